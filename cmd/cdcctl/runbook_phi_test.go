package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/healthlake-cdc/healthlake-cdc/internal/logging/loggingtest"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
	"github.com/healthlake-cdc/healthlake-cdc/local/stack"
)

// phiValue is one value of the sample that must never leave the events.
type phiValue struct {
	Kind  string // name, birthDate, address, identifier, telecom
	Value string
}

// collectPHI reads the Patient, Practitioner, Organization and Location
// lines of dir: names (given, family, prefix; the name of an organization or
// location), birth dates, address lines, cities and postal codes, identifier
// values and telecom values.
func collectPHI(t *testing.T, dir string) []phiValue {
	t.Helper()
	seen := map[string]bool{}
	var out []phiValue
	add := func(kind string, v any) {
		s, ok := v.(string)
		s = strings.TrimSpace(s)
		if !ok || len(s) < 3 || seen[s] {
			return
		}
		seen[s] = true
		out = append(out, phiValue{kind, s})
	}
	strs := func(kind string, v any) {
		if a, ok := v.([]any); ok {
			for _, x := range a {
				add(kind, x)
			}
		}
	}
	objs := func(v any) []map[string]any {
		switch x := v.(type) {
		case map[string]any:
			return []map[string]any{x}
		case []any:
			var ms []map[string]any
			for _, e := range x {
				if m, ok := e.(map[string]any); ok {
					ms = append(ms, m)
				}
			}
			return ms
		}
		return nil
	}
	for _, typ := range []string{"Patient", "Practitioner", "Organization", "Location"} {
		files, _ := filepath.Glob(filepath.Join(dir, typ+".*ndjson"))
		if len(files) == 0 {
			t.Fatalf("no %s file in %s", typ, dir)
		}
		for _, path := range files {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
			for sc.Scan() {
				var r map[string]any
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				if s, ok := r["name"].(string); ok {
					add("name", s)
				}
				for _, n := range objs(r["name"]) {
					add("name", n["family"])
					strs("name", n["given"])
					strs("name", n["prefix"])
				}
				add("birthDate", r["birthDate"])
				for _, a := range objs(r["address"]) {
					strs("address", a["line"])
					add("address", a["city"])
					add("address", a["postalCode"])
				}
				for _, id := range objs(r["identifier"]) {
					add("identifier", id["value"])
				}
				for _, tc := range objs(r["telecom"]) {
					add("telecom", tc["value"])
				}
			}
			_ = f.Close()
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

var numericRE = regexp.MustCompile(`^[0-9.\-]+$`)

// findPHI returns the values that occur in text as a whole token: not
// inside a longer word or number, so that a postal code does not match
// the digits of a duration.
func findPHI(text string, values []phiValue) []phiValue {
	var found []phiValue
	for _, v := range values {
		numeric := numericRE.MatchString(v.Value)
		inToken := func(c byte) bool {
			return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || numeric && c == '.'
		}
		for from := 0; ; {
			i := strings.Index(text[from:], v.Value)
			if i < 0 {
				break
			}
			i += from
			end := i + len(v.Value)
			if (i == 0 || !inToken(text[i-1])) && (end == len(text) || !inToken(text[end])) {
				found = append(found, v)
				break
			}
			from = i + 1
		}
	}
	return found
}

func TestFindPHIMatchesWholeTokensOnly(t *testing.T) {
	vals := []phiValue{{"address", "02134"}, {"name", "Jacinto644"}, {"birthDate", "1985-03-12"}}
	got := findPHI(`{"durationMs":1.02134,"n":102134} "Jacinto6440" born 1985-03-12 in`, vals)
	if len(got) != 1 || got[0].Value != "1985-03-12" {
		t.Fatalf("found %v", got)
	}
	if got := findPHI(`{"family":"Jacinto644","zip":"02134"}`, vals); len(got) != 2 {
		t.Fatalf("found %v", got)
	}
}

// captureProcessOutput redirects the process's stdout and stderr, the log
// package and slog's default logger until the returned function is called,
// which gives back what was written there: output of any component that
// does not log through the stack's logger.
func captureProcessOutput(t *testing.T) func() string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	oldOut, oldErr := os.Stdout, os.Stderr
	oldLog := log.Writer()
	oldSlog := slog.Default()
	os.Stdout, os.Stderr = w, w
	log.SetOutput(w)
	slog.SetDefault(slog.New(slog.NewJSONHandler(w, nil)))
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(&buf, r)
		close(done)
	}()
	var once sync.Once
	restore := func() string {
		once.Do(func() {
			os.Stdout, os.Stderr = oldOut, oldErr
			log.SetOutput(oldLog)
			slog.SetDefault(oldSlog)
			_ = w.Close()
			<-done
			_ = r.Close()
		})
		return buf.String()
	}
	t.Cleanup(func() { restore() })
	return restore
}

// seedCopy links the sample's resource files (not its export log) into a
// directory of their own.
func seedCopy(t *testing.T, dir string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.ndjson"))
	out := t.TempDir()
	resourceFile := regexp.MustCompile(`^[A-Z][A-Za-z]+\.[0-9]+\.ndjson$`)
	n := 0
	for _, f := range files {
		if !resourceFile.MatchString(filepath.Base(f)) {
			continue
		}
		if err := os.Symlink(f, filepath.Join(out, filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		t.Skipf("no resource files in %s", dir)
	}
	return out
}

func TestNoPHIInLogsMetricsHistoryOrStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole local pipeline over the Synthea sample")
	}
	dir := syntheaDir // inspect_test.go; CDC_SYNTHEA_DIR overrides it
	if d := os.Getenv("CDC_SYNTHEA_DIR"); d != "" {
		dir = d
	}
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("Synthea sample not present: %v", err)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	phi := collectPHI(t, dir)
	kinds := map[string]int{}
	for _, v := range phi {
		kinds[v.Kind]++
	}
	for _, k := range []string{"name", "birthDate", "address", "identifier", "telecom"} {
		if kinds[k] == 0 {
			t.Fatalf("the sample yielded no %s values: %v", k, kinds)
		}
	}
	seed := seedCopy(t, dir)

	logs, metricLines := &loggingtest.Buffer{}, &loggingtest.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	stray := captureProcessOutput(t)
	ctx := context.Background()
	st, err := stack.Start(ctx, stack.Options{
		Addr:          "127.0.0.1:0",
		Name:          fmt.Sprintf("phi%d", time.Now().UnixNano()%1e9),
		SeedDir:       seed,
		Every:         time.Hour,
		RecheckDelay:  time.Second,
		RecordEvents:  true,
		Logger:        logger,
		MetricsOutput: metricLines,
	})
	if err != nil {
		stray()
		t.Fatalf("start the local stack: %v", err)
	}
	defer st.Close()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	w, err := st.RunOnce(rctx)
	cancel()
	strayOut := stray()
	if err != nil {
		t.Fatalf("run a window: %v", err)
	}

	// Not vacuous: the window published one event per resource, the
	// components logged, and the events do carry the sample's PHI.
	if w.Outcome != report.OutcomeCommitted {
		t.Fatalf("window %+v", w)
	}
	if n := len(st.Delivered.EventIDs()); n != st.Seeded() || n < 1000 {
		t.Fatalf("%d distinct events for %d seeded resources", n, st.Seeded())
	}
	var patients bytes.Buffer
	for _, d := range st.Delivered.Deliveries() {
		if strings.HasPrefix(d.EventID, "Patient/") {
			patients.Write(d.Event.Detail)
			patients.WriteByte('\n')
		}
	}
	control := findPHI(patients.String(), phi)
	controlKinds := map[string]bool{}
	for _, v := range control {
		controlKinds[v.Kind] = true
	}
	for _, k := range []string{"name", "birthDate", "address", "identifier", "telecom"} {
		if !controlKinds[k] {
			t.Errorf("control: the scan finds no %s value in the delivered Patient events; it would not find one elsewhere either", k)
		}
	}

	logText := logs.String()
	logLines := strings.Count(logText, "\n")
	if logLines < 5 {
		t.Fatalf("only %d log lines captured: the logger is not threaded to the components\n%s", logLines, logText)
	}
	// Structured JSON; the run's lines carry the run context.
	runLines, jobLines := 0, 0
	for i, line := range strings.Split(strings.TrimSpace(logText), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("log line %d is not JSON: %v", i+1, err)
			continue
		}
		if m["runId"] == nil {
			continue // the stack's own lines (seeding), outside any run
		}
		runLines++
		if m["runId"] != w.RunID || m["executionId"] != w.ExecutionARN || m["window"] == nil {
			t.Errorf("log line %d (%v) lacks the run context: executionId %v, runId %v, window %v", i+1, m["msg"], m["executionId"], m["runId"], m["window"])
		}
		if m["jobId"] != nil {
			jobLines++
		}
	}
	if runLines < 4 || jobLines < 2 {
		t.Errorf("%d log lines of the run, %d with the export job id", runLines, jobLines)
	}
	if os.Getenv("CDC_PHI_TEST_DUMP") != "" {
		t.Logf("log lines:\n%s\nstray:\n%s", logText, strayOut)
	}
	metricText := metricLines.String()
	for _, m := range []string{"CheckpointLagSeconds", "EventsPublished", "ExportWaitSeconds"} {
		if !strings.Contains(metricText, `"`+m+`"`) {
			t.Errorf("no %s EMF line captured:\n%.2000s", m, metricText)
		}
	}

	// Execution history of every execution the Step Functions emulator
	// kept (the parent and the Distributed Map children).
	var hist bytes.Buffer
	execs := st.SFN.Executions("")
	if len(execs) < 2 {
		t.Fatalf("%d executions kept; want the run and its Map children", len(execs))
	}
	events := 0
	for _, x := range execs {
		b, _ := json.Marshal(x)
		hist.Write(b)
		h, err := st.SFN.History(x.ARN)
		if err != nil {
			t.Fatal(err)
		}
		events += len(h)
		b, _ = json.Marshal(h)
		hist.Write(b)
		hist.WriteByte('\n')
	}
	if events < 10 {
		t.Fatalf("only %d history events", events)
	}

	// Every item of the run table: RUN state, run history, export ledger.
	var items bytes.Buffer
	db := dynamodb.NewFromConfig(st.Config)
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(st.Res.Table)})
	nItems := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		nItems += len(page.Items)
		b, _ := json.Marshal(page.Items)
		items.Write(b)
	}
	if nItems < 3 {
		t.Fatalf("only %d items in the run table", nItems)
	}

	// The cdc-local report.
	rep, _ := json.Marshal(st.Report.Snapshot())

	// What an operator sees.
	setRunbookEnv(t, st)
	var statusOut bytes.Buffer
	for _, args := range [][]string{{"status"}, {"status", "--json"}, {"quarantine"}, {"dlq", "--queue", "start"}} {
		var out, errb bytes.Buffer
		if code := run(ctx, args, strings.NewReader(""), &out, &errb); code != exitOK {
			t.Fatalf("cdcctl %v: exit %d: %s", args, code, errb.String())
		}
		statusOut.Write(out.Bytes())
		statusOut.Write(errb.Bytes())
	}
	if !strings.Contains(statusOut.String(), w.RunID) {
		t.Fatalf("cdcctl status does not show the run:\n%s", statusOut.String())
	}

	for _, c := range []struct{ name, text string }{
		{"the log lines", logText},
		{"the EMF metric lines", metricText},
		{"stdout/stderr and the default loggers", strayOut},
		{"the execution history", hist.String()},
		{"the run table", items.String()},
		{"cdcctl status/quarantine/dlq", statusOut.String()},
		{"the cdc-local report", string(rep)},
	} {
		if found := findPHI(c.text, phi); len(found) > 0 {
			sort.Slice(found, func(i, j int) bool { return found[i].Kind < found[j].Kind })
			var kinds []string
			for _, f := range found {
				kinds = append(kinds, f.Kind)
			}
			// Name the kinds only: the values are PHI of the sample.
			t.Errorf("%s hold %d PHI value(s) of the sample (kinds %v)", c.name, len(found), kinds)
		}
	}
	if strings.TrimSpace(strayOut) != "" {
		t.Logf("output outside the stack's logger (%d bytes), first line: %.300s", len(strayOut), strings.SplitN(strayOut, "\n", 2)[0])
	}
	t.Logf("scanned %d log lines, %d metric bytes, %d executions (%d history events), %d table items against %d PHI values; control found %d in the Patient events",
		logLines, len(metricText), len(execs), events, nItems, len(phi), len(control))
}
