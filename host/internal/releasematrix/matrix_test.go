//go:build linux

package releasematrix_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/host/internal/relay/sshdtest"
	"github.com/hermes-box/hermes-box/shared/termsafe/termsafetest"
)

// The hostile matrix on the release build: every verb of the agent table
// that a command calls (but releaseElsewhere's), in every hostile mode,
// with the release hermes-box (built as `make build` builds it: no hbxtest
// tag, no test hook, production timings and deadlines) as the host
// process. It reaches each box by the product's own paths: its project and
// state directories, the fake smolvm on PATH, and the relay as boxadmin to
// the box's Debian sshd, which forces the compromised agent stand-in
// (tests/testagent's hostile cases) as the remote command, or smolvm exec,
// whose agent is the same stand-in.

// releaseDriver is how a command of the release binary reaches a verb.
type releaseDriver struct {
	// file is the test agent's case file of the verb (VERB or VERB.SUB).
	file string
	// args is the command.
	args []string
	// conf is the box's configuration, a key of releaseConfigs.
	conf string
	// env is added to the command's environment.
	env []string
	// stdin is the command's input.
	stdin string
	// follow runs the command until Ctrl-C, sent after followFor.
	follow bool
	// mutates says the command changes the box: after each cell the test
	// build restarts it.
	mutates bool
	// hang is what the command says of a box that never answers the verb,
	// when it goes on without it; "" is the door's error, which names the
	// verb and the next step.
	hang string
	// asks is how many calls in a row the command lets the box leave
	// unanswered before it gives up: a readiness wait's three (0 is one).
	asks int
	// stopped says the command runs on a stopped box: the test build
	// stops the box before each cell.
	stopped bool
	// once says the case meets the command's first call of the verb only.
	once bool
}

// The snapshot's kind, whatever the default: a full snapshot writes each
// part (snapshot write), an incremental one sends its chunks.
var (
	fullSnapshot        = []string{"HERMES_BOX_SNAPSHOT_INCREMENTAL=false"}
	incrementalSnapshot = []string{"HERMES_BOX_SNAPSHOT_INCREMENTAL=true"}
)

