// Package gen generates realistic, synthetic FHIR R4 resources for tests,
// benchmarks and the local demo: deterministic for a seed, with references
// between resources, settable meta.versionId/lastUpdated and line sizes from
// a few hundred bytes to many megabytes. Every name, address and identifier is
// made up.
package gen

import (
	"encoding/base64"
	"fmt"
	"slices"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
)

// MaxSize is the largest line size Options.Size may ask for.
const MaxSize = 64 << 20

// DefaultStart is the default meta.lastUpdated of the first generated resource.
var DefaultStart = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// Options controls one generated resource. The zero value gives a resource
// with a fresh id, versionId "1", the generator's clock as lastUpdated and its
// natural size.
type Options struct {
	// ID is the resource id; empty generates a UUID-shaped one.
	ID string
	// VersionID is meta.versionId; empty means "1".
	VersionID string
	// OmitVersionID leaves meta.versionId out (content-hash versions).
	OmitVersionID bool
	// LastUpdated is meta.lastUpdated; zero takes the generator's clock, which
	// then advances by 1 to 1000 ms.
	LastUpdated time.Time
	// OmitLastUpdated leaves meta.lastUpdated out (a line the pipeline quarantines).
	OmitLastUpdated bool
	// Size is the minimum length of the line in bytes (0: natural size, about
	// 0.5–2 KB). DocumentReference and DiagnosticReport grow an attachment,
	// Observation grows components, the other types grow their narrative.
	// Lines exceed Size by at most one Observation component (< 300 bytes).
	Size int
}

// typeOrder lists the supported types so that referenced types come first.
var typeOrder = []string{
	"Organization", "Practitioner", "Patient", "Encounter", "Observation", "Condition",
	"MedicationRequest", "Procedure", "Immunization", "AllergyIntolerance",
	"DiagnosticReport", "DocumentReference",
}

// Types returns the resource types the generator supports, referenced types
// (Organization, Practitioner, Patient, Encounter) first.
func Types() []string { return slices.Clone(typeOrder) }

// Supported reports whether the generator can produce resources of typ.
func Supported(typ string) bool { return slices.Contains(typeOrder, typ) }

// refRing is how many recent ids per type the generator keeps as reference
// targets; bounded so that long streams use constant memory.
const refRing = 256

// Generator produces resources deterministically from its seed. It is not safe
// for concurrent use.
type Generator struct {
	r     rng
	clock time.Time
	refs  map[string][]string
	next  map[string]int
}

// New returns a generator whose output depends only on seed and the sequence
// of calls made on it.
func New(seed int64) *Generator {
	return &Generator{
		r:     rng{s: uint64(seed) ^ 0x9e3779b97f4a7c15},
		clock: DefaultStart,
		refs:  map[string][]string{},
		next:  map[string]int{},
	}
}

// SetClock sets the lastUpdated the next resource without Options.LastUpdated gets.
func (g *Generator) SetClock(t time.Time) { g.clock = t.UTC() }

// Resource returns one NDJSON line (without the newline) holding a resource
// of type typ, which must be one of Types().
func (g *Generator) Resource(typ string, o Options) ([]byte, error) {
	return g.AppendResource(nil, typ, o)
}

// AppendResource appends one resource line (without the newline) to dst.
func (g *Generator) AppendResource(dst []byte, typ string, o Options) ([]byte, error) {
	build, ok := builders[typ]
	if !ok {
		return dst, fmt.Errorf("gen: unsupported resource type %q", typ)
	}
	if o.Size < 0 || o.Size > MaxSize {
		return dst, fmt.Errorf("gen: size %d outside 0..%d", o.Size, MaxSize)
	}
	id := o.ID
	if id == "" {
		id = g.uuid()
	}
	lu := o.LastUpdated
	if lu.IsZero() {
		lu = g.clock
		g.clock = g.clock.Add(time.Duration(1+g.r.intn(1000)) * time.Millisecond)
	}
	meta := obj{}
	if !o.OmitVersionID {
		v := o.VersionID
		if v == "" {
			v = "1"
		}
		meta = append(meta, kv{"versionId", v})
	}
	if !o.OmitLastUpdated {
		meta = append(meta, kv{"lastUpdated", envelope.FormatTime(lu)})
	}
	c := &ctx{g: g, id: id, at: lu.UTC()}
	res := obj{{"resourceType", typ}, {"id", id}, {"meta", meta}}
	res = append(res, build(c)...)
	start := len(dst)
	dst = appendValue(dst, res)
	if o.Size > 0 && len(dst)-start < o.Size {
		dst = g.grow(dst[:start], typ, res, o.Size)
	}
	g.remember(typ, id)
	return dst, nil
}

