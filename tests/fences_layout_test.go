package tests

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
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

// fence is one rule of DESIGN.md's layout: no package at or under from
// (but those at or under except) imports a package at or under one of to.
// Paths are relative to the module unless they hold a dot (a third-party
// module); external forbids every import outside the standard library and
// the module's shared/.
type fence struct {
	from     string
	except   []string
	to       []string
	external bool
	// direct checks direct imports only: the command line reaches smolvm,
	// keys, backups and the relay through box, which is the point.
	direct bool
	why    string
}

// The agent's image libraries, which only its Executor helper links.
var imageLibraries = []string{"go.podman.io/", "github.com/opencontainers/umoci", "github.com/google/go-containerregistry",
	"guest-agent/internal/oci", "guest-agent/internal/ociverb"}

// layout lists every rule of the layout: DESIGN.md's dependency direction
// (host → shared ← guest-agent, shared on the standard library only,
// neither binary in the other's internal/) and the package rules of its
// tree. A rule's packages must exist, so a moved package fails here
// instead of leaving a fence around nothing.
var layout = []fence{
	{from: "shared", to: []string{"host", "guest-agent"}, external: true,
		why: "shared/ is used by both binaries and imports only the standard library"},
	{from: "host", to: []string{"guest-agent"}, why: "neither binary imports the other's internal/"},
	{from: "guest-agent", to: []string{"host"}, why: "neither binary imports the other's internal/"},
	{from: "host/internal/box", to: []string{"host/internal/cli"}, why: "the lifecycle does not know the command line"},
	{from: "host/internal", except: []string{"host/internal/box", "host/internal/cli"}, to: []string{"host/internal/box", "host/internal/cli"},
		why: "the host's single-noun packages know neither the lifecycle nor the command line"},
	{from: "host/internal/cli", to: []string{"host/internal/smolvm", "host/internal/keys", "host/internal/backup", "host/internal/relay"}, direct: true,
		why: "the command line calls the box's verbs (box.Start(ctx, b)); smolvm, keys, backups and the relay are the lifecycle's"},
	{from: "host/internal", except: []string{"host/internal/agent", "host/internal/box", "host/internal/relay", "host/internal/boxtest"}, to: []string{"host/internal/relay"}, direct: true,
		why: "agent verbs go through the typed agent client (host/internal/agent), which alone, with the lifecycle that picks the transport, names the relay (boxtest stands the tests' sshd up with relay/sshdtest)"},
	{from: "guest-agent/internal", except: []string{"guest-agent/internal/cli"}, to: []string{"guest-agent/internal/cli"},
		why: "the agent's packages serve its command line, not the reverse"},
	{from: "guest-agent/internal/oci", to: []string{"guest-agent/internal/supervise"},
		why: "oci verifies and activates images; the supervisor program that runs one is the executor's"},
	{from: "guest-agent/internal/provision", to: []string{"guest-agent/internal/boot"},
		why: "provisioning does not import the runtime; the names both use live in shared/boxlayout"},
	{from: "guest-agent/internal", except: []string{"guest-agent/internal/cli", "guest-agent/internal/boot"}, to: []string{"guest-agent/internal/boot"},
		why: "only the agent's command line runs the boot; the box's names live in shared/boxlayout, not in boot"},
	{from: "guest-agent", to: []string{"github.com/spf13/cobra"}, why: "the agent's command line uses the flag package"},
	{from: "guest-agent", except: []string{"guest-agent/cmd", "guest-agent/internal"}, to: imageLibraries,
		why: "the lean agent that answers every relay call links no image library; its Executor helper does"},
	{from: "host/internal/backup", to: []string{"host/internal/smolvm", "host/internal/agent", "host/internal/relay"},
		why: "backup reaches a machine only through the interfaces it owns (MachineOps, SnapshotOps), which the lifecycle implements; it imports no machine driver, agent client or relay"},
	{from: "", except: []string{"host/internal/boxtest"}, to: []string{"host/internal/boxtest"},
		why: "boxtest, the lifecycle tests' project, is imported by _test.go files only"},
	{from: "", except: []string{"guest-agent/internal/oci/ocitest"},
		to:  []string{"guest-agent/internal/oci/ocitest", "github.com/google/go-containerregistry/pkg/registry"},
		why: "ocitest and its in-memory registry are imported by _test.go files only"},
}

