//go:build linux

package releasematrix_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
// that a command calls over the SSH relay, in every hostile mode, with the
// release hermes-box (built as `make build` builds it: no hbxtest tag, no
// test hook, production timings and deadlines) as the host process. It
// reaches each box by the product's own paths: its project and state
// directories, the fake smolvm on PATH, and the relay as boxadmin to the
// box's Debian sshd, which forces the compromised agent stand-in
// (tests/testagent's hostile cases) as the remote command.

// releaseDriver is how a command of the release binary reaches a verb.
type releaseDriver struct {
	// file is the test agent's case file of the verb (VERB or VERB.SUB).
	file string
	// args is the command.
	args []string
	// follow runs the command until Ctrl-C, sent after followFor.
	follow bool
	// mutates says the command changes the box: after each cell the test
	// build restarts it.
	mutates bool
	// hang is what the command says of a box that never answers the verb,
	// when it goes on without it; "" is the door's error, which names the
	// verb and the next step.
	hang string
}

// releaseDrivers has an entry for every verb a command calls over the
// relay on a box that init made; TestHostileMatrixRelease fails for a verb
// in neither this table nor releaseElsewhere, so a verb added to the table
// is driven here the day it is added.
var releaseDrivers = map[*agent.Verb]releaseDriver{
	agent.Health:         {file: "health", args: []string{"status"}},
	agent.ServicesStatus: {file: "services.status", args: []string{"logs", "hermes"}},
	agent.Logs:           {file: "logs", args: []string{"logs", "hermes"}},
	agent.LogsFollow:     {file: "logs", args: []string{"logs", "-f", "hermes"}, follow: true},
	agent.AuditRaw:       {file: "audit", args: []string{"audit"}},
	// stop waits 30 s for the services, then stops the machine anyway.
	agent.ServicesStop: {file: "services.stop", args: []string{"stop"}, mutates: true,
		hang: "could not stop the services gracefully"},
	agent.ServicesStart:  {file: "services.start", args: []string{"snapshot", "matrix"}, mutates: true},
	agent.SnapshotChunks: {file: "snapshot.chunks", args: []string{"snapshot", "matrix"}, mutates: true},
}

// releaseElsewhere are the verbs no command of an initialised box calls
// over the relay, and where their hostile matrix runs instead
// (host/internal/agent's TestHostileMatrix, the same modes through
// Debian's sshd with that package's test binary as the host).
var releaseElsewhere = map[*agent.Verb]string{
	agent.HealthDeep:          "restore's and init's verification: agent TestHostileMatrix",
	agent.ExecutorStatus:      "a box with the Executor enabled: agent TestHostileMatrix",
	agent.ExecutorStatusSizes: "a box with the Executor enabled: agent TestHostileMatrix",
	agent.ExecutorRefresh:     "a box with the Executor enabled: agent TestHostileMatrix",
	agent.ExecutorConnect:     "a box with the Executor enabled: agent TestHostileMatrix",
	agent.SnapshotWrite:       "a v2 snapshot (HERMES_BOX_SNAPSHOT_INCREMENTAL=false): agent TestHostileMatrix",
	agent.SnapshotApply:       "restore applies through smolvm exec to a machine in restore mode, not the relay: agent TestHostileMatrix",
	// start sends them only to a box with secrets to deliver, or a
	// network mode to prove; the matrix's box has neither.
	agent.SecretsSet: "start, for a box with secrets: agent TestHostileMatrix",
	agent.Netprobe:   "start, for a box with a network mode to prove: agent TestHostileMatrix",
	agent.Version:    "smolvm exec, not the relay: agent TestHostileMatrix",
	agent.Netcheck:   "smolvm exec, not the relay: agent TestHostileMatrix",
	agent.HostKeys:   "smolvm exec, not the relay: agent TestHostileMatrix",
	agent.Provision:  "smolvm exec, not the relay: agent TestHostileMatrix",
}

// releaseModes are the matrix's modes; each is the test agent's case for
// verb v.
// The modes of a group share a box, in turn; the groups of a verb run in
// parallel, so that the two long waits (a box that never answers, a drip)
// overlap.
var releaseModes = []struct {
	name, group string
	c           func(v *agent.Verb) string
}{
	{"escape", "quick", func(*agent.Verb) string { return "escape" }},
	{"stdout-1GiB", "quick", func(*agent.Verb) string { return "flood-stdout" }},
	{"stderr-1GiB", "quick", func(*agent.Verb) string { return "flood-stderr-line" }},
	{"never-answers", "hang", func(*agent.Verb) string { return "hang" }},
	// Just under the deadline; a verb with an idle deadline drips past it
	// (a part every third of it or so).
	{"slow-drip", "drip", func(v *agent.Verb) string {
		if v.Idle > 0 {
			return fmt.Sprintf("drip:%v", v.Idle+10*time.Second)
		}
		return fmt.Sprintf("drip:%v", v.Deadline-10*time.Second)
	}},
	{"10k-step-names", "quick", func(*agent.Verb) string { return "steps:10000" }},
}

// releaseGroups are the groups of releaseModes, in order.
var releaseGroups = []string{"quick", "hang", "drip"}

// followFor is how long the matrix follows a log before its Ctrl-C.
const followFor = 5 * time.Second

// releaseSetups bounds the boxes set up at once (init is the matrix's CPU;
// the cells' waits overlap freely).
const releaseSetups = 4

