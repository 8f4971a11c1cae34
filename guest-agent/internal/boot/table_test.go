package boot

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/patch"
	"github.com/hermes-box/hermes-box/guest-agent/internal/supervise"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/pins"
)

func TestBoxTable(t *testing.T) {
	root := t.TempDir()
	write(t, root, "etc/passwd", "root:x:0:0::/root:/bin/sh\nhermes:x:1002:1002::/home/hermes:/bin/sh\n", 0o644)
	write(t, root, "etc/group", "hermes:x:1002:\nsudo:x:27:hermes\n", 0o644)
	tests := []struct {
		name     string
		opts     BoxOptions
		programs []string
	}{
		{"executor disabled", BoxOptions{}, []string{"sshd", "hermes"}},
		{"executor enabled", BoxOptions{ExecutorEnabled: true, ExecutorHostPort: 14788, ExecutorImage: "r.example/x:v1@sha256:" + strings.Repeat("a", 64)}, []string{"sshd", "executor", "hermes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tbl := BoxTable(tt.opts)
			if err := tbl.Validate(); err != nil {
				t.Fatal(err)
			}
			progs, err := tbl.Resolve(root)
			if err != nil {
				t.Fatal(err)
			}
			slices.SortFunc(progs, func(a, b supervise.Program) int { return a.Priority - b.Priority })
			var names []string
			byName := map[string]supervise.Program{}
			for _, p := range progs {
				names = append(names, p.Name)
				byName[p.Name] = p
			}
			if !slices.Equal(names, tt.programs) {
				t.Fatalf("programs by priority %v, want %v", names, tt.programs)
			}
			sshd, hermes := byName["sshd"], byName["hermes"]
			if sshd.Credential != nil || sshd.Command[0] != filepath.Join(root, "usr/sbin/sshd") || sshd.StartTime != time.Second || sshd.Log.Path != filepath.Join(root, "run/hermes-box/sshd.log") {
				t.Errorf("sshd: %+v", sshd)
			}
			if c := hermes.Credential; c == nil || c.UID != 1002 || !slices.Equal(c.Groups, []uint32{27, 1002}) {
				t.Errorf("hermes credential %+v", c)
			}
			if hermes.Dir != filepath.Join(root, "workspace/work") || hermes.StopWait != 30*time.Second || hermes.StartRetries != 20 || hermes.StopSignal != syscall.SIGTERM || hermes.AutoRestart != supervise.RestartUnexpected {
				t.Errorf("hermes: %+v", hermes)
			}
			// The gateway's git settings (GitSpawn): a repository's config
			// runs no fsmonitor or hook program.
			if !slices.Contains(hermes.Env, "HERMES_HOME=/workspace/hermes-home") || !slices.Contains(hermes.Env, "GIT_CONFIG_COUNT=8") ||
				!slices.Contains(hermes.Env, "GIT_CONFIG_KEY_0=core.fsmonitor") || !slices.Contains(hermes.Env, "GIT_CONFIG_VALUE_0=false") ||
				!slices.Contains(hermes.Env, "GIT_CONFIG_KEY_1=core.hooksPath") {
				t.Errorf("hermes env %v", hermes.Env)
			}
			if ex, ok := byName["executor"]; ok {
				// One definition of Executor's command: the launcher verb,
				// which resolves oci.Program; the table passes its inputs.
				if !slices.Equal(ex.Command, []string{filepath.Join(root, "usr/local/sbin/hermes-box-agent"), "executor", "run"}) || ex.Credential != nil ||
					!slices.Contains(ex.Env, "HERMES_BOX_EXECUTOR_HOST_PORT=14788") || !slices.Contains(ex.Env, "HERMES_BOX_EXECUTOR_IMAGE="+tt.opts.ExecutorImage) ||
					ex.StopWait != 45*time.Second || ex.StartRetries != 20 || ex.Log.Path != filepath.Join(root, "workspace/executor/executor.log") {
					t.Errorf("executor: %+v", ex)
				}
			}
			if want := len(tt.programs); len(tbl.Checks) != want {
				t.Errorf("%d checks, want %d", len(tbl.Checks), want)
			}
		})
	}
}

func TestBoxOptionsFromEnv(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want BoxOptions
		err  string
	}{
		{map[string]string{}, BoxOptions{}, ""},
		{map[string]string{boxlayout.EnvExecutorEnabled: "true", boxlayout.EnvExecutorHostPort: "4800", boxlayout.EnvExecutorImage: "r/x:t@sha256:0"}, BoxOptions{ExecutorEnabled: true, ExecutorHostPort: 4800, ExecutorImage: "r/x:t@sha256:0"}, ""},
		{map[string]string{boxlayout.EnvExecutorEnabled: "false", boxlayout.EnvExecutorImage: "r/x:t@sha256:0"}, BoxOptions{}, ""},
		{map[string]string{boxlayout.EnvExecutorEnabled: "false", boxlayout.EnvExecutorHostPort: "bad"}, BoxOptions{}, ""},
		{map[string]string{boxlayout.EnvExecutorEnabled: "yes"}, BoxOptions{}, boxlayout.EnvExecutorEnabled},
		{map[string]string{boxlayout.EnvExecutorEnabled: "1", boxlayout.EnvExecutorHostPort: "70000"}, BoxOptions{}, boxlayout.EnvExecutorHostPort},
	}
	for _, tt := range tests {
		got, err := BoxOptionsFromEnv(func(k string) string { return tt.env[k] })
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%v: got %v, want error naming %s", tt.env, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%v: got %+v, %v", tt.env, got, err)
		}
	}
}

