package protocol

import (
	"sync"
	"time"
)

// HeartbeatEvery is how often the agent reports a long step that is still
// running and says nothing else (a package manager at work, a walk of the
// whole root). The host ends a long verb that shows no progress for its
// idle deadline, several heartbeats long, so a healthy box never meets it
// and a hung one is found in minutes, not at a deadline of hours.
const HeartbeatEvery = 20 * time.Second

// Heartbeat emits a progress event for step every HeartbeatEvery (its
// Current the seconds the step has run) until stop is called; stop waits
// for the last one, so that none is emitted after it returns.
func Heartbeat(emit func(Event), step string) (stop func()) {
	return heartbeat(emit, step, HeartbeatEvery)
}

func heartbeat(emit func(Event), step string, every time.Duration) (stop func()) {
	start := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				emit(Event{Type: EventProgress, Level: LevelInfo, Step: step, Message: "still running",
					Progress: &Progress{Current: int64(now.Sub(start) / time.Second), Unit: "s"}})
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() { close(done); wg.Wait() })
	}
}
