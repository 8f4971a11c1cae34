package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/boot"
	"github.com/hermes-box/hermes-box/guest-agent/internal/control"
	"github.com/hermes-box/hermes-box/guest-agent/internal/supervise"
)

// The benchmarks compare the agent's boot with Debian's supervisord 4.2.5,
// each supervising the same three `sleep` programs, started once per test
// binary and shared by every benchmark of the run.

const supervisordPath = "/usr/bin/supervisord"

type benchFixture struct {
	dir        string
	agent      string // built agent binary
	agentRoot  string
	agentCmd   *exec.Cmd
	superConf  string
	superSock  string
	superCmd   *exec.Cmd
	err        error
	cancelProc context.CancelFunc
}

var (
	benchOnce sync.Once
	bench     *benchFixture
)

// stopBenchFixture is called from TestMain after the run.
func stopBenchFixture() {
	if bench == nil {
		return
	}
	for _, c := range []*exec.Cmd{bench.agentCmd, bench.superCmd} {
		if c != nil && c.Process != nil {
			_ = c.Process.Signal(syscall.SIGTERM)
			_ = c.Wait()
		}
	}
	bench.cancelProc()
	os.RemoveAll(bench.dir)
}

func fixture(b *testing.B) *benchFixture {
	b.Helper()
	if _, err := os.Stat(supervisordPath); err != nil {
		if os.Getenv("CI") == "true" {
			b.Fatalf("Debian's supervisor package is missing: %v", err)
		}
		b.Skipf("needs Debian's supervisor package (%s): %v", supervisordPath, err)
	}
	benchOnce.Do(func() {
		bench = &benchFixture{}
		bench.err = bench.start()
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench
}

func (f *benchFixture) start() error {
	var err error
	if f.dir, err = os.MkdirTemp("", "hermes-box-bench-"); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancelProc = cancel
	if err := f.buildAgent(ctx); err != nil {
		return err
	}
	if err := f.startAgent(ctx); err != nil {
		return err
	}
	return f.startSupervisord(ctx)
}

// buildAgent builds the real static agent, as the box runs it.
func (f *benchFixture) buildAgent(ctx context.Context) error {
	f.agent = filepath.Join(f.dir, "hermes-box-agent")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", f.agent, "github.com/hermes-box/hermes-box/guest-agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the agent: %v: %s", err, out)
	}
	return nil
}

func (f *benchFixture) startAgent(ctx context.Context) error {
	f.agentRoot = filepath.Join(f.dir, "root")
	files := map[string]string{
		"etc/passwd": fmt.Sprintf("hermes:x:%d:%d::/:/bin/sh\n", os.Getuid(), os.Getgid()),
		"etc/group":  fmt.Sprintf("hermes:x:%d:\n", os.Getgid()),
	}
	var tbl boot.Table
	for _, name := range []string{"one", "two", "three"} {
		tbl.Programs = append(tbl.Programs, supervise.Program{
			Name: name, Command: []string{"/bin/sleep", "100000"}, AutoStart: true,
			StartRetries: supervise.DefaultStartRetries, StopWait: supervise.DefaultStopWait,
			Log: supervise.Log{Path: "/logs/" + name + ".log", MaxBytes: 50 << 20, Backups: 10},
		})
	}
	tb, _ := json.Marshal(tbl)
	files["table.json"] = string(tb)
	for name, body := range files {
		p := filepath.Join(f.agentRoot, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return err
		}
	}
	// The table's commands are under the root: link sleep there.
	os.MkdirAll(filepath.Join(f.agentRoot, "bin"), 0o755)
	if err := os.Symlink("/bin/sleep", filepath.Join(f.agentRoot, "bin/sleep")); err != nil {
		return err
	}
	f.agentCmd = exec.CommandContext(ctx, f.agent, "--root", f.agentRoot, "boot", "--table", filepath.Join(f.agentRoot, "table.json"))
	if err := f.agentCmd.Start(); err != nil {
		return err
	}
	return waitFor(func() bool {
		resp, err := control.Call(ctx, control.Socket(f.agentRoot), control.Request{Op: control.OpStatus})
		return err == nil && strings.Count(fmt.Sprint(resp.Services), "RUNNING") == 3
	})
}

func (f *benchFixture) startSupervisord(ctx context.Context) error {
	tmpl, err := os.ReadFile("testdata/supervisord.conf")
	if err != nil {
		return err
	}
	sd := filepath.Join(f.dir, "supervisord")
	os.MkdirAll(sd, 0o755)
	f.superConf = filepath.Join(sd, "supervisord.conf")
	f.superSock = filepath.Join(sd, "supervisor.sock")
	if err := os.WriteFile(f.superConf, []byte(strings.ReplaceAll(string(tmpl), "DIR", sd)), 0o600); err != nil {
		return err
	}
	f.superCmd = exec.CommandContext(ctx, supervisordPath, "-n", "-c", f.superConf)
	if err := f.superCmd.Start(); err != nil {
		return err
	}
	return waitFor(func() bool {
		out, err := exec.CommandContext(ctx, "supervisorctl", "-c", f.superConf, "status").Output()
		return err == nil && strings.Count(string(out), "RUNNING") == 3
	})
}

func waitFor(cond func() bool) error {
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for the supervisor to run 3 programs")
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // let it settle to idle
	return nil
}

// rssKiB reads VmRSS from /proc/<pid>/status.
func rssKiB(b *testing.B, pid int) float64 {
	b.Helper()
	fh, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		b.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// BenchmarkIdleRSS reports each supervisor's resident memory (rss-KiB)
// while it supervises three idle programs.
func BenchmarkIdleRSS(b *testing.B) {
	f := fixture(b)
	for _, c := range []struct {
		name string
		cmd  *exec.Cmd
	}{{"agent", f.agentCmd}, {"supervisord", f.superCmd}} {
		b.Run(c.name, func(b *testing.B) {
			var rss float64
			for b.Loop() {
				rss = rssKiB(b, c.cmd.Process.Pid)
			}
			b.ReportMetric(rss, "rss-KiB")
		})
	}
}

// BenchmarkStatusRoundTrip times one status query: the command-line tools
// as a user runs them (`hermes-box-agent services status` against
// `supervisorctl status`), and the bare protocol (the control socket
// against supervisord's XML-RPC on its unix socket).
func BenchmarkStatusRoundTrip(b *testing.B) {
	f := fixture(b)
	ctx := b.Context()
	cli := map[string][]string{
		"agent-cli":         {f.agent, "--root", f.agentRoot, "services", "status"},
		"supervisorctl-cli": {"supervisorctl", "-c", f.superConf, "status"},
	}
	for _, name := range []string{"agent-cli", "supervisorctl-cli"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				out, err := exec.CommandContext(ctx, cli[name][0], cli[name][1:]...).Output()
				if err != nil || strings.Count(string(out), "RUNNING") != 3 {
					b.Fatalf("%v: %q", err, out)
				}
			}
		})
	}
	b.Run("agent-socket", func(b *testing.B) {
		for b.Loop() {
			resp, err := control.Call(ctx, control.Socket(f.agentRoot), control.Request{Op: control.OpStatus})
			if err != nil || len(resp.Services) != 3 {
				b.Fatal(err)
			}
		}
	})
	b.Run("supervisord-xmlrpc", func(b *testing.B) {
		client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", f.superSock)
		}}}
		const call = `<?xml version="1.0"?><methodCall><methodName>supervisor.getAllProcessInfo</methodName><params></params></methodCall>`
		for b.Loop() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://localhost/RPC2", strings.NewReader(call))
			req.Header.Set("Content-Type", "text/xml")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || strings.Count(string(body), "RUNNING") != 3 {
				b.Fatalf("%v: %q", err, body)
			}
		}
	})
}
