package stack

import (
	"context"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/gen"
)

// catchUpDays is the backlog of the replay figure of issue 11.4.
const catchUpDays = 30

// seedSpread loads n generated resources whose lastUpdated spread evenly
// over (from, to], oldest first, through the emulator's clock, and returns
// their eventIds.
func seedSpread(t *testing.T, st *Stack, n int, from, to time.Time) map[string]bool {
	t.Helper()
	ds, ok := st.HealthLake.Datastore(st.Res.DatastoreID)
	if !ok {
		t.Fatal("no data store")
	}
	type res struct {
		typ, id string
		line    []byte
	}
	var all []res
	err := gen.Generate(gen.ExportSpec{Seed: 7, Counts: GenerateCounts(n)}, func(typ string, line []byte) error {
		id, err := resourceID(line)
		if err != nil {
			return err
		}
		all = append(all, res{typ, id, append([]byte(nil), line...)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	step := to.Sub(from) / time.Duration(len(all))
	defer st.clock.done()
	for i, r := range all {
		st.clock.seed(from.Add(time.Duration(i+1) * step))
		vid, err := ds.Load(r.typ, r.id, r.line)
		if err != nil {
			t.Fatal(err)
		}
		ids[envelope.EventID(r.typ, r.id, vid)] = true
	}
	return ids
}

// TestThirtyDayReplayExportsEachLineAboutOnce is the figure of issue 11.4:
// a replay of 30 days catches up with exported lines ÷ delivered events ≤
// 1.05 (with 24 h windows, each re-exporting everything up to now, it was
// ≈ 15). "small parts" splits the export's manifest into parts of a few
// one-file batches, so that consecutive runs deliver the parts of one
// export (reuse) instead of exporting again.
func TestThirtyDayReplayExportsEachLineAboutOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end catch-up")
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		// multiPart: the catch-up must take more than one run per export.
		multiPart bool
	}{
		{"one part", nil, false},
		{"small parts", map[string]string{"CDC_BATCH_MAX_FILES": "1", "CDC_MANIFEST_PART_BATCHES": "3"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			const n = 720 // one change an hour for 30 days
			st := startStack(t, func(o *Options) {
				o.SampleSize, o.RecordEvents, o.ResourcesPerFile, o.LambdaEnv = -1, false, 20, c.env
			})
			ctx := context.Background()
			now := time.Now().UTC()
			from := now.Add(-catchUpDays * 24 * time.Hour)
			ids := seedSpread(t, st, n, from, now.Add(-time.Hour))
			store, err := st.runStore()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store.Replay(ctx, runlockReplay(from)); err != nil {
				t.Fatalf("replay: %v", err)
			}
			runs := 0
			for ; runs < 40; runs++ {
				w, err := st.RunOnce(ctx)
				if err != nil || w.Status != "SUCCEEDED" {
					t.Fatalf("run %d: %+v, %v", runs, w, err)
				}
				s, err := store.Status(ctx, 0)
				if err != nil {
					t.Fatal(err)
				}
				if s.Pending == nil && s.Checkpoint.After(now.Add(-time.Hour)) && len(st.Delivered.EventIDs()) >= len(ids) {
					runs++
					break
				}
			}
			delivered := st.Delivered.EventIDs()
			missing := 0
			for id := range ids {
				if delivered[id] == 0 {
					missing++
				}
			}
			if missing > 0 {
				t.Fatalf("%d of %d seeded changes were never delivered after %d runs", missing, len(ids), runs)
			}
			ex, err := st.Exported(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			lines, jobs := int(ex.Lines), int(ex.Jobs)
			ratio := float64(lines) / float64(len(delivered))
			t.Logf("30-day replay (%s): %d runs, %d export jobs, %d exported lines, %d distinct events delivered (%d deliveries): ratio %.3f",
				c.name, runs, jobs, lines, len(delivered), st.Delivered.Len(), ratio)
			if ratio > 1.05 {
				t.Errorf("exported lines ÷ delivered events = %.3f, want ≤ 1.05", ratio)
			}
			if c.multiPart && runs <= jobs {
				t.Errorf("%d runs for %d export jobs: the parts of one export were not delivered by consecutive runs", runs, jobs)
			}
		})
	}
}
