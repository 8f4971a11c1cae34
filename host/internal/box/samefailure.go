package box

import (
	"errors"
	"fmt"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/progress"
	"github.com/hermes-box/hermes-box/host/internal/userr"
)

// A readiness wait (health, version through smolvm exec) ends early when
// its calls fail the same way: sameFailureTries calls in a row with one
// error text over at least sameFailureSpan. A box still booting fails the
// same way for a while too (the relay refused), which is why both bounds
// hold: 5 min is the health wait's grace for a silent box, past the 91 s a
// restored box under TCG took (healthGrace), and far under the startup
// deadline (20 min, 2 h with the Executor) that such a box held the
// command for before, retried every 0.5 s (782 warning lines in 10 min).
// A report that says a service is starting is no failure: an Executor
// pulling its image is waited for the whole deadline.
const (
	sameFailureTries = 20
	sameFailureSpan  = 5 * time.Minute
)

// sameFailures counts a wait's calls in a row that failed with one error
// text, and since when.
type sameFailures struct {
	text  string
	n     int
	since time.Time
}

// note counts the call that ended with err (nil: answered); a call the box
// did not answer is noAnswers' to count. Once sameFailureTries calls in a
// row over sameFailureSpan failed alike, it returns the error that ends
// the wait.
func (s *sameFailures) note(err error) error {
	var na *agent.NoAnswerError
	if err == nil || errors.As(err, &na) {
		*s = sameFailures{}
		return nil
	}
	now := time.Now()
	if text := err.Error(); text != s.text {
		*s = sameFailures{text: text, since: now}
	}
	s.n++
	if s.n < sameFailureTries || now.Sub(s.since) < sameFailureSpan {
		return nil
	}
	return userr.WithHint(fmt.Errorf("the box failed the same way %d times in a row over %s, so the wait ends before its deadline: %w",
		s.n, progress.Duration(now.Sub(s.since).Round(time.Second)), err),
		"the error above is what every try got; hermes-box shell opens the box's root console to look, and hermes-box restart tries again")
}
