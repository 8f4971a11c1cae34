package cli_test

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"debug/macho"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/host/internal/relay/sshdtest"
)

// distPlatforms are the Makefile's HOST_PLATFORMS: the hosts hermes-box
// runs on, each with the executable format it must have.
var distPlatforms = []struct {
	goos, goarch string
	elf          elf.Machine // Linux
	macho        macho.Cpu   // macOS
}{
	{goos: "darwin", goarch: "arm64", macho: macho.CpuArm64},
	{goos: "linux", goarch: "arm64", elf: elf.EM_AARCH64},
	{goos: "linux", goarch: "amd64", elf: elf.EM_X86_64},
}

// distVersion is the version the test's dist build is stamped with.
const distVersion = "dist-test-1"

// makeHosts runs the Makefile's cross-builds of the host (`make hosts`,
// what `make dist` adds to `make build`) into a temporary bin directory.
func makeHosts(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("make is required")
		}
		t.Skip("make is not installed")
	}
	bin := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "-C", sshdtest.ModuleRoot(t), "BIN="+bin, "VERSION="+distVersion, "hosts")
	// A test run's GOFLAGS (e.g. -tags=hbxtest) must not reach a release build.
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make hosts: %v\n%s", err, out)
	}
	return bin
}

// checkDistBinary checks one cross-built host binary: its executable
// header's platform, the platform, tags and version Go recorded in it, and
// that no test hook's name is in it.
func checkDistBinary(t *testing.T, path, goos, goarch string, wantELF elf.Machine, wantMachO macho.Cpu) {
	t.Helper()
	switch goos {
	case "linux":
		f, err := elf.Open(path)
		if err != nil {
			t.Fatalf("%s is not an ELF file: %v", path, err)
		}
		if f.Machine != wantELF || f.Type != elf.ET_EXEC {
			t.Errorf("%s: ELF machine %v type %v, want %v executable", path, f.Machine, f.Type, wantELF)
		}
		f.Close()
	case "darwin":
		f, err := macho.Open(path)
		if err != nil {
			t.Fatalf("%s is not a Mach-O file: %v", path, err)
		}
		if f.Cpu != wantMachO || f.Type != macho.TypeExec {
			t.Errorf("%s: Mach-O CPU %v type %v, want %v executable", path, f.Cpu, f.Type, wantMachO)
		}
		f.Close()
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatalf("go version -m %s: %v", path, err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	want := map[string]string{"GOOS": goos, "GOARCH": goarch, "-tags": "hbxrelease", "CGO_ENABLED": "0", "-trimpath": "true"}
	for k, v := range want {
		if settings[k] != v {
			t.Errorf("%s was built with %s=%q, want %q", path, k, settings[k], v)
		}
	}
	// -trimpath leaves -ldflags out of the record: the stamp is looked for
	// in the bytes (and the Linux binaries print it below).
	b := boxtest.ReadFile(t, path)
	if info.Path != "github.com/hermes-box/hermes-box/host" || !bytes.Contains(b, []byte(distVersion)) {
		t.Errorf("%s: main package %s: not the host stamped %s", path, info.Path, distVersion)
	}
	for _, h := range []string{"HBX_TEST_", "HERMES_BOX_AGENT_TEST_ONLY_PINS"} {
		if bytes.Contains(b, []byte(h)) {
			t.Errorf("%s contains the test hook name %q", path, h)
		}
	}
}

// runHostBinary runs a Linux host binary of arch goarch in dir: natively,
// or under QEMU's user-mode emulator for the other architecture. It
// returns "" with ok false when the emulator is missing outside CI.
func runHostBinary(t *testing.T, dir, exe, goarch string, args ...string) (string, bool) {
	t.Helper()
	argv := append([]string{exe}, args...)
	if goarch != runtime.GOARCH {
		emu := map[string]string{"arm64": "qemu-aarch64-static", "amd64": "qemu-x86_64-static"}[goarch]
		p, err := exec.LookPath(emu)
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s (qemu-user-static) is required to run the %s host binary", emu, goarch)
			}
			t.Logf("%s is not installed: the %s binary is checked, not run", emu, goarch)
			return "", false
		}
		argv = append([]string{p}, argv...)
	}
	cmd := exec.CommandContext(t.Context(), argv[0], argv[1:]...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v in %s: %v\n%s", argv, dir, err, out)
	}
	return string(out), true
}

