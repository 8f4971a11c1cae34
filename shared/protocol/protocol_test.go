package protocol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func goldenLines(t *testing.T, name string) [][]byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

func TestGoldenRequests(t *testing.T) {
	want := []Request{
		{ProtocolVersion: 1, Argv: []string{"health", "--json"}},
		{ProtocolVersion: 1, Argv: []string{"snapshot", "apply"}, Options: Options{Stdin: true, LogLevel: LevelDebug}},
	}
	lines := goldenLines(t, "requests.jsonl")
	if len(lines) != len(want) {
		t.Fatalf("golden has %d lines, want %d", len(lines), len(want))
	}
	for i, line := range lines {
		got, err := DecodeRequest(line)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("line %d: got %+v, want %+v", i+1, got, want[i])
		}
		var buf bytes.Buffer
		if err := WriteRequest(&buf, got); err != nil {
			t.Fatal(err)
		}
		if got := bytes.TrimSuffix(buf.Bytes(), []byte("\n")); !bytes.Equal(got, line) {
			t.Errorf("line %d re-encoded:\n got %s\nwant %s", i+1, got, line)
		}
	}
}

func TestGoldenEvents(t *testing.T) {
	for i, line := range goldenLines(t, "events.jsonl") {
		ev, err := DecodeEvent(line)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, line) {
			t.Errorf("line %d re-encoded:\n got %s\nwant %s", i+1, b, line)
		}
	}
}

func TestDecodeRequestRefuses(t *testing.T) {
	tests := []struct {
		name, line, want string
	}{
		{"other version", `{"protocolVersion":2,"argv":["health"]}`, "unsupported protocol version"},
		{"no verb", `{"protocolVersion":1,"argv":[]}`, "no verb"},
		{"empty verb", `{"protocolVersion":1,"argv":[""]}`, "no verb"},
		{"unknown field", `{"protocolVersion":1,"argv":["health"],"shell":"rm -rf /"}`, "unknown field"},
		{"unknown option", `{"protocolVersion":1,"argv":["health"],"options":{"sudo":true}}`, "unknown field"},
		{"bad level", `{"protocolVersion":1,"argv":["health"],"options":{"logLevel":"loud"}}`, "unknown log level"},
		{"trailing", `{"protocolVersion":1,"argv":["health"]} {}`, "trailing data"},
		{"not json", `health --json`, "decoding request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRequest([]byte(tt.line))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestReadRequestLeavesData(t *testing.T) {
	r := bufio.NewReader(strings.NewReader("{\"protocolVersion\":1,\"argv\":[\"snapshot\",\"apply\"],\"options\":{\"stdin\":true}}\nRAW\x00BYTES"))
	req, err := ReadRequest(r)
	if err != nil {
		t.Fatal(err)
	}
	if !req.Options.Stdin {
		t.Fatal("stdin option lost")
	}
	rest, _ := io.ReadAll(r)
	if string(rest) != "RAW\x00BYTES" {
		t.Fatalf("data after request = %q", rest)
	}
}

func TestReadRequestBounds(t *testing.T) {
	long := `{"protocolVersion":1,"argv":["` + strings.Repeat("a", MaxRequestBytes) + `"]}` + "\n"
	if _, err := ReadRequest(bufio.NewReader(strings.NewReader(long))); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("oversized request: got %v", err)
	}
	if _, err := ReadRequest(bufio.NewReader(strings.NewReader(`{"protocolVersion":1,"argv":["health"]}`))); err == nil {
		t.Fatal("unterminated request accepted")
	}
	if _, err := ReadRequest(bufio.NewReader(strings.NewReader(""))); !errors.Is(err, io.EOF) {
		t.Fatalf("empty input: got %v, want EOF", err)
	}
}

func TestEventWriterLevels(t *testing.T) {
	var buf bytes.Buffer
	w := NewEventWriter(&buf, LevelWarn)
	w.now = func() time.Time { return time.Date(2026, 11, 22, 2, 40, 0, 0, time.UTC) }
	for _, l := range []Level{LevelDebug, LevelInfo, LevelWarn, LevelError} {
		if err := w.Emit(Event{Type: EventLog, Level: l, Message: string(l)}); err != nil {
			t.Fatal(err)
		}
	}
	want := `{"time":"2026-11-22T02:40:00Z","type":"log","level":"warn","message":"warn"}
{"time":"2026-11-22T02:40:00Z","type":"log","level":"error","message":"error"}
`
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestDecodeEventRefuses(t *testing.T) {
	for _, line := range []string{`not json`, `{"type":"log"}`, `{"time":"2026-11-22T02:40:00Z"}`} {
		if _, err := DecodeEvent([]byte(line)); err == nil || !strings.Contains(err.Error(), strconv.Quote(line)) {
			t.Errorf("%s: got %v, want an error quoting the line", line, err)
		}
	}
}

// FuzzDecodeRequest checks the decoder never panics, and that whatever it
// accepts is valid and survives a round trip unchanged.
func FuzzDecodeRequest(f *testing.F) {
	for _, line := range goldenLines(&testing.T{}, "requests.jsonl") {
		f.Add(line)
	}
	f.Add([]byte(`{"protocolVersion":1,"argv":["a"],"options":{}}`))
	f.Add([]byte(`{"protocolVersion":1,"argv":null}`))
	f.Add([]byte(`[1,2,3]`))
	f.Fuzz(func(t *testing.T, line []byte) {
		req, err := DecodeRequest(line)
		if err != nil {
			return
		}
		if err := req.Validate(); err != nil {
			t.Fatalf("accepted an invalid request: %v", err)
		}
		var buf bytes.Buffer
		if err := WriteRequest(&buf, req); err != nil {
			t.Fatal(err)
		}
		again, err := ReadRequest(bufio.NewReader(&buf))
		if err != nil {
			t.Fatalf("re-reading %q: %v", buf.String(), err)
		}
		if !reflect.DeepEqual(again, req) {
			t.Fatalf("round trip changed %+v into %+v", req, again)
		}
	})
}
