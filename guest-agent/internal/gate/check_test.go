package gate

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/shared/pins"
)

func TestCheckNamesVersionAndMechanism(t *testing.T) {
	for _, tt := range []struct {
		version string
		want    pins.GateMechanism
	}{{"0.16.0", pins.GateSourcePatch}, {"0.17.0", pins.GateSourcePatch}, {"0.19.0", pins.GateSmartPlugin}} {
		t.Run(tt.version, func(t *testing.T) {
			rep, err := Check(fixture(t, tt.version))
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Accepted || rep.Mechanism != tt.want || rep.Version != tt.version || rep.Commit != release(t, tt.version).Commit {
				t.Fatalf("%+v", rep)
			}
			for _, f := range rep.Found {
				if f.Count != 1 {
					t.Errorf("%s %q: %d", f.Kind, f.Label, f.Count)
				}
			}
		})
	}
}

func TestCheckRefuses018WithTheReason(t *testing.T) {
	rep, err := Check(fixture(t, "0.18.2"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Accepted || !strings.Contains(rep.Reason, "silently becomes manual") || len(rep.Found) != 0 {
		t.Fatalf("%+v", rep)
	}
}

func TestCheckRefusesUnknownVersionsAndBadTrees(t *testing.T) {
	dir := fixture(t, "0.19.0")
	write(t, dir, "pyproject.toml", "[project]\nversion = \"0.23.0\"\n")
	rep, err := Check(dir)
	if err != nil || rep.Accepted || !strings.Contains(rep.Reason, "supported releases are") {
		t.Fatalf("%+v %v", rep, err)
	}
	if _, err := Check(t.TempDir()); err == nil || !strings.Contains(err.Error(), "pyproject.toml") {
		t.Fatalf("no pyproject: %v", err)
	}
	if _, err := Check(dir + "/nope"); err == nil {
		t.Fatal("a missing dir was checked")
	}
}

// TestCheckRefusesNewerLinesWithTheReason: 0.20.x to 0.22.x are refused by
// name (the approval code was split; no tree verified), with what to pin
// instead, even when the tree otherwise looks like 0.19.0.
func TestCheckRefusesNewerLinesWithTheReason(t *testing.T) {
	for _, version := range []string{"0.20.0", "0.21.3", "0.22.1"} {
		t.Run(version, func(t *testing.T) {
			dir := fixture(t, "0.19.0")
			write(t, dir, "pyproject.toml", "[project]\nversion = \""+version+"\"\n")
			rep, err := Check(dir)
			if err != nil || rep.Accepted || len(rep.Found) != 0 {
				t.Fatalf("%+v %v", rep, err)
			}
			for _, want := range []string{"refused Hermes release: Hermes " + version + ": ", "approval_smart.py",
				"no byte-exact tree of this line has been verified",
				"pin a supported release instead with HERMES_BOX_HERMES_COMMIT: " + pins.DefaultHermesCommit + " (0.19.0)"} {
				if !strings.Contains(rep.Reason, want) {
					t.Errorf("reason lacks %q:\n%s", want, rep.Reason)
				}
			}
			t.Logf("Hermes %s: %s", version, rep.Reason)
		})
	}
}

// TestCheckRefusesEveryAlteredRequirement alters, one at a time, each thing
// an accepted tree's mechanism relies on, and expects a refusal naming it.
func TestCheckRefusesEveryAlteredRequirement(t *testing.T) {
	for _, version := range []string{"0.16.0", "0.19.0"} {
		reqs, err := Requirements(release(t, version))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reqs {
			t.Run(version+"/"+r.Label, func(t *testing.T) {
				dir := fixture(t, version)
				alter(t, dir, r.File, r.Text)
				rep, err := Check(dir)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Accepted || !strings.Contains(rep.Reason, "do not occur exactly once") {
					t.Fatalf("accepted after altering %q: %+v", r.Label, rep)
				}
				for _, f := range rep.Found {
					if (f.Label == r.Label && f.File == r.File) != (f.Count != 1) {
						t.Errorf("%s %q counted %d", f.Kind, f.Label, f.Count)
					}
				}
			})
		}
	}
}

// TestCheckRefusesARenamedChatPrompt: the plugin finds the 0.19.0 chat's
// prompt by its name, so an upstream rename must refuse the tree, not leave
// the chat waiting approvals.timeout (the gateway's 300 s).
func TestCheckRefusesARenamedChatPrompt(t *testing.T) {
	dir := fixture(t, "0.19.0")
	renamed := strings.NewReplacer("def _approval_callback(", "def _approval_prompt(",
		"self._approval_callback)", "self._approval_prompt)").Replace(read(t, dir, cliPy))
	write(t, dir, cliPy, renamed)
	rep, err := Check(dir)
	if err != nil || rep.Accepted {
		t.Fatalf("accepted: %+v %v", rep, err)
	}
	var missing []string
	for _, f := range rep.Found {
		if f.Count != 1 {
			missing = append(missing, f.Label)
		}
	}
	want := []string{"CLI chat prompt", "CLI agent thread registers the chat prompt"}
	if strings.Join(missing, "|") != strings.Join(want, "|") {
		t.Fatalf("refused for %q, want %q", missing, want)
	}
}

func TestRequirementsCoverTheTable(t *testing.T) {
	for _, rel := range pins.HermesReleases {
		reqs, err := Requirements(rel)
		if err != nil {
			t.Fatalf("%s: %v", rel.Version, err)
		}
		kinds := map[string]int{}
		for _, r := range reqs {
			kinds[r.Kind]++
		}
		if kinds[KindAnchor] == 0 || kinds[KindConfig] == 0 {
			t.Errorf("%s: %v", rel.Version, kinds)
		}
		if rel.Mechanism == pins.GateSmartPlugin && (kinds[KindHook] < 2 || kinds[KindSeam] < 3 || kinds[KindFlag] != 1) {
			t.Errorf("%s: smart-plugin needs hooks, seams and the supervisor flag: %v", rel.Version, kinds)
		}
	}
}

// TestCheckRealTrees is the check on git-archive exports of the four real
// commits (HERMES_BOX_HERMES_TREES): 0.16.0, 0.17.0 and 0.19.0 accepted and
// named, with the installer SHA-256 pinned in shared/pins equal to the tree's
// scripts/install.sh; 0.18.2 refused with the reason; and each accepted tree
// refused once any one thing it relies on is altered.
func TestCheckRealTrees(t *testing.T) {
	for _, version := range []string{"0.16.0", "0.17.0", "0.18.2", "0.19.0"} {
		t.Run(version, func(t *testing.T) {
			dir := realTree(t, version)
			rep, err := Check(dir)
			if err != nil {
				t.Fatal(err)
			}
			if version == "0.18.2" {
				if rep.Accepted || !strings.Contains(rep.Reason, "silently becomes manual") {
					t.Fatalf("%+v", rep)
				}
				return
			}
			if !rep.Accepted || rep.Mechanism != release(t, version).Mechanism {
				t.Fatalf("%+v", rep)
			}
			installer := sha256.Sum256([]byte(read(t, dir, installSh)))
			if got, want := hex.EncodeToString(installer[:]), release(t, version).InstallerSHA256; got != want {
				t.Errorf("%s of the real tree has sha256 %s; shared/pins pins %s", installSh, got, want)
			}
			reqs, _ := Requirements(release(t, version))
			for _, r := range reqs {
				work := t.TempDir()
				for _, f := range append([]string{"pyproject.toml"}, files(reqs)...) {
					write(t, work, f, read(t, dir, f))
				}
				alter(t, work, r.File, r.Text)
				if rep, err := Check(work); err != nil || rep.Accepted {
					t.Errorf("accepted after altering %s %q: %v", r.Kind, r.Label, err)
				}
			}
		})
	}
}

// files lists the files the requirements read, once each.
func files(reqs []Requirement) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range reqs {
		if !seen[r.File] {
			seen[r.File] = true
			out = append(out, r.File)
		}
	}
	return out
}

// TestCheck counts drift: one anchor twice, one file gone.
func TestCheck(t *testing.T) {
	dir := fixture(t, "0.17.0")
	rep, err := Check(dir)
	if err != nil || !rep.Accepted || rep.Version != "0.17.0" || rep.Mechanism != pins.GateSourcePatch {
		t.Fatalf("%+v %v", rep, err)
	}
	write(t, dir, approvalPy, read(t, dir, approvalPy)+"    combined_desc = \"; \".join(desc for _, desc, _ in warnings)\n")
	if err := os.Remove(filepath.Join(dir, auxPy)); err != nil {
		t.Fatal(err)
	}
	rep, err = Check(dir)
	if err != nil || rep.Accepted {
		t.Fatalf("drifted tree accepted: %+v %v", rep, err)
	}
	for _, f := range rep.Found {
		want := 1
		switch f.Label {
		case "human escalation reason":
			want = 2
		case "Codex service tier forwarding", "the reviewer's Codex endpoint is Codex's": // auxPy's
			want = 0
			if !f.Missing {
				t.Error("missing file not reported")
			}
		}
		if f.Count != want {
			t.Errorf("%s: count %d, want %d", f.Label, f.Count, want)
		}
	}
}
