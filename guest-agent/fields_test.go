package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/shared/protocol"
)

// TestEventFieldsAreShared: every field name the agent puts in an event is
// a protocol.Field constant listed in protocol.EventFields, the list the
// host's filter keeps, so the host cannot silently drop a field the agent
// adds. It reads the agent's sources: the map literal of an event's Fields
// (or one passed to a function, as provision's stepEvent takes them) and
// every assignment to Fields[KEY].
func TestEventFieldsAreShared(t *testing.T) {
	consts := fieldConstants(t)
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, key := range eventFieldKeys(f) {
			checked++
			if name, ok := sharedField(key, consts); !ok {
				t.Errorf("%s: event field %s is not a protocol.Field constant listed in protocol.EventFields", fset.Position(key.Pos()), name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no event field found in the agent's sources: the check would not notice a new one")
	}
}

// fieldConstants maps the names of protocol's Field constants to their
// values, read from its source.
func fieldConstants(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "shared", "protocol", "event.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == 1 && len(vs.Values) == 1 && strings.HasPrefix(vs.Names[0].Name, "Field") {
			if lit, ok := vs.Values[0].(*ast.BasicLit); ok {
				consts[vs.Names[0].Name], _ = strconv.Unquote(lit.Value)
			}
		}
		return true
	})
	return consts
}

// eventFieldKeys are the keys of event fields in f: of a map[string]string
// literal that is a Fields value or a call's argument, and of an index
// expression X.Fields[KEY].
func eventFieldKeys(f *ast.File) []ast.Expr {
	var keys []ast.Expr
	mapLiteral := func(e ast.Expr) {
		lit, ok := e.(*ast.CompositeLit)
		if !ok {
			return
		}
		if mt, ok := lit.Type.(*ast.MapType); !ok || !isIdent(mt.Key, "string") || !isIdent(mt.Value, "string") {
			return
		}
		for _, el := range lit.Elts {
			if kv, ok := el.(*ast.KeyValueExpr); ok {
				keys = append(keys, kv.Key)
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.KeyValueExpr:
			if isIdent(n.Key, "Fields") {
				mapLiteral(n.Value)
			}
		case *ast.CallExpr:
			for _, a := range n.Args {
				mapLiteral(a)
			}
		case *ast.IndexExpr:
			if sel, ok := n.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "Fields" {
				keys = append(keys, n.Index)
			}
		}
		return true
	})
	return keys
}

// sharedField reports whether key is protocol.FieldX with X's value in
// protocol.EventFields; name is how the key reads.
func sharedField(key ast.Expr, consts map[string]string) (name string, ok bool) {
	sel, isSel := key.(*ast.SelectorExpr)
	if !isSel || !isIdent(sel.X, "protocol") {
		if lit, isLit := key.(*ast.BasicLit); isLit {
			return lit.Value, false
		}
		return "(an expression)", false
	}
	value, isConst := consts[sel.Sel.Name]
	return "protocol." + sel.Sel.Name, isConst && slices.Contains(protocol.EventFields, value)
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
