package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/change"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
	"github.com/healthlake-cdc/healthlake-cdc/internal/prepare"
	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
)

func init() {
	register("inspect", command{
		summary: "print the events an export file would produce; report quarantined lines",
		run:     runInspect,
	})
}

// inspectFarFuture is the default upper end of inspect's window.
var inspectFarFuture = time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC)

// typeFromNameRE matches HealthLake and bulk-export file names:
// Type.ndjson, Type.000.ndjson, Type-{n}-{m}-0.ndjson.
var typeFromNameRE = regexp.MustCompile(`^([A-Z][A-Za-z]{0,63})(?:\.[0-9]+|-[^/]*)?\.ndjson$`)

// declaredTypeFromName returns the resource type a file name announces, or "".
func declaredTypeFromName(path string) string {
	m := typeFromNameRE.FindStringSubmatch(filepath.Base(path))
	if m == nil {
		return ""
	}
	return m[1]
}

// quarantineRecord is one stderr line per quarantined line.
type quarantineRecord struct {
	File   string `json:"file"`
	Line   int64  `json:"line"`
	Reason string `json:"reason"`
}

// inspectSummary is the first stderr line.
type inspectSummary struct {
	Lines         int64 `json:"lines"`
	Events        int64 `json:"events"`
	OutsideWindow int64 `json:"outsideWindow"`
	Quarantined   int64 `json:"quarantined"`
	Filtered      int64 `json:"filtered,omitempty"`
	Blank         int64 `json:"blank,omitempty"`
	ClaimChecked  int64 `json:"claimChecked,omitempty"`
	// AssumedLastUpdated counts events whose line had no meta.lastUpdated and
	// took the assumed one (--default-last-updated, or the file's time).
	AssumedLastUpdated int64 `json:"assumedLastUpdated,omitempty"`
}

type inspectConfig struct {
	validation   fhir.Validation
	classifier   change.Classifier
	typeFromName bool
	declaredType string
	maxLine      int
	export       envelope.ExportRef
	defaultLU    string // lastUpdated for lines without one ("" = none)
	fileTimeLU   bool   // with no window given: assume the file's modification time
	maxEntry     int
	bucket       string
}

// runInspect implements `cdcctl inspect`: it reads export files the way
// prepare-change does and drives prepare-change's emitter in a dry run,
// printing, per line, the event detail it would publish (stdout) or the
// reason it would quarantine the line (stderr).
func runInspect(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, files, code, ok := parseInspect(args, stderr)
	if !ok {
		return code
	}
	out := bufio.NewWriterSize(stdout, 256<<10)
	res := inspectFiles(ctx, files, stdin, cfg, out)
	if err := out.Flush(); err != nil {
		res.problems = append(res.problems, fmt.Sprintf("cdcctl inspect: write events: %v", err))
	}
	return res.report(stderr)
}