// releaseDrivers has an entry for every verb a command of the release
// binary calls, over the relay or through smolvm exec, on a box that init
// made; TestHostileMatrixRelease fails for a verb in neither this table nor
// releaseElsewhere, so a verb added to the table is driven here the day it
// is added.
var releaseDrivers = map[*agent.Verb]releaseDriver{
	agent.Health:         {file: "health", args: []string{"status"}, conf: "plain"},
	agent.ServicesStatus: {file: "services.status", args: []string{"logs", "hermes"}, conf: "plain"},
	agent.Logs:           {file: "logs", args: []string{"logs", "hermes"}, conf: "plain"},
	agent.LogsFollow:     {file: "logs", args: []string{"logs", "-f", "hermes"}, conf: "plain", follow: true},
	agent.AuditRaw:       {file: "audit", args: []string{"audit"}, conf: "plain"},
	// stop waits 30 s for the services, then stops the machine anyway.
	agent.ServicesStop: {file: "services.stop", args: []string{"stop"}, conf: "plain", mutates: true,
		hang: "could not stop the services gracefully"},
	agent.ServicesStart: {file: "services.start", args: []string{"snapshot", "matrix"}, conf: "plain", env: fullSnapshot, mutates: true},
	agent.SnapshotWrite: {file: "snapshot.write", args: []string{"snapshot", "matrix"}, conf: "plain", env: fullSnapshot, mutates: true},
	agent.SnapshotChunks: {file: "snapshot.chunks", args: []string{"snapshot", "matrix"}, conf: "plain", env: incrementalSnapshot,
		mutates: true},
	// Through smolvm exec: the host key read out of band.
	agent.HostKeys: {file: "hostkeys", args: []string{"hostkey", "repin", "--yes"}, conf: "plain"},
	// start of a running box verifies it: health, then health --deep,
	// asked again while the box is not ready.
	agent.HealthDeep: {file: "health.--json.--deep", args: []string{"start"}, conf: "plain", asks: 3},
	// A stopped box's repin boots it and waits for its agent's version
	// through smolvm exec.
	agent.Version: {file: "version", args: []string{"hostkey", "repin", "--yes"}, conf: "plain", mutates: true, stopped: true, asks: 3},
	// init waits for the builder's network with netcheck through smolvm
	// exec, which ends it in the box after agent.NetcheckKill; its error
	// says to re-run init (the builder is deleted), not to restart a box.
	agent.Netcheck: {file: "netcheck", args: []string{"init"}, conf: "fresh", mutates: true, asks: 3,
		hang: "the box did not answer agent netcheck"},
	// Through smolvm exec, in the builder.
	agent.Provision: {file: "provision", args: []string{"init"}, conf: "fresh", mutates: true,
		hang: "the box did not answer agent provision"},
	// A start delivers the secrets, then proves the network mode.
	agent.SecretsSet: {file: "secrets.set", args: []string{"restart"}, conf: "guestenv", mutates: true},
	agent.Netprobe:   {file: "netprobe", args: []string{"restart"}, conf: "guestenv", mutates: true},
	// executor status shows a box that never answers in its report's
	// metadata field, and goes on.
	agent.ExecutorStatus: {file: "executor.status", args: []string{"executor", "status"}, conf: "executor",
		hang: "Metadata err: the box did not answer agent executor status within"},
	agent.ExecutorStatusSizes: {file: "executor.status", args: []string{"executor", "status", "--sizes"}, conf: "executor",
		hang: "Metadata err: the box did not answer agent executor status --sizes within"},
	// A start of a box with the Executor refreshes Hermes' discovery once
	// the box is healthy.
	agent.ExecutorRefresh: {file: "executor.refresh-discovery", args: []string{"restart"}, conf: "executor", mutates: true},
	// restore proves the backup on a candidate machine (apply), then
	// applies it again at the cut-over, which the case does not meet (a
	// drip's second wait); a failed apply removes the candidate and
	// restarts the original. The cheapest restore: the box's own small
	// full backup, a full safety snapshot.
	agent.SnapshotApply: {file: "snapshot.apply", args: []string{"restore", backupArg}, conf: "backup", env: fullSnapshot,
		mutates: true, once: true, hang: "the box did not answer agent snapshot apply"},
	agent.ExecutorConnect: {file: "executor.connect-hermes", args: []string{"executor", "connect-hermes", "--api-key-stdin"},
		conf: "executor", stdin: "matrix-api-key\n"},
}

// releaseElsewhere are the verbs the release binary calls that the matrix
// does not drive, and why; their hostile matrix runs in host/internal/agent's
// TestHostileMatrix (the same modes through Debian's sshd, that package's
// test binary as the host, every deadline shortened).
var releaseElsewhere = map[*agent.Verb]string{}

// backupArg in a driver's args is the backup its box's setup made
// (releaseConfig.backup).
const backupArg = "BACKUP"

// releaseConfig is a configuration of the matrix's boxes: a project, and
// the cases its agents keep between cells (file: case).
type releaseConfig struct {
	project func(t *testing.T) *boxtest.Project
	keep    map[string]string
	// fresh is a project that init has not run in: a cell's command makes
	// the box, and the test build destroys what it left.
	fresh bool
	// backup is a full backup made once after init, with no case set,
	// which the cells restore (backupArg).
	backup bool
}

// releaseConfigs are the configurations the drivers name: plain (init's
// defaults), guestenv (a secret to deliver and a network mode to prove at
// every start) and executor (the Executor enabled, its health endpoint
// served here).
var releaseConfigs = map[string]releaseConfig{
	"plain": {project: func(t *testing.T) *boxtest.Project { return boxtest.New(t) }},
	"fresh": {project: func(t *testing.T) *boxtest.Project { return boxtest.New(t) }, fresh: true},
	// A restore applies the backup through smolvm exec -i: 1.0.4 (the
	// fake's default) ends an input the guest does not take within 10 s,
	// before the verb's deadline; 1.9.3 streams it.
	"backup": {project: func(t *testing.T) *boxtest.Project {
		p := boxtest.New(t)
		p.Env = append(p.Env, "FAKESMOLVM_VERSION=1.9.3")
		return p
	}, backup: true},
	"guestenv": {
		project: func(t *testing.T) *boxtest.Project {
			p := boxtest.New(t, "HERMES_BOX_NETWORK_MODE=none")
			p.Write("secret-env.txt", "OPENAI_API_KEY=MATRIX_SECRET\n")
			// smolvm 1.9.3 enforces the mode on create --from; 1.0.4
			// refuses it.
			p.Env = append(p.Env, "MATRIX_SECRET=sk-matrix", "FAKESMOLVM_VERSION=1.9.3")
			return p
		},
		// The release binary probes the real outside, which may answer
		// here: outside a netprobe cell the box vouches for its mode
		// (the host shows such a proof as the box's word).
		keep: map[string]string{"netprobe": "forge"},
	},
	"executor": {project: func(t *testing.T) *boxtest.Project {
		health := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/api/health" {
				http.NotFound(w, r)
			}
		}))
		t.Cleanup(health.Close)
		port := sshdtest.FreePort(t)
		p := boxtest.New(t, "HERMES_BOX_EXECUTOR_ENABLED=true", "HERMES_BOX_EXECUTOR_PORT="+strconv.Itoa(port))
		p.Env = append(p.Env, "FAKESMOLVM_GUEST_4788="+strings.TrimPrefix(health.URL, "http://"))
		return p
	}},
}

