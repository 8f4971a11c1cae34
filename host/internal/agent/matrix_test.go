//go:build linux

package agent_test

import (
	"bytes"
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
	"unicode/utf8"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/relay/sshdtest"
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
// 100 cells. host/internal/cli's TestHostileMatrixRelease runs the verbs
// that commands call over the relay with the release binary and the real
// deadlines.
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
	var stdout, stderr safeSink
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	c := cell{verb: strings.TrimSpace(v.Name() + " " + strings.Join(v.Args, " ")), mode: mode, wall: time.Since(start), bound: bound}
	if err != nil {
		t.Errorf("host process: %v\nstderr: %s", err, stderr.head.String())
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
	for _, s := range []*safeSink{&stdout, &stderr} {
		if s.bad != "" {
			t.Errorf("a control byte reached the output: %s\n%s", s.bad, s.head.String())
		}
	}
	if mode == modeEscape && !strings.Contains(stdout.head.String()+stderr.head.String(), "]52;c;") {
		t.Errorf("the payload was not shown at all:\nstdout: %s\nstderr: %s", stdout.head.String(), stderr.head.String())
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

// safeSink takes a process's output: it keeps the first 4 KiB to show,
// counts the rest, and notes the first character a terminal would obey (a
// control other than newline and tab, DEL, a C1 control, a bidi control)
// or bytes that are not UTF-8.
type safeSink struct {
	head  bytes.Buffer
	n     int64
	carry []byte
	bad   string
}

func (s *safeSink) Write(p []byte) (int, error) {
	if s.head.Len() < 4<<10 {
		s.head.Write(p[:min(len(p), 4<<10-s.head.Len())])
	}
	s.n += int64(len(p))
	buf := append(s.carry, p...)
	for len(buf) > 0 && s.bad == "" {
		if !utf8.FullRune(buf) {
			break
		}
		r, size := utf8.DecodeRune(buf)
		switch {
		case r == utf8.RuneError && size == 1:
			s.bad = fmt.Sprintf("bytes that are not UTF-8 at byte %d", s.n-int64(len(buf)))
		case r < 0x20 && r != '\n' && r != '\t', r == 0x7f, r >= 0x80 && r <= 0x9f,
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
			s.bad = fmt.Sprintf("%U at byte %d", r, s.n-int64(len(buf)))
		}
		buf = buf[size:]
	}
	s.carry = append(s.carry[:0], buf...)
	if s.bad != "" {
		s.carry = nil
	}
	return len(p), nil
}
