package netcheck

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const header = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"

type fakeResolver struct {
	ips     []net.IP
	err     error
	network string
}

func (f *fakeResolver) LookupIP(ctx context.Context, network, host string) ([]net.IP, error) {
	f.network = network
	if _, ok := ctx.Deadline(); !ok {
		return nil, errors.New("lookup without a deadline")
	}
	return f.ips, f.err
}

func procWith(t *testing.T, table string) string {
	t.Helper()
	dir := t.TempDir()
	if table != "" {
		if err := os.MkdirAll(filepath.Join(dir, "net"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "net", "route"), []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCheck(t *testing.T) {
	ok := header + "eth0\t00000000\t0102000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n" +
		"eth0\t0002000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
	tests := []struct {
		name      string
		table     string
		res       *fakeResolver
		ready     bool
		routeErr  string
		dnsErr    string
		wantGW    string
		wantAddrs string
	}{
		{"ready", ok, &fakeResolver{ips: []net.IP{net.ParseIP("185.125.190.36")}}, true, "", "", "10.0.2.1", "185.125.190.36"},
		{"only a link route", header + "eth0\t0002000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n", &fakeResolver{ips: []net.IP{net.ParseIP("1.2.3.4")}}, false, "no default IPv4 route", "", "", "1.2.3.4"},
		{"default route down", header + "eth0\t00000000\t0102000A\t0002\t0\t0\t0\t00000000\t0\t0\t0\n", &fakeResolver{ips: []net.IP{net.ParseIP("1.2.3.4")}}, false, "no default IPv4 route", "", "", "1.2.3.4"},
		{"no route table", "", &fakeResolver{ips: []net.IP{net.ParseIP("1.2.3.4")}}, false, "no such file", "", "", "1.2.3.4"},
		{"dns fails", ok, &fakeResolver{err: errors.New("server misbehaving")}, false, "", "resolving ports.ubuntu.com over IPv4: server misbehaving", "10.0.2.1", ""},
		{"only IPv6 answers", ok, &fakeResolver{ips: []net.IP{net.ParseIP("2001:db8::1")}}, false, "", "no IPv4 address", "10.0.2.1", ""},
		{"malformed table", header + "eth0\t00000000\n", &fakeResolver{ips: []net.IP{net.ParseIP("1.2.3.4")}}, false, "line 2: 2 fields", "", "", "1.2.3.4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Check(t.Context(), Options{ProcDir: procWith(t, tt.table), Resolver: tt.res, Host: "ports.ubuntu.com", Timeout: time.Second})
			if r.Ready != tt.ready || r.Route.Gateway != tt.wantGW || strings.Join(r.DNS.Addresses, ",") != tt.wantAddrs {
				t.Errorf("got %+v", r)
			}
			if !strings.Contains(r.Route.Error, tt.routeErr) || tt.routeErr == "" && r.Route.Error != "" {
				t.Errorf("route error %q, want %q", r.Route.Error, tt.routeErr)
			}
			if !strings.Contains(r.DNS.Error, tt.dnsErr) || tt.dnsErr == "" && r.DNS.Error != "" {
				t.Errorf("dns error %q, want %q", r.DNS.Error, tt.dnsErr)
			}
			if tt.res.network != "ip4" && tt.res.network != "" {
				t.Errorf("looked up %q, want ip4", tt.res.network)
			}
		})
	}
}

func TestPackageHost(t *testing.T) {
	if PackageHost("arm64") != "ports.ubuntu.com" || PackageHost("amd64") != "archive.ubuntu.com" {
		t.Fatal("wrong package hosts")
	}
}

func FuzzDefaultRoute(f *testing.F) {
	f.Add([]byte(header + "eth0\t00000000\t0102000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"))
	f.Add([]byte("x\n y z\n\t\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		iface, gw, err := DefaultRoute(b)
		if err != nil {
			return
		}
		if iface == "" || net.ParseIP(gw).To4() == nil {
			t.Fatalf("DefaultRoute gave %q %q", iface, gw)
		}
	})
}