// TestLayoutFences checks every rule of layout against `go list`.
func TestLayoutFences(t *testing.T) {
	transitive := deps(t, "./...")
	direct := map[string][]string{}
	for pkg, l := range imports(t, "./...") {
		direct[pkg] = l.imports
	}
	for _, problem := range fenceProblems(layout, transitive, direct) {
		t.Error(problem)
	}
}

// fenceProblems checks fences against the module's packages, each with its
// transitive and its direct imports: a rule naming a module package that
// does not exist, and each forbidden arrow.
func fenceProblems(fences []fence, transitive, direct map[string][]string) []string {
	var problems []string
	for _, f := range fences {
		for _, p := range append(append([]string{f.from}, f.except...), f.to...) {
			if !strings.Contains(p, ".") && !existsUnder(transitive, abs(p)) {
				problems = append(problems, fmt.Sprintf("the rule %q names %s, which holds no package: fence what exists", f.why, p))
			}
		}
		for pkg := range transitive {
			if !under(pkg, abs(f.from)) || slices.ContainsFunc(f.except, func(e string) bool { return under(pkg, abs(e)) }) {
				continue
			}
			ds := transitive[pkg]
			if f.direct {
				ds = direct[pkg]
			}
			for _, d := range ds {
				if forbids(f, d) {
					problems = append(problems, fmt.Sprintf("%s imports %s: %s", pkg, d, f.why))
				}
			}
		}
	}
	slices.Sort(problems)
	return problems
}

// forbids reports whether f forbids importing d.
func forbids(f fence, d string) bool {
	if f.external && !isStd(d) && !under(d, mod+"/shared") {
		return true
	}
	return slices.ContainsFunc(f.to, func(to string) bool { return under(d, abs(to)) })
}

// abs is the import path of p, a path relative to the module or a
// third-party prefix.
func abs(p string) string {
	switch {
	case p == "":
		return mod
	case strings.Contains(p, "."):
		return p
	}
	return mod + "/" + p
}

// under reports whether pkg is prefix or below it; a prefix ending in "/"
// (a third-party host) matches any path it begins.
func under(pkg, prefix string) bool {
	return pkg == prefix || strings.HasPrefix(pkg, strings.TrimSuffix(prefix, "/")+"/")
}

// existsUnder reports whether some listed package is at or under prefix.
func existsUnder(pkgs map[string][]string, prefix string) bool {
	for pkg := range pkgs {
		if under(pkg, prefix) {
			return true
		}
	}
	return false
}

// TestFenceProblemsFindsArrows: the checker reports a forbidden arrow,
// direct or transitive as the rule says, honours exceptions, and reports a
// rule around a package that does not exist.
func TestFenceProblemsFindsArrows(t *testing.T) {
	a, b, c, cli := mod+"/guest-agent/internal/a", mod+"/guest-agent/internal/b", mod+"/guest-agent/internal/c", mod+"/guest-agent/internal/cli"
	transitive := map[string][]string{
		a:   {b, c, "example.com/lib", "fmt"},
		b:   {c, "example.com/lib"},
		c:   {"example.com/lib"},
		cli: {a, b, c, "example.com/lib"},
	}
	direct := map[string][]string{a: {b}, b: {c}, cli: {a}}
	tests := []struct {
		name string
		f    fence
		want []string
	}{
		{"transitive", fence{from: "guest-agent/internal/a", to: []string{"guest-agent/internal/c"}, why: "w"},
			[]string{a + " imports " + c + ": w"}},
		{"direct", fence{from: "guest-agent/internal/a", to: []string{"guest-agent/internal/c"}, direct: true, why: "w"}, nil},
		{"except", fence{from: "guest-agent/internal", except: []string{"guest-agent/internal/cli", "guest-agent/internal/a"}, to: []string{"guest-agent/internal/c"}, why: "w"},
			[]string{b + " imports " + c + ": w"}},
		{"external", fence{from: "guest-agent/internal/c", external: true, why: "w"},
			[]string{c + " imports example.com/lib: w"}},
		{"third-party prefix", fence{from: "guest-agent/internal/b", to: []string{"example.com/"}, why: "w"},
			[]string{b + " imports example.com/lib: w"}},
		{"no such package", fence{from: "guest-agent/internal/gone", to: []string{"guest-agent/internal/c"}, why: "w"},
			[]string{`the rule "w" names guest-agent/internal/gone, which holds no package: fence what exists`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fenceProblems([]fence{tt.f}, transitive, direct)
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
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
