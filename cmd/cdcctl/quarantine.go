package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/prepare"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/s3read"
)

// envBucket names the artifact bucket (the stack output BucketName).
const envBucket = stackconfig.EnvBucket

// maxQuarantineLine bounds one record of a quarantine object: the raw part
// is capped by prepare-change, so a longer line is not a record.
const maxQuarantineLine = 16 << 20

func init() {
	register("quarantine", command{
		summary: "list quarantined lines (run, file, line, reason; never the line itself)",
		run:     runQuarantine,
	})
}

// quarantineEntry is one quarantined line as `cdcctl quarantine` shows it:
// where it is and why, never its content (it may hold PHI).
type quarantineEntry struct {
	RunID string `json:"runId"`
	File  string `json:"file"`
	Line  int64  `json:"line"`
	// LineFrom > 0: Line counts from the first line at or after this byte
	// (prepare.QuarantineRecord.LineFrom).
	LineFrom  int64  `json:"lineFrom,omitempty"`
	Offset    int64  `json:"offset"`
	Length    int    `json:"length,omitempty"`
	Reason    string `json:"reason"`
	Truncated bool   `json:"truncated,omitempty"`
	Object    string `json:"object"`
	WrittenAt string `json:"writtenAt"`
}

// quarantineRun is a run with quarantined lines and, when the RUN table is
// known, its window: `cdcctl replay --since {since}` re-runs it.
type quarantineRun struct {
	RunID       string `json:"runId"`
	Records     int    `json:"records"`
	Objects     int    `json:"objects"`
	WindowSince string `json:"windowSince,omitempty"`
	WindowUntil string `json:"windowUntil,omitempty"`
	Outcome     string `json:"outcome,omitempty"`
}

// quarantineView is the JSON form of `cdcctl quarantine`.
type quarantineView struct {
	Bucket  string            `json:"bucket"`
	Prefix  string            `json:"prefix"`
	Since   string            `json:"since,omitempty"`
	Runs    []quarantineRun   `json:"runs"`
	Records []quarantineEntry `json:"records"`
	// Truncated is true when --max stopped the listing.
	Truncated bool `json:"truncated"`
}

// quarantineFields are the only fields of a quarantine record cdcctl
// decodes: raw and rawBase64 are never read.
type quarantineFields struct {
	File      string `json:"file"`
	Line      int64  `json:"line"`
	LineFrom  int64  `json:"lineFrom"`
	Offset    int64  `json:"offset"`
	Length    int    `json:"length"`
	Reason    string `json:"reason"`
	Truncated bool   `json:"truncated"`
}

func runQuarantine(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, f := newAWSFlagSet("quarantine", stderr)
	bucket := fs.String("bucket", os.Getenv(envBucket), "artifact bucket (default $CDC_BUCKET, the stack output BucketName)")
	runID := fs.String("run", "", "only this run id (the execution name)")
	sinceFlag := fs.String("since", "", "only quarantine objects written at or after T (RFC 3339)")
	maxN := fs.Int("max", 1000, "list at most N records")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if *bucket == "" {
		fmt.Fprintln(stderr, "cdcctl quarantine: no bucket: pass --bucket NAME or "+setHint(envBucket))
		return exitUsage
	}
	if strings.Contains(*runID, "/") {
		fmt.Fprintln(stderr, "cdcctl quarantine: --run takes a run id (the execution name), not a path")
		return exitUsage
	}
	var since time.Time
	if *sinceFlag != "" {
		t, err := envelope.ParseTime(*sinceFlag)
		if err != nil {
			fmt.Fprintf(stderr, "cdcctl quarantine: --since: %v; use RFC 3339 such as 2026-11-21T08:00:00Z\n", err)
			return exitUsage
		}
		since = t
	}
	if *maxN <= 0 {
		fmt.Fprintln(stderr, "cdcctl quarantine: --max must be at least 1")
		return exitUsage
	}
	cfg, err := f.awsConfig(ctx)
	if err != nil {
		return fail(stderr, "quarantine", err.Error())
	}
	prefix := prepare.QuarantinePrefix
	if *runID != "" {
		prefix += *runID + "/"
	}
	v := quarantineView{Bucket: *bucket, Prefix: prefix, Records: []quarantineEntry{}, Runs: []quarantineRun{}}
	if !since.IsZero() {
		v.Since = envelope.FormatTime(since)
	}
	// Quarantine objects written by prepare-change carry no checksum the SDK
	// could validate; do not log a line about it for every object.
	s3c := s3.New(awsclient.NewS3(cfg).Options(), func(o *s3.Options) { o.DisableLogOutputChecksumValidationSkipped = true })
	if err := listQuarantine(ctx, s3c, &v, since, *maxN); err != nil {
		return fail(stderr, "quarantine", f.explain(err)+"\ncheck --bucket / CDC_BUCKET and that your role may read quarantine/ of the bucket")
	}
	runs := summarizeRuns(v.Records)
	if f.table != "" && len(runs) > 0 {
		addWindows(ctx, f, runs)
	}
	v.Runs = runs
	if f.json {
		if err := writeJSON(stdout, v); err != nil {
			return fail(stderr, "quarantine", err.Error())
		}
		return exitOK
	}
	printQuarantine(stdout, v)
	return exitOK
}