// parseInspect reads inspect's flags and files; ok false: exit with code
// (the problem and the usage printed on stderr).
func parseInspect(args []string, stderr io.Writer) (cfg inspectConfig, files []string, code int, ok bool) {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cdcctl inspect [flags] FILE...   (FILE - reads stdin)")
		fmt.Fprintln(stderr, "Prints one event detail per line on stdout; on stderr a JSON summary, then one JSON line per quarantined line.")
		fmt.Fprintln(stderr, "Exit 0: nothing quarantined; 3: something quarantined; 1: a file could not be read; 2: usage error.")
		fs.PrintDefaults()
	}
	validate := fs.String("validate", "json", "validation level: none, json or r4")
	since := fs.String("since", "", "window start, exclusive (RFC 3339; default 0001-01-01T00:00:00Z)")
	until := fs.String("until", "", "window end, inclusive (RFC 3339; default 9999-12-31T23:59:59.999Z)")
	typeFromName := fs.Bool("type-from-name", false, "declare each file's resource type from its name (Type.ndjson, Type.000.ndjson, Type-….ndjson); lines of another type are quarantined")
	declared := fs.String("type", "", "declare the resource type of every file (lines of another type are quarantined)")
	include := fs.String("include", "", "comma-separated resource types to keep (default all)")
	exclude := fs.String("exclude", "", "comma-separated resource types to drop")
	maxLine := fs.Int("max-line-bytes", 0, "longest accepted line (0 = reader default)")
	datastore := fs.String("datastore-id", "local", "export.datastoreId of the events")
	job := fs.String("job-id", "inspect", "export.jobId of the events")
	defaultLU := fs.String("default-last-updated", "", "meta.lastUpdated to assume for lines without one (files that never passed through HealthLake, e.g. Synthea output); default: the file's modification time when no window is given, else quarantine them")
	maxEntry := fs.Int("max-entry-bytes", 262144, "PutEvents entry size limit above which the detail is claim-checked (0 = never)")
	bucket := fs.String("claim-check-bucket", "local", "bucket named in resourceRef of claim-checked details")
	if err := fs.Parse(args); err != nil {
		return cfg, nil, exitUsage, false // the flag package has printed the problem and the usage
	}
	usageErr := func(format string, a ...any) (inspectConfig, []string, int, bool) {
		fmt.Fprintf(stderr, "cdcctl inspect: "+format+"\n", a...)
		return inspectConfig{}, nil, exitUsage, false
	}
	files = fs.Args()
	if len(files) == 0 {
		return usageErr("no files given")
	}
	cfg = inspectConfig{
		typeFromName: *typeFromName,
		declaredType: *declared,
		maxLine:      *maxLine,
		export:       envelope.ExportRef{DatastoreID: *datastore, JobID: *job},
		maxEntry:     *maxEntry,
		bucket:       *bucket,
	}
	var err error
	if cfg.validation, err = fhir.ParseValidation(*validate); err != nil {
		return usageErr("--validate: want none, json or r4")
	}
	if *typeFromName && *declared != "" {
		return usageErr("--type and --type-from-name exclude each other")
	}
	if *declared != "" && !change.IsTypeName(*declared) {
		return usageErr("--type: not a resource type name")
	}
	if *maxLine < 0 || *maxEntry < 0 {
		return usageErr("--max-line-bytes and --max-entry-bytes must not be negative")
	}
	w := envelope.Window{Since: time.Time{}, Until: inspectFarFuture}
	if *since != "" {
		if w.Since, err = envelope.ParseTime(*since); err != nil {
			return usageErr("--since: want an RFC 3339 time such as 2026-11-21T10:00:00Z")
		}
	}
	if *until != "" {
		if w.Until, err = envelope.ParseTime(*until); err != nil {
			return usageErr("--until: want an RFC 3339 time such as 2026-11-21T10:05:00Z")
		}
	}
	if w.Empty() {
		return usageErr("--since must be before --until")
	}
	if *defaultLU != "" {
		t, err := envelope.ParseTime(*defaultLU)
		if err != nil {
			return usageErr("--default-last-updated: want an RFC 3339 time")
		}
		cfg.defaultLU = envelope.FormatTime(t)
	}
	// Without a window, a line lacking meta.lastUpdated cannot fall outside
	// it: it is an event as of the export file's time. With a window it is
	// quarantined, as prepare-change would.
	cfg.fileTimeLU = *defaultLU == "" && *since == "" && *until == ""
	cfg.classifier = change.Classifier{
		Window: w,
		Filter: change.Filter{Include: change.ParseTypeList(*include), Exclude: change.ParseTypeList(*exclude)},
	}
	return cfg, files, exitOK, true
}

// inspected is what inspect found in all its files.
type inspected struct {
	counts                change.Counts
	claimChecked, assumed int64
	records               []quarantineRecord
	problems              []string // printed after the summary and records, which come first
}

// inspectFiles inspects each file in turn ("-": stdin), writing the event
// details to out; a file that cannot be read is a problem, and the others
// are still read.
func inspectFiles(ctx context.Context, files []string, stdin io.Reader, cfg inspectConfig, out io.Writer) inspected {
	var res inspected
	for _, name := range files {
		if ctx.Err() != nil {
			res.problems = append(res.problems, "cdcctl inspect: interrupted")
			break
		}
		var src io.Reader
		if name == "-" {
			src = stdin
		} else {
			f, err := os.Open(name)
			if err != nil {
				res.problems = append(res.problems, fmt.Sprintf("cdcctl inspect: %v", err))
				continue
			}
			src = f
		}
		fileCfg := cfg
		if cfg.fileTimeLU {
			fileCfg.defaultLU = envelope.FormatTime(time.Now())
			if f, ok := src.(*os.File); ok && name != "-" {
				if st, err := f.Stat(); err == nil {
					fileCfg.defaultLU = envelope.FormatTime(st.ModTime())
				}
			}
		}
		cc, as, recs, err := inspectFile(name, src, fileCfg, out, &res.counts)
		res.assumed += as
		if c, ok := src.(io.Closer); ok && name != "-" {
			_ = c.Close() // read-only file: nothing to lose on close
		}
		res.claimChecked += cc
		res.records = append(res.records, recs...)
		if err != nil {
			res.problems = append(res.problems, fmt.Sprintf("cdcctl inspect: %s: %v", name, err))
		}
	}
	return res
}