// releaseCell is one cell's figures.
type releaseCell struct {
	verb, mode string
	rssKiB     int64
	wall       time.Duration
}

// TestHostileMatrixRelease runs the matrix: a box per verb and group of
// modes (init with the test build), those in parallel and the modes of a
// group in turn: the case written, the release binary's command, the case
// removed (and a box the command changed restarted). Each cell: peak RSS
// of hermes-box at most 64 MiB, wall time within the verb's deadline (its
// idle deadline for a box that never answers) plus 10 s, no control byte
// in its output; a box that never answers ends the command with an error
// naming the verb and the next step, and a drip under the deadline does
// not.
func TestHostileMatrixRelease(t *testing.T) {
	requireNSSWrapper(t)
	release := sshdtest.GoBuildRelease(t, filepath.Join(t.TempDir(), "hermes-box"), "./host", "-tags", "hbxrelease", "-trimpath")
	setups := make(chan struct{}, releaseSetups)
	var (
		mu    sync.Mutex
		cells []releaseCell
	)
	start := time.Now()
	t.Run("cells", func(t *testing.T) {
		for _, v := range agent.Verbs {
			d, ok := releaseDrivers[v]
			if !ok {
				if releaseElsewhere[v] == "" {
					t.Errorf("verb %q has no command in the release matrix: add it to releaseDrivers (or releaseElsewhere, saying where its matrix runs)", verbKey(v))
				}
				continue
			}
			for _, g := range releaseGroups {
				t.Run(verbKey(v)+"/"+g, func(t *testing.T) {
					t.Parallel()
					setups <- struct{}{}
					h := releaseBox(t)
					<-setups
					for _, m := range releaseModes {
						if m.group != g {
							continue
						}
						t.Run(m.name, func(t *testing.T) {
							h.T = t
							c := runReleaseCell(t, h, release, v, d, m.name, m.c(v))
							mu.Lock()
							cells = append(cells, c)
							mu.Unlock()
						})
					}
				})
			}
		}
	})
	t.Logf("release matrix: %d cells in %v%s", len(cells), time.Since(start).Round(time.Second), releaseTable(cells))
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

// releaseBox is an initialised box whose machines' sshd takes the release
// binary's login.
func releaseBox(t *testing.T) *boxtest.Project {
	p := boxtest.New(t)
	boxtest.Must(t, os.MkdirAll(p.State, 0o755))
	boxtest.Must(t, os.WriteFile(filepath.Join(p.State, "release-login"), nil, 0o644))
	mustRun(t, p, "init")
	return p
}

// runReleaseCell runs one cell on h's box and puts the box back.
func runReleaseCell(t *testing.T, h *boxtest.Project, release string, v *agent.Verb, d releaseDriver, mode, c string) releaseCell {
	// Every machine's agent takes the case.
	file := h.Hostile(d.file, c)
	r := runRelease(t, h, release, d.args, d.follow)
	boxtest.Must(t, os.Remove(file))
	if d.mutates {
		mustRun(t, h, "restart")
	}
	cell := releaseCell{verb: verbKey(v), mode: mode, rssKiB: r.maxRSSKiB, wall: r.elapsed}
	t.Logf("hermes-box %s: exit %d, peak RSS %.1f MiB, %v", strings.Join(d.args, " "), r.code, float64(r.maxRSSKiB)/1024, r.elapsed.Round(time.Millisecond))
	limit := v.Deadline
	if v.Idle > 0 && mode == "never-answers" {
		limit = v.Idle
	}
	if d.follow {
		limit = followFor
	}
	if bound := limit + 10*time.Second; r.elapsed > bound {
		t.Errorf("took %v, want at most %v", r.elapsed, bound)
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

// releaseRun is one run of the release binary: its output seen as it came.
type releaseRun struct {
	code      int
	out, err  *termsafetest.Sink
	maxRSSKiB int64
	elapsed   time.Duration
}

// runRelease runs the release binary with args in h's project, without the
// test hooks' variables, and measures it; a follow is interrupted after
// followFor.
func runRelease(t *testing.T, h *boxtest.Project, release string, args []string, follow bool) releaseRun {
	ctx, cancel := context.WithTimeout(context.Background(), runLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, release, args...)
	cmd.Env = slices.DeleteFunc(slices.Clone(h.Env), func(kv string) bool { return strings.HasPrefix(kv, "HBX_TEST_") })
	r := releaseRun{out: &termsafetest.Sink{}, err: &termsafetest.Sink{}}
	cmd.Stdout, cmd.Stderr = r.out, r.err
	start := time.Now()
	boxtest.Must(t, cmd.Start())
	stop, done := make(chan struct{}), make(chan struct{})
	var hwm int64
	go func() { defer close(done); hwm = boxtest.WatchHWM(cmd.Process.Pid, stop) }()
	if follow {
		time.AfterFunc(followFor, func() { cmd.Process.Signal(syscall.SIGINT) })
	}
	err := cmd.Wait()
	close(stop)
	<-done
	r.elapsed, r.maxRSSKiB = time.Since(start), hwm
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running the release hermes-box %v: %v", args, err)
	}
	return r
}

// releaseTable is the cells as a table, verbs by modes: peak RSS and time.
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
				fmt.Fprintf(&b, " %.1f MiB, %.0f s |", float64(c.rssKiB)/1024, c.wall.Seconds())
			} else {
				b.WriteString(" - |")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
