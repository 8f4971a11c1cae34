// Package mcp is a small Model Context Protocol client for Executor's
// streamable-HTTP endpoint: JSON-RPC 2.0 over POST, the Mcp-Session-Id
// header echoed after initialize, and responses as JSON or as a
// server-sent-event stream. It knows the three calls hermes-box needs:
// initialize, tools/list and tools/call.
package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/shared/bounded"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

// ProtocolVersion is the MCP revision the client asks for.
const ProtocolVersion = "2025-03-26"

// maxResponse bounds one response body; a longer one is an error, not a
// truncated answer. Executor's answers come from the box, which may be
// hostile, and what the host buffers stays well under its memory budget.
const maxResponse = 8 << 20

// ErrUnauthorized is returned when the server refuses the API key.
var ErrUnauthorized = errors.New("the MCP server refused the API key")

// Client talks to one MCP endpoint. It is not safe for concurrent use.
type Client struct {
	url     string
	apiKey  string
	http    *http.Client
	session string
	nextID  int
	ready   bool
}

// New returns a client for url authenticating with apiKey (sent as a bearer
// token). A nil httpClient means one with a 30 s timeout. Whatever the
// client, redirects are not followed (NoRedirects).
func New(url, apiKey string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{url: url, apiKey: apiKey, http: NoRedirects(httpClient)}
}

// ErrRedirect is returned for a response that redirects: the server is in
// the box, and following it would send the API key wherever the box points.
var ErrRedirect = errors.New("redirect refused")

// NoRedirects returns a copy of c that fails on any redirect with
// ErrRedirect, and with a 30 s timeout when c has none.
func NoRedirects(c *http.Client) *http.Client {
	cp := *c
	cp.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		return fmt.Errorf("%w: the server in the box redirected to %s (the API key is sent to the box only)", ErrRedirect, req.URL.Redacted())
	}
	if cp.Timeout == 0 {
		cp.Timeout = 30 * time.Second
	}
	return &cp
}

// Tool is one entry of tools/list.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
}

// Content is one item of a tool result's content.
type Content struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
}

// ToolResult is the result of tools/call.
type ToolResult struct {
	Content           []Content       `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
}

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("MCP error %d: %s", e.Code, e.Message) }

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      *int   `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *RPCError       `json:"error"`
}

// Initialize opens the session; the other calls do it on first use.
func (c *Client) Initialize(ctx context.Context) error {
	if c.ready {
		return nil
	}
	params := map[string]any{
		"protocolVersion": ProtocolVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]string{"name": "hermes-box", "version": "1"},
	}
	if _, err := c.call(ctx, "initialize", params); err != nil {
		return err
	}
	if err := c.notify(ctx, "notifications/initialized"); err != nil {
		return err
	}
	c.ready = true
	return nil
}

