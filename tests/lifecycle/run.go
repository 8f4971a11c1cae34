package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/shared/health"
)

// Result is one hermes-box invocation's outcome.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Runner runs hermes-box with args in env; err is for a command that could
// not run at all.
type Runner interface {
	Run(ctx context.Context, env []string, args ...string) (Result, error)
}

// Phase is one row of the phase table.
type Phase struct {
	Name     string
	Duration time.Duration
	// Outcome is "ok", "failed: …" or "skipped: …".
	Outcome string
}

// Lifecycle is one run: its config, environment and phase table.
type Lifecycle struct {
	cfg    Config
	env    []string
	run    Runner
	Phases []Phase
	now    func() time.Time
}

// note is the file the run writes before the snapshot and checks after
// each restore.
const note = "/workspace/work/hermes-box-e2e.txt"

// New prepares a run in dir (its config and data dir) with the caller's
// environment base.
func New(cfg Config, base []string, dir string, r Runner) (*Lifecycle, error) {
	env, err := cfg.environ(base, dir)
	if err != nil {
		return nil, err
	}
	return &Lifecycle{cfg: cfg, env: env, run: r, now: time.Now}, nil
}

// step is one phase's work; a skipped error marks it skipped.
type step struct {
	name string
	fn   func(ctx context.Context) error
}

type skipped string

func (s skipped) Error() string { return string(s) }

// Run runs every phase in order and stops at the first failure; whatever
// happens, it destroys the disposable box at the end (the reference's
// cleanup trap). It returns the first failure.
func (l *Lifecycle) Run(ctx context.Context) error {
	var backup string
	steps := []step{
		// The installed smolvm is qualified first: a failing row names what
		// this host's smolvm cannot do before any box exists.
		{"doctor", func(ctx context.Context) error { return l.must(ctx, "doctor") }},
		{"init", func(ctx context.Context) error { return l.must(ctx, "init") }},
		{"status", l.status},
		{"ssh", l.sshChecks},
		{"logs", func(ctx context.Context) error { return l.must(ctx, "logs", "-n", "20") }},
		{"write note", func(ctx context.Context) error { return l.writeNote(ctx, "before-restore") }},
		{"snapshot", func(ctx context.Context) (err error) { backup, err = l.snapshot(ctx); return err }},
		{"change note", func(ctx context.Context) error { return l.writeNote(ctx, "after-snapshot") }},
		{"restore (replacement)", func(ctx context.Context) error { return l.restore(ctx, backup) }},
		{"executor status", l.executorStatus},
		{"destroy", func(ctx context.Context) error { return l.must(ctx, "destroy", "--force") }},
		{"restore (fresh)", func(ctx context.Context) error { return l.restore(ctx, backup) }},
		{"destroy (final)", func(ctx context.Context) error { return l.must(ctx, "destroy", "--force") }},
	}
	var failed error
	for _, s := range steps {
		start := l.now()
		err := s.fn(ctx)
		p := Phase{Name: s.name, Duration: l.now().Sub(start), Outcome: "ok"}
		var skip skipped
		switch {
		case errors.As(err, &skip):
			p.Outcome = "skipped: " + skip.Error()
		case err != nil:
			p.Outcome = "failed: " + err.Error()
			failed = fmt.Errorf("phase %s: %w", s.name, err)
		}
		l.Phases = append(l.Phases, p)
		if failed != nil {
			break
		}
	}
	if failed != nil {
		start := l.now()
		_, err := l.run.Run(context.WithoutCancel(ctx), l.env, "destroy", "--force")
		outcome := "ok"
		if err != nil {
			outcome = "failed: " + err.Error()
		}
		l.Phases = append(l.Phases, Phase{Name: "cleanup: destroy --force", Duration: l.now().Sub(start), Outcome: outcome})
	}
	return failed
}

