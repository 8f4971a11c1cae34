// The testagent command stands in for the hermes-box-agent verbs that cannot
// run outside a real guest: netcheck (the real network), provision (apt
// and the installers) and executor refresh-discovery (Executor's port and
// the boot id inside the guest). It speaks the same protocol (a request line on stdin
// for relay, data on stdout, JSON Lines events on stderr, the verb's exit
// status) and hands every other verb (boot, services, logs, hostkeys,
// health, snapshot, …) to the real agent, whose path is linked in with
// -ldflags "-X main.realAgent=PATH": a direct verb by exec(2), so that the
// real agent is the process (boot gets the machine's signals), a relayed one
// with the same request line.
//
// Its behaviour is steered by files under <root>/.testagent/ (the fake
// smolvm copies a seed image into a machine's root): netcheck-fail holds how
// many netchecks still fail; provision-fail makes provision fail with status
// 3; executor refresh-discovery answers restarted once per machine
// (discovery-refreshed marks it). It records what it was asked in calls.log.
// Its provision also copies in Hermes with the approval gate installed on
// the real tree when the harness names one (GatedHermesEnv), so that the
// real agent's health has a gate to check.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// realAgent is the real hermes-box-agent, set at link time.
var realAgent = "hermes-box-agent"

// own lists the verbs this program answers itself.
var own = map[string]func(t *agent, args []string) int{
	"netcheck":  (*agent).netcheck,
	"provision": (*agent).provision,
}

// notRelayed are the verbs the real agent refuses through its relay (its
// verb table marks them relay: false); the host must run them directly.
var notRelayed = map[string]bool{"netcheck": true, "provision": true, "hostkeys": true, "boot": true}

type agent struct {
	root   string
	in     io.Reader
	events *protocol.EventWriter
	// direct is a verb run directly, not through the relay.
	direct bool
}

// plainEnv, set, runs a direct verb without its hostile case.
const plainEnv = "TESTAGENT_PLAIN"

func main() {
	fs := flag.NewFlagSet("testagent", flag.ContinueOnError)
	root := fs.String("root", "/", "file system root")
	if err := fs.Parse(os.Args[1:]); err != nil || fs.NArg() == 0 {
		os.Exit(2)
	}
	t := &agent{root: *root, in: os.Stdin, events: protocol.NewEventWriter(os.Stderr, protocol.LevelDebug)}
	os.Exit(t.run(fs.Args()))
}

func (t *agent) run(argv []string) int {
	t.record(argv)
	if argv[0] == "relay" {
		return t.relay()
	}
	// A verb run directly (smolvm exec) turns hostile as a relayed one
	// does; its real answer (a drip's, a step flood's tail) is this
	// program run again without the case (plainEnv).
	if os.Getenv(plainEnv) == "" {
		t.direct = true
		if code, ok := t.hostile(protocol.Request{Argv: argv}); ok {
			return code
		}
	}
	if fn, ok := own[argv[0]]; ok {
		return fn(t, argv[1:])
	}
	err := syscall.Exec(realAgent, append([]string{realAgent, "--root", t.root}, argv...), os.Environ())
	t.fail("running the real agent: %v", err)
	return 1
}

// relay reads the request line; own verbs run here, others go to the real
// agent's relay with the same line.
func (t *agent) relay() int {
	br := bufio.NewReader(os.Stdin)
	req, err := protocol.ReadRequest(br)
	if err != nil {
		t.fail("relay: %v", err)
		return 2
	}
	t.record(append([]string{"relay:"}, req.Argv...))
	var in io.Reader = br
	if stdin := t.recordRelay(req.Argv); stdin != nil {
		defer stdin.Close()
		in = io.TeeReader(br, stdin)
	}
	t.in = in
	if code, ok := t.hostile(req); ok {
		return code
	}
	if notRelayed[req.Argv[0]] {
		// The real agent's allow-list: these verbs run only directly.
		t.fail("verb %q is not allowed through the relay", req.Argv[0])
		return 2
	}
	if fn, ok := own[req.Argv[0]]; ok {
		return fn(t, req.Argv[1:])
	}
	if strings.Join(req.Argv, " ") == "executor refresh-discovery" {
		return t.refreshDiscovery()
	}
	var line bytes.Buffer
	if err := protocol.WriteRequest(&line, req); err != nil {
		t.fail("relay: %v", err)
		return 2
	}
	return t.delegate([]string{"relay"}, io.MultiReader(&line, in))
}