func TestParseTableErrorsNameTheField(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"programs":[{"name":"a","command":["x"],"bogus":1}]}`, `t.json: json: unknown field "bogus"`},
		{`{"programs":[{"name":"a","command":["x"]},{"name":"b","command":[]}]}`, `programs[1]: program "b": command: is empty`},
		{`{"programs":[{"name":"a","command":["x"],"stopsignal":"NOPE"}]}`, `stopsignal: unknown signal "NOPE"`},
		{`{"programs":[{"name":"a","command":["x"],"startsecs":-1}]}`, `startsecs: want 0 to 86400 seconds, got -1`},
		{`{"programs":[{"name":"a","command":["x"],"log":{"path":"rel"}}]}`, `log.path: want an absolute path`},
		{`{"programs":[{"name":"a","command":["x"],"environment":{"A=B":"c"}}]}`, `environment: bad variable "A=B"`},
		{`{"programs":[],"checks":[{"code":"x"}]}`, `checks[0]: check "x": want exactly one of tcp, http and service`},
		{`{"programs":[]} {}`, `trailing data`},
	}
	for _, tt := range tests {
		_, err := ParseTable([]byte(tt.body), "t.json")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.body, err, tt.want)
		}
	}
}

func FuzzParseTable(f *testing.F) {
	b, _ := json.Marshal(BoxTable(BoxOptions{ExecutorEnabled: true}))
	f.Add(b)
	f.Add([]byte(`{"programs":[{"name":"a","command":["x"],"startsecs":1e300}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tbl, err := ParseTable(b, "fuzz.json")
		if err != nil {
			return
		}
		for _, p := range tbl.Programs {
			if err := supervise.Validate(p); err != nil {
				t.Fatalf("accepted table has an invalid program %+v: %v", p, err)
			}
		}
	})
}

func TestBoxTableDefaultExecutorImage(t *testing.T) {
	tbl := BoxTable(BoxOptions{ExecutorEnabled: true})
	for _, p := range tbl.Programs {
		if p.Name == "executor" && (!slices.Contains(p.Env, boxlayout.EnvExecutorImage+"="+pins.DefaultExecutorImage) || !slices.Contains(p.Env, boxlayout.EnvExecutorHostPort+"=4788")) {
			t.Fatalf("executor environment %v, want the pinned image and port 4788", p.Env)
		}
	}
}

func TestGatewayExternalSupervisorFromTheInstalledRelease(t *testing.T) {
	if boxlayout.HermesSourceMarker != "/usr/local/lib/hermes-agent/"+patch.SourceMarker {
		t.Fatalf("boxlayout.HermesSourceMarker %q is not the gate step's %q", boxlayout.HermesSourceMarker, patch.SourceMarker)
	}
	gateway := func(o BoxOptions) string {
		for _, p := range BoxTable(o).Programs {
			if p.Name == "hermes" {
				return strings.Join(p.Command, " ")
			}
		}
		return ""
	}
	for _, tt := range []struct {
		name, record, want string
	}{
		{"0.19.0 has the flag", "commit=" + pins.DefaultHermesCommit + "\n", "/usr/local/bin/hermes gateway run --replace --external-supervisor"},
		{"0.16.0 lacks it", "commit=81eaedd0f5c471c7ee748990066135a684f3c962\n", "/usr/local/bin/hermes gateway run --replace"},
		{"no record", "", "/usr/local/bin/hermes gateway run --replace"},
		{"unknown commit", "commit=" + strings.Repeat("0", 40) + "\n", "/usr/local/bin/hermes gateway run --replace"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			if tt.record != "" {
				write(t, root, strings.TrimPrefix(boxlayout.HermesSourceMarker, "/"), tt.record, 0o644)
			}
			if got := gateway(GatewayOptions(root, BoxOptions{})); got != tt.want {
				t.Fatalf("gateway %q, want %q", got, tt.want)
			}
		})
	}
}

// TestBoxTableJSON: the box's table in its wire form (`boot --table`) is
// the golden file, and the golden file read back is the same table.
func TestBoxTableJSON(t *testing.T) {
	tbl := BoxTable(BoxOptions{ExecutorEnabled: true, ExecutorHostPort: 14788, ExecutorImage: "r.example/x:v1@sha256:" + strings.Repeat("a", 64), GatewayExternalSupervisor: true})
	got, err := json.MarshalIndent(tbl, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/boxtable.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(append(got, '\n')) != string(want) {
		t.Errorf("BoxTable as JSON differs from testdata/boxtable.json:\n%s", got)
	}
	back, err := ParseTable(want, "testdata/boxtable.json")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, tbl) {
		t.Errorf("read back:\n%+v\nwant\n%+v", back, tbl)
	}
}
