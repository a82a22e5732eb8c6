// Package docs holds the project's documentation; its test holds the
// documents to the tests they cite.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// cited matches a test, example, benchmark or fuzz target named in a
// document: the documents cite them in backquotes.
var cited = regexp.MustCompile("`((?:Test|Example|Benchmark|Fuzz)[A-Za-z0-9_]+)")

// declared matches a test function's declaration.
var declared = regexp.MustCompile(`(?m)^func ((?:Test|Example|Benchmark|Fuzz)[A-Za-z0-9_]+)\(`)

// notTests are names in the documents that are not this project's tests.
var notTests = map[string]string{
	"TestEventPattern": "EventBridge's API action that evaluates a pattern against an event",
}

// TestEveryCitedTestExists: every test a document names as holding a
// promise (docs/*.md, README.md, the examples' READMEs) is declared in the
// repository, so that a renamed or removed test cannot leave a sentence
// unheld.
func TestEveryCitedTestExists(t *testing.T) {
	root := ".."
	have := map[string]bool{}
	var docs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", "cdk.out", "testdata", "build":
				return filepath.SkipDir
			}
			if strings.HasPrefix(d.Name(), ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(path, "_test.go"):
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range declared.FindAllStringSubmatch(string(src), -1) {
				have[m[1]] = true
			}
		case strings.HasSuffix(path, ".md"):
			docs = append(docs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(have) < 500 || len(docs) < 10 {
		t.Fatalf("%d tests in %d documents found; the walk is broken", len(have), len(docs))
	}
	n := 0
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range cited.FindAllStringSubmatch(string(text), -1) {
			n++
			if name := m[1]; !have[name] && notTests[name] == "" {
				t.Errorf("%s cites %s, which no test file declares", doc, name)
			}
		}
	}
	if n < 100 {
		t.Fatalf("%d citations found; the reading is broken", n)
	}
}
