package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/gen"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
)

// Writes counts what the workload wrote.
type Writes struct {
	Initial int64 `json:"initial"`
	Creates int64 `json:"creates"`
	Updates int64 `json:"updates"`
	Deletes int64 `json:"deletes"`
	// UpdatesWithoutTarget were due while the type had no live resource
	// (not written); DeletesRefused were refused by the data store (during
	// a HealthLake outage the DELETE fails like every other call) and not
	// retried.
	UpdatesWithoutTarget int64 `json:"updatesWithoutTarget,omitempty"`
	DeletesRefused       int64 `json:"deletesRefused,omitempty"`
	// Rejected counts creates and updates the data store refused.
	Rejected int64 `json:"rejected,omitempty"`
	// Erases counts `$erase` jobs started (hard deletes: no history left);
	// BulkDeletes the `$bulk-delete` jobs and BulkDeleted the live
	// resources of their types when each was started.
	Erases      int64 `json:"erases,omitempty"`
	BulkDeletes int64 `json:"bulkDeletes,omitempty"`
	BulkDeleted int64 `json:"bulkDeleted,omitempty"`
}

// deleter sends a FHIR DELETE (stack.FHIR).
type deleter func(ctx context.Context, method, path string, body []byte) (*http.Response, error)

// driver writes the workload's changes into the data store: creates and
// updates through the data store's Go API (a client's write is not part of
// the pipeline; going through the emulator's HTTP API would only cost wall
// time), deletes through the FHIR REST API (the emulator's DELETE).
type driver struct {
	ds     *fakehealthlake.Datastore
	del    deleter
	g      *gen.Generator
	rng    *rand.Rand
	next   int64
	live   map[string][]int64 // live ids by type
	all    map[string][]int64 // every id ever created, by type
	writes Writes
	body   []byte
	// lastWrite is the time of the last write (virtual).
	lastWrite time.Time
	// stamps, kept when the fast path is on (keepStamps), lists per
	// "type/id" every version the driver wrote, oldest first: what tells
	// whether a version was still the latest when its window exported.
	stamps map[string][]stamp
}

// stamp is one version the driver wrote: its meta.lastUpdated (Unix ns;
// a FHIR DELETE's is the driver's clock once the DELETE was answered) and
// whether it is a deletion.
type stamp struct {
	vid     uint32
	deleted bool
	at      int64
}

// keepStamps makes the driver record every version it writes (stamps).
func (d *driver) keepStamps() { d.stamps = map[string][]stamp{} }

// stamped records a version written now; for a creation or update its
// lastUpdated is read back from the data store (the emulator steps stamps
// by a millisecond within an instant).
func (d *driver) stamped(typ, id, vid string, deleted bool) {
	if d.stamps == nil {
		return
	}
	key := typ + "/" + id
	at := time.Now()
	if !deleted {
		if b, ok := d.ds.Read(typ, id); ok {
			if t, err := envelope.ParseTime(metaField(b, "lastUpdated")); err == nil {
				at = t
			}
		}
	}
	ss := d.stamps[key]
	n, err := strconv.ParseUint(vid, 10, 32)
	if err != nil && len(ss) > 0 {
		n = uint64(ss[len(ss)-1].vid) + 1
	}
	d.stamps[key] = append(ss, stamp{vid: uint32(n), deleted: deleted, at: at.UnixNano()})
}

func newDriver(ds *fakehealthlake.Datastore, del deleter, seed int64) *driver {
	return &driver{
		ds: ds, del: del, g: gen.New(seed), rng: rand.New(rand.NewPCG(uint64(seed), 0x5157)),
		live: map[string][]int64{}, all: map[string][]int64{},
	}
}

// errRejected: the data store refused a write (counted in Writes.Rejected).
var errRejected = errors.New("write rejected by the data store")

func resourceID(n int64) string { return "sim-" + strconv.FormatInt(n, 36) }