// releaseModes are the matrix's modes; each is the test agent's case for
// verb v. The quick ones end at once (a flood at its cap); the others wait
// for a deadline.
var releaseModes = []struct {
	name  string
	quick bool
	c     func(v *agent.Verb) string
}{
	{"escape", true, func(*agent.Verb) string { return "escape" }},
	{"stdout-1GiB", true, func(*agent.Verb) string { return "flood-stdout" }},
	{"stderr-1GiB", true, func(*agent.Verb) string { return "flood-stderr-line" }},
	{"never-answers", false, func(*agent.Verb) string { return "hang" }},
	// Just under the deadline; a verb with an idle deadline drips past it
	// (a part every third of it or so).
	// A deadline of 20 s or less (netcheck's, whose smolvm --timeout is
	// shorter still) is dripped for half of it.
	{"slow-drip", false, func(v *agent.Verb) string {
		if v.Idle > 0 {
			return fmt.Sprintf("drip:%v", v.Idle+10*time.Second)
		}
		return fmt.Sprintf("drip:%v", max(v.Deadline-10*time.Second, v.Deadline/2))
	}},
	{"10k-step-names", true, func(*agent.Verb) string { return "steps:10000" }},
}

// quickMode says the box answers mode's case at once, in full or at a cap.
func quickMode(mode string) bool {
	for _, m := range releaseModes {
		if m.name == mode {
			return m.quick
		}
	}
	return false
}

// followFor is how long the matrix follows a log before its Ctrl-C.
const followFor = 5 * time.Second

// releaseSetups bounds the boxes set up at once (init is the matrix's CPU;
// the cells' waits overlap freely).
const releaseSetups = 4

// shortWait is the longest wait of a verb whose two waiting cells (never
// answers, drip) share a box in turn; a longer one's have a box each, in
// parallel.
const shortWait = 2 * time.Minute

// releaseCell is one cell's figures.
type releaseCell struct {
	verb, mode     string
	rssKiB         int64
	wall, fromCall time.Duration // the command's, and from the verb's call
}

// laneCell is one cell of a lane: a verb, its driver and a mode.
type laneCell struct {
	v    *agent.Verb
	d    releaseDriver
	mode int
}

// releaseLane is a box and the cells it runs in turn.
type releaseLane struct {
	name, conf string
	cells      []laneCell
	wait       time.Duration // the cells' waits together
}

