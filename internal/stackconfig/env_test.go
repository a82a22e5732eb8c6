package stackconfig_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var envName = regexp.MustCompile(`"(CDC_[A-Z0-9_]+)"`)

// declaredEnv returns the variables env.go declares.
func declaredEnv(t *testing.T) map[string]bool {
	t.Helper()
	src, err := os.ReadFile("env.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range envName.FindAllStringSubmatch(string(src), -1) {
		out[m[1]] = true
	}
	if len(out) < 30 {
		t.Fatalf("env.go declares %d variables; the reading is broken", len(out))
	}
	return out
}

// TestEveryVariableIsDocumented: docs/ARCHITECTURE.md ("Configuration:
// environment variables") names every variable a Lambda reads.
func TestEveryVariableIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range declaredEnv(t) {
		if !strings.Contains(string(doc), name) {
			t.Errorf("%s is not in docs/ARCHITECTURE.md", name)
		}
	}
}

// TestVariablesAreNamedOnce: outside this package, the module's code names a
// declared variable by its constant, not by a second copy of its name.
func TestVariablesAreNamedOnce(t *testing.T) {
	declared := declaredEnv(t)
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "stackconfig" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range envName.FindAllStringSubmatch(string(src), -1) {
			if declared[m[1]] {
				t.Errorf("%s names %s literally; use stackconfig's constant", path, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
