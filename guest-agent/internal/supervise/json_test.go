package supervise

import (
	"encoding/json"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProgramJSON: absent startsecs, startretries and stopwaitsecs take
// supervisord's defaults, written ones (0 too) are kept, and a program
// written and read back is the same program.
func TestProgramJSON(t *testing.T) {
	tests := []struct {
		name, body string
		want       Program
	}{
		{"defaults", `{"name":"a","command":["x"],"priority":0,"autostart":false}`,
			Program{Name: "a", Command: []string{"x"}, StartTime: DefaultStartTime, StartRetries: DefaultStartRetries, StopWait: DefaultStopWait}},
		{"zeros kept", `{"name":"a","command":["x"],"priority":0,"autostart":true,"startsecs":0,"startretries":0,"stopwaitsecs":0}`,
			Program{Name: "a", Command: []string{"x"}, AutoStart: true}},
		{"every field", `{"name":"a","command":["x","y"],"user":"u","directory":"/d","environment":{"B":"2","A":"1"},"secretsfile":"/s",` +
			`"priority":5,"autostart":true,"autorestart":"true","exitcodes":[0,3],"startsecs":0.5,"startretries":7,"stopsignal":"INT","stopwaitsecs":2,` +
			`"log":{"path":"/l","maxbytes":9,"backups":1}}`,
			Program{Name: "a", Command: []string{"x", "y"}, User: "u", Dir: "/d", Env: []string{"A=1", "B=2"}, SecretsFile: "/s",
				Priority: 5, AutoStart: true, AutoRestart: RestartAlways, ExitCodes: []int{0, 3}, StartTime: 500 * time.Millisecond, StartRetries: 7,
				StopSignal: syscall.SIGINT, StopWait: 2 * time.Second, Log: Log{Path: "/l", MaxBytes: 9, Backups: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Program
			if err := json.Unmarshal([]byte(tt.body), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("read %+v, want %+v", got, tt.want)
			}
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var back Program
			if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, got) {
				t.Fatalf("read back from %s: %+v, %v", b, back, err)
			}
		})
	}
}

func TestProgramJSONRefuses(t *testing.T) {
	for _, tt := range []struct{ body, want string }{
		{`{"name":"a","command":["x"],"bogus":1}`, `unknown field "bogus"`},
		{`{"name":"a","command":["x"],"stopsignal":"NOPE"}`, `program "a": stopsignal: unknown signal "NOPE"`},
		{`{"name":"a","command":["x"],"stopwaitsecs":1e300}`, `program "a": stopwaitsecs: want 0 to 86400 seconds, got 1e+300`},
		{`{"name":"a","command":["x"],"log":{"path":""}}`, `program "a": log.path: want an absolute path`},
		{`{"name":"a","command":["x"],"environment":{"":"c"}}`, `program "a": environment: bad variable ""`},
	} {
		var p Program
		if err := json.Unmarshal([]byte(tt.body), &p); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.body, err, tt.want)
		}
	}
}