// releaseLanes shares boxes among cells where the configuration and the
// waits allow (setting a box up is what costs): the quick cells of the
// verbs whose command leaves the box as it was share one box per
// configuration (a follow's cells all end on its Ctrl-C: quick too); a
// verb's waiting cells share a box when its wait is short (shortWait), and
// have one each otherwise; the quick cells of a command that changes the
// box run on the box of its never-answers cell. The lanes come longest
// wait first, so that the long waits start early and overlap.
func releaseLanes(t *testing.T) []*releaseLane {
	byName := map[string]*releaseLane{}
	var lanes []*releaseLane
	for _, v := range agent.Verbs {
		d, ok := releaseDrivers[v]
		if !ok {
			if releaseElsewhere[v] == "" {
				t.Errorf("verb %q has no command in the release matrix: add it to releaseDrivers (or releaseElsewhere, saying why not)", verbKey(v))
			}
			continue
		}
		wait := v.Deadline
		if v.Idle > 0 {
			wait = v.Idle
		}
		// A box that never answers is asked d.asks times.
		never := wait * time.Duration(max(1, d.asks))
		for i, m := range releaseModes {
			var name string
			switch {
			case (m.quick || d.follow) && !d.mutates:
				name = d.conf + "/quick"
			case never <= shortWait:
				name = verbKey(v) + "/wait"
			case m.name == "never-answers" || m.quick && never <= wait:
				name = verbKey(v) + "/never-answers"
			default:
				// The quick cells go with the shorter wait.
				name = verbKey(v) + "/" + m.name
				if m.quick {
					name = verbKey(v) + "/slow-drip"
				}
			}
			l := byName[name]
			if l == nil {
				l = &releaseLane{name: name, conf: d.conf}
				byName[name] = l
				lanes = append(lanes, l)
			}
			l.cells = append(l.cells, laneCell{v: v, d: d, mode: i})
			switch {
			case m.quick || d.follow:
			case m.name == "never-answers":
				l.wait += never
			default:
				l.wait += wait
			}
		}
	}
	slices.SortStableFunc(lanes, func(a, b *releaseLane) int { return cmp.Compare(b.wait, a.wait) })
	return lanes
}

// TestHostileMatrixRelease runs the matrix: a box per lane (releaseLanes;
// init with the test build, but for a fresh project), the lanes in
// parallel (at most releaseSetups set up at once) and a lane's cells in
// turn: the case written, the release binary's command, the case removed
// (and a box the command changed put back). Each cell: the command calls
// the verb; peak RSS of hermes-box at most 64 MiB; from the verb's call to
// the command's end at most the verb's deadline (its idle deadline for a
// box that never answers) plus 10 s, but for a drip, which must not be
// cut; no control byte in its output; a box that never answers ends the
// command with an error naming the verb and the next step.
func TestHostileMatrixRelease(t *testing.T) {
	requireNSSWrapper(t)
	release := sshdtest.GoBuildRelease(t, filepath.Join(t.TempDir(), "hermes-box"), "./host", "-tags", "hbxrelease", "-trimpath")
	setups := make(chan struct{}, releaseSetups)
	var (
		mu    sync.Mutex
		cells []releaseCell
	)
	start := time.Now()
	lanes := releaseLanes(t)
	// The lanes run at once from goroutines, not as t.Parallel subtests:
	// go test's -parallel (GOMAXPROCS by default, 2 on CI's machine) would
	// let two lanes run at a time, and a lane is mostly waits (a box that
	// never answers, a drip), so the matrix took the sum of its lanes.
	t.Run("lanes", func(t *testing.T) {
		var wg sync.WaitGroup
		for _, l := range lanes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t.Run(l.name, func(t *testing.T) { runReleaseLane(t, l, release, setups, &mu, &cells) })
			}()
		}
		wg.Wait()
	})
	t.Logf("release matrix: %d cells on %d boxes in %v%s", len(cells), len(lanes), time.Since(start).Round(time.Second), releaseTable(cells))
}

// runReleaseLane sets up the lane's box (holding one of setups) and runs
// its cells in turn, adding each cell's figures to cells.
func runReleaseLane(t *testing.T, l *releaseLane, release string, setups chan struct{}, mu *sync.Mutex, cells *[]releaseCell) {
	// The slot is given back even when the setup fails.
	h, backup := func() (*boxtest.Project, string) {
		setups <- struct{}{}
		defer func() { <-setups }()
		return releaseBox(t, l.conf)
	}()
	for _, c := range l.cells {
		m := releaseModes[c.mode]
		d := c.d
		d.args = slices.Clone(d.args)
		if i := slices.Index(d.args, backupArg); i >= 0 {
			d.args[i] = backup
		}
		t.Run(verbKey(c.v)+"/"+m.name, func(t *testing.T) {
			h.T = t
			cell := runReleaseCell(t, h, release, c.v, d, m.name, m.c(c.v))
			mu.Lock()
			*cells = append(*cells, cell)
			mu.Unlock()
		})
	}
}

func verbKey(v *agent.Verb) string {
	return strings.TrimSpace(v.Name() + " " + strings.Join(v.Args, " "))
}

