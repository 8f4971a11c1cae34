package mcp

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/shared/mcp/mcptest"
)

func TestClientJSONAndSSE(t *testing.T) {
	for _, sse := range []bool{false, true} {
		name := map[bool]string{false: "json", true: "sse"}[sse]
		t.Run(name, func(t *testing.T) {
			srv := mcptest.New("k-1", sse)
			defer srv.Close()
			srv.Execute = func(code string) map[string]any {
				return map[string]any{"content": []map[string]string{{"type": "text", "text": "ignored"}},
					"structuredContent": map[string]any{"code": code}}
			}
			c := New(srv.MCPURL(), "k-1", nil)
			tools, err := c.ListTools(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(tools) != 2 || tools[0].Name != "execute" || tools[1].Name != "resume" {
				t.Fatalf("tools %+v", tools)
			}
			out, err := c.Execute(t.Context(), "return 1;")
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]string
			if err := json.Unmarshal(out, &got); err != nil || got["code"] != "return 1;" {
				t.Fatalf("execute returned %s (%v)", out, err)
			}
		})
	}
}

func TestExecuteResultShapes(t *testing.T) {
	tests := []struct {
		name   string
		result map[string]any
		want   string
		err    string
	}{
		{"text json", map[string]any{"content": []map[string]string{{"type": "text", "text": `[1,2]`}}}, `[1,2]`, ""},
		{"plain text", map[string]any{"content": []map[string]string{{"type": "text", "text": "hello"}}}, `"hello"`, ""},
		{"tool error", map[string]any{"isError": true, "content": []map[string]string{{"type": "text", "text": "boom"}}}, "", "execute failed: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := mcptest.New("k", true)
			defer srv.Close()
			srv.Execute = func(string) map[string]any { return tt.result }
			out, err := New(srv.MCPURL(), "k", nil).Execute(t.Context(), "x")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || string(out) != tt.want {
				t.Fatalf("got %s %v, want %s", out, err, tt.want)
			}
		})
	}
}

func TestClientErrors(t *testing.T) {
	srv := mcptest.New("right", false)
	defer srv.Close()
	_, err := New(srv.MCPURL(), "wrong", nil).ListTools(t.Context())
	if !errors.Is(err, ErrUnauthorized) || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("got %v, want ErrUnauthorized without the key", err)
	}
	_, err = New(srv.URL+"/nope", "right", nil).ListTools(t.Context())
	if err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Fatalf("got %v", err)
	}
	var rpcErr *RPCError
	c := New(srv.MCPURL(), "right", nil)
	if err := c.Initialize(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.call(t.Context(), "bogus/method", nil); !errors.As(err, &rpcErr) || rpcErr.Code != -32601 {
		t.Fatalf("got %v, want a JSON-RPC error", err)
	}
}
