package main

import (
	"archive/tar"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestFloorReach: what a guest reaches under each release's floor, as the
// release's row says; the broken profile floors nothing.
func TestFloorReach(t *testing.T) {
	all := []string{fakeLAN, fakeHostAlias, fakeMetadata}
	tests := []struct {
		version, floor, broken string
		want                   []string
	}{
		{"1.0.4", "", "", nil},
		{"1.0.4", "off", "", nil}, // 1.0.4 reads no variable: its full floor stands
		{"1.9.3", "strict", "", nil},
		{"1.9.3", "", "", []string{fakeLAN, fakeHostAlias}},
		{"1.9.3", "off", "", all},
		{"1.25.4", "strict", "", nil},
		{"1.25.4", "STRICT ", "", nil},
		{"1.25.4", "", "", []string{fakeLAN}},
		{"1.25.4", "strict", brokenFloorLeaks, all},
	}
	for _, tt := range tests {
		t.Run(tt.version+"/"+tt.floor+"/"+tt.broken, func(t *testing.T) {
			t.Setenv("FAKESMOLVM_VERSION", tt.version)
			t.Setenv("FAKESMOLVM_BROKEN", tt.broken)
			if got := floorReach(tt.floor); !slices.Equal(got, tt.want) {
				t.Errorf("floorReach(%q) = %v, want %v", tt.floor, got, tt.want)
			}
		})
	}
}

// TestGuestNetwork runs a guest connect through the real namespace the
// fake gives it: nothing answers under the strict floor, and the LAN and
// metadata stand-ins refuse (answer) when the floor lets them through;
// the stand-in agent is left on the host's network.
func TestGuestNetwork(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("bash is needed to probe")
	}
	exe := buildFake(t)
	tests := []struct {
		reach []string
		addr  string
		want  string
	}{
		{nil, "192.0.2.1", "Network is unreachable"},
		{nil, "169.254.169.254", "Network is unreachable"},
		{[]string{fakeLAN}, "192.0.2.1", "Connection refused"},
		{[]string{fakeLAN}, "169.254.169.254", "Network is unreachable"},
		{[]string{fakeLAN, fakeHostAlias, fakeMetadata}, "169.254.169.254", "Connection refused"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.reach, ",")+"/"+tt.addr, func(t *testing.T) {
			cmd := exec.Command("bash", "-c", `exec 3<>"/dev/tcp/$1/80"`, "probe", tt.addr)
			if err := isolateWith(cmd, exe, tt.reach); err != nil {
				t.Fatal(err)
			}
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tt.want) {
				t.Errorf("connect to %s with %v: %v %s, want %q", tt.addr, tt.reach, err, out, tt.want)
			}
		})
	}
	cmd := exec.Command("/x/" + agentName)
	if err := guestNetwork(cmd, &record{}, []string{"/x/" + agentName}); err != nil || cmd.SysProcAttr != nil {
		t.Errorf("the agent was isolated: %v %+v", err, cmd.SysProcAttr)
	}
}

// isolateWith is isolateNet with the fake built by the test as the helper.
func isolateWith(cmd *exec.Cmd, exe string, reach []string) error {
	if err := isolateNet(cmd, reach); err != nil {
		return err
	}
	cmd.Path, cmd.Args[0] = exe, exe
	return nil
}

func buildFake(t *testing.T) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "fakesmolvm")
	if out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("building the fake: %v\n%s", err, out)
	}
	return exe
}

// TestPackCarriesXattrs: a file's user.* attribute goes into the pack as
// a PAX record and onto the extracted file; the broken profile drops it.
func TestPackCarriesXattrs(t *testing.T) {
	for _, broke := range []string{"", brokenPackDropsXattrs} {
		t.Run("broken="+broke, func(t *testing.T) {
			t.Setenv("FAKESMOLVM_BROKEN", broke)
			root, out := t.TempDir(), t.TempDir()
			f := filepath.Join(root, "etc", "probe")
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Setxattr(f, "user.hbx", []byte("v1"), 0); err != nil {
				t.Fatalf("this file system keeps no user.* attributes: %v", err)
			}
			arc := filepath.Join(t.TempDir(), "p.smolmachine")
			if err := writeArchive(root, arc, packManifest{}); err != nil {
				t.Fatal(err)
			}
			if _, err := readArchive(arc, out); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 16)
			n, err := syscall.Getxattr(filepath.Join(out, "etc", "probe"), "user.hbx", buf)
			switch {
			case broke == "" && (err != nil || string(buf[:n]) != "v1"):
				t.Errorf("the extracted file's user.hbx: %q, %v; want v1", buf[:n], err)
			case broke != "" && err == nil:
				t.Errorf("the broken profile kept user.hbx: %q", buf[:n])
			}
		})
	}
}

// TestAddTreeMatchesAddFS: the archive is the one tar.Writer.AddFS would
// write, plus the attributes.
func TestAddTreeMatchesAddFS(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"a/b/c", "d"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(p), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("d", filepath.Join(root, "l")); err != nil {
		t.Fatal(err)
	}
	var ours, std bytes.Buffer
	if err := addTree(tar.NewWriter(&ours), root, false); err != nil {
		t.Fatal(err)
	}
	if err := tar.NewWriter(&std).AddFS(os.DirFS(root)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ours.Bytes(), std.Bytes()) {
		t.Errorf("addTree wrote %d bytes unlike AddFS's %d", ours.Len(), std.Len())
	}
}
