package box

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/host/internal/userr"
)

// initCalls runs init and returns its smolvm calls and its error.
func (p *project) initCalls() ([]boxtest.Call, error) {
	return p.do(func(ctx context.Context, b *Box) error { return Init(ctx, b, nil) })
}

func TestInitCyclesBuilderAfterFailedNetcheck(t *testing.T) {
	p := newProject(t)
	p.Seed("netcheck-fail", "16") // all 15 probes of boot 1 and the first of boot 2
	calls, err := p.initCalls()
	if err != nil {
		t.Fatalf("init: %v", err)
	}
	const netcheck = "machine exec --stream --name hermes-builder --timeout 8s -- /usr/local/sbin/hermes-box-agent netcheck"
	var want []string
	for _, c := range p.InitCalls() {
		if c != netcheck {
			want = append(want, c)
			continue
		}
		for range 15 {
			want = append(want, netcheck)
		}
		want = append(want, "machine stop --name hermes-builder", "machine update --name hermes-builder --net",
			"machine start --name hermes-builder", "machine status --name hermes-builder --json", netcheck, netcheck)
	}
	boxtest.ExpectCalls(t, calls, want)
	if !strings.Contains(p.ui.text(), "builder network unavailable after boot 1/3") {
		t.Errorf("no warning about the restart:\n%s", p.ui.text())
	}
}

func TestInitGivesUpAfterThreeBoots(t *testing.T) {
	p := newProject(t)
	p.Seed("netcheck-fail", "1000")
	calls, err := p.initCalls()
	if err == nil || !strings.Contains(err.Error(), "has no usable IPv4 route or DNS after 3 boots") {
		t.Fatalf("init: %v", err)
	}
	n := 0
	for _, l := range boxtest.Lines(calls) {
		if strings.HasSuffix(l, "hermes-box-agent netcheck") {
			n++
		}
	}
	if n != 45 {
		t.Errorf("%d netchecks, want 3 boots × 15", n)
	}
	p.checkBuilderDeleted(calls)
}

// checkBuilderDeleted wants the builder deleted at the end of the run and
// no runtime box left.
func (p *project) checkBuilderDeleted(calls []boxtest.Call) {
	p.t.Helper()
	ls := boxtest.Lines(calls)
	// The builder exists once its create succeeded, which the next call
	// to it (update --net) shows.
	created := slices.Contains(ls, "machine update --name hermes-builder --net")
	deleted := slices.Contains(ls, "machine delete --name hermes-builder --force")
	if created && !deleted {
		p.t.Errorf("the builder was not deleted:\n  %s", strings.Join(ls, "\n  "))
	}
	if _, ok := p.Machines()[boxtest.Builder]; ok {
		p.t.Errorf("the builder still exists: %v", p.Machines())
	}
}

// TestInitFailurePaths fails each step of init in turn: the builder is
// always deleted, the runtime box kept (stopped) only when it was created,
// and the error carries the exit status hermes-box exits with.
func TestInitFailurePaths(t *testing.T) {
	tests := []struct {
		name    string
		fail    string // fake smolvm fail rule
		seed    string // .testagent file to create
		env     []string
		code    int
		message string
		keepBox bool // the runtime machine is kept (first start failed)
	}{
		{name: "builder create", fail: "machine create@hermes-builder", code: 1, message: "injected failure"},
		{name: "builder update", fail: "machine update@hermes-builder#1", code: 1, message: "smolvm machine update hermes-builder"},
		{name: "builder start", fail: "machine start@hermes-builder#1", code: 1, message: "smolvm machine start hermes-builder"},
		{name: "agent copy", fail: "machine cp@hermes-builder#1", code: 1, message: "smolvm machine cp hermes-builder"},
		{name: "provision", seed: "provision-fail", code: 3, message: "agent provision exited with status 3"},
		{name: "builder stop", fail: "machine stop@hermes-builder#1", code: 1, message: "smolvm machine stop hermes-builder"},
		{name: "pack", fail: "pack create", code: 1, message: "smolvm pack create hermes-builder"},
		{name: "runtime create", fail: "machine create@hermes-box", code: 1, message: "smolvm machine create hermes-box"},
		{name: "layers evicted", env: []string{"FAKESMOLVM_PACK_SIZE=" + "20000000000"}, code: 1, message: "extraction cache evicted them"},
		{name: "first start", fail: "machine start@hermes-box#1", code: 1, message: "was kept (stopped)", keepBox: true},
		{name: "host key", fail: "machine exec@hermes-box#1", code: 1, message: "hostkeys exited with status 1", keepBox: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProject(t)
			t.Setenv("FAKESMOLVM_FAIL", tt.fail)
			for _, kv := range tt.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			if tt.seed != "" {
				p.Seed(tt.seed, "yes")
			}
			calls, err := p.initCalls()
			if err == nil || userr.Code(err) != tt.code || !strings.Contains(err.Error()+userr.Hint(err), tt.message) {
				t.Fatalf("init: %v (exit %d), want %d with %q", err, userr.Code(err), tt.code, tt.message)
			}
			p.checkBuilderDeleted(calls)
			state, kept := p.Machines()[boxtest.Machine]
			if kept != tt.keepBox {
				t.Errorf("runtime machine kept=%v (%q), want %v", kept, state, tt.keepBox)
			}
			if tt.keepBox && (state == "running" || !strings.Contains(err.Error()+userr.Hint(err), "hermes-box start")) {
				t.Errorf("a kept box must be stopped (%s) and the error must say how to resume: %v (%s)", state, err, userr.Hint(err))
			}
			if tt.name == "layers evicted" && !slices.Contains(boxtest.Lines(calls), "machine data-dir --name hermes-box") {
				t.Errorf("the marker was not checked")
			}
		})
	}
}

func TestNetworkModesRefused(t *testing.T) {
	for _, mode := range []string{"none", "strict"} {
		t.Run(mode, func(t *testing.T) {
			p := newProject(t, "HERMES_BOX_NETWORK_MODE="+mode)
			calls, err := p.initCalls()
			if err == nil || userr.Code(err) != 1 || !strings.Contains(err.Error(), "HERMES_BOX_NETWORK_MODE="+mode+" is refused on smolvm 1.0.4: that release drops --allow-host") {
				t.Fatalf("init: %v", err)
			}
			boxtest.ExpectCalls(t, calls, append([]string{"--version"}, p.HelpCalls()...))
		})
	}
}
