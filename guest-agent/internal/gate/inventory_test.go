package gate

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/hermesconfig"
	"github.com/hermes-box/hermes-box/guest-agent/internal/hermestest"
	"github.com/hermes-box/hermes-box/guest-agent/internal/patch"
	"github.com/hermes-box/hermes-box/shared/pins"

	"encoding/json"
)

// input is one read testdata/inventory.py found.
type input struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// inventory lists what InventoryFiles read in the real tree of version.
func inventory(t *testing.T, version string) []input {
	t.Helper()
	tree := realTree(t, version)
	script, err := filepath.Abs(filepath.Join("testdata", "inventory.py"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(hermestest.Python(t), append([]string{script, tree}, InventoryFiles...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("inventory of %s: %v\n%s", version, err, stderr.String())
	}
	var ins []input
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var in input
		if err := json.Unmarshal(sc.Bytes(), &in); err != nil {
			t.Fatalf("inventory line %q: %v", sc.Text(), err)
		}
		ins = append(ins, in)
	}
	if len(ins) == 0 {
		t.Fatalf("inventory of %s found nothing", version)
	}
	return ins
}

// unclassified names every input of ins that table has no row for.
func unclassified(version string, ins []input, table []Input) []string {
	var out []string
	for _, in := range ins {
		if _, ok := classify(table, in.Kind, in.Name); !ok {
			out = append(out, fmt.Sprintf("hermes %s: %s:%d: %s input %q is not classified in gate.Inputs", version, in.File, in.Line, in.Kind, in.Name))
		}
	}
	return out
}

var inventoryVersions = []string{"0.16.0", "0.17.0", "0.19.0"}

// TestInventoryRealTrees lists every environment variable, config key and
// import directory the gateway's and the agent's start-up and approval
// code (InventoryFiles) read in the real 0.16.0, 0.17.0 and 0.19.0 trees,
// and requires a row of gate.Inputs for each; every row must be read by
// some release. It logs the inputs per release and class.
func TestInventoryRealTrees(t *testing.T) {
	used := map[string]bool{}
	for _, version := range inventoryVersions {
		ins := inventory(t, version)
		for _, problem := range unclassified(version, ins, Inputs) {
			t.Error(problem)
		}
		byClass := map[string]map[string]bool{}
		for _, in := range ins {
			row, ok := classify(Inputs, in.Kind, in.Name)
			if !ok {
				continue
			}
			used[row.Kind+" "+row.Name] = true
			k := in.Kind + " " + string(row.Class)
			if byClass[k] == nil {
				byClass[k] = map[string]bool{}
			}
			byClass[k][in.Name] = true
		}
		keys := make([]string, 0, len(byClass))
		for k := range byClass {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			names := make([]string, 0, len(byClass[k]))
			for n := range byClass[k] {
				names = append(names, n)
			}
			sort.Strings(names)
			t.Logf("hermes %s: %s (%d): %s", version, k, len(names), strings.Join(names, ", "))
		}
	}
	for _, row := range Inputs {
		if !used[row.Kind+" "+row.Name] {
			t.Errorf("gate.Inputs row %s %q: no supported release reads it (a stale row hides nothing, but says what is not so)", row.Kind, row.Name)
		}
	}
}

// TestInventoryNamesAnUnclassifiedInput: with one row removed (the
// managed directory's variable), the inventory of the real 0.19.0 tree
// names the release, the file, the line and the input.
func TestInventoryNamesAnUnclassifiedInput(t *testing.T) {
	var table []Input
	for _, row := range Inputs {
		if row.Name != "HERMES_MANAGED_DIR" {
			table = append(table, row)
		}
	}
	got := unclassified("0.19.0", inventory(t, "0.19.0"), table)
	want := `hermes 0.19.0: hermes_cli/managed_scope.py:65: env input "HERMES_MANAGED_DIR" is not classified in gate.Inputs`
	if !slices.Contains(got, want) {
		t.Fatalf("want %q among %q", want, got)
	}
	t.Logf("without the row: %s", strings.Join(got, "; "))
}

// TestInputsAreWhatTheyClaim: a stripped variable is one the gate's .env
// edit restores (its hunk names it or a prefix of it); a pinned config key
// names a key the managed scope pins for some mechanism.
func TestInputsAreWhatTheyClaim(t *testing.T) {
	set, err := patch.SetByID("hermes-0.19.0")
	if err != nil {
		t.Fatal(err)
	}
	var keep string
	for _, a := range set.Anchors {
		if strings.Contains(a.Marker, "gate-env-keep") {
			keep = a.Hunk
		}
	}
	if keep == "" {
		t.Fatal("no gate-env-keep hunk")
	}
	managed := slices.Concat(hermesconfig.ManagedKeys(hermesconfig.ManagedSettingsFor(pins.GateSourcePatch)),
		hermesconfig.ManagedKeys(hermesconfig.ManagedSettingsFor(pins.GateSmartPlugin)))
	for _, row := range Inputs {
		switch {
		case row.Kind == "env" && row.Class == Stripped:
			if name := strings.TrimSuffix(row.Name, "*"); !strings.Contains(keep, `"`+name+`"`) {
				t.Errorf("env %s is classified stripped, but gate-env-keep does not name %q", row.Name, name)
			}
		case row.Kind == "config" && row.Class == Pinned:
			if !slices.Contains(managed, row.Pin) {
				t.Errorf("config %s is classified pinned by %q, which the managed scope does not pin", row.Name, row.Pin)
			}
		}
	}
}
