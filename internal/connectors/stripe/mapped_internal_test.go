package stripe

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"
)

// Parse decodes data.object only for the types mapped names; a type classify maps that is
// missing there would always be EventTypeUnsupported. Read classify's cases from the source
// so the two lists cannot drift apart.
func TestEveryTypeClassifyMapsIsDecoded(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "parse.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	ast.Inspect(f, func(n ast.Node) bool {
		fn, ok := n.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "classify" {
			return true
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			cc, ok := n.(*ast.CaseClause)
			if !ok {
				return true
			}
			for _, e := range cc.List {
				lit, ok := e.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				typ, _ := strconv.Unquote(lit.Value)
				seen++
				if !mapped(typ) {
					t.Errorf("classify maps %q but mapped does not list it: its object is never decoded", typ)
				}
			}
			return true
		})
		return false
	})
	if seen == 0 {
		t.Fatal("found no case of classify in parse.go")
	}
}
