package etcdcluster

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestOneStatusWriter: writeStatus (status.go) is the only function of this package that reaches the
// status subresource. A second writer would skip its rules: no write when nothing changed, the
// optimistic lock that ends a pass acting on a stale view, and p.orig kept as what was last written
// (a later writeStatus would otherwise patch from an older base). The scan reads the package's
// sources: any call of a client's Status() or SubResource(…), and any use of
// shared.PatchStatusIfChanged, is a status writer. Other kinds' status (an EtcdBackup's verdict) is
// written through their own helpers in internal/controller/shared.
func TestOneStatusWriter(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var writers []string
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			ast.Inspect(d, func(n ast.Node) bool {
				if statusWrite(n) {
					fn := "(package level)"
					if fd, ok := d.(*ast.FuncDecl); ok {
						fn = fd.Name.Name
					}
					writers = append(writers, name+": "+fn)
				}
				return true
			})
		}
	}
	if want := []string{"status.go: writeStatus"}; !slices.Equal(writers, want) {
		t.Errorf("status writers: %q, want only %q: change p.c.Status and call p.writeStatus instead", writers, want)
	}
}

// statusWrite says whether n reaches the status subresource: x.Status(), x.SubResource(…) or a use
// of PatchStatusIfChanged.
func statusWrite(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.CallExpr:
		sel, ok := n.Fun.(*ast.SelectorExpr)
		return ok && (sel.Sel.Name == "Status" && len(n.Args) == 0 || sel.Sel.Name == "SubResource")
	case *ast.Ident: // shared.PatchStatusIfChanged's name, called or passed on
		return n.Name == "PatchStatusIfChanged"
	}
	return false
}
