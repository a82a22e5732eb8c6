package iam

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// docSection is the section of docs/LOCAL.md that lists every route.
const docSection = "## Every emulated operation"

// docKey is how the table in docs/LOCAL.md names a route: the Op of a
// JSON-protocol route ("SendMessageBatch", "TransactWriteItems/Put"); for a
// REST route the method, a space and the path pattern, followed by "?" and
// the required query parameter when there is one ("GET /{bucket}?uploads").
// A HealthLake FHIR path is written relative to the data store base
// /datastore/{datastore}/r4 ("GET /{type}/{id}/_history"; "POST /" for the
// base itself).
func docKey(r Route) string {
	if r.Op != "" {
		return r.Op
	}
	path := r.Path
	if r.Service == "healthlake" {
		path = strings.TrimPrefix(path, hlBase)
		if path == "" {
			path = "/"
		}
	}
	k := r.Method + " " + path
	if r.Query != "" {
		k += "?" + r.Query
	}
	return k
}

var (
	codeSpan  = regexp.MustCompile("`([^`]+)`")
	separator = regexp.MustCompile(`^\|[\s\-:|]+\|$`)
)

// docRow is one row of the table: its line number and its cells' code spans.
type docRow struct {
	line              int
	operation, action map[string]bool
}

// docRows reads the rows of the table in docSection of docs/LOCAL.md. A row
// is a line starting with "|", split into cells on every "|" not escaped
// as "\|"; the table's header (the line before a separator line) and the
// separator are left out.
func docRows(t *testing.T) []docRow {
	t.Helper()
	b, err := os.ReadFile("../../docs/LOCAL.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+docSection+"\n")
	if !ok {
		t.Fatalf("docs/LOCAL.md has no section %q", docSection)
	}
	heading := strings.Count(string(b), "\n") - strings.Count(rest, "\n") // the heading's line number
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	lines := strings.Split(rest, "\n")
	spans := func(cell string) map[string]bool {
		m := map[string]bool{}
		for _, s := range codeSpan.FindAllStringSubmatch(cell, -1) {
			m[strings.ReplaceAll(s[1], `\|`, "|")] = true
		}
		return m
	}
	var rows []docRow
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "|") || separator.MatchString(l) {
			continue
		}
		if i+1 < len(lines) && separator.MatchString(strings.TrimSpace(lines[i+1])) {
			continue // the header
		}
		cells := strings.Split(strings.ReplaceAll(strings.Trim(l, "|"), `\|`, "\x00"), "|")
		if len(cells) < 4 {
			t.Errorf("docs/LOCAL.md:%d: a row of %q needs 4 cells (service, operation, IAM action, not modelled): %s", heading+1+i, docSection, l)
			continue
		}
		for j := range cells {
			cells[j] = strings.ReplaceAll(cells[j], "\x00", `\|`)
		}
		rows = append(rows, docRow{line: heading + 1 + i, operation: spans(cells[1]), action: spans(cells[2])})
	}
	return rows
}

// TestLocalDocListsEveryRoute keeps the table of docs/LOCAL.md's section
// "Every emulated operation" complete: every route of Routes() must have a
// row, and every row must describe a route. The matching rule: a row lists
// a route when its operation cell (the second) has a code span equal to
// the route's docKey and its IAM action cell (the third) a code span equal
// to the route's Action. Other code spans in those cells (the AWS API name
// of a REST request, a second action) are free. Several rows may list one
// route (S3's PUT of an object is PutObject, UploadPart and CopyObject).
func TestLocalDocListsEveryRoute(t *testing.T) {
	rows := docRows(t)
	if len(rows) == 0 {
		t.Fatalf("no rows in the table of %q", docSection)
	}
	used := make([]bool, len(rows))
	for _, r := range Routes() {
		key, listed := docKey(r), false
		for i, row := range rows {
			if row.operation[key] && row.action[r.Action] {
				listed, used[i] = true, true
			}
		}
		if !listed {
			t.Errorf("docs/LOCAL.md %q: no row for route %s (operation `%s`, IAM action `%s`)", docSection, r.Pattern(), key, r.Action)
		}
	}
	for i, row := range rows {
		if !used[i] {
			t.Errorf("docs/LOCAL.md:%d: the row names no route of iam.Routes() (operation and IAM action as code spans: %s)", row.line, keys(row.operation))
		}
	}
}

func keys(m map[string]bool) string {
	var out []string
	for k := range m {
		out = append(out, "`"+k+"`")
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
