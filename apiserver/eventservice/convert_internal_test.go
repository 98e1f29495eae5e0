package eventservice

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"

	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1"
	"github.com/videogen-dev/videogen-operator/internal/connectors"
)

// TestEventTypesMatchConnectors guards the naming contract toEventType
// relies on: every EventType constant in connectors/event.go has a proto
// value of the same name, and the proto enum has nothing else.
func TestEventTypesMatchConnectors(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../../internal/connectors/event.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "EventType" {
				continue
			}
			for _, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok {
					t.Fatalf("EventType constant with a non-literal value: %#v", v)
				}
				name, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				defined[name] = true
			}
		}
	}
	if len(defined) < 18 {
		t.Fatalf("found only %d EventType constants in connectors/event.go: %v", len(defined), defined)
	}
	for name := range defined {
		got := toEventType(connectors.EventType(name))
		if got.String() != name {
			t.Errorf("connectors type %s maps to proto %v", name, got)
		}
	}
	for name, value := range eventsv1.EventType_value {
		if value != 0 && !defined[name] {
			t.Errorf("proto EventType %s is not a connectors type", name)
		}
	}
	if toEventType("SOMETHING_NEW") != eventsv1.EventType_EVENT_TYPE_UNSPECIFIED {
		t.Error("an unknown type must map to EVENT_TYPE_UNSPECIFIED")
	}
}
