package box

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/shared/config"
	"github.com/hermes-box/hermes-box/shared/filenames"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// TestDriftNamesTheHermesCommit: a configuration asking for another Hermes
// commit than the box runs is named, with the upgrade path as its next
// step (a restore of the box's own backup would bring the old Hermes
// back); a record made before the commit was kept names none.
func TestDriftNamesTheHermesCommit(t *testing.T) {
	const older = "81eaedd0f5c471c7ee748990066135a684f3c962" // 0.16.0
	commitDrift := "HERMES_BOX_HERMES_COMMIT is " + older + " (Hermes 0.16.0) in the configuration, but the box runs " +
		pins.DefaultHermesCommit + " (Hermes 0.19.0), installed in its root file system when it was built, and keeps it"
	for _, tc := range []struct {
		name      string
		record    func(map[string]any) // edits the record init would write
		configure func(*config.Config)
		drift     []string
		next      string
	}{
		{name: "same commit", configure: func(*config.Config) {}},
		{name: "another commit", configure: func(c *config.Config) { c.HermesCommit = older },
			drift: []string{commitDrift}, next: upgradeNext},
		{name: "record without the commit", record: func(r map[string]any) { delete(r, "hermesCommit") },
			configure: func(c *config.Config) { c.HermesCommit = older }},
		{name: "another setting", configure: func(c *config.Config) { c.CPUs = 2 },
			drift: []string{"HERMES_BOX_CPUS is 2 in the configuration, but the box was created with 4 and keeps it"}, next: driftNext},
		{name: "another setting and commit", configure: func(c *config.Config) { c.CPUs, c.HermesCommit = 2, older },
			drift: []string{"HERMES_BOX_CPUS is 2 in the configuration, but the box was created with 4 and keeps it", commitDrift}, next: upgradeNext},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default(t.TempDir())
			cfg.CPUs = 4
			data, err := json.Marshal(settingsOf(cfg))
			if err != nil {
				t.Fatal(err)
			}
			rec := map[string]any{}
			if err := json.Unmarshal(data, &rec); err != nil {
				t.Fatal(err)
			}
			if rec["hermesCommit"] != pins.DefaultHermesCommit {
				t.Fatalf("the record does not keep the Hermes commit: %s", data)
			}
			if tc.record != nil {
				tc.record(rec)
			}
			if data, err = json.Marshal(rec); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(cfg.StateDir(), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(cfg.StateDir(), filenames.BoxSettings), data, 0o600); err != nil {
				t.Fatal(err)
			}
			tc.configure(cfg)
			b := &Box{cfg: cfg}
			if err := adoptSettings(b); err != nil {
				t.Fatal(err)
			}
			if got := Drift(b); !slices.Equal(got, tc.drift) {
				t.Errorf("drift:\n%q\nwant\n%q", got, tc.drift)
			}
			if got := DriftNext(b); got != tc.next {
				t.Errorf("next step %q, want %q", got, tc.next)
			}
		})
	}
	if !strings.Contains(upgradeNext, "hermes-box restore before-upgrade --workspace-only") || !strings.Contains(upgradeNext, "hermes-box init") {
		t.Errorf("the upgrade path does not name init and the workspace-only restore: %s", upgradeNext)
	}
}

// TestRecordHermesTakesOnlyAPinnedRelease: the Hermes version a restored
// box's health check reports (the box's word) reaches the host's record
// only as a release of the pins table, mapped to its commit there; any
// other string (unknown, empty, a commit, escapes, too long) leaves the
// record as it was.
func TestRecordHermesTakesOnlyAPinnedRelease(t *testing.T) {
	older, err := pins.HermesByVersion("0.16.0")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		version, want string
	}{
		{"0.16.0", older.Commit},
		{"", pins.DefaultHermesCommit},
		{"9.9.9", pins.DefaultHermesCommit},
		{older.Commit, pins.DefaultHermesCommit},
		{"0.16.0\x1b]52;c;aGk=\x07", pins.DefaultHermesCommit},
		{" 0.16.0", pins.DefaultHermesCommit},
		{strings.Repeat("0.16.0", 1<<16), pins.DefaultHermesCommit},
	} {
		cfg := config.Default(t.TempDir())
		if err := os.MkdirAll(cfg.StateDir(), 0o700); err != nil {
			t.Fatal(err)
		}
		b := &Box{cfg: cfg}
		if err := writeSettings(b, settingsOf(cfg)); err != nil {
			t.Fatal(err)
		}
		if err := recordHermes(b, tc.version); err != nil {
			t.Fatalf("%.40q: %v", tc.version, err)
		}
		data, err := os.ReadFile(filepath.Join(cfg.StateDir(), filenames.BoxSettings))
		if err != nil {
			t.Fatal(err)
		}
		var s Settings
		if err := json.Unmarshal(data, &s); err != nil {
			t.Fatal(err)
		}
		if s.HermesCommit != tc.want || b.cfg.HermesCommit != tc.want {
			t.Errorf("version %.40q: recorded %s (config %s), want %s", tc.version, s.HermesCommit, b.cfg.HermesCommit, tc.want)
		}
	}
}