// listQuarantine reads the records of every quarantine object under
// v.Prefix written at or after since, up to maxN records.
func listQuarantine(ctx context.Context, c *s3.Client, v *quarantineView, since time.Time, maxN int) error {
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(v.Bucket), Prefix: aws.String(v.Prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list s3://%s/%s: %w", v.Bucket, v.Prefix, err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			written := aws.ToTime(o.LastModified)
			if !since.IsZero() && written.Before(since) {
				continue
			}
			run, _, ok := strings.Cut(strings.TrimPrefix(key, prepare.QuarantinePrefix), "/")
			if !ok {
				continue // not a quarantine object of a run
			}
			full, err := readQuarantineObject(ctx, c, v, key, run, written, maxN)
			if err != nil {
				return err
			}
			if full {
				v.Truncated = true
				return nil
			}
		}
	}
	return nil
}

// readQuarantineObject appends the records of one object; it reports
// whether maxN was reached.
func readQuarantineObject(ctx context.Context, c *s3.Client, v *quarantineView, key, run string, written time.Time, maxN int) (bool, error) {
	body, err := s3read.Object(ctx, c, v.Bucket, key)
	if err != nil {
		return false, fmt.Errorf("read s3://%s/%s: %w", v.Bucket, key, err)
	}
	defer body.Close()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), maxQuarantineLine)
	n := 0
	for sc.Scan() {
		n++
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		if len(v.Records) >= maxN {
			return true, nil
		}
		var r quarantineFields
		e := quarantineEntry{RunID: run, Object: key, WrittenAt: envelope.FormatTime(written)}
		if err := json.Unmarshal(b, &r); err != nil {
			e.Reason = fmt.Sprintf("record %d of the quarantine object is not JSON (not shown)", n)
		} else {
			e.File, e.Line, e.LineFrom, e.Offset, e.Length, e.Reason, e.Truncated = r.File, r.Line, r.LineFrom, r.Offset, r.Length, r.Reason, r.Truncated
		}
		v.Records = append(v.Records, e)
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("read s3://%s/%s: %w", v.Bucket, key, err)
	}
	return false, nil
}

func summarizeRuns(recs []quarantineEntry) []quarantineRun {
	byRun := map[string]*quarantineRun{}
	objects := map[string]bool{}
	var order []string
	for _, r := range recs {
		q, ok := byRun[r.RunID]
		if !ok {
			q = &quarantineRun{RunID: r.RunID}
			byRun[r.RunID] = q
			order = append(order, r.RunID)
		}
		q.Records++
		if !objects[r.Object] {
			objects[r.Object] = true
			q.Objects++
		}
	}
	sort.Strings(order)
	out := make([]quarantineRun, 0, len(order))
	for _, id := range order {
		out = append(out, *byRun[id])
	}
	return out
}

// addWindows fills each run's window from the run history; runs older than
// the history's retention keep none.
func addWindows(ctx context.Context, f *awsFlags, runs []quarantineRun) {
	cfg, err := f.awsConfig(ctx)
	if err != nil {
		return
	}
	store, err := f.store(cfg)
	if err != nil {
		return
	}
	hist, err := store.History(ctx, 1000)
	if err != nil {
		return
	}
	for i := range runs {
		for _, h := range hist {
			if h.RunID == runs[i].RunID {
				runs[i].WindowSince = envelope.FormatTime(h.Window.Since)
				runs[i].WindowUntil = envelope.FormatTime(h.Window.Until)
				runs[i].Outcome = string(h.Outcome)
				break
			}
		}
	}
}

func printQuarantine(w io.Writer, v quarantineView) {
	if len(v.Records) == 0 {
		fmt.Fprintf(w, "no quarantined records under s3://%s/%s", v.Bucket, v.Prefix)
		if v.Since != "" {
			fmt.Fprintf(w, " written since %s", v.Since)
		}
		fmt.Fprintln(w)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tFILE\tLINE\tREASON")
	for _, r := range v.Records {
		line := strconv.FormatInt(r.Line, 10)
		if r.LineFrom > 0 {
			line += " after byte " + strconv.FormatInt(r.LineFrom, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.RunID, r.File, line, oneLine(r.Reason, 120))
	}
	_ = tw.Flush()
	if v.Truncated {
		fmt.Fprintf(w, "(stopped at %d records: narrow with --run or --since, or raise --max)\n", len(v.Records))
	}
	fmt.Fprintln(w)
	for _, r := range v.Runs {
		fmt.Fprintf(w, "run %s: %d record(s) in %d object(s)", r.RunID, r.Records, r.Objects)
		if r.WindowSince != "" {
			fmt.Fprintf(w, "; window (%s, %s]; after a fix: cdcctl replay --since %s", r.WindowSince, r.WindowUntil, r.WindowSince)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "the lines themselves stay in the quarantine objects (they may hold PHI); read them only where PHI may be read")
}
