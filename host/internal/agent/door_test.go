package agent

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Where the relay may be imported from: the client, the relay itself and
// the box, which makes the transports (SSH with the pinned key, smolvm
// exec) that clients run over.
var relayImporters = []string{"internal/agent", "internal/relay", "internal/box"}

// doorViolations lists, for the Go files under root (host/), every place
// outside this package and the relay that opens an agent session (a
// Transport's Run, a request written by hand), builds an agent argv (a
// []string literal starting with a verb's first word), or imports the relay
// where only the client and the box's transports may.
func doorViolations(t *testing.T, root string) []string {
	t.Helper()
	words := map[string]bool{}
	for _, v := range Verbs {
		words[v.Argv[0]] = true
	}
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		dir := filepath.ToSlash(filepath.Dir(rel))
		if dir == "internal/agent" || strings.HasPrefix(dir, "internal/relay") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		at := func(n ast.Node, what string) {
			found = append(found, fset.Position(n.Pos()).String()+": "+what)
		}
		pkgs := map[string]bool{}
		for _, imp := range f.Imports {
			name := strings.Trim(imp.Path.Value, `"`)
			name = name[strings.LastIndex(name, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			pkgs[name] = true
			if strings.HasSuffix(imp.Path.Value, `/host/internal/relay"`) && !slices.Contains(relayImporters, dir) {
				at(imp, "imports the relay")
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Run" && len(n.Args) == 5 && !isPackage(sel.X, pkgs) {
					at(n, "runs a transport (an agent session)")
				}
				if isSel(n.Fun, "protocol", "WriteRequest") {
					at(n, "writes an agent request")
				}
			case *ast.CompositeLit:
				if isSel(n.Type, "protocol", "Request") {
					at(n, "builds an agent request")
				}
				if w := verbArgv(n, words); w != "" {
					at(n, "builds the argv of agent verb "+w)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// verbArgv is the verb word of a []string literal that is an agent argv:
// one that starts with a verb's first word, or with the agent's path
// (boxlayout.AgentPath) and then one, as a command run by smolvm exec.
func verbArgv(n *ast.CompositeLit, words map[string]bool) string {
	arr, ok := n.Type.(*ast.ArrayType)
	if !ok || !isIdent(arr.Elt, "string") || len(n.Elts) == 0 {
		return ""
	}
	first := 0
	if sel, ok := n.Elts[0].(*ast.SelectorExpr); ok && sel.Sel.Name == "AgentPath" && len(n.Elts) > 1 {
		first = 1
	}
	if lit, ok := n.Elts[first].(*ast.BasicLit); ok && lit.Kind == token.STRING {
		if w, _ := strconv.Unquote(lit.Value); words[w] {
			return w
		}
	}
	return ""
}

func isSel(e ast.Expr, pkg, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == name && isIdent(sel.X, pkg)
}

// isPackage reports whether e names an imported package (cli.Run is a
// function, not a transport).
func isPackage(e ast.Expr, pkgs map[string]bool) bool {
	id, ok := e.(*ast.Ident)
	return ok && pkgs[id.Name]
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// TestOneDoor: nothing in host/ but this package opens an agent session,
// writes a request or builds a verb's argv, and only the box (for its
// transports) imports the relay; the cli never does.
func TestOneDoor(t *testing.T) {
	for _, v := range doorViolations(t, "../..") {
		t.Error(v)
	}
}

// TestOneDoorCatches: the scan finds each kind of way round the door in a
// package written to have them.
func TestOneDoorCatches(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "internal", "cli")
	src := `package cli

import (
	"context"

	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

func f(ctx context.Context, tr relay.Transport) {
	argv := []string{"services", "status", "--json"}
	keys := []string{boxlayout.AgentPath, "hostkeys"}
	_, _ = tr.Run(ctx, protocol.Request{Argv: argv}, nil, nil, nil)
	_ = protocol.WriteRequest(nil, protocol.Request{})
	_ = keys
}
`
	writeFile(t, filepath.Join(dir, "bad.go"), src)
	got := doorViolations(t, root)
	for _, want := range []string{"imports the relay", "builds the argv of agent verb services", "builds the argv of agent verb hostkeys", "runs a transport", "builds an agent request", "writes an agent request"} {
		if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("not caught: %s (found %q)", want, got)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
