package etcdcluster

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"

	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
)

// TestEveryActionKindHasAHandler reads the planner's Kind constants from its source: a kind added
// there without a handler here would otherwise fail only when the planner first decides it.
func TestEveryActionKindHasAHandler(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../../planner/planner.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	kinds := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Kind" {
				continue
			}
			for _, v := range vs.Values {
				kinds++
				lit, err := strconv.Unquote(v.(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				k := planner.Kind(lit)
				_, handled := actionHandlers[k]
				switch {
				case (k == planner.None || k == planner.Wait) && handled:
					t.Errorf("%s takes no step but has a handler", k)
				case k != planner.None && k != planner.Wait && !handled:
					t.Errorf("action kind %s has no handler in actionHandlers", k)
				}
			}
		}
	}
	if kinds < 10 {
		t.Fatalf("read only %d action kinds from planner.go: the test no longer finds them", kinds)
	}
}
