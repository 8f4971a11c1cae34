package secrets

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/shared/config"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

type fakeAgent struct {
	argv  []string
	stdin string
	out   string
	code  int
}

// Run answers as the agent's relay does.
func (f *fakeAgent) Run(_ context.Context, req protocol.Request, stdin io.Reader, stdout io.Writer, _ func(protocol.Event)) (int, error) {
	f.argv = req.Argv
	b, _ := io.ReadAll(stdin)
	f.stdin = string(b)
	_, _ = io.WriteString(stdout, f.out)
	return f.code, nil
}

// call is the agent client over f.
func (f *fakeAgent) call() *agent.Client { return agent.New(f, nil) }

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestResolve(t *testing.T) {
	maps := []config.SecretMapping{{Guest: "OPENAI_API_KEY", Host: "MY_KEY", Line: 1}, {Guest: "GH_TOKEN", Host: "MY_GH", Line: 2}}
	s, err := Resolve(maps, env("MY_KEY", "sk-1", "MY_GH", "gh-2"))
	if err != nil || s.Env["OPENAI_API_KEY"] != "sk-1" || s.Env["GH_TOKEN"] != "gh-2" {
		t.Fatalf("%+v %v", s, err)
	}
	_, err = Resolve(maps, env("MY_KEY", "sk-1", "MY_GH", ""))
	if err == nil || !strings.Contains(err.Error(), `"MY_GH" referenced by secret mapping for "GH_TOKEN" is unset or empty`) || strings.Contains(err.Error(), "sk-1") {
		t.Fatalf("missing variable: %v", err)
	}
	_, err = Resolve([]config.SecretMapping{{Guest: "PATH", Host: "P"}}, env("P", "/x"))
	if err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("reserved guest name: %v", err)
	}
}

func TestDeliver(t *testing.T) {
	s := protocol.Secrets{Env: map[string]string{"OPENAI_API_KEY": "sk-deliver"}}
	a := &fakeAgent{out: `{"names":["OPENAI_API_KEY"],"tmpfs":true}` + "\n"}
	if err := Deliver(context.Background(), a.call(), s); err != nil {
		t.Fatal(err)
	}
	if strings.Join(a.argv, " ") != "secrets set" {
		t.Errorf("argv %q", a.argv)
	}
	var got protocol.Secrets
	if err := json.Unmarshal([]byte(a.stdin), &got); err != nil || got.Env["OPENAI_API_KEY"] != "sk-deliver" {
		t.Errorf("stdin %q", a.stdin)
	}
	for _, bad := range []*fakeAgent{{code: 1}, {out: `{"names":[]}`}, {out: "garbage"}} {
		err := Deliver(context.Background(), bad.call(), s)
		if err == nil || strings.Contains(err.Error(), "sk-deliver") {
			t.Errorf("agent %+v: %v", bad, err)
		}
	}
}
