package provision

import (
	"embed"
	"time"
)

//go:embed files
var embedded embed.FS

// asset returns an embedded file; the names are fixed, so a miss is a bug.
func asset(name string) []byte {
	b, err := embedded.ReadFile("files/" + name)
	if err != nil {
		panic("provision: missing embedded file " + name)
	}
	return b
}

// Steps is the full provisioning sequence, in order.
func Steps() []Step {
	return []Step{
		{Name: "hosts", Timeout: 10 * time.Second, Check: checkHosts, Apply: applyHosts},
		{Name: "apt-config", Timeout: 10 * time.Second, Check: checkAptConfig, Apply: applyAptConfig},
		{Name: "apt-index", Timeout: 25 * time.Minute, Check: checkAptIndex, Apply: applyAptIndex},
		{Name: "packages", Timeout: 25 * time.Minute, Check: checkPackages, Apply: applyPackages},
		{Name: "accounts", Timeout: 5 * time.Minute, Check: checkAccounts, Apply: applyAccounts},
		{Name: "sudoers", Timeout: 2 * time.Minute, Check: checkSudoers, Apply: applySudoers},
		{Name: "sshd", Timeout: 2 * time.Minute, Check: checkSSHD, Apply: applySSHD},
		{Name: "authorized-keys", Timeout: 10 * time.Second, Check: checkAuthorizedKeys, Apply: applyAuthorizedKeys},
		{Name: "login-shell", Timeout: 10 * time.Second, Check: checkLoginShell, Apply: applyLoginShell},
		{Name: "workspace", Timeout: time.Minute, Check: checkWorkspace, Apply: applyWorkspace},
		{Name: "profile-env", Timeout: 10 * time.Second, Check: checkProfileEnv, Apply: applyProfileEnv},
		{Name: "node", Timeout: 15 * time.Minute, Check: checkNode, Apply: applyNode},
		{Name: "uv", Timeout: 10 * time.Minute, Check: checkUV, Apply: applyUV},
		{Name: "hermes", Timeout: 2*time.Hour + 15*time.Minute, Check: checkHermes, Apply: applyHermes},
		{Name: "hermes-env", Timeout: 10 * time.Second, Check: checkHermesEnv, Apply: applyHermesEnv},
		{Name: "gated-approval", Timeout: 15 * time.Minute, Check: checkGate, Apply: applyGate},
		{Name: "uv-sync", Timeout: 25 * time.Minute, Check: checkUVSync, Apply: applyUVSync},
		{Name: "codex-pin", Timeout: 10 * time.Second, Check: checkCodexPin, Apply: applyCodexPin},
		{Name: "cleanup", Timeout: 15 * time.Minute, Check: checkCleanup, Apply: applyCleanup},
		{Name: "smoke", Timeout: 10 * time.Minute, Check: checkSmoke, Apply: applySmoke},
		{Name: "workspace-seed", Timeout: 30 * time.Minute, Check: checkSeed, Apply: applySeed},
		{Name: "finalize", Timeout: time.Minute, Check: checkFinalize, Apply: applyFinalize},
	}
}
