//go:build !hbxrelease

// Package mcptest is an in-process MCP server for tests, shaped like
// Executor's /mcp endpoint: bearer-key auth, a session id issued by
// initialize and required afterwards, tools/list and tools/call, answered as
// JSON or as a server-sent-event stream.
package mcptest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// Server is a fake MCP endpoint.
type Server struct {
	*httptest.Server
	// Key is the accepted API key.
	Key string
	// SSE answers requests as event streams instead of JSON.
	SSE bool
	// Tools are the names tools/list returns.
	Tools []string
	// Execute answers the execute tool: a result object for tools/call.
	Execute func(code string) map[string]any

	mu      sync.Mutex
	session string
	codes   []string
}

// New starts a server on loopback that accepts key and lists execute and
// resume; stop it with Close.
func New(key string, sse bool) *Server {
	s := &Server{Key: key, SSE: sse, Tools: []string{"execute", "resume"}, session: "sess-1"}
	s.Execute = func(code string) map[string]any {
		return map[string]any{"content": []map[string]string{{"type": "text", "text": `{"ok":true}`}}}
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// MCPURL is the /mcp endpoint.
func (s *Server) MCPURL() string { return s.Server.URL + "/mcp" }

// Codes returns the code passed to execute so far.
func (s *Server) Codes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string{}, s.codes...)
}

type request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string `json:"name"`
		Arguments struct {
			Code string `json:"code"`
		} `json:"arguments"`
		ProtocolVersion string `json:"protocolVersion"`
	} `json:"params"`
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/mcp" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+s.Key {
		http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
		return
	}
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") || !strings.Contains(r.Header.Get("Accept"), "application/json") {
		http.Error(w, "client must accept JSON and SSE", http.StatusNotAcceptable)
		return
	}
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if req.Method != "initialize" && r.Header.Get("Mcp-Session-Id") != s.session {
		http.Error(w, "missing or unknown session", http.StatusBadRequest)
		return
	}
	if req.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	s.reply(w, req)
}

func (s *Server) reply(w http.ResponseWriter, req request) {
	var result any
	switch req.Method {
	case "initialize":
		w.Header().Set("Mcp-Session-Id", s.session)
		result = map[string]any{"protocolVersion": req.Params.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo": map[string]string{"name": "executor-fake", "version": "0"}}
	case "tools/list":
		var tools []map[string]any
		for _, t := range s.Tools {
			tools = append(tools, map[string]any{"name": t, "inputSchema": map[string]any{"type": "object"}})
		}
		result = map[string]any{"tools": tools}
	case "tools/call":
		s.mu.Lock()
		s.codes = append(s.codes, req.Params.Arguments.Code)
		s.mu.Unlock()
		result = s.Execute(req.Params.Arguments.Code)
	default:
		s.write(w, map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
		return
	}
	s.write(w, map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
}

func (s *Server) write(w http.ResponseWriter, msg any) {
	b, _ := json.Marshal(msg)
	if !s.SSE {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n")
	// Split the JSON over two data lines, as SSE allows, after the first
	// comma, which follows the numeric id ({"id":N,…} sorts first).
	half := strings.IndexByte(string(b), ',') + 1
	fmt.Fprintf(w, "event: message\nid: 1\ndata: %s\ndata: %s\n\n", b[:half], b[half:])
}
