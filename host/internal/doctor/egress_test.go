package doctor

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

const procRoute = `Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
eth0	0000A8C0	00000000	0001	0	0	100	00FFFFFF	0	0	0
eth0	00000000	0102000A	0003	0	0	100	00000000	0	0	0
`

// TestParseProcRoute: the default route's gateway comes out of Linux's
// little-endian hex; a table without one says so, and a malformed
// gateway names the line.
func TestParseProcRoute(t *testing.T) {
	tests := []struct {
		name, in, want, err string
	}{
		{"default route", procRoute, "10.0.2.1", ""},
		{"no default route", strings.Split(procRoute, "\n")[0] + "\n" + strings.Split(procRoute, "\n")[1] + "\n", "", errNoDefaultRoute.Error()},
		{"default route down", strings.Replace(procRoute, "0003", "0002", 1), "", errNoDefaultRoute.Error()},
		{"bad gateway", strings.Replace(procRoute, "0102000A", "01020Z0A", 1), "", "/proc/net/route line 3: gateway \"01020Z0A\" is not 8 hex digits"},
		{"empty", "", "", errNoDefaultRoute.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcRoute([]byte(tt.in))
			checkGateway(t, got, err, tt.want, tt.err)
		})
	}
}

// TestParseRouteGet reads macOS's `route -n get default`.
func TestParseRouteGet(t *testing.T) {
	const out = "   route to: default\ndestination: default\n       mask: default\n    gateway: 192.168.1.1\n  interface: en0\n"
	tests := []struct {
		name, in, want, err string
	}{
		{"gateway", out, "192.168.1.1", ""},
		{"no gateway line", "   route to: default\n  interface: utun3\n", "", errNoDefaultRoute.Error()},
		{"not an address", strings.Replace(out, "192.168.1.1", "link#4", 1), "", `route -n get default: gateway "link#4" is not an IPv4 address`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRouteGet([]byte(tt.in))
			checkGateway(t, got, err, tt.want, tt.err)
		})
	}
}

func checkGateway(t *testing.T, got netip.Addr, err error, want, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || err.Error() != wantErr {
			t.Fatalf("error %v, want %q", err, wantErr)
		}
		return
	}
	if err != nil || got.String() != want {
		t.Fatalf("%v, %v; want %s", got, err, want)
	}
}

// FuzzParseProcRoute: any input gives an IPv4 gateway or an error.
func FuzzParseProcRoute(f *testing.F) {
	f.Add([]byte(procRoute))
	f.Add([]byte("h\nx 00000000 zz 3\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := parseProcRoute(b)
		if err == nil && !a.Is4() {
			t.Fatalf("gateway %v is not IPv4", a)
		}
		if err != nil && a.IsValid() {
			t.Fatalf("an error with a gateway: %v", a)
		}
	})
}

// FuzzParseRouteGet: any input gives an IPv4 gateway or an error.
func FuzzParseRouteGet(f *testing.F) {
	f.Add([]byte("    gateway: 192.168.1.1\n"))
	f.Add([]byte("gateway: ::1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := parseRouteGet(b)
		if err == nil && !a.Is4() {
			t.Fatalf("gateway %v is not IPv4", a)
		}
		if err != nil && !errors.Is(err, errNoDefaultRoute) && a.IsValid() {
			t.Fatalf("an error with a gateway: %v", a)
		}
	})
}
