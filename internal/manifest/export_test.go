package manifest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
)

func threeParts() Export {
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return Export{Bucket: "b", ManifestKey: PartKey("run-1", 0), ManifestRunID: "run-1", Part: 0, Parts: 3,
		PartFiles: []int{10, 10, 3}, PartBatches: []int{2, 2, 1}, FileCount: 10, BatchCount: 2, JobID: "j", DatastoreID: "d",
		Window: envelope.Window{Since: since, Until: since.Add(time.Hour)}}
}

func TestExportNextWalksTheParts(t *testing.T) {
	e := threeParts()
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	var seen []int
	for {
		seen = append(seen, e.FileCount)
		if err := e.Validate(); err != nil {
			t.Fatalf("part %d: %v", e.Part, err)
		}
		n, ok := e.Next()
		if !ok {
			if !e.Last() || e.Part != 2 {
				t.Fatalf("Next stopped at part %d of %d", e.Part, e.Parts)
			}
			break
		}
		if n.ManifestKey != PartKey("run-1", n.Part) || n.BatchCount != e.PartBatches[n.Part] || !n.Window.Since.Equal(e.Window.Since) {
			t.Fatalf("Next = %+v", n)
		}
		e = n
	}
	if len(seen) != 3 || seen[2] != 3 {
		t.Fatalf("file counts %v, want [10 10 3]", seen)
	}
}

func TestExportValidateRejects(t *testing.T) {
	cases := map[string]func(*Export){
		"no parts":            func(e *Export) { e.Parts = 0 },
		"part out of range":   func(e *Export) { e.Part = 3 },
		"partFiles short":     func(e *Export) { e.PartFiles = e.PartFiles[:2] },
		"fileCount mismatch":  func(e *Export) { e.FileCount = 9 },
		"partBatches short":   func(e *Export) { e.PartBatches = []int{1} },
		"key of another part": func(e *Export) { e.ManifestKey = PartKey("run-1", 1) },
		"no run":              func(e *Export) { e.ManifestRunID = "" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			e := threeParts()
			mutate(&e)
			if err := e.Validate(); err == nil {
				t.Fatal("Validate accepted it")
			}
		})
	}
}

func TestExportJSONShape(t *testing.T) {
	b, err := json.Marshal(threeParts())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"bucket"`, `"manifestKey"`, `"manifestRunId"`, `"part"`, `"parts"`, `"partFiles"`,
		`"fileCount"`, `"batchCount"`, `"jobId"`, `"datastoreId"`, `"window":{"since"`, `"completedWithErrors"`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("JSON lacks %s: %s", k, b)
		}
	}
	var back Export
	if err := json.Unmarshal(b, &back); err != nil || back.Parts != 3 || back.PartFiles[2] != 3 {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}