// report writes the summary, the quarantine records and the problems to
// stderr and returns inspect's exit code: 1 with a problem, 3 with a
// quarantined line, else 0.
func (res inspected) report(stderr io.Writer) int {
	c := res.counts
	sum, _ := json.Marshal(inspectSummary{
		Lines: c.Lines, Events: c.Events, OutsideWindow: c.OutsideWindow,
		Quarantined: c.Quarantined, Filtered: c.Filtered, Blank: c.Blank, ClaimChecked: res.claimChecked,
		AssumedLastUpdated: res.assumed,
	})
	fmt.Fprintf(stderr, "%s\n", sum)
	enc := json.NewEncoder(stderr)
	enc.SetEscapeHTML(false)
	for _, r := range res.records {
		_ = enc.Encode(r)
	}
	for _, p := range res.problems {
		fmt.Fprintln(stderr, p)
	}
	switch {
	case len(res.problems) > 0:
		return exitFailure
	case c.Quarantined > 0:
		return exitQuarantined
	}
	return exitOK
}

// inspectFile classifies every line of one file, writing the details the
// emitter builds (in a dry run: nothing published, nothing stored) to out
// and returning how many details were claim-checked, how many took the
// assumed lastUpdated, and the quarantine records.
func inspectFile(name string, src io.Reader, cfg inspectConfig, out io.Writer, counts *change.Counts) (int64, int64, []quarantineRecord, error) {
	declared := cfg.declaredType
	if cfg.typeFromName {
		declared = declaredTypeFromName(name)
	}
	maxEntry := cfg.maxEntry
	if maxEntry == 0 {
		maxEntry = math.MaxInt // never claim-check
	}
	pub, err := publish.NewDryRun(func(detail []byte) error {
		if _, err := out.Write(detail); err != nil {
			return err
		}
		_, err := out.Write([]byte{'\n'})
		return err
	}, publish.Config{MaxEntryBytes: maxEntry})
	if err != nil {
		return 0, 0, nil, err
	}
	em := &publish.Emitter{
		Publisher:  pub,
		ClaimCheck: &publish.ClaimCheck{Bucket: cfg.bucket, DryRun: true},
		Window:     cfg.classifier.Window,
		Export:     cfg.export,
		CheckJSON:  cfg.validation == fhir.ValidateNone,
	}
	r := fhir.NewReader(src, fhir.Options{File: name, DeclaredType: declared, MaxLineBytes: cfg.maxLine, Validation: cfg.validation})
	var records []quarantineRecord
	var assumed int64
	ctx := context.Background()
	for {
		l, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			counts.Blank += r.Stats().Blank
			return em.ClaimChecked(), assumed, records, fmt.Errorf("read: %w", err)
		}
		took := false
		if l.Problem == "" && l.LastUpdated == "" && cfg.defaultLU != "" {
			l.LastUpdated, took = cfg.defaultLU, true
		}
		kind, reason := cfg.classifier.Classify(l)
		if kind == change.KindEvent {
			res := envelope.Resource{ResourceType: l.ResourceType, ID: l.ID, VersionID: l.VersionID, LastUpdated: l.LastUpdated, Raw: l.Raw}
			_, err := em.Emit(ctx, res, nil)
			var tooLarge *publish.EntryTooLargeError
			var invalid *publish.InvalidResourceError
			switch {
			case errors.As(err, &tooLarge):
				kind, reason = change.KindQuarantined, prepare.ReasonEventTooLarge
			case errors.As(err, &invalid):
				kind, reason = change.KindQuarantined, prepare.ReasonNotJSON
			case err != nil:
				return em.ClaimChecked(), assumed, records, fmt.Errorf("write events: %w", err)
			case took:
				assumed++
			}
		}
		counts.Add(kind)
		if kind == change.KindQuarantined {
			records = append(records, quarantineRecord{File: name, Line: l.Number, Reason: reason})
		}
	}
	counts.Blank += r.Stats().Blank
	return em.ClaimChecked(), assumed, records, nil
}