// requireNSSWrapper skips without Debian's libnss-wrapper, which lets the
// test's sshd take boxadmin's login; under CI=true it fails instead.
func requireNSSWrapper(t *testing.T) {
	if lib, _ := filepath.Glob("/usr/lib/*/libnss_wrapper.so"); len(lib) > 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("libnss_wrapper.so is missing (install libnss-wrapper); CI=true requires this test to run")
	}
	t.Skip("libnss_wrapper.so is missing (install libnss-wrapper)")
}

// releaseBox is an initialised box of configuration conf whose machines' sshd takes the release
// binary's login, and the path of the backup its configuration makes ("" for none).
func releaseBox(t *testing.T, conf string) (*boxtest.Project, string) {
	c := releaseConfigs[conf]
	p := c.project(t)
	for f, kept := range c.keep {
		p.Hostile(f, kept)
	}
	boxtest.Must(t, os.MkdirAll(p.State, 0o755))
	boxtest.Must(t, os.WriteFile(filepath.Join(p.State, "release-login"), nil, 0o644))
	if !c.fresh {
		mustRun(t, p, "init")
	}
	if !c.backup {
		return p, ""
	}
	p.Extra = fullSnapshot
	defer func() { p.Extra = nil }()
	out, err := run(t, p, "snapshot", "matrix")
	if err != nil {
		t.Fatalf("hermes-box snapshot matrix: %v\n%s", err, out)
	}
	// snapshot prints the backup's path last.
	lines := strings.Fields(out)
	return p, lines[len(lines)-1]
}

