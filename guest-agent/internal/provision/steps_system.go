package provision

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// --- hosts ---------------------------------------------------------------

var validHostname = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$`)

func (p *Provisioner) hostname() (string, error) {
	h := p.cfg.Hostname
	if h == "" {
		b, err := os.ReadFile(p.path("/etc/hostname"))
		if err == nil {
			h = strings.TrimSpace(string(b))
		} else if h, err = os.Hostname(); err != nil {
			return "", fmt.Errorf("reading the hostname: %w", err)
		}
	}
	if !validHostname.MatchString(h) {
		return "", fmt.Errorf("hostname %q is not a valid host name", h)
	}
	return h, nil
}

func readOptional(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

func checkHosts(_ context.Context, p *Provisioner) (Status, error) {
	h, err := p.hostname()
	if err != nil {
		return Status{}, err
	}
	b, err := readOptional(p.path("/etc/hosts"))
	if err != nil {
		return Status{}, fmt.Errorf("reading /etc/hosts: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && f[0] == "127.0.1.1" && contains(f[1:], h) {
			return Status{}, nil
		}
	}
	return Status{Pending: []string{"add 127.0.1.1 " + h + " to /etc/hosts"}}, nil
}

func applyHosts(_ context.Context, p *Provisioner) error {
	h, err := p.hostname()
	if err != nil {
		return err
	}
	b, err := readOptional(p.path("/etc/hosts"))
	if err != nil {
		return fmt.Errorf("reading /etc/hosts: %w", err)
	}
	if len(b) > 0 && !bytes.HasSuffix(b, []byte("\n")) {
		b = append(b, '\n')
	}
	b = append(b, "127.0.1.1 "+h+"\n"...)
	return p.writeFile(file{Path: "/etc/hosts", Data: b, Mode: 0o644})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// --- apt -----------------------------------------------------------------

var aptConfig = file{Path: boxlayout.AptNetworkConf, Data: asset("apt-network.conf"), Mode: 0o644}

func checkAptConfig(_ context.Context, p *Provisioner) (Status, error) {
	s, err := p.fileStatus(aptConfig)
	return Status{Pending: s}, err
}

func applyAptConfig(_ context.Context, p *Provisioner) error { return p.writeFile(aptConfig) }

// Packages is the one apt transaction: what the box needs and what the
// Hermes installer's python-deps stage would otherwise install itself. No
// skopeo (the agent pulls images) and no supervisor (the agent supervises).
// libatomic1: Node's Linux builds link it from Node 25 on (pins.NodeMajor).
var Packages = []string{
	"build-essential", "ca-certificates", "curl", "git", "libatomic1", "libffi-dev", "ncurses-term",
	"openssh-server", "procps", "python3", "python3-dev", "ripgrep", "sudo", "tmux", "xz-utils",
}

// The apt bounds of the reference: 6 index refreshes of at most 3 minutes
// with 5 seconds between them, and one install of at most 20 minutes.
const (
	aptIndexAttempts = 6
	aptIndexTimeout  = 3 * time.Minute
	aptIndexPause    = 5 * time.Second
	aptInstallTime   = 20 * time.Minute
)

var aptEnv = []string{"DEBIAN_FRONTEND=noninteractive"}

// installedPackages reads dpkg's status file.
func (p *Provisioner) installedPackages() (map[string]bool, error) {
	b, err := readOptional(p.path("/var/lib/dpkg/status"))
	if err != nil {
		return nil, fmt.Errorf("reading the dpkg status: %w", err)
	}
	got := map[string]bool{}
	for _, stanza := range strings.Split(string(b), "\n\n") {
		var name string
		var ok bool
		for _, line := range strings.Split(stanza, "\n") {
			if v, found := strings.CutPrefix(line, "Package: "); found {
				name = strings.TrimSpace(v)
			}
			if strings.TrimSpace(line) == "Status: install ok installed" {
				ok = true
			}
		}
		if name != "" && ok {
			got[name] = true
		}
	}
	return got, nil
}

func checkPackages(_ context.Context, p *Provisioner) (Status, error) {
	got, err := p.installedPackages()
	if err != nil {
		return Status{}, err
	}
	var missing []string
	for _, pkg := range Packages {
		if !got[pkg] {
			missing = append(missing, pkg)
		}
	}
	if len(missing) == 0 {
		return Status{}, nil
	}
	return Status{Pending: []string{"apt install " + strings.Join(missing, " ")}}, nil
}

// checkAptIndex needs a refresh only while packages are missing and no
// package index has been downloaded (cloud images ship without lists).
func checkAptIndex(ctx context.Context, p *Provisioner) (Status, error) {
	st, err := checkPackages(ctx, p)
	if err != nil || len(st.Pending) == 0 {
		return st, err
	}
	for _, g := range []string{"*_InRelease", "*_Release", "*_Packages*"} {
		if m, _ := filepath.Glob(p.path("/var/lib/apt/lists/" + g)); len(m) > 0 {
			return Status{}, nil
		}
	}
	return Status{Pending: []string{"refresh the package index (apt-get update, at most 6 bounded attempts)"}}, nil
}

func applyAptIndex(ctx context.Context, p *Provisioner) error {
	var last error
	for i := 1; i <= aptIndexAttempts; i++ {
		_, err := p.run(ctx, "apt-index", command.Command{Path: "apt-get", Args: []string{"update", "-o", "APT::Update::Error-Mode=any"}, Env: aptEnv, Timeout: aptIndexTimeout})
		if err == nil {
			return nil
		}
		last = err
		p.emit(protocol.Event{Type: protocol.EventWarning, Level: protocol.LevelWarn, Step: "apt-index",
			Message: fmt.Sprintf("package index refresh attempt %d/%d failed: %v", i, aptIndexAttempts, err)})
		if ctx.Err() != nil {
			break
		}
		if i < aptIndexAttempts {
			if err := p.cfg.Sleep(ctx, aptIndexPause); err != nil {
				return fmt.Errorf("waiting to refresh the package index: %w", err)
			}
		}
	}
	return fmt.Errorf("apt index refresh failed after %d bounded attempts: %w", aptIndexAttempts, last)
}

func applyPackages(ctx context.Context, p *Provisioner) error {
	args := append([]string{"install", "-y", "--no-install-recommends"}, Packages...)
	_, err := p.run(ctx, "packages", command.Command{Path: "apt-get", Args: args, Env: aptEnv, Timeout: aptInstallTime})
	return err
}

// --- accounts ------------------------------------------------------------

type account struct {
	name string
	id   int
	// locked: the password is locked ("!…"); otherwise it is deleted ("").
	locked bool
}

// accounts are boxadmin, whose only way in is its SSH key (no password, so
// sshd does not treat it as locked), and hermes, locked, with sudo.
var accounts = []account{{boxlayout.AdminUser, boxlayout.AdminUID, false}, {boxlayout.ServiceUser, boxlayout.ServiceUID, true}}

// dbEntry is one line of /etc/passwd, /etc/group or /etc/shadow.
type dbEntry struct{ fields []string }

func (p *Provisioner) readDB(guest string) (map[string]dbEntry, error) {
	b, err := readOptional(p.path(guest))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", guest, err)
	}
	out := map[string]dbEntry{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) >= 3 && f[0] != "" {
			out[f[0]] = dbEntry{fields: f}
		}
	}
	return out, sc.Err()
}

// idOwner returns the name whose id field (index 2) is id, if any.
func idOwner(db map[string]dbEntry, id int) string {
	for name, e := range db {
		if e.fields[2] == strconv.Itoa(id) {
			return name
		}
	}
	return ""
}

type accountState struct{ needGroup, needUser, needPassword bool }

func (p *Provisioner) accountStates() (map[string]accountState, error) {
	passwd, err := p.readDB("/etc/passwd")
	if err != nil {
		return nil, err
	}
	group, err := p.readDB("/etc/group")
	if err != nil {
		return nil, err
	}
	shadow, err := p.readDB("/etc/shadow")
	if err != nil {
		return nil, err
	}
	out := map[string]accountState{}
	for _, a := range accounts {
		var st accountState
		for _, db := range []struct {
			what string
			m    map[string]dbEntry
			need *bool
		}{{"group", group, &st.needGroup}, {"user", passwd, &st.needUser}} {
			e, ok := db.m[a.name]
			if !ok {
				if other := idOwner(db.m, a.id); other != "" {
					return nil, fmt.Errorf("%s id %d, needed for %s, belongs to %q", db.what, a.id, a.name, other)
				}
				*db.need = true
				continue
			}
			if e.fields[2] != strconv.Itoa(a.id) {
				return nil, fmt.Errorf("%s %s exists with id %s; want %d", db.what, a.name, e.fields[2], a.id)
			}
		}
		pw := ""
		if e, ok := shadow[a.name]; ok && len(e.fields) > 1 {
			pw = e.fields[1]
		} else {
			pw = "missing"
		}
		st.needPassword = a.locked && !strings.HasPrefix(pw, "!") || !a.locked && pw != ""
		out[a.name] = st
	}
	return out, nil
}

func checkAccounts(_ context.Context, p *Provisioner) (Status, error) {
	states, err := p.accountStates()
	if err != nil {
		return Status{}, err
	}
	var pending []string
	for _, a := range accounts {
		st := states[a.name]
		if st.needGroup {
			pending = append(pending, fmt.Sprintf("create group %s (%d)", a.name, a.id))
		}
		if st.needUser {
			pending = append(pending, fmt.Sprintf("create user %s (%d)", a.name, a.id))
		}
		if st.needPassword && a.locked {
			pending = append(pending, "lock the password of "+a.name)
		} else if st.needPassword {
			pending = append(pending, "delete the password of "+a.name)
		}
	}
	return Status{Pending: pending}, nil
}

func applyAccounts(ctx context.Context, p *Provisioner) error {
	for _, a := range accounts {
		states, err := p.accountStates()
		if err != nil {
			return err
		}
		id := strconv.Itoa(a.id)
		var cmds []command.Command
		if states[a.name].needGroup {
			cmds = append(cmds, command.Command{Path: "groupadd", Args: []string{"--gid", id, a.name}})
		}
		if states[a.name].needUser {
			cmds = append(cmds, command.Command{Path: "useradd", Args: []string{"--uid", id, "--gid", id, "--create-home", "--shell", "/bin/bash", a.name}})
		}
		if err := p.runAll(ctx, "accounts", cmds); err != nil {
			return err
		}
		// useradd's default password state may already be what we want.
		if states, err = p.accountStates(); err != nil {
			return err
		}
		if !states[a.name].needPassword {
			continue
		}
		flag := "--delete"
		if a.locked {
			flag = "--lock"
		}
		if err := p.runAll(ctx, "accounts", []command.Command{{Path: "passwd", Args: []string{flag, a.name}}}); err != nil {
			return err
		}
	}
	return nil
}

// runAll runs short commands one after another, one minute each.
func (p *Provisioner) runAll(ctx context.Context, step string, cmds []command.Command) error {
	for _, c := range cmds {
		if c.Timeout == 0 {
			c.Timeout = time.Minute
		}
		if _, err := p.run(ctx, step, c); err != nil {
			return err
		}
	}
	return nil
}

// --- sudoers and sshd: validated before they are put in place -------------

var sudoersFile = file{Path: boxlayout.SudoersFile, Data: asset("sudoers"), Mode: 0o440}

func checkSudoers(_ context.Context, p *Provisioner) (Status, error) {
	s, err := p.fileStatus(sudoersFile)
	return Status{Pending: s}, err
}

// applySudoers stages the file under a name sudo ignores (it contains a
// dot), has visudo check it, and only then renames it into place.
func applySudoers(ctx context.Context, p *Provisioner) error {
	return p.validatedWrite(ctx, "sudoers", sudoersFile, func(staged string) (command.Command, func(), error) {
		return command.Command{Path: "visudo", Args: []string{"-cf", staged}, Timeout: time.Minute}, func() {}, nil
	})
}

// SSHDDropIn is the sshd configuration the box runs with.
var SSHDDropIn = asset("sshd-hermes-box.conf")

// Sudoers is the sudo policy of the box.
var Sudoers = asset("sudoers")

var sshdFile = file{Path: boxlayout.SSHDDropIn, Data: SSHDDropIn, Mode: 0o644}

func checkSSHD(_ context.Context, p *Provisioner) (Status, error) {
	s, err := p.fileStatus(sshdFile)
	return Status{Pending: s}, err
}

// applySSHD stages the drop-in under a name sshd's Include does not match
// and validates it with `sshd -t` ahead of the system configuration.
func applySSHD(ctx context.Context, p *Provisioner) error {
	if err := os.MkdirAll(p.path("/run/sshd"), 0o755); err != nil {
		return fmt.Errorf("creating /run/sshd: %w", err)
	}
	return p.validatedWrite(ctx, "sshd", sshdFile, func(staged string) (command.Command, func(), error) {
		tmp, err := os.MkdirTemp("", "hermes-box-sshd-check-")
		if err != nil {
			return command.Command{}, nil, fmt.Errorf("creating the sshd check dir: %w", err)
		}
		cleanup := func() { _ = os.RemoveAll(tmp) }
		conf, err := SSHDCheckConfig(tmp, staged, p.path("/etc/ssh/sshd_config"))
		if err != nil {
			cleanup()
			return command.Command{}, nil, err
		}
		return command.Command{Path: "/usr/sbin/sshd", Args: []string{"-t", "-f", conf}, Timeout: time.Minute}, cleanup, nil
	})
}

// SSHDCheckConfig writes, into dir, a throwaway host key and an sshd
// configuration that includes dropIn first (sshd keeps the first value of
// an option, as with Debian's sshd_config.d) and then main, if it exists.
// It returns the configuration's path for `sshd -t -f`.
func SSHDCheckConfig(dir, dropIn, main string) (string, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", fmt.Errorf("generating a check host key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		return "", fmt.Errorf("encoding the check host key: %w", err)
	}
	keyPath := filepath.Join(dir, "host_ed25519_key")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(block), 0o600); err != nil {
		return "", fmt.Errorf("writing the check host key: %w", err)
	}
	conf := "Include " + dropIn + "\n"
	if exists(main) {
		conf += "Include " + main + "\n"
	}
	conf += "HostKey " + keyPath + "\n"
	path := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return "", fmt.Errorf("writing the sshd check config: %w", err)
	}
	return path, nil
}

// validatedWrite writes f under a staging name, runs the validator command
// on it, and renames it into place only when the validator accepts it.
func (p *Provisioner) validatedWrite(ctx context.Context, step string, f file, validator func(staged string) (command.Command, func(), error)) error {
	staged := file{Path: filepath.Join(filepath.Dir(f.Path), "."+filepath.Base(f.Path)+".new"), Data: f.Data, Mode: f.Mode, UID: f.UID, GID: f.GID}
	if err := p.writeFile(staged); err != nil {
		return err
	}
	stagedPath := p.path(staged.Path)
	defer os.Remove(stagedPath)
	cmd, cleanup, err := validator(stagedPath)
	if err != nil {
		return err
	}
	defer cleanup()
	if _, err := p.run(ctx, step, cmd); err != nil {
		return fmt.Errorf("%s was refused, nothing installed: %w", f.Path, err)
	}
	if err := os.Rename(stagedPath, p.path(f.Path)); err != nil {
		return fmt.Errorf("installing %s: %w", f.Path, err)
	}
	return atomicfile.SyncDir(filepath.Dir(p.path(f.Path)))
}

// --- boxadmin's key, login shell, workspace, environment -------------------

func (p *Provisioner) authorizedKeys() (file, error) {
	n := 0
	for i, line := range strings.Split(string(p.cfg.AuthorizedKeys), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line)); err != nil {
			return file{}, fmt.Errorf("authorized keys line %d: %w", i+1, err)
		}
		n++
	}
	if n == 0 {
		return file{}, errors.New("authorized keys hold no key")
	}
	return file{Path: boxlayout.AdminHome + "/.ssh/authorized_keys", Data: p.cfg.AuthorizedKeys, Mode: 0o600, UID: boxlayout.AdminUID, GID: boxlayout.AdminUID}, nil
}

var boxadminSSHDir = dir{Path: boxlayout.AdminHome + "/.ssh", Mode: 0o700, UID: boxlayout.AdminUID, GID: boxlayout.AdminUID}

func checkAuthorizedKeys(_ context.Context, p *Provisioner) (Status, error) {
	if len(p.cfg.AuthorizedKeys) == 0 {
		return Status{Skip: "no authorized keys given; boxadmin cannot log in until the host installs its key"}, nil
	}
	f, err := p.authorizedKeys()
	if err != nil {
		return Status{}, err
	}
	s, err := p.collect([]dir{boxadminSSHDir}, []file{f}, nil)
	return Status{Pending: s}, err
}

func applyAuthorizedKeys(_ context.Context, p *Provisioner) error {
	f, err := p.authorizedKeys()
	if err != nil {
		return err
	}
	return p.put([]dir{boxadminSSHDir}, []file{f}, nil)
}

var loginShellFiles = []file{
	{Path: boxlayout.AdminProfileTemplate, Data: asset("boxadmin.bash_profile"), Mode: 0o644},
	{Path: boxlayout.AdminHome + "/.bash_profile", Data: asset("boxadmin.bash_profile"), Mode: 0o644, UID: boxlayout.AdminUID, GID: boxlayout.AdminUID},
	{Path: "/usr/local/bin/tm", Data: asset("tm"), Mode: 0o755},
	{Path: "/etc/tmux.conf", Data: asset("tmux.conf"), Mode: 0o644},
}

// inBoxLinks make the agent answer as supervisorctl inside the box (`sudo
// supervisorctl restart hermes`), as the reference's supervisord did.
var inBoxLinks = []link{{Path: "/usr/local/bin/supervisorctl", Target: boxlayout.AgentPath}}

