package protocol

import (
	"sync"
	"testing"
	"time"
)

// TestHeartbeat: a step that runs beats as progress events of that step
// until stopped, and none comes after stop returns.
func TestHeartbeat(t *testing.T) {
	var mu sync.Mutex
	var got []Event
	stop := heartbeat(func(ev Event) {
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
	}, "apt", 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	stop()
	mu.Lock()
	n := len(got)
	mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if n < 2 || len(got) != n {
		t.Fatalf("%d beats before stop, %d after", n, len(got))
	}
	for _, ev := range got {
		if ev.Type != EventProgress || ev.Step != "apt" || ev.Progress == nil || ev.Progress.Unit != "s" || !ev.Level.Known() {
			t.Errorf("beat %+v", ev)
		}
	}
	stop() // a second stop is harmless
}