// write generates resource n of typ and loads it into the data store;
// false when the data store refused it (counted in Writes.Rejected).
func (d *driver) write(typ string, n int64) (bool, error) {
	body, err := d.g.AppendResource(d.body[:0], typ, gen.Options{ID: resourceID(n)})
	if err != nil {
		return false, fmt.Errorf("generate %s: %w", typ, err)
	}
	d.body = body
	vid, err := d.ds.Load(typ, resourceID(n), body)
	if err != nil {
		d.writes.Rejected++
		return false, nil
	}
	d.stamped(typ, resourceID(n), vid, false)
	d.lastWrite = time.Now()
	return true, nil
}

// create writes a new resource of typ (not counted: the caller counts).
func (d *driver) create(typ string) error {
	n := d.next
	d.next++
	switch ok, err := d.write(typ, n); {
	case err != nil:
		return err
	case !ok:
		return errRejected
	}
	d.live[typ] = append(d.live[typ], n)
	d.all[typ] = append(d.all[typ], n)
	return nil
}

// update writes a new version of a random live resource of typ.
func (d *driver) update(typ string) error {
	ids := d.live[typ]
	if len(ids) == 0 {
		d.writes.UpdatesWithoutTarget++
		return nil
	}
	ok, err := d.write(typ, ids[d.rng.IntN(len(ids))])
	if ok {
		d.writes.Updates++
	}
	return err
}

// remove deletes a random live resource of typ.
func (d *driver) remove(ctx context.Context, typ string) {
	if d.retire(typ, func(id string) bool {
		if !d.send(ctx, http.MethodDelete, typ+"/"+id) {
			return false
		}
		d.stamped(typ, id, "", true)
		return true
	}) {
		d.writes.Deletes++
	}
}

// retire picks a random live resource of typ and, when do(id) succeeds,
// takes it off the live list (false: none live, or do failed — counted in
// DeletesRefused).
func (d *driver) retire(typ string, do func(id string) bool) bool {
	ids := d.live[typ]
	if len(ids) == 0 {
		return false
	}
	i := d.rng.IntN(len(ids))
	if !do(resourceID(ids[i])) {
		d.writes.DeletesRefused++
		return false
	}
	ids[i] = ids[len(ids)-1]
	d.live[typ] = ids[:len(ids)-1]
	d.lastWrite = time.Now()
	return true
}

// preload writes the initial load, each resource stamped at its time in
// (start − spread, start]: pin sets the emulator's clock.
func (d *driver) preload(in Initial, n int, start time.Time, pin func(time.Time)) error {
	types := in.Types
	if len(types) == 0 {
		types = gen.Types()
	}
	spread := in.SpreadOver.D()
	if spread <= 0 {
		spread = time.Hour
	}
	step := spread / time.Duration(max(n, 1))
	from := start.Add(-spread)
	for i := 0; i < n; i++ {
		pin(from.Add(time.Duration(i) * step))
		switch err := d.create(types[i%len(types)]); {
		case err == nil:
			d.writes.Initial++
		case !errors.Is(err, errRejected):
			return err
		}
	}
	return nil
}

// rates are the per-second changes of one type and kind, accumulated so
// that fractional rates write at the right average.
type accumulator struct{ acc float64 }

func (a *accumulator) take(x float64) int {
	a.acc += x
	n := math.Floor(a.acc)
	a.acc -= n
	return int(n)
}

// plan is what the driver writes each second.
type plan struct {
	w       Workload
	scale   float64
	streams [][3]accumulator
	bursts  [][3]accumulator
	erases  []accumulator
}

func newPlan(w Workload) *plan {
	return &plan{w: w, scale: w.scale(), streams: make([][3]accumulator, len(w.Streams)), bursts: make([][3]accumulator, len(w.Bursts)), erases: make([]accumulator, len(w.Bursts))}
}