func (t *agent) delegate(argv []string, stdin io.Reader) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, realAgent, append([]string{"--root", t.root}, argv...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.fail("running the real agent: %v", err)
		return 1
	}
	return 0
}

// refreshDiscovery answers as the agent's verb does, restarting nothing:
// restarted the first time, then already done.
func (t *agent) refreshDiscovery() int {
	_, err := os.Stat(t.path("discovery-refreshed"))
	res := protocol.DiscoveryRefresh{Restarted: errors.Is(err, os.ErrNotExist), BootID: "testagent-boot"}
	if err := os.WriteFile(t.path("discovery-refreshed"), []byte(res.BootID+"\n"), 0o600); err != nil {
		t.fail("refresh-discovery: %v", err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return 1
	}
	return 0
}

// recordRelay is the recording agent: when the fake smolvm's state
// directory (<root>/../../..) has a record/ directory, every relayed call
// of every machine, candidates too, appends a line to record/MACHINE.log
// (the verb, and whether the file named in record/watch existed when the
// call came), and the caller gets record/MACHINE.stdin to copy the call's
// stdin into. Records live outside the machine, so that they outlast a
// candidate's deletion.
func (t *agent) recordRelay(argv []string) io.WriteCloser {
	dir := filepath.Join(t.root, "..", "..", "..", "record")
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil
	}
	name := filepath.Base(filepath.Dir(t.root))
	watched := "absent"
	if w := strings.TrimSpace(readFile(filepath.Join(dir, "watch"))); w != "" {
		if _, err := os.Stat(w); err == nil {
			watched = "present"
		}
	}
	if f, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		fmt.Fprintf(f, "%s watched=%s\n", strings.Join(argv, " "), watched)
		f.Close()
	}
	f, err := os.OpenFile(filepath.Join(dir, name+".stdin"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil
	}
	return f
}

func (t *agent) path(name string) string { return filepath.Join(t.root, ".testagent", name) }