// grow re-serialises res with padding so that its line is at least size bytes.
func (g *Generator) grow(dst []byte, typ string, res obj, size int) []byte {
	start := len(dst)
	switch typ {
	case "DocumentReference", "DiagnosticReport":
		// The attachment's data holds base64 text; find it and fill it.
		att := findAttachment(res)
		att.setData("")
		base := len(appendValue(dst, res)) - start
		need := size - base
		n := (need*3 + 3) / 4 // raw bytes whose base64 is >= need
		att.setData(base64.StdEncoding.EncodeToString(g.text(n)))
	case "Observation":
		base := len(appendValue(dst, res)) - start
		var comps arr
		var scratch []byte
		total := base + len(`,"component":[]`)
		for total < size {
			cp := g.component()
			scratch = appendValue(scratch[:0], cp)
			total += len(scratch) + 1
			comps = append(comps, cp)
		}
		res = append(res, kv{"component", comps})
	default:
		div := func(words string) string {
			return `<div xmlns="http://www.w3.org/1999/xhtml">` + words + `</div>`
		}
		probe := append(slices.Clone(res[:3]), kv{"text", obj{{"status", "generated"}, {"div", div("")}}})
		probe = append(probe, res[3:]...)
		base := len(appendValue(dst, probe)) - start
		probe[3].v = obj{{"status", "generated"}, {"div", div(string(g.text(size - base)))}}
		res = probe
	}
	return appendValue(dst[:start], res)
}

// attachmentRef lets grow fill the data of the attachment the builder created.
type attachmentRef struct{ o obj }

func (a attachmentRef) setData(s string) {
	for i := range a.o {
		if a.o[i].k == "data" {
			a.o[i].v = s
		}
	}
}

// findAttachment returns the first attachment (an obj with a "data" member)
// in res, searching content[].attachment and presentedForm[].
func findAttachment(res obj) attachmentRef {
	var found obj
	var walk func(v any)
	walk = func(v any) {
		if found != nil {
			return
		}
		switch x := v.(type) {
		case obj:
			for _, m := range x {
				if m.k == "data" {
					found = x
					return
				}
			}
			for _, m := range x {
				walk(m.v)
			}
		case arr:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(res)
	return attachmentRef{found}
}

func (g *Generator) remember(typ, id string) {
	r := g.refs[typ]
	if len(r) < refRing {
		g.refs[typ] = append(r, id)
		return
	}
	i := g.next[typ]
	r[i] = id
	g.next[typ] = (i + 1) % refRing
}

// ref returns a reference to a recent resource of typ, or "" when there is none.
func (g *Generator) ref(typ string) string {
	r := g.refs[typ]
	if len(r) == 0 {
		return ""
	}
	return typ + "/" + r[g.r.intn(len(r))]
}

func (g *Generator) uuid() string {
	a, b := g.r.next(), g.r.next()
	const hx = "0123456789abcdef"
	var out [36]byte
	j := 0
	for i := 0; i < 32; i++ {
		if i == 8 || i == 12 || i == 16 || i == 20 {
			out[j] = '-'
			j++
		}
		var nib uint64
		if i < 16 {
			nib = a >> (60 - 4*uint(i)) & 0xF
		} else {
			nib = b >> (60 - 4*uint(i-16)) & 0xF
		}
		out[j] = hx[nib]
		j++
	}
	return string(out[:])
}

// text returns exactly n bytes of synthetic clinical prose (ASCII words).
func (g *Generator) text(n int) []byte {
	if n <= 0 {
		return nil
	}
	b := make([]byte, 0, n+16)
	for len(b) < n {
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = append(b, noteWords[g.r.intn(len(noteWords))]...)
	}
	return b[:n]
}

// rng is splitmix64: tiny, fast and fixed forever, so generated files never
// change with the Go release.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// intn returns a number in [0, n); n must be > 0.
func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

func pick[T any](r *rng, xs []T) T { return xs[r.intn(len(xs))] }