// second writes the changes due in the second starting at offset t.
func (p *plan) second(ctx context.Context, d *driver, t time.Duration) error {
	for i, s := range p.w.Streams {
		if t < s.From.D() || (s.Until > 0 && t >= s.Until.D()) {
			continue
		}
		perSec := p.scale / 86400
		acc := &p.streams[i]
		if err := p.write(ctx, d, s.ResourceType,
			acc[0].take(s.CreatesPerDay*perSec), acc[1].take(s.UpdatesPerDay*perSec), acc[2].take(s.DeletesPerDay*perSec)); err != nil {
			return err
		}
	}
	for i, b := range p.w.Bursts {
		over := b.Over.D()
		if over < time.Second {
			over = time.Second
		}
		if t < b.At.D() || t >= b.At.D()+over {
			continue
		}
		frac := p.scale / over.Seconds()
		acc := &p.bursts[i]
		if err := p.write(ctx, d, b.ResourceType,
			acc[0].take(float64(b.Creates)*frac), acc[1].take(float64(b.Updates)*frac), acc[2].take(float64(b.Deletes)*frac)); err != nil {
			return err
		}
		for range p.erases[i].take(float64(b.Erases) * frac) {
			d.erase(ctx, b.ResourceType)
		}
		if b.BulkDelete != "" && t == b.At.D() {
			d.bulkDelete(ctx, b.ResourceType, b.BulkDelete == BulkDeleteHard)
		}
	}
	return nil
}

func (p *plan) write(ctx context.Context, d *driver, typ string, creates, updates, deletes int) error {
	for range creates {
		switch err := d.create(typ); {
		case err == nil:
			d.writes.Creates++
		case !errors.Is(err, errRejected):
			return err
		}
	}
	for range updates {
		if err := d.update(typ); err != nil {
			return err
		}
	}
	for range deletes {
		d.remove(ctx, typ)
	}
	return nil
}

// erase starts a `$erase` of a random live resource of typ: the resource and
// its history go, so only the reconciliation can announce it.
func (d *driver) erase(ctx context.Context, typ string) {
	if d.retire(typ, func(id string) bool { return d.send(ctx, http.MethodPost, typ+"/"+id+"/$erase") }) {
		d.writes.Erases++
	}
}

// bulkDelete starts a `$bulk-delete` of every live resource of typ (soft,
// history kept, or hard, history gone).
func (d *driver) bulkDelete(ctx context.Context, typ string, hard bool) {
	if !d.send(ctx, http.MethodPost, typ+"/$bulk-delete?isHardDelete="+strconv.FormatBool(hard)) {
		d.writes.DeletesRefused++
		return
	}
	d.writes.BulkDeletes++
	d.writes.BulkDeleted += int64(len(d.live[typ]))
	d.live[typ] = nil
	d.lastWrite = time.Now()
}

// send sends a FHIR request without a body; true on a 2xx answer.
func (d *driver) send(ctx context.Context, method, path string) bool {
	resp, err := d.del(ctx, method, path, nil)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode/100 == 2
}

// latest reads the data store's current version of every resource the
// driver created: vid "" for a resource whose current version is a
// deletion (or that is gone).
func (d *driver) latest(yield func(typ, id, vid, lastUpdated string)) {
	for typ, ids := range d.all {
		for _, n := range ids {
			id := resourceID(n)
			b, ok := d.ds.Read(typ, id)
			if !ok {
				yield(typ, id, "", "")
				continue
			}
			yield(typ, id, versionOf(b), metaField(b, "lastUpdated"))
		}
	}
}

// metaField finds a top-level string field of meta in a stored resource
// (the emulator writes it unescaped).
func metaField(b []byte, name string) string {
	key := `"` + name + `":"`
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return ""
	}
	rest := b[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}

// versionOf finds meta.versionId in a stored resource (the emulator writes
// it unescaped).
func versionOf(b []byte) string { return metaField(b, "versionId") }
