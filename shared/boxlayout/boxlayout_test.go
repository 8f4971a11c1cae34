package boxlayout

import (
	"path"
	"strconv"
	"strings"
	"testing"
)

func TestPathsAreCleanAndAbsolute(t *testing.T) {
	for _, p := range []string{AgentPath, OCIHelperPath, Workspace, HermesHome, LogDir, WorkDir, CodexHome,
		ExecutorDir, ExecutorDataDir, ExecutorRuntimeDir, GateAuditLog, AuthorizedKeysUpload, TestPinsDir, StateDir, SeedArchive, SeedID,
		AdminHome, ServiceHome, HermesTree, HermesVenv, HermesSourceMarker, HermesCLI, RestoreReady, OwnershipMarker, RestoredID,
		CodexPinFile, GateVerdictCache, DownloadCache, ChunkCache, StartupLog, RunDir, BoxOptionsFile, ControlSocket, SSHDLog, SecretsDir, ExecutorDiscoveryRefreshed,
		HermesConfig, SudoersFile, SSHDDropIn, AptNetworkConf, ProfileScript, SecretsProfile, AdminProfileTemplate, CacheDir, SmokeMarker, HermesManagedDir} {
		if !path.IsAbs(p) || path.Clean(p) != p {
			t.Errorf("%q is not a clean absolute path", p)
		}
	}
	if got := InRoot(RestoreReady); got != "var/lib/hermes-box/restore-ready" {
		t.Errorf("InRoot(%q) = %q", RestoreReady, got)
	}
}

func TestDerivedNamesAgree(t *testing.T) {
	if path.Dir(OCIHelperPath) != path.Dir(AgentPath) {
		t.Errorf("the Executor helper %s is not beside the agent %s", OCIHelperPath, AgentPath)
	}
	if want := "http://127.0.0.1:" + strconv.Itoa(ExecutorPort) + "/mcp"; ExecutorURL != want {
		t.Errorf("ExecutorURL %q, want %q", ExecutorURL, want)
	}
	if !strings.HasPrefix(ExecutorRuntimeDir, path.Join(Workspace, RuntimeDirName)+"/") {
		t.Errorf("ExecutorRuntimeDir %q is not below the workspace's %s", ExecutorRuntimeDir, RuntimeDirName)
	}
	if !strings.Contains(RelayCommand, " "+AgentPath+" relay") {
		t.Errorf("RelayCommand %q does not run the agent's relay", RelayCommand)
	}
}
