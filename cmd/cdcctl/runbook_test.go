package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	sfnapi "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
	"github.com/healthlake-cdc/healthlake-cdc/local/sink"
	"github.com/healthlake-cdc/healthlake-cdc/local/stack"
)

const runbookPath = "../../docs/OPERATIONS.md"

// runbookCommands returns every line of the ```sh blocks of the runbook, in
// order and without duplicates. Every such line must be a cdcctl command:
// other commands (AWS CLI, queries) belong in ```text blocks, which the
// test does not run.
func runbookCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(runbookPath)
	if err != nil {
		t.Fatalf("read the runbook: %v", err)
	}
	var cmds []string
	seen := map[string]bool{}
	inSh, inOther := false, false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "```") && !inSh && !inOther:
			inSh = strings.TrimPrefix(line, "```") == "sh"
			inOther = !inSh
			continue
		case strings.HasPrefix(line, "```"):
			inSh, inOther = false, false
			continue
		}
		if !inSh || line == "" {
			continue
		}
		if !strings.HasPrefix(line, "cdcctl ") {
			t.Errorf("%s:%d: a ```sh line that is not a cdcctl command: %q (put other commands in ```text)", runbookPath, n, line)
			continue
		}
		if !seen[line] {
			seen[line] = true
			cmds = append(cmds, line)
		}
	}
	if inSh || inOther {
		t.Errorf("%s: an unclosed code block", runbookPath)
	}
	return cmds
}

// splitCommand splits a runbook line the way sh would for the forms the
// runbook uses — words, "double" and 'single' quotes — and replaces $NAME
// and ${NAME} (outside single quotes) from vars. An unknown placeholder is
// an error: the scenario must fill every one.
func splitCommand(line string, vars map[string]string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inWord := false
	quote := rune(0)
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case quote == '\'' && c != '\'':
			cur.WriteRune(c)
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '\'' || c == '"'):
			quote, inWord = c, true
		case c == '$':
			j := i + 1
			braced := j < len(rs) && rs[j] == '{'
			if braced {
				j++
			}
			k := j
			for k < len(rs) && (rs[k] == '_' || rs[k] >= 'A' && rs[k] <= 'Z' || rs[k] >= '0' && rs[k] <= '9') {
				k++
			}
			name := string(rs[j:k])
			if name == "" {
				return nil, fmt.Errorf("a bare $ in %q", line)
			}
			if braced {
				if k >= len(rs) || rs[k] != '}' {
					return nil, fmt.Errorf("unclosed ${ in %q", line)
				}
				k++
			}
			v, ok := vars[name]
			if !ok {
				return nil, fmt.Errorf("placeholder $%s of %q is not filled by the scenario", name, line)
			}
			cur.WriteString(v)
			inWord = true
			i = k - 1
		case quote == 0 && !inWord && c == '#':
			i = len(rs) // a shell comment runs to the end of the line
		case quote == 0 && (c == ' ' || c == '\t'):
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed quote in %q", line)
	}
	if inWord {
		args = append(args, cur.String())
	}
	return args, nil
}

func TestSplitCommand(t *testing.T) {
	got, err := splitCommand(`cdcctl replay --since $SINCE --reason "$REASON and more" '$X' ${Y}z`,
		map[string]string{"SINCE": "2026-01-01T00:00:00Z", "REASON": "two words", "Y": "y"})
	want := []string{"cdcctl", "replay", "--since", "2026-01-01T00:00:00Z", "--reason", "two words and more", "$X", "yz"}
	if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("split = %q, %v; want %q", got, err, want)
	}
	if _, err := splitCommand("cdcctl quarantine --run $RUN_ID", nil); err == nil || !strings.Contains(err.Error(), "RUN_ID") {
		t.Fatalf("an unfilled placeholder: %v", err)
	}
}

// runbook runs the runbook's commands against a local stack and records
// which ones ran.
type runbook struct {
	st       *stack.Stack
	commands map[string]bool // runbook line → ran
	order    []string
}