// The host binaries `make dist` adds: one per supported host platform, of
// that platform, release-tagged with no test hooks; `package` carries
// them, and in the unpacked package docs/backups.md's step for a host of
// another kind (copy bin/hermes-box-<os>-<arch> over bin/hermes-box) gives
// a hermes-box that runs there.
func TestDistBinariesInPortablePackage(t *testing.T) {
	t.Parallel()
	bin := makeHosts(t)
	h := newHarness(t)
	for _, p := range distPlatforms {
		name := "hermes-box-" + p.goos + "-" + p.goarch
		path := filepath.Join(bin, name)
		checkDistBinary(t, path, p.goos, p.goarch, p.elf, p.macho)
		h.Write("bin/"+name, boxtest.ReadFile(t, path))
		boxtest.Must(t, os.Chmod(filepath.Join(h.Root, "bin", name), 0o755))
	}
	if t.Failed() {
		t.FailNow()
	}
	// The test build stands in for the source host's bin/hermes-box.
	h.Write("bin/hermes-box", boxtest.ReadFile(t, bins.hermesBox))
	boxtest.Must(t, os.Chmod(filepath.Join(h.Root, "bin", "hermes-box"), 0o755))
	mustRun(t, h, "init")
	r := mustRun(t, h, "package", "dist")
	archive := strings.TrimSpace(r.stdout)
	mustRun(t, h, "stop")

	fresh := t.TempDir()
	sh(t, fresh, "tar", "-xf", archive)
	proj := filepath.Join(fresh, "hermes-box")
	var info struct {
		HostBinaries map[string]string `json:"hostBinaries"`
	}
	boxtest.Must(t, json.Unmarshal(boxtest.ReadFile(t, filepath.Join(proj, "portable.json")), &info))
	notes := string(boxtest.ReadFile(t, filepath.Join(proj, "PORTABLE.md")))
	for _, p := range distPlatforms {
		plat := p.goos + "-" + p.goarch
		rel := "bin/hermes-box-" + plat
		if info.HostBinaries[plat] != rel {
			t.Errorf("portable.json names %q for %s, want %s: %v", info.HostBinaries[plat], plat, rel, info.HostBinaries)
		}
		if !strings.Contains(notes, fmt.Sprintf("%-14s %s", plat, rel)) {
			t.Errorf("PORTABLE.md does not name %s for %s:\n%s", rel, plat, notes)
		}
		fi, err := os.Stat(filepath.Join(proj, rel))
		if err != nil || fi.Mode().Perm()&0o111 == 0 || !bytes.Equal(boxtest.ReadFile(t, filepath.Join(proj, rel)), boxtest.ReadFile(t, filepath.Join(bin, "hermes-box-"+plat))) {
			t.Errorf("the package's %s is not the executable make dist built: %v", rel, err)
		}
	}
	// docs/backups.md, on a Linux host of each architecture: copy the platform's
	// binary over bin/hermes-box and run it from the package.
	for _, p := range distPlatforms {
		if p.goos != "linux" {
			continue
		}
		sh(t, proj, "cp", "bin/hermes-box-linux-"+p.goarch, "bin/hermes-box")
		out, ran := runHostBinary(t, proj, "bin/hermes-box", p.goarch, "version", "--json")
		if !ran {
			continue
		}
		var v struct{ Version string }
		if err := json.Unmarshal([]byte(out), &v); err != nil || v.Version != distVersion {
			t.Errorf("the package's linux/%s hermes-box version --json: %v %q", p.goarch, err, out)
		}
	}
}