// runReleaseCell runs one cell on h's box and puts the box back.
func runReleaseCell(t *testing.T, h *boxtest.Project, release string, v *agent.Verb, d releaseDriver, mode, c string) releaseCell {
	if d.stopped {
		mustRun(t, h, "stop")
	}
	// Every machine's agent takes the case.
	if d.once {
		c = "once:" + c
	}
	file := h.Hostile(d.file, c)
	removeAll(t, file+".hits", file+".released")
	r := runRelease(t, h, release, d)
	// From the (last) call that met the case to the command's end: what
	// the verb's deadline bounds, after whatever the command did first.
	// A command that goes on once the box did not answer (restore restarts
	// the original, stop stops the machine anyway) is bounded to when the
	// hung agent saw the host let go of the call, as long as it saw it.
	fromCall := r.elapsed
	if fi, err := os.Stat(file + ".hits"); err == nil {
		fromCall = min(r.elapsed, r.end.Sub(fi.ModTime()))
		if rel, err := os.Stat(file + ".released"); err == nil && d.hang != "" && !rel.ModTime().Before(fi.ModTime()) {
			fromCall = rel.ModTime().Sub(fi.ModTime())
		}
	}
	calls := casesMet(t, file+".hits")
	removeAll(t, file, file+".hits", file+".reached", file+".released")
	if kept := releaseConfigs[d.conf].keep[d.file]; kept != "" {
		h.Hostile(d.file, kept)
	}
	// A restore whose apply failed restarted the original and removed its
	// candidate; one that succeeded replaced the box with the backup.
	if m := h.Machines(); d.args[0] == "restore" && (len(m) != 1 || m[boxtest.Machine] != "running") {
		t.Errorf("machines after the restore: %v, want %s running alone", m, boxtest.Machine)
	}
	switch {
	case d.mutates && releaseConfigs[d.conf].fresh:
		// Whatever init left: a box, or nothing (its builder deleted).
		if out, err := run(t, h, "destroy", "--force"); err != nil && len(h.Machines()) > 0 {
			t.Fatalf("hermes-box destroy --force: %v\n%s", err, out)
		}
		if m := h.Machines(); len(m) > 0 {
			t.Fatalf("machines left after the cell: %v", m)
		}
	case d.mutates && d.args[0] != "restart" && !d.stopped:
		// A restart's cell needs none: the next cell's restart starts
		// the box whatever the last one left; nor does a stopped box's,
		// whose next cell stops the box first.
		mustRun(t, h, "restart")
	}
	cell := releaseCell{verb: verbKey(v), mode: mode, rssKiB: r.maxRSSKiB, wall: r.elapsed, fromCall: fromCall}
	t.Logf("hermes-box %s: exit %d, peak RSS %.1f MiB, %v (%v from the call); %.300q", strings.Join(d.args, " "), r.code,
		float64(r.maxRSSKiB)/1024, r.elapsed.Round(time.Millisecond), fromCall.Round(time.Millisecond), errorLine(r.err.Head()))
	if !slices.ContainsFunc(calls, func(argv []string) bool { return verbOf(argv) == v }) {
		t.Errorf("the command never called agent %s (the case met %q):\nstdout: %.2000q\nstderr: %.2000q", v.Name(), calls, r.out.Head(), r.err.Head())
	}
	limit := v.Deadline
	if v.Idle > 0 && mode == "never-answers" {
		limit = v.Idle
	}
	if d.follow {
		limit = followFor
	}
	// A drip answers in full just under the deadline, and the command
	// goes on with its next steps (a restart waits for the gateway again):
	// what it must show is that the answer was not cut. So does a command
	// that took a quick answer in full and succeeded: init's netcheck is
	// followed by the whole of init (provision, the base image), which is
	// not the verb's time.
	wentOn := mode == "slow-drip" || (quickMode(mode) && r.code == 0)
	if bound := limit + 10*time.Second; fromCall > bound && !wentOn {
		t.Errorf("took %v from the call, want at most %v", fromCall, bound)
	}
	if r.maxRSSKiB == 0 || r.maxRSSKiB > rssBudgetKiB {
		t.Errorf("peak RSS %d KiB, want at most %d", r.maxRSSKiB, rssBudgetKiB)
	}
	for _, o := range []struct {
		what string
		sink *termsafetest.Sink
	}{{"stdout", r.out}, {"stderr", r.err}} {
		if o.sink.Bad() != "" {
			t.Errorf("%s carries %s:\n%.2000q", o.what, o.sink.Bad(), o.sink.Head())
		}
	}
	out := r.out.Head() + r.err.Head()
	named := strings.Contains(out, "did not answer agent "+v.Name())
	switch {
	case mode == "never-answers" && d.hang != "" && !strings.Contains(out, d.hang):
		t.Errorf("exit %d, want %q:\nstdout: %.2000s\nstderr: %.2000s", r.code, d.hang, r.out.Head(), r.err.Head())
	case mode == "never-answers" && d.hang == "" && !d.follow && (!named || !strings.Contains(out, "hermes-box restart")):
		t.Errorf("exit %d, want the verb and the next step named:\nstdout: %.2000s\nstderr: %.2000s", r.code, r.out.Head(), r.err.Head())
	case mode == "slow-drip" && named:
		t.Errorf("a drip under the deadline was cut:\nstdout: %.2000s\nstderr: %.2000s", r.out.Head(), r.err.Head())
	}
	return cell
}

// casesMet is the argv of each call that met a case, from the test
// agent's NAME.hits (a JSON array a line); none when it is missing.
func casesMet(t *testing.T, hits string) [][]string {
	data, err := os.ReadFile(hits)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	boxtest.Must(t, err)
	var calls [][]string
	for line := range strings.Lines(string(data)) {
		var argv []string
		if err := json.Unmarshal([]byte(line), &argv); err != nil {
			t.Fatalf("%s: %q: %v", hits, line, err)
		}
		calls = append(calls, argv)
	}
	return calls
}

// verbOf is the verb of the table that a call's argv is: of those whose
// argv it starts with and whose literal flags it has, the most specific
// (a case file serves every verb of its name: health --json --deep is
// HealthDeep's call, logs with -f LogsFollow's).
func verbOf(argv []string) *agent.Verb {
	var best *agent.Verb
	bestScore := 0
	for _, v := range agent.Verbs {
		if len(argv) < len(v.Argv) || !slices.Equal(argv[:len(v.Argv)], v.Argv) {
			continue
		}
		score := len(v.Argv)
		for _, a := range v.Args {
			if strings.HasPrefix(a, "-") {
				if !slices.Contains(argv[len(v.Argv):], a) {
					score = -1
					break
				}
				score++
			}
		}
		if score > bestScore {
			best, bestScore = v, score
		}
	}
	return best
}

// errorLine is the command's error in its stderr, the line hermes-box
// starts with "hermes-box: ", or "" when none.
func errorLine(stderr string) string {
	i := strings.LastIndex("\n"+stderr, "\nhermes-box: ")
	if i < 0 {
		return ""
	}
	line, _, _ := strings.Cut(stderr[i:], "\n")
	return line
}

