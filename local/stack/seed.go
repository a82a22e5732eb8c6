package stack

import (
	"io"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"

	"github.com/healthlake-cdc/healthlake-cdc/internal/gen"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
)

// seed loads the data store: the state directory's snapshot when there is
// one (restored, not seeded), else every *.ndjson file of SeedDir, or a
// generated sample.
func (s *Stack) seed(ctx context.Context) error {
	if s.restoreFrom != "" {
		return s.restoreState()
	}
	var n int
	var err error
	s.clock.seed(s.seedBase())
	defer s.clock.done()
	switch {
	case s.opts.SeedDir != "":
		n, err = s.LoadDir(ctx, s.opts.SeedDir)
	case s.opts.SampleSize > 0:
		n, err = s.LoadGenerated(s.opts.SampleSize, s.opts.GenSeed)
	}
	if err != nil {
		return err
	}
	s.seeded = n
	skipped := s.SeedSkipped()
	s.Report.Update(func(r *report.Report) { r.Resources, r.SeedSkipped = n, skipped })
	s.log.Info("seeded data store", "datastore", s.Res.DatastoreID, "resources", n, "skippedLines", skipped)
	return nil
}

// GenerateCounts spreads n resources over the generator's types, referenced
// types first.
func GenerateCounts(n int) map[string]int {
	types := gen.Types()
	counts := make(map[string]int, len(types))
	for i := 0; i < n; i++ {
		counts[types[i%len(types)]]++
	}
	return counts
}

// LoadGenerated loads n generated resources into the data store.
func (s *Stack) LoadGenerated(n int, seed int64) (int, error) {
	ds, ok := s.HealthLake.Datastore(s.Res.DatastoreID)
	if !ok {
		return 0, fmt.Errorf("stack: no data store %s", s.Res.DatastoreID)
	}
	loaded := 0
	err := gen.Generate(gen.ExportSpec{Seed: seed, Counts: GenerateCounts(n)}, func(typ string, line []byte) error {
		id, err := resourceID(line)
		if err != nil {
			return err
		}
		if _, err := ds.Load(typ, id, append([]byte(nil), line...)); err != nil {
			return fmt.Errorf("load generated %s: %w", typ, err)
		}
		loaded++
		return nil
	})
	if err != nil {
		return loaded, fmt.Errorf("stack: seed generated resources: %w", err)
	}
	return loaded, nil
}

// LoadDir loads every *.ndjson file of dir, one resource per line, keeping
// each resource's id.
func (s *Stack) LoadDir(ctx context.Context, dir string) (int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.ndjson"))
	if err != nil {
		return 0, fmt.Errorf("stack: seed: %w", err)
	}
	if len(files) == 0 {
		return 0, fmt.Errorf("stack: seed: no *.ndjson file in %s", dir)
	}
	sort.Strings(files)
	total := 0
	for _, f := range files {
		n, err := s.loadFile(ctx, f)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// loadFile loads one NDJSON file. A line that is not a resource (an export
// log, a broken line) or that the data store refuses is skipped with its
// reason, as HealthLake's import would refuse it; seeding goes on.
func (s *Stack) loadFile(ctx context.Context, path string) (int, error) {
	ds, ok := s.HealthLake.Datastore(s.Res.DatastoreID)
	if !ok {
		return 0, fmt.Errorf("stack: no data store %s", s.Res.DatastoreID)
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("stack: seed: %w", err)
	}
	defer f.Close()
	name := filepath.Base(path)
	r := fhir.NewReader(f, fhir.Options{File: name, Validation: fhir.ValidateJSON})
	n := 0
	for {
		l, err := r.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("stack: seed %s: %w", name, err)
		}
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		if l.Problem != "" {
			s.skipSeedLine(name, l.Number, l.Problem)
			continue
		}
		if _, err := ds.Load(l.ResourceType, l.ID, append([]byte(nil), l.Raw...)); err != nil {
			s.skipSeedLine(name, l.Number, err.Error())
			continue
		}
		n++
	}
}

// skipSeedLine counts and logs a seed line that was not loaded (file, line
// and reason only: never the line).
func (s *Stack) skipSeedLine(file string, line int64, reason string) {
	s.mu.Lock()
	s.seedSkipped++
	s.mu.Unlock()
	s.log.Warn("seed line skipped", "file", file, "line", line, "reason", reason)
}

// SeedSkipped is how many seed lines were not loaded.
func (s *Stack) SeedSkipped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seedSkipped
}

func resourceID(line []byte) (string, error) {
	var head struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(line, &head); err != nil || head.ID == "" {
		return "", errors.New("generated resource without id")
	}
	return head.ID, nil
}

// SeedPast is how far before the stack's start seeded resources are stamped.
const SeedPast = time.Hour

// seedBase is the lastUpdated of the first seeded resource. The HealthLake
// emulator stamps every write strictly after the previous one (millisecond
// steps), so a bulk load stamped "now" would run into the future and past
// the first window's until; the stack stamps seeded resources as written
// in the past instead: from an hour before the start (or just after the
// saved checkpoint), one millisecond apart.
func (s *Stack) seedBase() time.Time {
	base := s.started.Add(-SeedPast).UTC().Truncate(time.Millisecond)
	if !s.startCheckpoint.IsZero() && !base.After(s.startCheckpoint) {
		base = s.startCheckpoint.Add(time.Millisecond)
	}
	return base
}

// seedClock is the HealthLake emulator's clock: the stack's clock, except
// while seeding, when it stands at the seed base and the emulator's
// strictly-increasing stamps count up from there.
type seedClock struct {
	now     func() time.Time
	mu      sync.Mutex
	base    time.Time
	seeding bool
}

// Now is the emulator's clock.
func (c *seedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seeding {
		return c.base
	}
	return c.now()
}

func (c *seedClock) seed(base time.Time) {
	c.mu.Lock()
	c.base, c.seeding = base, true
	c.mu.Unlock()
}

func (c *seedClock) done() {
	c.mu.Lock()
	c.seeding = false
	c.mu.Unlock()
}
