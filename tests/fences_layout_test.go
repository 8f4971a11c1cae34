package tests

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// imports lists each package matching pattern with its direct imports and
// its directory.
func imports(t *testing.T, pattern string) map[string]listed {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "list", "-f", `{{.ImportPath}} {{.Dir}}{{range .Imports}} {{.}}{{end}}`, pattern)
	cmd.Dir = moduleRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pattern, err)
	}
	m := map[string]listed{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		m[f[0]] = listed{dir: f[1], imports: f[2:]}
	}
	return m
}

type listed struct {
	dir     string
	imports []string
}

// TestLayoutArrows checks the arrows DESIGN.md's layout forbids beyond the
// fences above: the lifecycle (host/internal/box) does not know the command
// line; the host's single-noun packages know neither; the command line
// reaches smolvm, keys and backups only through box; and the agent's
// packages do not reach up into its command line.
func TestLayoutArrows(t *testing.T) {
	h := mod + "/host/internal/"
	lower := []string{"smolvm", "relay", "keys", "backup", "listener", "mcp"}
	type arrow struct{ from, to string }
	var forbidden []arrow
	forbidden = append(forbidden, arrow{h + "box", h + "cli"})
	for _, p := range lower {
		forbidden = append(forbidden, arrow{h + p, h + "box"}, arrow{h + p, h + "cli"})
	}
	for _, p := range []string{"smolvm", "keys", "backup"} {
		forbidden = append(forbidden, arrow{h + "cli", h + p})
	}
	// Transitive for the upward arrows, direct for cli's: cli reaches them
	// through box, which is the point.
	all := deps(t, "./...")
	direct := imports(t, "./host/internal/cli/...")
	for _, a := range forbidden {
		for pkg, ds := range all {
			if pkg != a.from && !strings.HasPrefix(pkg, a.from+"/") {
				continue
			}
			if a.from == h+"cli" {
				ds = direct[pkg].imports
			}
			for _, d := range ds {
				if d == a.to || strings.HasPrefix(d, a.to+"/") {
					t.Errorf("%s imports %s: DESIGN.md's layout forbids %s → %s", pkg, d, a.from, a.to)
				}
			}
		}
	}
	agentCLI := mod + "/guest-agent/internal/cli"
	for pkg, ds := range deps(t, "./guest-agent/internal/...") {
		if pkg == agentCLI || strings.HasPrefix(pkg, agentCLI+"/") {
			continue
		}
		for _, d := range ds {
			if d == agentCLI {
				t.Errorf("%s imports %s: the agent's packages serve its command line, not the reverse", pkg, d)
			}
		}
	}
}

// spawners are the calls that start a child process besides os/exec.
var spawners = map[string]map[string]bool{
	"os":      {"StartProcess": true},
	"syscall": {"ForkExec": true, "StartProcess": true},
}

// TestBootSpawnsOnlyThroughTheSupervisor: the boot process (the agent's
// boot verb and every package of the module it links) starts children only
// through the supervisor, whose reaper waits with wait4(-1): a child
// started by os/exec elsewhere would have its status taken by that reaper.
func TestBootSpawnsOnlyThroughTheSupervisor(t *testing.T) {
	supervise := mod + "/guest-agent/internal/supervise"
	boot := mod + "/guest-agent/internal/boot"
	pkgs := append([]string{boot}, deps(t, "./guest-agent/internal/boot")[boot]...)
	list := imports(t, "./...")
	checked := 0
	for _, pkg := range pkgs {
		p, ok := list[pkg]
		if !ok || pkg == supervise {
			continue // outside the module, or the supervisor
		}
		checked++
		for _, problem := range spawnsIn(t, p.dir, "*.go") {
			t.Errorf("%s: %s; the boot process starts children only through %s", pkg, problem, supervise)
		}
	}
	if checked < 3 {
		t.Fatalf("checked %d packages of the boot process (%v): the dependency listing is wrong", checked, pkgs)
	}
	// The boot verb itself, in the agent's command line.
	cli := list[mod+"/guest-agent/internal/cli"]
	for _, problem := range spawnsIn(t, cli.dir, "boot*.go") {
		t.Errorf("the boot verb: %s; the boot process starts children only through %s", problem, supervise)
	}
}

// spawnsIn names each import of os/exec and each spawning call in the
// non-test files matching glob in dir.
func spawnsIn(t *testing.T, dir, glob string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, glob))
	if err != nil || len(files) == 0 {
		t.Fatalf("no %s in %s: %v", glob, dir, err)
	}
	var problems []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		problems = append(problems, spawnsInFile(f, filepath.Base(name))...)
	}
	return problems
}

// spawnsInFile is spawnsIn for one parsed file.
func spawnsInFile(f *ast.File, name string) []string {
	var problems []string
	local := map[string]string{} // local name → import path, for os and syscall
	for _, is := range f.Imports {
		path, _ := strconv.Unquote(is.Path.Value)
		if path == "os/exec" {
			problems = append(problems, name+" imports os/exec")
		}
		if _, ok := spawners[path]; ok {
			n := path
			if is.Name != nil {
				n = is.Name.Name
			}
			local[n] = path
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && spawners[local[id.Name]][sel.Sel.Name] {
			problems = append(problems, name+" calls "+local[id.Name]+"."+sel.Sel.Name)
		}
		return true
	})
	return problems
}

// TestSpawnsInFileFindsSpawns: the boot fence sees os/exec, a renamed
// syscall import and os.StartProcess, and leaves other calls alone.
func TestSpawnsInFileFindsSpawns(t *testing.T) {
	src := `package p
import (
	"os"
	"os/exec"
	sc "syscall"
)
func f() {
	_ = exec.Command("x")
	sc.ForkExec("x", nil, nil)
	os.StartProcess("x", nil, nil)
	os.Getpid()
}`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(spawnsInFile(f, "p.go"), "; ")
	want := "p.go imports os/exec; p.go calls syscall.ForkExec; p.go calls os.StartProcess"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