func (t *agent) record(argv []string) {
	os.MkdirAll(filepath.Dir(t.path("calls.log")), 0o755)
	f, err := os.OpenFile(t.path("calls.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintln(f, strings.Join(argv, " "))
		f.Close()
	}
}

func (t *agent) fail(format string, args ...any) {
	t.events.Emit(protocol.Event{Type: protocol.EventLog, Level: protocol.LevelError, Message: fmt.Sprintf(format, args...)})
}

// netcheck fails while <root>/.testagent/netcheck-fail counts down.
func (t *agent) netcheck(args []string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(readFile(t.path("netcheck-fail"))))
	ready := n <= 0
	if !ready {
		os.WriteFile(t.path("netcheck-fail"), []byte(strconv.Itoa(n-1)), 0o644)
	}
	json.NewEncoder(os.Stdout).Encode(map[string]bool{"ready": ready, "route": ready, "dns": ready})
	if !ready {
		t.fail("no IPv4 default route")
		return 1
	}
	return 0
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// provision emits step events, lays out the workspace and installs the
// authorized key, or fails when provision-fail exists.
func (t *agent) provision(args []string) int {
	fs := flag.NewFlagSet("provision", flag.ContinueOnError)
	keys := fs.String("authorized-keys", "", "")
	fs.String("hermes-commit", "", "")
	fs.Bool("executor", false, "")
	if err := fs.Parse(args); err != nil || *keys == "" {
		t.fail("provision: bad arguments %q", args)
		return 2
	}
	for i, step := range []string{"packages", "accounts", "hermes"} {
		t.events.Emit(protocol.Event{Type: protocol.EventStep, Step: step, State: protocol.StepStarted})
		t.events.Emit(protocol.Event{Type: protocol.EventProgress, Step: step, Progress: &protocol.Progress{Current: int64(i + 1), Total: 3}})
		if step == "hermes" && readFile(t.path("provision-fail")) != "" {
			t.events.Emit(protocol.Event{Type: protocol.EventStep, Step: step, State: protocol.StepFailed, Message: "installer failed"})
			return 3
		}
		t.events.Emit(protocol.Event{Type: protocol.EventStep, Step: step, State: protocol.StepDone})
	}
	key, err := os.ReadFile(filepath.Join(t.root, *keys))
	if err != nil {
		t.fail("provision: %v", err)
		return 1
	}
	for _, d := range []string{boxlayout.WorkDir, boxlayout.HermesHome, "/home/" + boxlayout.AdminUser + "/.ssh", "/home/" + boxlayout.ServiceUser} {
		os.MkdirAll(filepath.Join(t.root, d), 0o755)
	}
	if err := t.accounts(); err != nil {
		t.fail("provision: %v", err)
		return 1
	}
	// The files a backup's workspace must hold.
	for name, body := range map[string]string{
		boxlayout.HermesHome + "/config.yaml": "approvals:\n  mode: gated\n",
		boxlayout.CodexHome + "/config.toml":  "model = \"test\"\n",
	} {
		p := filepath.Join(t.root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.fail("provision: %v", err)
			return 1
		}
	}
	if err := os.WriteFile(filepath.Join(t.root, "/home/"+boxlayout.AdminUser+"/.ssh/authorized_keys"), key, 0o600); err != nil {
		t.fail("provision: %v", err)
		return 1
	}
	if err := t.tools(); err != nil {
		t.fail("provision: %v", err)
		return 1
	}
	if err := t.gatedHermes(); err != nil {
		t.fail("provision: %v", err)
		return 1
	}
	return 0
}

// GatedHermesEnv names an overlay root holding a Hermes tree with the
// approval gate installed (usr/local/lib/hermes-agent, its venv's python
// among it) and the managed scope (etc/hermes/config.yaml), which provision
// copies into the box, so that the real agent's gate check runs against
// real Hermes code. Unset, the box has the stand-in tools only and no gate,
// which the host refuses.
const GatedHermesEnv = "TESTAGENT_GATED_HERMES"

func (t *agent) gatedHermes() error {
	src := os.Getenv(GatedHermesEnv)
	if src == "" {
		return nil
	}
	// The tree's venv brings its own interpreter in place of the stand-in.
	if err := os.Remove(filepath.Join(t.root, boxlayout.HermesVenv, "bin", "python")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.CopyFS(t.root, os.DirFS(src))
}

// standinTools are what provision installs that health's tool checks run:
// each a script printing a version. The one named in <root>/.testagent/
// broken-tool fails instead, as a half-provisioned box's would.
var standinTools = []string{
	"usr/local/bin/hermes", "usr/local/lib/hermes-agent/venv/bin/python", "usr/local/bin/node", "usr/local/bin/npm",
	"usr/bin/tmux", "usr/bin/infocmp", "workspace/codex-home/bin/codex",
}

func (t *agent) tools() error {
	broken := strings.TrimSpace(readFile(t.path("broken-tool")))
	for _, name := range standinTools {
		script := "#!/bin/sh\necho \"" + filepath.Base(name) + " stand-in 1.0\"\n"
		if name == broken {
			script = "#!/bin/sh\necho \"" + filepath.Base(name) + ": broken install\" >&2\nexit 1\n"
		}
		if err := writeExec(filepath.Join(t.root, name), script); err != nil {
			return err
		}
	}
	for _, name := range []string{"usr/share/terminfo/t/tmux-256color", "usr/share/terminfo/x/xterm-256color"} {
		if err := writeExec(filepath.Join(t.root, name), "terminfo"); err != nil {
			return err
		}
	}
	return nil
}

func writeExec(p, body string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(body), 0o755)
}

// accounts adds the box's users to the root's passwd and group files, with
// this process's uid and gid, so that nothing needs a chown to another user.
func (t *agent) accounts() error {
	uid, gid := os.Getuid(), os.Getgid()
	files := map[string][]string{
		"etc/passwd": {
			"root:x:0:0:root:/root:/bin/sh",
			fmt.Sprintf("%[1]s:x:%[2]d:%[3]d::/home/%[1]s:/bin/sh", boxlayout.AdminUser, uid, gid),
			fmt.Sprintf("%[1]s:x:%[2]d:%[3]d::/home/%[1]s:/bin/sh", boxlayout.ServiceUser, uid, gid),
		},
		"etc/group": {"root:x:0:", fmt.Sprintf("%s:x:%d:", boxlayout.ServiceUser, gid)},
	}
	for name, entries := range files {
		p := filepath.Join(t.root, name)
		have := readFile(p)
		var add strings.Builder
		for _, e := range entries {
			user, _, _ := strings.Cut(e, ":")
			if !strings.HasPrefix(have, user+":") && !strings.Contains(have, "\n"+user+":") {
				add.WriteString(e + "\n")
			}
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		_, err = f.WriteString(add.String())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}