// vars fills the runbook's placeholders for one command.
type vars map[string]string

// run runs one runbook line (it must be on the page, verbatim) with the
// placeholders filled and checks its exit code.
func (rb *runbook) run(t *testing.T, line string, v vars, wantCode int) (string, string) {
	t.Helper()
	if _, ok := rb.commands[line]; !ok {
		t.Fatalf("the scenario runs %q, which is not in %s: keep the test and the runbook in step", line, runbookPath)
	}
	rb.commands[line] = true
	args, err := splitCommand(line, v)
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), args[1:], strings.NewReader(""), &out, &errb)
	if code != wantCode {
		t.Fatalf("%s (as %q): exit %d, want %d\nstdout:\n%s\nstderr:\n%s", line, args, code, wantCode, out.String(), errb.String())
	}
	return out.String(), errb.String()
}

// crashes makes chosen functions crash before their handler runs, so their
// queue messages go to the dead-letter queue (local/lambdas.Faults).
type crashes struct {
	mu  sync.Mutex
	fns map[string]bool
}

func (c *crashes) set(fns ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fns = map[string]bool{}
	for _, f := range fns {
		c.fns[f] = true
	}
}

func (c *crashes) CrashBefore(function string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fns[function]
}

func (c *crashes) CrashAfter(string) bool { return false }

// waitFor polls cond until it holds; the test's deadline bounds it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var startedRE = regexp.MustCompile(`started (\S+) at`)