// PrintTable writes the phase table.
func (l *Lifecycle) PrintTable(w io.Writer) {
	fmt.Fprintf(w, "%-26s %9s  %s\n", "phase", "seconds", "outcome")
	var total time.Duration
	for _, p := range l.Phases {
		total += p.Duration
		fmt.Fprintf(w, "%-26s %9.1f  %s\n", p.Name, p.Duration.Seconds(), firstLine(p.Outcome))
	}
	fmt.Fprintf(w, "%-26s %9.1f\n", "total", total.Seconds())
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func (l *Lifecycle) call(ctx context.Context, args ...string) (Result, error) {
	r, err := l.run.Run(ctx, l.env, args...)
	if err != nil {
		return r, fmt.Errorf("hermes-box %s: %w", strings.Join(args, " "), err)
	}
	if r.Code != 0 {
		return r, fmt.Errorf("hermes-box %s: exit %d: %s", strings.Join(args, " "), r.Code, tail(r.Stderr))
	}
	return r, nil
}

func (l *Lifecycle) must(ctx context.Context, args ...string) error {
	_, err := l.call(ctx, args...)
	return err
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 600 {
		s = "…" + s[len(s)-600:]
	}
	return s
}

// status: status --json decodes with shared/health and is healthy.
func (l *Lifecycle) status(ctx context.Context) error {
	r, err := l.call(ctx, "status", "--json")
	if err != nil {
		return err
	}
	rep, err := health.Decode([]byte(r.Stdout))
	if err != nil {
		return fmt.Errorf("status --json: %w", err)
	}
	if rep.Status != health.StatusHealthy {
		return fmt.Errorf("status is %s", rep.Status)
	}
	return nil
}

// sshChecks are the reference's in-box checks, through hermes-box ssh.
func (l *Lifecycle) sshChecks(ctx context.Context) error {
	for _, c := range []string{
		"sudo -n -u hermes true",
		"sudo -iu hermes hermes --version",
		"sudo -iu hermes /usr/local/lib/hermes-agent/venv/bin/python -c 'import discord'",
		"sudo -iu hermes /workspace/codex-home/bin/codex --version",
		"test -x /usr/local/bin/tm && test -f /etc/tmux.conf",
		"infocmp -x tmux-256color >/dev/null && infocmp -x xterm-256color >/dev/null",
		"sudo -u hermes sudo supervisorctl status hermes | grep -Fq RUNNING",
		"test ! -e /var/run/docker.sock",
	} {
		if err := l.must(ctx, "ssh", "--", c); err != nil {
			return err
		}
	}
	r, err := l.run.Run(ctx, l.env, "ssh", "--", "sudo -n true")
	if err != nil {
		return err
	}
	if r.Code == 0 {
		return errors.New("boxadmin obtained root with sudo -n true")
	}
	return nil
}

func (l *Lifecycle) writeNote(ctx context.Context, text string) error {
	return l.must(ctx, "ssh", "--", fmt.Sprintf("sudo -u hermes sh -c 'printf %s > %s'", text, note))
}

func (l *Lifecycle) checkNote(ctx context.Context, want string) error {
	r, err := l.call(ctx, "ssh", "--", "sudo -u hermes cat "+note)
	if err != nil {
		return err
	}
	if got := strings.TrimSpace(r.Stdout); got != want {
		return fmt.Errorf("%s holds %q after the restore, want %q", note, got, want)
	}
	return nil
}

// snapshot returns the backup's path (the last stdout line).
func (l *Lifecycle) snapshot(ctx context.Context) (string, error) {
	r, err := l.call(ctx, "snapshot", "end-to-end")
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if lines[len(lines)-1] == "" {
		return "", errors.New("snapshot printed no backup path")
	}
	return lines[len(lines)-1], nil
}

func (l *Lifecycle) restore(ctx context.Context, backup string) error {
	if err := l.must(ctx, "restore", backup); err != nil {
		return err
	}
	if err := l.status(ctx); err != nil {
		return err
	}
	return l.checkNote(ctx, "before-restore")
}

// executorStatus runs `executor status --json` when Executor is enabled.
func (l *Lifecycle) executorStatus(ctx context.Context) error {
	if !l.cfg.ExecutorEnabled {
		return skipped("HERMES_BOX_EXECUTOR_ENABLED is not true")
	}
	r, err := l.call(ctx, "executor", "status", "--json")
	if err != nil {
		return err
	}
	if !json.Valid([]byte(r.Stdout)) {
		return fmt.Errorf("executor status --json printed no JSON: %s", tail(r.Stdout))
	}
	return nil
}
