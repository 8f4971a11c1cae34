package supervise

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestEnvFromIsReadAtEveryStart: the program sees what EnvFrom returns at
// its start, a restart sees the new value, and an EnvFrom error fails the
// start instead of running the program without its variables.
func TestEnvFromIsReadAtEveryStart(t *testing.T) {
	out := filepath.Join(t.TempDir(), "seen")
	var n atomic.Int32
	var fail atomic.Bool
	p := Program{Name: "gw", Command: []string{"sh", "-c", `printf %s "$MAPPED_SECRET" > "$OUT"; exec sleep 60`},
		Env: []string{"OUT=" + out, "MAPPED_SECRET=from-env"}, AutoStart: true, StopWait: 5 * time.Second,
		EnvFrom: func() ([]string, error) {
			if fail.Load() {
				return nil, errors.New("secrets file unreadable")
			}
			return []string{"MAPPED_SECRET=value-" + string(rune('0'+n.Add(1)))}, nil
		}}
	s := newSup(t, Options{}, p)
	if err := s.StartAutostart(t.Context()); err != nil {
		t.Fatal(err)
	}
	seen := func(want string) {
		t.Helper()
		eventually(t, 10*time.Second, "the program to see "+want, func() bool {
			b, _ := os.ReadFile(out)
			return string(b) == want
		})
	}
	seen("value-1")
	if err := os.Remove(out); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(t.Context(), "gw"); err != nil {
		t.Fatal(err)
	}
	seen("value-2")
	fail.Store(true)
	if err := s.Restart(t.Context(), "gw"); err == nil {
		t.Error("a start whose EnvFrom failed succeeded")
	}
}
