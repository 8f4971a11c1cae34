//go:build linux

package agent_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/relay/sshdtest"
	"github.com/hermes-box/hermes-box/shared/termsafe/termsafetest"
)

// The environment of the matrix's host process.
const (
	envAddr     = "HBX_MATRIX_ADDR"
	envUser     = "HBX_MATRIX_USER"
	envKey      = "HBX_MATRIX_KEY"
	envHostKey  = "HBX_MATRIX_HOST_KEY"
	envCommand  = "HBX_MATRIX_COMMAND"
	envAnchor   = "HBX_MATRIX_ANCHOR"
	envDeadline = "HBX_MATRIX_DEADLINE" // every verb's deadline in the matrix
	envHWM      = "HBX_MATRIX_HWM"      // where the host writes its peak RSS (VmHWM, KiB)
)

// matrixDeadline caps every verb's deadline in this matrix (its idle
// deadline at half: agent.Shortened, which only this package's test binary
// has): long enough for a session on a loaded machine, short enough for
// 100 cells. host/internal/releasematrix's TestHostileMatrixRelease runs the
// verbs that commands call (but those it lists in releaseElsewhere) with the
// release binary and the real deadlines.
const matrixDeadline = 4 * time.Second

// matrixRSSKiB is the most a cell's host process may hold resident.
const matrixRSSKiB = 64 << 10

// TestMain runs the binary as the matrix's agent or host when asked to.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "hbx-matrix-agent":
			deadline, _ := time.ParseDuration(os.Args[3])
			os.Exit(matrixAgent(os.Args[2], deadline, atoi(os.Args[4])))
		case "hbx-matrix-host":
			os.Exit(matrixHost(atoi(os.Args[2]), atoi(os.Args[3])))
		}
	}
	os.Exit(m.Run())
}

// cell is one verb in one mode: the host's peak RSS and wall time.
type cell struct {
	verb, mode string
	rssKiB     int64
	wall       time.Duration
	bound      time.Duration
}

// TestHostileMatrix runs every verb of the table in every hostile mode
// through Debian's sshd and a compromised agent, one host process per
// cell: its peak RSS stays within 64 MiB, its wall time within the
// verb's deadline (here matrixDeadline) plus 10 s, and nothing it prints
// carries a byte a terminal would obey.
func TestHostileMatrix(t *testing.T) {
	sshd := sshdtest.New(t, sshdtest.Options{NoAgent: true})
	exe := matrixBinary(t)
	var (
		mu    sync.Mutex
		cells []cell
	)
	for i, v := range agent.Verbs {
		name := v.Name() + " " + strings.Join(v.Args, " ")
		if uses[v] == nil {
			t.Errorf("verb %q has no use in the matrix: add one to uses", name)
			continue
		}
		for _, mode := range modes {
			t.Run(strings.TrimSpace(name)+"/"+mode, func(t *testing.T) {
				t.Parallel()
				c := runCell(t, sshd, exe, i, v, mode)
				mu.Lock()
				cells = append(cells, c)
				mu.Unlock()
			})
		}
	}
	t.Cleanup(func() { logMatrix(t, cells) })
}

// matrixBinary is this test binary, or under the race detector the same
// tests built without it: the host process must be measured as it is built.
func matrixBinary(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if !raceEnabled {
		return exe
	}
	out := filepath.Join(t.TempDir(), "agent.test")
	cmd := exec.CommandContext(t.Context(), "go", "test", "-c", "-o", out, "./host/internal/agent")
	cmd.Dir = sshdtest.ModuleRoot(t)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the matrix's host without the race detector: %v\n%s", err, b)
	}
	return out
}

// runCell runs one cell and checks its bounds.
func runCell(t *testing.T, sshd *sshdtest.Server, exe string, i int, v *agent.Verb, mode string) cell {
	calls, bound := 1, matrixDeadline+10*time.Second
	if v.Follow() {
		bound = followFor + 10*time.Second
	}
	if mode == modeSteps {
		calls = 10_000 / stepsPerCall
		bound *= time.Duration(calls)
	}
	drip := matrixDeadline - time.Second
	dir := t.TempDir()
	hwm := filepath.Join(dir, "hwm")
	command := strings.Join([]string{sshdtest.ShellQuote(exe), "hbx-matrix-agent", mode, drip.String()}, " ")
	cmd := exec.CommandContext(t.Context(), exe, "hbx-matrix-host", strconv.Itoa(i), strconv.Itoa(calls))
	cmd.Env = append(os.Environ(), envAddr+"="+sshd.Addr, envUser+"="+sshd.User, envKey+"="+sshd.KeyPath,
		envHostKey+"="+string(ssh.MarshalAuthorizedKey(sshd.HostKey)), envCommand+"="+command,
		envAnchor+"="+filepath.Join(dir, "anchor"), envDeadline+"="+matrixDeadline.String(), envHWM+"="+hwm)
	var stdout, stderr termsafetest.Sink
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	c := cell{verb: strings.TrimSpace(v.Name() + " " + strings.Join(v.Args, " ")), mode: mode, wall: time.Since(start), bound: bound}
	if err != nil {
		t.Errorf("host process: %v\nstderr: %s", err, stderr.Head())
	}
	if b, err := os.ReadFile(hwm); err == nil {
		c.rssKiB, _ = strconv.ParseInt(string(b), 10, 64)
	}
	if c.rssKiB == 0 || c.rssKiB > matrixRSSKiB {
		t.Errorf("peak RSS %d KiB, want at most %d", c.rssKiB, matrixRSSKiB)
	}
	if c.wall > bound {
		t.Errorf("took %v, want at most %v", c.wall, bound)
	}
	for _, s := range []*termsafetest.Sink{&stdout, &stderr} {
		if s.Bad() != "" {
			t.Errorf("a control byte reached the output: %s\n%s", s.Bad(), s.Head())
		}
	}
	if mode == modeEscape && !strings.Contains(stdout.Head()+stderr.Head(), "]52;c;") {
		t.Errorf("the payload was not shown at all:\nstdout: %s\nstderr: %s", stdout.Head(), stderr.Head())
	}
	return c
}

// logMatrix logs the cells as a table, verbs by modes: peak RSS and time.
func logMatrix(t *testing.T, cells []cell) {
	slices.SortFunc(cells, func(a, b cell) int { return strings.Compare(a.verb, b.verb) })
	var b strings.Builder
	fmt.Fprintf(&b, "\n| verb | %s |\n|---|%s\n", strings.Join(modes, " | "), strings.Repeat("---|", len(modes)))
	for i := 0; i < len(cells); {
		row := map[string]cell{}
		verb := cells[i].verb
		for ; i < len(cells) && cells[i].verb == verb; i++ {
			row[cells[i].mode] = cells[i]
		}
		fmt.Fprintf(&b, "| %s |", verb)
		for _, m := range modes {
			c, ok := row[m]
			if !ok {
				b.WriteString(" - |")
				continue
			}
			fmt.Fprintf(&b, " %.1f MiB, %.1f s |", float64(c.rssKiB)/1024, c.wall.Seconds())
		}
		b.WriteString("\n")
	}
	t.Log(b.String())
}
