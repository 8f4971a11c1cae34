package config

import (
	"os"
	"path/filepath"
	"reflect"
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