func TestRunbookCommandsWorkAsDocumented(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole local pipeline")
	}
	cmds := runbookCommands(t)
	if len(cmds) < 10 {
		t.Fatalf("the runbook has %d cdcctl commands; the parser is probably wrong", len(cmds))
	}
	ctx := context.Background()
	faults := &crashes{}
	st, err := stack.Start(ctx, stack.Options{
		Addr:              "127.0.0.1:0",
		Name:              fmt.Sprintf("rb%d", time.Now().UnixNano()%1e9),
		SampleSize:        8,
		Every:             time.Hour,
		VisibilityTimeout: time.Second,
		RecheckDelay:      time.Second,
		MaxReceiveCount:   2,
		RecordEvents:      true,
		// The runbook parks re-check messages; HealthLake's job events would
		// park beside them at their own pace.
		NoJobEventRule: true,
	})
	if err != nil {
		t.Fatalf("start the local stack: %v", err)
	}
	t.Cleanup(st.Close)
	st.Lambdas.SetFaults(faults)
	setRunbookEnv(t, st)
	rb := &runbook{st: st, commands: map[string]bool{}, order: cmds}
	for _, c := range cmds {
		rb.commands[c] = false
	}
	sfnc := sfnapi.NewFromConfig(st.Config)
	store, err := runlock.New(dynamodb.NewFromConfig(st.Config), runlock.Config{Table: st.Res.Table})
	if err != nil {
		t.Fatal(err)
	}
	status := func() runlock.Status {
		t.Helper()
		s, err := store.Status(ctx, 50)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	wait := func(arn string, before int) report.Run {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		w, err := st.Wait(wctx, arn, time.Now(), before)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	// cdcctlRun is the runbook's "start a run now": it returns the window
	// the started execution ran.
	cdcctlRun := func() (report.Run, []string) {
		t.Helper()
		before := st.Delivered.Len()
		out, _ := rb.run(t, "cdcctl run", nil, exitOK)
		m := startedRE.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("cdcctl run printed no execution ARN:\n%s", out)
		}
		w := wait(m[1], before)
		return w, eventIDs(st.Delivered.Since(before))
	}
	movedToDLQ := func(fn string) int64 { return st.MappingStats()[fn].MovedToDLQ }
	// parked starts an execution whose queue message ends in fn's DLQ while
	// the execution keeps waiting for its task token.
	parked := func(fn string) string {
		t.Helper()
		faults.set(fn)
		base := movedToDLQ(fn)
		arn, err := st.StartExecution(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a message of "+fn+" in its dead-letter queue", func() bool { return movedToDLQ(fn) > base })
		return arn
	}
	stop := func(arn string) {
		t.Helper()
		if _, err := sfnc.StopExecution(ctx, &sfnapi.StopExecutionInput{ExecutionArn: aws.String(arn), Error: aws.String("Operator")}); err != nil {
			t.Fatal(err)
		}
		if w := wait(arn, st.Delivered.Len()); w.Status != "ABORTED" {
			t.Fatalf("stopped execution ended %s", w.Status)
		}
	}

	// --- Start a run now -------------------------------------------------------
	out, _ := rb.run(t, "cdcctl status", nil, exitOK)
	if !strings.Contains(out, "none yet") {
		t.Fatalf("status of a fresh stack:\n%s", out)
	}
	w1, ids1 := cdcctlRun()
	if w1.Outcome != report.OutcomeCommitted || len(ids1) != st.Seeded() || w1.Window == nil {
		t.Fatalf("first run: %+v with %d events for %d resources", w1, len(ids1), st.Seeded())
	}
	out, _ = rb.run(t, "cdcctl status", nil, exitOK)
	if !strings.Contains(out, w1.RunID+" SUCCEEDED") || !strings.Contains(out, "lock         free") {
		t.Fatalf("status after a run:\n%s", out)
	}

	// --- Replay a period: the next window re-emits the same eventIds ---------
	out, _ = rb.run(t, "cdcctl status --last 20", nil, exitOK)
	if !strings.Contains(out, w1.Window.Since) {
		t.Fatalf("status does not show the window to replay from:\n%s", out)
	}
	rb.run(t, `cdcctl replay --since $SINCE --reason "$REASON"`, vars{"SINCE": w1.Window.Since, "REASON": "runbook test: consumer outage"}, exitOK)
	if cp := status().Checkpoint; envelope.FormatTime(cp) != w1.Window.Since {
		t.Fatalf("replay left the checkpoint at %s, want %s", envelope.FormatTime(cp), w1.Window.Since)
	}
	w2, ids2 := cdcctlRun()
	if w2.Outcome != report.OutcomeCommitted || strings.Join(ids2, " ") != strings.Join(ids1, " ") {
		t.Fatalf("the replayed window delivered %v, want the first window's eventIds %v", ids2, ids1)
	}

	// --- Re-run quarantined records after a fix --------------------------------
	quarantineSince := envelope.FormatTime(time.Now().Add(-time.Second).Truncate(time.Second))
	const secret = "Zqphimarker"
	bad := []byte(`{"resourceType":"Patient","id":"rb-bad","name":[{"family":"` + secret + `"}],"gender":"female","gender":"male"}`)
	if _, err := st.PutResource(ctx, "Patient", "rb-bad", bad); err != nil {
		t.Fatal(err)
	}
	goodV, err := st.PutResource(ctx, "Patient", "rb-good", []byte(`{"resourceType":"Patient","id":"rb-good","gender":"male"}`))
	if err != nil {
		t.Fatal(err)
	}
	w3, ids3 := cdcctlRun()
	if w3.Outcome != report.OutcomeCommitted || strings.Join(ids3, " ") != "Patient/rb-good/_history/"+goodV {
		t.Fatalf("window with a bad line: %+v delivered %v", w3, ids3)
	}
	if h := status().History[0]; h.RunID != w3.RunID || h.Counts.Quarantined != 1 {
		t.Fatalf("history of the window with a bad line: %+v", h)
	}
	out, _ = rb.run(t, "cdcctl quarantine", nil, exitOK)
	for _, want := range []string{w3.RunID, "duplicate top-level key", "Patient"} {
		if !strings.Contains(out, want) {
			t.Errorf("cdcctl quarantine lacks %q:\n%s", want, out)
		}
	}
	out, _ = rb.run(t, "cdcctl quarantine --run $RUN_ID", vars{"RUN_ID": w3.RunID}, exitOK)
	if !strings.Contains(out, w3.RunID) || !strings.Contains(out, "cdcctl replay --since "+w3.Window.Since) {
		t.Errorf("cdcctl quarantine --run does not show the run and its window:\n%s", out)
	}
	jsonOut, _ := rb.run(t, "cdcctl quarantine --since $SINCE --json", vars{"SINCE": quarantineSince}, exitOK)
	var qv quarantineView
	decodeJSON(t, jsonOut, &qv)
	if len(qv.Records) != 1 || qv.Records[0].RunID != w3.RunID || qv.Records[0].Line < 1 || !strings.Contains(qv.Records[0].Reason, "duplicate") ||
		len(qv.Runs) != 1 || qv.Runs[0].WindowSince != w3.Window.Since {
		t.Fatalf("quarantine --json = %+v", qv)
	}
	for _, o := range []string{out, jsonOut} {
		if strings.Contains(o, secret) || strings.Contains(o, `"gender"`) {
			t.Fatalf("cdcctl quarantine printed the quarantined line:\n%s", o)
		}
	}
	// The fix (here: the corrected resource), then replay the run's window.
	fixedV, err := st.PutResource(ctx, "Patient", "rb-bad", []byte(`{"resourceType":"Patient","id":"rb-bad","gender":"female"}`))
	if err != nil {
		t.Fatal(err)
	}
	rb.run(t, `cdcctl replay --since $WINDOW_SINCE --reason "$REASON"`, vars{"WINDOW_SINCE": w3.Window.Since, "REASON": "runbook test: fixed bad line"}, exitOK)
	w4, ids4 := cdcctlRun()
	want4 := []string{"Patient/rb-bad/_history/" + fixedV, "Patient/rb-good/_history/" + goodV}
	sort.Strings(want4)
	if w4.Outcome != report.OutcomeCommitted || w4.Window.Since != w3.Window.Since || strings.Join(ids4, " ") != strings.Join(want4, " ") {
		t.Fatalf("replay after the fix: %+v delivered %v, want %v", w4, ids4, want4)
	}
	out, _ = rb.run(t, "cdcctl quarantine --run $RUN_ID", vars{"RUN_ID": w4.RunID}, exitOK)
	if !strings.Contains(out, "no quarantined records") {
		t.Fatalf("the re-run still quarantined lines:\n%s", out)
	}

	// --- StartDeadLetterAlarm while the execution waits: redrive -------------
	arn := parked(stack.FnStartExport)
	token := peekToken(t, st, st.Res.StartDLQURL)
	out, _ = rb.run(t, "cdcctl dlq --queue start", nil, exitOK)
	for _, want := range []string{executionName(arn), "RUNNING", "--redrive", "start"} {
		if !strings.Contains(out, want) {
			t.Errorf("dlq listing lacks %q:\n%s", want, out)
		}
	}
	if token == "" || strings.Contains(out, token) || strings.Contains(out, token[:24]) {
		t.Fatalf("dlq listing shows the task token:\n%s", out)
	}
	faults.set()
	before := st.Delivered.Len()
	out, _ = rb.run(t, "cdcctl dlq --queue start --redrive", nil, exitOK)
	if !strings.Contains(out, "redriven 1") {
		t.Fatalf("redrive:\n%s", out)
	}
	if w := wait(arn, before); w.Outcome != report.OutcomeCommitted {
		t.Fatalf("the redriven run ended %+v", w)
	}
	if n := dlqDepth(t, st, st.Res.StartDLQURL); n != 0 {
		t.Fatalf("%d messages left in the start DLQ after the redrive", n)
	}

	// --- RecheckDeadLetterAlarm while the execution waits: redrive -----------
	arn = parked(stack.FnCheckExport)
	out, _ = rb.run(t, "cdcctl dlq --queue recheck", nil, exitOK)
	var job string
	if job = status().ExportJob.JobID; job == "" || !strings.Contains(out, job) || !strings.Contains(out, "recheck") || !strings.Contains(out, "RUNNING") {
		t.Fatalf("recheck DLQ listing lacks the job %q:\n%s", job, out)
	}
	faults.set()
	before = st.Delivered.Len()
	out, _ = rb.run(t, "cdcctl dlq --queue recheck --redrive", nil, exitOK)
	if !strings.Contains(out, "redriven 1") {
		t.Fatalf("recheck redrive:\n%s", out)
	}
	if w := wait(arn, before); w.Outcome != report.OutcomeCommitted {
		t.Fatalf("the redriven re-check ended %+v", w)
	}

	// --- The run already ended: a redrive is skipped, purge; stale lock ------
	arn = parked(stack.FnStartExport)
	stop(arn)
	faults.set()
	out, _ = rb.run(t, "cdcctl dlq --queue start --redrive", nil, exitOK)
	if !strings.Contains(out, "skipped 1") || !strings.Contains(out, "ABORTED") {
		t.Fatalf("redrive of an ended run's message:\n%s", out)
	}
	out, _ = rb.run(t, "cdcctl dlq --queue start --purge", nil, exitOK)
	if !strings.Contains(out, "purged 1") || dlqDepth(t, st, st.Res.StartDLQURL) != 0 {
		t.Fatalf("purge:\n%s", out)
	}
	checkpoint := status().Checkpoint
	out, _ = rb.run(t, "cdcctl status", nil, exitOK)
	if !strings.Contains(out, "STALE") {
		t.Fatalf("status does not show the stale lock:\n%s", out)
	}
	out, _ = rb.run(t, "cdcctl unlock", nil, exitOK)
	if s := status(); !strings.Contains(out, "released") || s.Lock != nil || !s.Checkpoint.Equal(checkpoint) || s.History[0].Outcome != runlock.OutcomeAbandoned {
		t.Fatalf("unlock of a stale lock: %+v\n%s", s, out)
	}

	arn = parked(stack.FnCheckExport)
	stop(arn)
	faults.set()
	out, _ = rb.run(t, "cdcctl dlq --queue recheck --purge", nil, exitOK)
	if !strings.Contains(out, "purged 1") || dlqDepth(t, st, st.Res.RecheckDLQURL) != 0 {
		t.Fatalf("recheck purge:\n%s", out)
	}
	rb.run(t, "cdcctl unlock", nil, exitOK)

	// --- A live owner: unlock refuses, --force releases; the owner then fails
	arn = parked(stack.FnStartExport)
	_, stderr := rb.run(t, "cdcctl unlock", nil, exitFailure)
	if !strings.Contains(stderr, "--force") || status().Lock == nil {
		t.Fatalf("unlock of a running owner: %s", stderr)
	}
	out, _ = rb.run(t, "cdcctl unlock --force", nil, exitOK)
	if !strings.Contains(out, "released") || status().Lock != nil {
		t.Fatalf("unlock --force:\n%s", out)
	}
	faults.set()
	rb.run(t, "cdcctl dlq --queue start --redrive", nil, exitOK)
	if w := wait(arn, st.Delivered.Len()); w.Status != "FAILED" {
		t.Fatalf("the forced-out run ended %+v, want FAILED (its commit is refused)", w)
	}
	// ExecutionFailedAlarm's diagnosis shows the failed run and its reason.
	jsonOut, _ = rb.run(t, "cdcctl status --json", nil, exitOK)
	var sv statusView
	decodeJSON(t, jsonOut, &sv)
	if sv.Lock != nil || sv.Checkpoint != envelope.FormatTime(checkpoint) || len(sv.History) == 0 || sv.History[0].RunID != executionName(arn) {
		t.Fatalf("status --json after the failed run: %+v", sv)
	}
	// CheckpointLagAlarm: the next run retries the window and moves on
	// (delivering an Observation the reconciliation below finds erased).
	if _, err := st.PutResource(ctx, "Observation", "rb-obs", []byte(`{"resourceType":"Observation","id":"rb-obs","status":"final","code":{"text":"x"}}`)); err != nil {
		t.Fatal(err)
	}
	w5, _ := cdcctlRun()
	if w5.Outcome != report.OutcomeCommitted || w5.Window.Since != envelope.FormatTime(checkpoint) || !status().Checkpoint.After(checkpoint) {
		t.Fatalf("the run after the failure: %+v", w5)
	}

	// ExportErrorsAlarm: HealthLake ends an export COMPLETED_WITH_ERRORS. With
	// the lenient default the run publishes the good files, quarantines the
	// error entry and commits; status shows it, quarantine lists the entry.
	if _, err := st.PutResource(ctx, "Patient", "rb-export-errors", []byte(`{"resourceType":"Patient","id":"rb-export-errors","gender":"other"}`)); err != nil {
		t.Fatal(err)
	}
	st.HealthLake.CompleteNextJobWithErrorsLosing("runbook test: one resource failed to export", 1)
	w6, _ := cdcctlRun()
	if w6.Outcome != report.OutcomeCommitted {
		t.Fatalf("a run whose export completed with errors: %+v, want committed (lenient)", w6)
	}
	out, _ = rb.run(t, "cdcctl status                      # the run, its job id, completedWithErrors / the failure's cause", nil, exitOK)
	if !strings.Contains(out, w6.RunID) {
		t.Errorf("status does not show the run %s:\n%s", w6.RunID, out)
	}
	out, _ = rb.run(t, "cdcctl quarantine --run $RUN_ID    # lenient: one record per error entry (file, line, reason)", vars{"RUN_ID": w6.RunID}, exitOK)
	if !strings.Contains(out, "OperationOutcome") || strings.Contains(out, "rb-export-errors") {
		t.Errorf("quarantine of the export's error entry (file named, resource id never shown):\n%s", out)
	}

	// --- Reconcile now; ReconcileRepairs ---------------------------------------
	// A delivered resource is erased ($erase: no history left, so no window
	// can see it): the reconciliation publishes its delete. The version the
	// lenient export above lost (quarantined, never delivered) is
	// re-published as a repair. (Another type than the repair's: in one type
	// and hour a missing and an extra resource count the same —
	// docs/RECONCILE.md, "What it cannot prove".)
	resp, err := st.FHIR(ctx, "POST", "Observation/rb-obs/$erase", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	time.Sleep(5 * time.Millisecond)
	before = st.Delivered.Len()
	out, _ = rb.run(t, "cdcctl reconcile --wait", nil, exitOK)
	for _, want := range []string{"started ", "ended SUCCEEDED", "deletes              1 (hard deletes 1)", "repairs              1", "unconfirmed          0"} {
		if !strings.Contains(out, want) {
			t.Errorf("cdcctl reconcile --wait lacks %q:\n%s", want, out)
		}
	}
	var deletes, repairs []string
	for _, d := range st.Delivered.Since(before) {
		switch {
		case strings.Contains(string(d.Event.Detail), `"operation":"delete"`):
			deletes = append(deletes, d.EventID)
		default:
			repairs = append(repairs, d.EventID)
		}
	}
	if len(deletes) != 1 || !strings.HasPrefix(deletes[0], "Observation/rb-obs/_history/") ||
		len(repairs) != 1 || !strings.HasPrefix(repairs[0], "Patient/rb-export-errors/_history/") {
		t.Errorf("the reconciliation delivered deletes %v and repairs %v", deletes, repairs)
	}
	out, _ = rb.run(t, "cdcctl reconcile status", nil, exitOK)
	if !strings.Contains(out, "repairs              1") || !strings.Contains(out, "last reconciliation  reconcile-") {
		t.Errorf("cdcctl reconcile status:\n%s", out)
	}
	out, _ = rb.run(t, "cdcctl reconcile status            # repairs, deletes, unconfirmed of the last reconciliation", nil, exitOK)
	if !strings.Contains(out, "ReconcileRepairs") {
		t.Errorf("reconcile status after a repair does not point at the runbook entry:\n%s", out)
	}

	// "Start a run now", waiting for it: how the run ended, from its record.
	out, _ = rb.run(t, "cdcctl run --wait", nil, exitOK)
	if !regexp.MustCompile(`(?m)^run manual-\S+ (SUCCEEDED|EMPTY): window \(`).MatchString(out) {
		t.Errorf("cdcctl run --wait does not say how the run ended:\n%s", out)
	}

	// "The pipeline's data store changed": the RUN record belongs to another
	// data store, so the execution fails before taking the lock, status
	// says why, and the replay that names the new store lets runs go on.
	bindRecordTo(t, st, "retired-store")
	out, _ = rb.run(t, "cdcctl run --wait", nil, exitFailure)
	if !strings.Contains(out, "error DatastoreChangedError") {
		t.Errorf("cdcctl run --wait for another data store does not name the error:\n%s", out)
	}
	out, _ = rb.run(t, "cdcctl status", nil, exitOK)
	if !strings.Contains(out, "WARNING      the RUN record's checkpoint belongs to HealthLake data store retired-store") {
		t.Errorf("cdcctl status does not say the data store changed:\n%s", out)
	}
	rb.run(t, `cdcctl replay --since $SINCE --datastore $DATASTORE_ID --reason "$REASON"`, vars{"SINCE": envelope.FormatTime(time.Now()),
		"DATASTORE_ID": st.Res.DatastoreID, "REASON": "runbook test: a new data store"}, exitOK)
	rb.run(t, "cdcctl run --wait", nil, exitOK)

	var missing []string
	for _, c := range rb.order {
		if !rb.commands[c] {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("runbook commands without a scenario in this test:\n  %s", strings.Join(missing, "\n  "))
	}
}

func eventIDs(ds []sink.Delivery) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.EventID)
	}
	sort.Strings(out)
	return out
}

