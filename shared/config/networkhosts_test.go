package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestLoadNetworkHosts(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string
		wantErr    string
	}{
		{name: "hosts and comments", text: "# allow\napi.openai.com\n\n  Example.ORG  # upper case folds\n", want: []string{"api.openai.com", "example.org"}},
		{name: "ip literal", text: "1.2.3.4\n", wantErr: "network-hosts.txt:1: expected one host name"},
		{name: "url", text: "ok.example.com\nhttps://x.example.com\n", wantErr: "network-hosts.txt:2: expected one host name"},
		{name: "wildcard", text: "*.example.com\n", wantErr: "network-hosts.txt:1:"},
		{name: "port", text: "example.com:443\n", wantErr: "network-hosts.txt:1:"},
		{name: "duplicate", text: "a.example.com\nA.example.com\n", wantErr: `network-hosts.txt:2: duplicate host "a.example.com"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), NetworkHostsFileName)
			if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := LoadNetworkHosts(p)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
	if got, err := LoadNetworkHosts(filepath.Join(t.TempDir(), "missing")); got != nil || err != nil {
		t.Errorf("missing file: %v %v", got, err)
	}
}

func FuzzLoadNetworkHosts(f *testing.F) {
	f.Add("api.example.com\n# c\nb.example.org # x\n")
	f.Add("1.2.3.4\n")
	f.Fuzz(func(t *testing.T, text string) {
		p := filepath.Join(t.TempDir(), NetworkHostsFileName)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		hosts, err := LoadNetworkHosts(p)
		if err != nil {
			if !strings.Contains(err.Error(), NetworkHostsFileName+":") {
				t.Fatalf("error does not name the file and line: %v", err)
			}
			return
		}
		for _, h := range hosts {
			if !hostName.MatchString(h) || strings.ContainsAny(h, " :/#") {
				t.Fatalf("accepted %q", h)
			}
		}
	})
}

// TestListFileExamples: secret-env.txt.example and network-hosts.txt.example
// load as they are (every example commented out), and every example line,
// uncommented, is a valid mapping or host.
func TestListFileExamples(t *testing.T) {
	example := regexp.MustCompile(`(?m)^# ([A-Za-z0-9_.=-]+)$`)
	for _, tt := range []struct {
		name string
		load func(path string) (int, error)
	}{
		{"secret-env.txt.example", func(p string) (int, error) { m, err := LoadSecretMappings(p); return len(m), err }},
		{"network-hosts.txt.example", func(p string) (int, error) { h, err := LoadNetworkHosts(p); return len(h), err }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join("..", "..", tt.name)
			if n, err := tt.load(path); err != nil || n != 0 {
				t.Fatalf("%s as it is: %d entries, %v", tt.name, n, err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			lines := example.FindAllStringSubmatch(string(data), -1)
			var b strings.Builder
			for _, l := range lines {
				b.WriteString(l[1] + "\n")
			}
			uncommented := filepath.Join(t.TempDir(), tt.name)
			if err := os.WriteFile(uncommented, []byte(b.String()), 0o600); err != nil {
				t.Fatal(err)
			}
			if n, err := tt.load(uncommented); err != nil || n < 2 || n != len(lines) {
				t.Errorf("%s uncommented: %d of %d lines, %v", tt.name, n, len(lines), err)
			}
		})
	}
}
