package box

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// The answers a scripted box gives a readiness wait's calls.
const (
	answerOK       = "ok"        // the verb's answer, as a ready box gives it
	answerStarting = "starting"  // a health report whose Hermes is STARTING
	answerNotReady = "not-ready" // netcheck's exit 1, or smolvm's while the machine boots
	answerRefused  = "refused"   // the relay refused: a box still booting
	answerHang     = "hang"      // nothing, until the verb's deadline
	answerFlood    = "flood"     // stdout past every readiness verb's cap
	answerGarbage  = "garbage"   // an answer that does not decode (with status 1 but for health)
	answerKilled   = "killed"    // smolvm's --timeout ended the verb in the box
)

// scriptedBox is a transport whose box gives the script's answers in turn,
// the last one for ever after; deep, when set, is the script of the deep
// health report.
type scriptedBox struct {
	script, deep []string
	calls        []string
}

func (s *scriptedBox) Run(ctx context.Context, req protocol.Request, _ io.Reader, stdout io.Writer, _ func(protocol.Event)) (int, error) {
	script := s.script
	if s.deep != nil && slices.Contains(req.Argv, "--deep") {
		script = s.deep
	}
	a := script[min(s.countFor(req), len(script)-1)]
	s.calls = append(s.calls, strings.Join(req.Argv, " "))
	switch a {
	case answerOK, answerStarting:
		switch req.Argv[0] {
		case "netcheck":
			_, err := io.WriteString(stdout, `{"ready":true}`)
			return 0, err
		case "version":
			_, err := io.WriteString(stdout, "hermes-box-agent 1.0.0\n")
			return 0, err
		}
		hermes := health.ServiceRunning
		if a == answerStarting {
			hermes = health.ServiceStarting
		}
		return 0, json.NewEncoder(stdout).Encode(&health.Report{SchemaVersion: health.SchemaVersion, Status: health.StatusHealthy,
			Checks:   map[health.Code]health.Check{health.CheckGate: gateActive},
			Services: []health.Service{{Name: "hermes", State: hermes}}})
	case answerNotReady:
		if req.Argv[0] != "netcheck" {
			return 1, nil // smolvm's own failure: status 1, no answer on stdout
		}
		_, err := io.WriteString(stdout, `{"ready":false}`)
		return 1, err
	case answerRefused:
		return -1, fmt.Errorf("dialing 127.0.0.1:2222: %w", syscall.ECONNREFUSED)
	case answerHang:
		<-ctx.Done()
		return -1, context.Cause(ctx)
	case answerFlood:
		chunk := make([]byte, 64<<10)
		for {
			if _, err := stdout.Write(chunk); err != nil {
				return -1, err
			}
		}
	case answerGarbage:
		_, err := io.WriteString(stdout, "\x1b[2J not an answer")
		if req.Argv[0] == "health" {
			return 0, err
		}
		return 1, err
	case answerKilled:
		return -1, fmt.Errorf("relaying %s through smolvm exec on builder: smolvm machine exec builder: %w after %v", req.Argv[0], smolvm.ErrTimeout, agent.NetcheckKill)
	}
	panic("unknown answer " + a)
}

// countFor is how many calls of the same script (deep or not) came before.
func (s *scriptedBox) countFor(req protocol.Request) int {
	deep := s.deep != nil && slices.Contains(req.Argv, "--deep")
	n := 0
	for _, c := range s.calls {
		if s.deep == nil || strings.HasSuffix(c, "--deep") == deep {
			n++
		}
	}
	return n
}

// readinessCase is one box a readiness wait meets: its script, and
// whether the wait ends ready or with the door's error naming verb after
// calls calls.
type readinessCase struct {
	name         string
	script, deep []string
	verb         string // "" when the wait ends ready
	calls        int
}

// times is n answers a.
func times(n int, a string) []string { return slices.Repeat([]string{a}, n) }

// runReadiness runs wait against each case's box in a synctest bubble
// (the verbs' deadlines pass on its clock, in no time): a box that does not
// answer maxNoAnswers calls in a row ends the wait with the door's error,
// naming the verb and the next step, long before the wait's own bound; a
// box that is not ready yet, or misses fewer calls in a row, is waited for.
func runReadiness(t *testing.T, tests []readinessCase, wait func(ctx context.Context, b *Box, tr *scriptedBox) error) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := &Box{timing: defaultTimings(), ui: nopUI{}}
				tr := &scriptedBox{script: tt.script, deep: tt.deep}
				start := time.Now()
				err := wait(t.Context(), b, tr)
				took := time.Since(start)
				t.Logf("%d calls, %v: %v", len(tr.calls), took, err)
				if tt.verb == "" {
					if err != nil {
						t.Fatalf("not ready after %v (calls %q): %v", took, tr.calls, err)
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), "did not answer agent "+tt.verb) || userr.Hint(err) != agent.NextStep {
					t.Fatalf("got %v (next: %q) after %v; want the door's error naming %q and %q", err, userr.Hint(err), took, tt.verb, agent.NextStep)
				}
				if len(tr.calls) != tt.calls {
					t.Errorf("ended after %d calls %q; want %d", len(tr.calls), tr.calls, tt.calls)
				}
			})
		})
	}
}