// setRunbookEnv points cdcctl at the stack the way an operator's shell would.
func setRunbookEnv(t *testing.T, st *stack.Stack) {
	t.Helper()
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_PROFILE", "")
	for _, kv := range st.CLIEnv() {
		t.Setenv(kv[0], kv[1])
	}
	t.Setenv(envStartQueueURL, st.Res.StartQueueURL)
	t.Setenv(envStartDLQURL, st.Res.StartDLQURL)
	t.Setenv(envRecheckQueueURL, st.Res.RecheckQueueURL)
	t.Setenv(envRecheckDLQURL, st.Res.RecheckDLQURL)
	t.Setenv(envActor, "runbook-test")
}

// peekToken reads the task token of the first message of a DLQ, hiding
// the message for one second only.
func peekToken(t *testing.T, st *stack.Stack, url string) string {
	t.Helper()
	out, err := sqs.NewFromConfig(st.Config).ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: 1, VisibilityTimeout: 1, WaitTimeSeconds: 2,
	})
	if err != nil || len(out.Messages) == 0 {
		t.Fatalf("peek at %s: %v (%d messages)", url, err, len(out.Messages))
	}
	var b dlqBody
	if err := json.Unmarshal([]byte(aws.ToString(out.Messages[0].Body)), &b); err != nil || len(b.TaskToken) < 24 {
		t.Fatalf("DLQ message without a task token: %v", err)
	}
	return b.TaskToken
}

// dlqDepth counts the messages of a queue, visible or not.
func dlqDepth(t *testing.T, st *stack.Stack, url string) int {
	t.Helper()
	out, err := sqs.NewFromConfig(st.Config).GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"},
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"} {
		var v int
		_, _ = fmt.Sscan(out.Attributes[k], &v)
		n += v
	}
	return n
}