func checkLoginShell(_ context.Context, p *Provisioner) (Status, error) {
	s, err := p.collect(nil, loginShellFiles, inBoxLinks)
	return Status{Pending: s}, err
}

func applyLoginShell(_ context.Context, p *Provisioner) error {
	return p.put(nil, loginShellFiles, inBoxLinks)
}

var workspaceDirs = []dir{
	{Path: boxlayout.Workspace, Mode: 0o750, UID: boxlayout.ServiceUID, GID: boxlayout.ServiceUID},
	{Path: boxlayout.HermesHome, Mode: 0o700, UID: boxlayout.ServiceUID, GID: boxlayout.ServiceUID},
	{Path: boxlayout.HermesHome + "/logs", Mode: 0o750, UID: boxlayout.ServiceUID, GID: boxlayout.ServiceUID},
	{Path: boxlayout.CodexHome, Mode: 0o700, UID: boxlayout.ServiceUID, GID: boxlayout.ServiceUID},
	{Path: boxlayout.CodexHome + "/bin", Mode: 0o750, UID: boxlayout.ServiceUID, GID: boxlayout.ServiceUID},
	{Path: boxlayout.WorkDir, Mode: 0o750, UID: boxlayout.ServiceUID, GID: boxlayout.ServiceUID},
}

var workspaceLinks = []link{{Path: boxlayout.ServiceHome + "/.hermes", Target: boxlayout.HermesHome, UID: boxlayout.ServiceUID, GID: boxlayout.ServiceUID}}

func checkWorkspace(_ context.Context, p *Provisioner) (Status, error) {
	s, err := p.collect(workspaceDirs, nil, workspaceLinks)
	return Status{Pending: s}, err
}

func applyWorkspace(_ context.Context, p *Provisioner) error {
	return p.put(workspaceDirs, nil, workspaceLinks)
}

var profileEnv = file{Path: boxlayout.ProfileScript, Data: asset("profile.sh"), Mode: 0o644}

func checkProfileEnv(_ context.Context, p *Provisioner) (Status, error) {
	s, err := p.fileStatus(profileEnv)
	return Status{Pending: s}, err
}

func applyProfileEnv(_ context.Context, p *Provisioner) error { return p.writeFile(profileEnv) }