// ListTools returns the server's tools.
func (c *Client) ListTools(ctx context.Context) ([]Tool, error) {
	if err := c.Initialize(ctx); err != nil {
		return nil, err
	}
	raw, err := c.call(ctx, "tools/list", map[string]any{})
	if err != nil {
		return nil, err
	}
	var res struct {
		Tools []Tool `json:"tools"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("decoding tools/list result: %w", err)
	}
	return res.Tools, nil
}

// CallTool calls a tool with arguments.
func (c *Client) CallTool(ctx context.Context, name string, args any) (*ToolResult, error) {
	if err := c.Initialize(ctx); err != nil {
		return nil, err
	}
	raw, err := c.call(ctx, "tools/call", map[string]any{"name": name, "arguments": args})
	if err != nil {
		return nil, err
	}
	var res ToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("decoding tools/call result: %w", err)
	}
	return &res, nil
}

// Execute runs TypeScript through Executor's execute tool and returns its
// value as JSON: the structured content when present, else the text parsed
// as JSON, else the text as a JSON string.
func (c *Client) Execute(ctx context.Context, code string) (json.RawMessage, error) {
	res, err := c.CallTool(ctx, "execute", map[string]string{"code": code})
	if err != nil {
		return nil, err
	}
	text := res.Text()
	if res.IsError {
		return nil, fmt.Errorf("execute failed: %s", strings.TrimSpace(text))
	}
	if len(res.StructuredContent) > 0 && string(res.StructuredContent) != "null" {
		return res.StructuredContent, nil
	}
	if json.Valid([]byte(text)) {
		return json.RawMessage(text), nil
	}
	b, _ := json.Marshal(text)
	return b, nil
}

// Text joins the result's text content.
func (r *ToolResult) Text() string {
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// call sends a request and returns the result of the matching response.
func (c *Client) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	c.nextID++
	id := c.nextID
	resp, err := c.post(ctx, rpcRequest{JSONRPC: "2.0", ID: &id, Method: method, Params: params})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
		c.session = s
	}
	body := bounded.Reader(resp.Body, maxResponse, "the MCP response to "+method)
	var r *rpcResponse
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "text/event-stream":
		r, err = readSSE(body, id)
	case "application/json":
		r, err = decodeResponse(body)
	default:
		return nil, fmt.Errorf("%s: unexpected content type %q", method, resp.Header.Get("Content-Type"))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if r.Error != nil {
		r.Error.Message = termsafe.String(r.Error.Message)
		return nil, fmt.Errorf("%s: %w", method, r.Error)
	}
	if string(r.ID) != fmt.Sprint(id) {
		return nil, fmt.Errorf("%s: response id %s, want %d", method, r.ID, id)
	}
	return r.Result, nil
}

func (c *Client) notify(ctx context.Context, method string) error {
	resp, err := c.post(ctx, rpcRequest{JSONRPC: "2.0", Method: method})
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse))
	return resp.Body.Close()
}

// post sends one JSON-RPC message; a non-2xx status is an error that quotes
// a bounded part of the body.
func (c *Client) post(ctx context.Context, msg rpcRequest) (*http.Response, error) {
	b, err := json.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", msg.Method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", msg.Method, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("MCP-Protocol-Version", ProtocolVersion)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", msg.Method, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 == 3 {
		return nil, fmt.Errorf("%s: %w: HTTP %d", msg.Method, ErrRedirect, resp.StatusCode)
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		return nil, fmt.Errorf("%s: %w (HTTP %d)", msg.Method, ErrUnauthorized, resp.StatusCode)
	}
	return nil, fmt.Errorf("%s: HTTP %d: %s", msg.Method, resp.StatusCode, termsafe.String(strings.TrimSpace(string(snippet))))
}

func decodeResponse(r io.Reader) (*rpcResponse, error) {
	var resp rpcResponse
	if err := json.NewDecoder(r).Decode(&resp); err != nil {
		return nil, fmt.Errorf("decoding response: %w", err)
	}
	return &resp, nil
}

// readSSE reads server-sent events until one carries the response to id;
// notifications and server requests on the stream are skipped.
func readSSE(r io.Reader, id int) (*rpcResponse, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxResponse+64<<10) // the reader's limit comes first
	var data []string
	dispatch := func() (*rpcResponse, bool) {
		defer func() { data = data[:0] }()
		if len(data) == 0 {
			return nil, false
		}
		var resp rpcResponse
		if json.Unmarshal([]byte(strings.Join(data, "\n")), &resp) != nil || string(resp.ID) != fmt.Sprint(id) {
			return nil, false
		}
		return &resp, true
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if resp, ok := dispatch(); ok {
				return resp, nil
			}
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading event stream: %w", err)
	}
	if resp, ok := dispatch(); ok {
		return resp, nil
	}
	return nil, fmt.Errorf("event stream ended without the response to request %d", id)
}

// ExecutorTools is the MCP surface Executor exposes, sorted: hermes-box
// connects to nothing else.
var ExecutorTools = []string{"execute", "resume"}

// CheckExecutorSurface lists the server's tools and insists on exactly
// ExecutorTools.
func (c *Client) CheckExecutorSurface(ctx context.Context) error {
	tools, err := c.ListTools(ctx)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, ExecutorTools) {
		return fmt.Errorf("unexpected Executor MCP surface %q: want exactly %q", names, ExecutorTools)
	}
	return nil
}
