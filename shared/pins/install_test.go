package pins

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSmolvmInstallForRuns runs the Linux instructions with bash, real
// sha256sum and tar, and a curl on PATH that serves a stand-in archive
// laid out as smolvm's (one smolvm-<version>-<platform>/ directory): an
// archive whose digest is the row's is unpacked into ~/.smolvm and linked
// into ~/.local/bin; one whose digest differs stops before anything is
// unpacked.
func TestSmolvmInstallForRuns(t *testing.T) {
	for _, tool := range []string{"bash", "tar", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found", tool)
		}
	}
	work := t.TempDir()
	top := filepath.Join(work, "src", "smolvm-0.0.1-linux-x86_64")
	if err := os.MkdirAll(filepath.Join(top, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(top, "smolvm"), []byte("#!/bin/sh\necho smolvm 0.0.1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(work, "archive.tar.gz")
	if out, err := exec.Command("tar", "-czf", archive, "-C", filepath.Join(work, "src"), "smolvm-0.0.1-linux-x86_64").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	b, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	bin := filepath.Join(work, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// curl -fsSLo FILE URL: copy the stand-in archive to FILE.
	curl := "#!/bin/sh\ncp " + archive + " \"$2\"\n"
	if err := os.WriteFile(filepath.Join(bin, "curl"), []byte(curl), 0o755); err != nil {
		t.Fatal(err)
	}
	saved := SmolvmArchives
	defer func() { SmolvmArchives = saved }()
	for _, tt := range []struct {
		name, sum string
		ok        bool
	}{{"matching digest", hex.EncodeToString(sum[:]), true}, {"other digest", strings.Repeat("0", 64), false}} {
		t.Run(tt.name, func(t *testing.T) {
			SmolvmArchives = []SmolvmArchive{{"0.0.1", "linux-x86_64", tt.sum, "test"}}
			home := t.TempDir()
			cmd := exec.Command("bash", "-c", SmolvmInstallFor("linux", "amd64", "0.0.1"))
			cmd.Env = []string{"HOME=" + home, "PATH=" + bin + ":" + os.Getenv("PATH"), "TMPDIR=" + t.TempDir()}
			out, err := cmd.CombinedOutput()
			installed, rerr := exec.Command(filepath.Join(home, ".local/bin/smolvm")).Output()
			if tt.ok && (err != nil || rerr != nil || string(installed) != "smolvm 0.0.1\n") {
				t.Fatalf("install: %v %s; installed smolvm: %q %v", err, out, installed, rerr)
			}
			if !tt.ok {
				if err == nil || !strings.Contains(string(out), "FAILED") {
					t.Fatalf("a wrong digest: %v %s", err, out)
				}
				if _, err := os.Stat(filepath.Join(home, ".smolvm")); !os.IsNotExist(err) {
					t.Errorf("unpacked despite a wrong digest: %v", err)
				}
			}
		})
	}
	if got := SmolvmInstallFor("darwin", "arm64", "1.9.3"); !strings.HasPrefix(got, "brew install smol-machines/tap/smolvm ") {
		t.Errorf("macOS: %s", got)
	}
	for _, a := range saved {
		if len(a.SHA256) != 64 || a.Source == "" {
			t.Errorf("archive row %+v lacks a digest or its source", a)
		}
	}
}

// TestReadmeInstallDigests: the README's quick start checks the Linux
// archives of the recommended release against the table's digests.
func TestReadmeInstallDigests(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range SmolvmArchives {
		if a.Version != SmolvmRecommended || !strings.HasPrefix(a.Platform, "linux-") {
			continue
		}
		n++
		if !strings.Contains(string(b), a.SHA256) || !strings.Contains(string(b), "v"+a.Version+"/smolvm-"+a.Version+"-linux-x86_64.tar.gz") {
			t.Errorf("README lacks %s's %s archive or its digest %s", a.Version, a.Platform, a.SHA256)
		}
	}
	if n == 0 {
		t.Errorf("no Linux archive digest for the recommended release %s", SmolvmRecommended)
	}
}