// TestWaitHealthyEndsOnABoxThatDoesNotAnswer: start's, restart's and
// init's wait for a healthy box ends after maxNoAnswers health calls in a
// row that the box took and never answered (past the first healthGrace of
// the wait), or answered past the cap, or with what is no report, instead
// of asking again until the startup deadline (20 min); a box still
// booting, starting its services, silent within the grace or missing fewer
// calls in a row (a slow guest under TCG), is waited for.
func TestWaitHealthyEndsOnABoxThatDoesNotAnswer(t *testing.T) {
	const cheap, deep = "health --json", "health --json --deep"
	runReadiness(t, []readinessCase{
		// Silent: ten calls of 30 s fall in the first healthGrace, then
		// three in a row count.
		{name: "never answers", script: []string{answerHang}, verb: cheap, calls: 12},
		{name: "1 GiB on stdout", script: []string{answerFlood}, verb: cheap, calls: 3},
		{name: "garbage", script: []string{answerGarbage}, verb: cheap, calls: 3},
		{name: "deep never answers", script: []string{answerOK}, deep: []string{answerHang}, verb: deep, calls: 4},
		{name: "silent for 4 min after booting, then ready", script: append(times(8, answerHang), answerOK)},
		{name: "booting, then ready", script: append(times(40, answerRefused), answerOK), calls: 42},
		{name: "starting, then ready", script: append(times(40, answerStarting), answerOK)},
		{name: "two misses while booting, then ready", script: []string{answerRefused, answerHang, answerHang, answerOK}},
		{name: "misses not in a row", script: []string{answerHang, answerHang, answerStarting, answerHang, answerHang, answerOK},
			deep: []string{answerHang, answerHang, answerOK}},
	}, func(ctx context.Context, b *Box, tr *scriptedBox) error {
		ctx, cancel := context.WithTimeout(ctx, b.timing.startupDeadline)
		defer cancel()
		return waitHealthy(ctx, b, nil, tr)
	})
}

// TestWaitAnswersEndsOnAnAgentThatDoesNotAnswer: restore's boot and a
// stopped box's host key repin wait for the agent's version through smolvm
// exec; maxNoAnswers calls in a row unanswered end the wait, a machine
// whose agent smolvm cannot reach yet is waited for.
func TestWaitAnswersEndsOnAnAgentThatDoesNotAnswer(t *testing.T) {
	runReadiness(t, []readinessCase{
		{name: "never answers", script: []string{answerHang}, verb: "version", calls: 3},
		{name: "1 GiB on stdout", script: []string{answerFlood}, verb: "version", calls: 3},
		{name: "fails with an answer", script: []string{answerGarbage}, verb: "version", calls: 3},
		{name: "booting, then ready", script: append(times(40, answerNotReady), answerOK)},
		{name: "two misses, then ready", script: []string{answerNotReady, answerHang, answerHang, answerOK}},
	}, func(ctx context.Context, b *Box, tr *scriptedBox) error {
		return waitAnswers(ctx, b, nil, "box", tr)
	})
}

// TestWaitNetworkEndsOnABuilderThatDoesNotAnswer: init's wait for the
// builder's network ends after maxNoAnswers netchecks in a row that the
// builder did not answer (the host's deadline, or smolvm's --timeout past
// the agent's own bound on its lookup), without cycling the builder; a
// builder that answers "not ready" is probed and cycled as before.
func TestWaitNetworkEndsOnABuilderThatDoesNotAnswer(t *testing.T) {
	runReadiness(t, []readinessCase{
		{name: "never answers", script: []string{answerHang}, verb: "netcheck", calls: 3},
		{name: "smolvm ends it", script: []string{answerKilled}, verb: "netcheck", calls: 3},
		{name: "1 GiB on stdout", script: []string{answerFlood}, verb: "netcheck", calls: 3},
		{name: "no result", script: []string{answerGarbage}, verb: "netcheck", calls: 3},
		{name: "not ready for a boot, then ready", script: append(times(20, answerNotReady), answerOK)},
		{name: "two misses, then ready", script: []string{answerNotReady, answerKilled, answerHang, answerOK}},
	}, func(ctx context.Context, b *Box, tr *scriptedBox) error {
		return waitNetwork(ctx, b, nil, "builder", tr, func(context.Context) error { return nil })
	})
}
