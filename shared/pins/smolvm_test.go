package pins

import (
	"errors"
	"strings"
	"testing"
)

func TestSmolvmTableRows(t *testing.T) {
	want := []string{"1.0.4", "1.9.0", "1.9.1", "1.9.2", "1.9.3"}
	if got := SmolvmTableVersions(); got != strings.Join(want, ",") {
		t.Fatalf("SmolvmTableVersions() = %q, want %q", got, strings.Join(want, ","))
	}
	for i := 1; i < len(SmolvmReleases); i++ {
		if !versionLess(SmolvmReleases[i-1].Version, SmolvmReleases[i].Version) {
			t.Errorf("table not ordered oldest first at %s", SmolvmReleases[i].Version)
		}
	}
	old, _, err := Smolvm("1.0.4", false)
	if err != nil || old.NetworkModesEnforced() || !old.DefaultFloorStrict || old.EgressFloorVar || old.Extract != ExtractPrivate || old.LargeExecStdin {
		t.Errorf("1.0.4 row = %+v, %v", old, err)
	}
	cur, _, err := Smolvm("1.9.3", false)
	if err != nil || !cur.NetworkModesEnforced() || cur.DefaultFloorStrict || !cur.EgressFloorVar || cur.Extract != ExtractSharedOnLinux || !cur.HostLoopbackAlias {
		t.Errorf("1.9.3 row = %+v, %v", cur, err)
	}
	for _, r := range SmolvmReleases {
		if r.SecretRefsOnCreateFrom {
			t.Errorf("%s: create --from drops --secret-env on every release read", r.Version)
		}
	}
}

func TestSmolvmRefusesUnlisted(t *testing.T) {
	cases := []struct {
		version string
		beyond  bool
		wantErr string
	}{
		{"1.8.3", false, "install a supported release"},
		{"1.8.3", true, "install a supported release"},
		{"1.10.0", false, "install a supported release: " + SmolvmInstallCommand("1.9.3") + " (or qualify this newer release on this host with the disposable test `hermes-box doctor`"},
		{"1.9.3-dirty", true, "unsupported smolvm release"},
		{"", true, "unsupported smolvm release"},
		{"01.10.0", true, "unsupported smolvm release"},
	}
	for _, c := range cases {
		_, _, err := Smolvm(c.version, c.beyond)
		if !errors.Is(err, ErrUnsupportedSmolvm) || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "1.0.4  ") {
			t.Errorf("Smolvm(%q, %v) = %v, want %q and the table", c.version, c.beyond, err, c.wantErr)
		}
	}
	if _, _, err := Smolvm("1.8.3", false); strings.Contains(err.Error(), "doctor") {
		t.Errorf("an older release is offered the doctor: %v", err)
	}
}

// TestSmolvmBeyond: a newer release is driven as the newest row with the
// later changes known for its version: from 1.13.0 the default floor
// keeps the host's loopback out.
func TestSmolvmBeyond(t *testing.T) {
	for _, c := range []struct {
		version  string
		loopback bool
	}{{"1.10.0", true}, {"1.12.9", true}, {"1.13.0", false}, {"1.25.4", false}, {"2.0.0", false}} {
		r, unlisted, err := Smolvm(c.version, true)
		if err != nil || !unlisted || r.Version != c.version || !r.NetworkModesEnforced() || r.Extract != ExtractSharedOnLinux || r.HostLoopbackAlias != c.loopback {
			t.Errorf("Smolvm(%q, true) = %+v, %v, %v", c.version, r, unlisted, err)
		}
	}
	if _, unlisted, err := Smolvm("1.9.2", true); err != nil || unlisted {
		t.Errorf("a listed release is never unlisted: %v %v", unlisted, err)
	}
	if SmolvmReleases[len(SmolvmReleases)-1].HostLoopbackAlias != true {
		t.Error("SmolvmBeyond changed the table's row")
	}
}

func TestSmolvmTableText(t *testing.T) {
	text := SmolvmTable()
	for _, want := range []string{
		"1.0.4    private          no                   no                no                 no             no              seccomp (amd64) + Landlock",
		"1.9.3    shared-on-linux  LAN, host loopback   yes               yes                yes            no              seccomp (amd64, arm64) + Landlock",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("table lacks %q:\n%s", want, text)
		}
	}
}

// TestSmolvmVMMConfinement: seccomp where internal_boot.rs installs it
// (x86_64 from 1.0.4, aarch64 from 1.3.8), Landlock on Linux, nothing on
// macOS.
func TestSmolvmVMMConfinement(t *testing.T) {
	tests := []struct {
		version, goos, goarch string
		seccomp, landlock     bool
	}{
		{"1.0.4", "linux", "amd64", true, true},
		{"1.0.4", "linux", "arm64", false, true},
		{"1.9.3", "linux", "arm64", true, true},
		{"1.9.0", "linux", "amd64", true, true},
		{"1.9.3", "darwin", "arm64", false, false},
	}
	for _, tt := range tests {
		r, _, err := Smolvm(tt.version, false)
		if err != nil {
			t.Fatal(err)
		}
		if s, l := r.VMMConfinement(tt.goos, tt.goarch); s != tt.seccomp || l != tt.landlock {
			t.Errorf("%s on %s/%s: seccomp %v, Landlock %v; want %v, %v", tt.version, tt.goos, tt.goarch, s, l, tt.seccomp, tt.landlock)
		}
	}
}

// TestExportHelperMemoryFrom1162: the helper VM's memory variable is a
// capability of 1.16.2 and later, from SmolvmLater, never of a table row.
func TestExportHelperMemoryFrom1162(t *testing.T) {
	for v, want := range map[string]bool{"1.16.1": false, "1.16.2": true, "1.25.4": true} {
		if got := SmolvmBeyond(v).ExportHelperMemoryVar; got != want {
			t.Errorf("%s: %v, want %v", v, got, want)
		}
	}
	for _, r := range SmolvmReleases {
		if r.ExportHelperMemoryVar {
			t.Errorf("%s takes the helper memory variable", r.Version)
		}
	}
}