// removeAll removes the files that exist of files.
func removeAll(t *testing.T, files ...string) {
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
}

// releaseRun is one run of the release binary: its output seen as it came.
type releaseRun struct {
	code      int
	out, err  *termsafetest.Sink
	maxRSSKiB int64
	elapsed   time.Duration
	end       time.Time
}

// runRelease runs the release binary with args in h's project, without the
// test hooks' variables, and measures it; a follow is interrupted after
// followFor.
func runRelease(t *testing.T, h *boxtest.Project, release string, d releaseDriver) releaseRun {
	ctx, cancel := context.WithTimeout(context.Background(), runLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, release, d.args...)
	cmd.Env = append(slices.DeleteFunc(slices.Clone(h.Env), func(kv string) bool { return strings.HasPrefix(kv, "HBX_TEST_") }), d.env...)
	cmd.Stdin = strings.NewReader(d.stdin)
	r := releaseRun{out: &termsafetest.Sink{}, err: &termsafetest.Sink{}}
	cmd.Stdout, cmd.Stderr = r.out, r.err
	start := time.Now()
	boxtest.Must(t, cmd.Start())
	stop, done := make(chan struct{}), make(chan struct{})
	var hwm int64
	go func() { defer close(done); hwm = boxtest.WatchHWM(cmd.Process.Pid, stop) }()
	if d.follow {
		time.AfterFunc(followFor, func() { cmd.Process.Signal(syscall.SIGINT) })
	}
	err := cmd.Wait()
	close(stop)
	<-done
	r.end = time.Now()
	r.elapsed, r.maxRSSKiB = r.end.Sub(start), hwm
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running the release hermes-box %v: %v", d.args, err)
	}
	return r
}

// releaseTable is the cells as a table, verbs by modes: peak RSS, the time
// from the verb's call to the command's end, and the command's in
// parentheses.
func releaseTable(cells []releaseCell) string {
	var b strings.Builder
	b.WriteString("\n| verb |")
	for _, m := range releaseModes {
		b.WriteString(" " + m.name + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(releaseModes)) + "\n")
	byVerb := map[string]map[string]releaseCell{}
	for _, c := range cells {
		if byVerb[c.verb] == nil {
			byVerb[c.verb] = map[string]releaseCell{}
		}
		byVerb[c.verb][c.mode] = c
	}
	for _, v := range agent.Verbs {
		row, ok := byVerb[verbKey(v)]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "| %s |", verbKey(v))
		for _, m := range releaseModes {
			if c, ok := row[m.name]; ok {
				fmt.Fprintf(&b, " %.1f MiB, %.0f s (%.0f s) |", float64(c.rssKiB)/1024, c.fromCall.Seconds(), c.wall.Seconds())
			} else {
				b.WriteString(" - |")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestVerbOf checks that a call met by a case file is told apart from the
// other verbs of the file's name, so that a cell whose command calls
// another verb of that name fails.
func TestVerbOf(t *testing.T) {
	for _, tt := range []struct {
		argv []string
		want *agent.Verb
	}{
		{[]string{"health", "--json"}, agent.Health},
		{[]string{"health", "--json", "--deep"}, agent.HealthDeep},
		{[]string{"executor", "status"}, agent.ExecutorStatus},
		{[]string{"executor", "status", "--sizes"}, agent.ExecutorStatusSizes},
		{[]string{"logs", "hermes", "-n", "200"}, agent.Logs},
		{[]string{"logs", "hermes", "-n", "200", "-f"}, agent.LogsFollow},
		{[]string{"provision", "--authorized-keys", "k", "--hermes-commit", "c"}, agent.Provision},
		{[]string{"services", "stop", "hermes"}, agent.ServicesStop},
		{[]string{"executor"}, nil},
		{[]string{"shell"}, nil},
	} {
		if got := verbOf(tt.argv); got != tt.want {
			t.Errorf("verbOf(%q) = %s, want %s", tt.argv, nameOf(got), nameOf(tt.want))
		}
	}
}

func nameOf(v *agent.Verb) string {
	if v == nil {
		return "none"
	}
	return verbKey(v)
}
