package mcp

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hermes-box/hermes-box/shared/bounded"
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

// TestNoRedirects: a server in the box that redirects gets no second
// request, wherever it points, and the API key goes nowhere else.
func TestNoRedirects(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
	}))
	defer other.Close()
	for _, code := range []int{301, 302, 307, 308} {
		box := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/steal", code)
		}))
		_, err := New(box.URL+"/mcp", "secret-key", nil).ListTools(t.Context())
		box.Close()
		if !errors.Is(err, ErrRedirect) || strings.Contains(err.Error(), "secret-key") {
			t.Fatalf("HTTP %d: got %v, want ErrRedirect", code, err)
		}
		// A caller's own client is wrapped too.
		box = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/steal", code)
		}))
		_, err = New(box.URL+"/mcp", "secret-key", &http.Client{}).ListTools(t.Context())
		box.Close()
		if !errors.Is(err, ErrRedirect) {
			t.Fatalf("HTTP %d with the caller's client: got %v", code, err)
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the redirect target got %d requests", n)
	}
}

// TestResponseBounded: an endless answer is cut off with an error naming
// the limit, for JSON and for an event stream, and for a stream of
// notifications that never answers.
func TestResponseBounded(t *testing.T) {
	for _, tc := range []struct{ name, ctype, prefix, fill string }{
		{"json", "application/json", `{"jsonrpc":"2.0","id":1,"result":{"x":"`, "A"},
		{"sse data", "text/event-stream", "data: ", "A"},
		{"sse notifications", "text/event-stream", "", "data: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sent atomic.Int64
			box := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				io.WriteString(w, tc.prefix)
				chunk := []byte(strings.Repeat(tc.fill, 64<<10/len(tc.fill)))
				for i := 0; i < 4*maxResponse/len(chunk); i++ {
					n, err := w.Write(chunk)
					sent.Add(int64(n))
					if err != nil {
						return
					}
				}
			}))
			defer box.Close()
			_, err := New(box.URL+"/mcp", "k", nil).ListTools(t.Context())
			if !errors.Is(err, bounded.ErrLimit) || !strings.Contains(err.Error(), "8 MiB") {
				t.Fatalf("got %v, want the limit named", err)
			}
		})
	}
}

// TestErrorsShowEscapes: text from the server in an error is made safe.
func TestErrorsShowEscapes(t *testing.T) {
	box := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		io.WriteString(w, "\x1b]52;c;cHduZWQ=\x07")
	}))
	defer box.Close()
	_, err := New(box.URL+"/mcp", "k", nil).ListTools(t.Context())
	if err == nil || strings.Contains(err.Error(), "\x1b") || !strings.Contains(err.Error(), `\x1b]52`) {
		t.Fatalf("got %q", err)
	}
}
