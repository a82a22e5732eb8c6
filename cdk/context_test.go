package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestEveryContextKeyIsDocumented: every Context* constant of config.go —
// the synth-time values the app reads — has its row in docs/DEPLOY.md's
// context table.
func TestEveryContextKeyIsDocumented(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "config.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if !strings.HasPrefix(name.Name, "Context") || i >= len(vs.Values) {
				continue
			}
			if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				v, _ := strconv.Unquote(lit.Value)
				keys = append(keys, v)
			}
		}
		return true
	})
	if len(keys) < 9 {
		t.Fatalf("found %d context keys in config.go: %v", len(keys), keys)
	}
	b, err := os.ReadFile(deployDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "| context | default | meaning |")
	if start < 0 {
		t.Fatalf("%s has no context table", deployDoc)
	}
	table := doc[start:]
	if end := strings.Index(table, "\n\n"); end > 0 {
		table = table[:end]
	}
	for _, k := range keys {
		if !strings.Contains(table, "`"+k+"`") {
			t.Errorf("context key %q has no row in %s's context table", k, deployDoc)
		}
	}
}
