package progress

import (
	"testing"
	"time"
)

// A bar ends when its transfer does, also short of its total (an
// estimate) or of nothing (unknown size).
func TestTransferTTYEndsShortOfItsTotal(t *testing.T) {
	for _, total := range []int64{0, 100} {
		var buf syncBuffer
		r := NewMode(&buf, TTY)
		tr := r.Transfer("x", total)
		tr.Add(10)
		r.Info("line")
		done := make(chan bool)
		go func() { tr.Done(nil); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("total %d: Done hangs", total)
		}
	}
}
