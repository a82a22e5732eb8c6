package publish_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// s3Headers records the SSE headers of every S3 PUT the gateway forwards.
type s3Headers struct {
	next http.Handler
	mu   sync.Mutex
	puts []http.Header
}

func (h *s3Headers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPut {
		h.mu.Lock()
		h.puts = append(h.puts, r.Header.Clone())
		h.mu.Unlock()
	}
	h.next.ServeHTTP(w, r)
}

func (h *s3Headers) all() []http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]http.Header(nil), h.puts...)
}

func newS3(t *testing.T, env *localaws.Env) (*s3.Client, *s3Headers) {
	t.Helper()
	rec := &s3Headers{next: gofakes3.New(s3mem.New(), gofakes3.WithAutoBucket(true)).Server()}
	env.Gateway.Handle(localaws.ServiceS3, rec)
	c := s3.NewFromConfig(env.Config(), func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("artifacts")}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	return c, rec
}

var (
	testWindow = envelope.Window{Since: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC), Until: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	testExport = envelope.ExportRef{DatastoreID: "ds1", JobID: "job1"}
)

func patientLine(id, version string, pad int) []byte {
	meta := `"meta":{"lastUpdated":"2026-11-21T09:30:00.000Z"}`
	if version != "" {
		meta = `"meta":{"versionId":"` + version + `","lastUpdated":"2026-11-21T09:30:00.000Z"}`
	}
	return []byte(`{"resourceType":"Patient","id":"` + id + `",` + meta + `,"text":{"div":"` + strings.Repeat("ä", pad) + `"}}`)
}

func resourceOf(line []byte, id, version string) envelope.Resource {
	return envelope.Resource{ResourceType: "Patient", ID: id, VersionID: version, LastUpdated: "2026-11-21T09:30:00.000Z", Raw: line}
}

func TestEmitInlineIsTheByteExactDetail(t *testing.T) {
	r := newRig(t, fakeeventbridge.Options{})
	p := r.publisher(t, publish.Config{})
	em := &publish.Emitter{Publisher: p, Window: testWindow, Export: testExport}
	ctx := context.Background()
	line := patientLine("p1", "", 10)
	res, err := em.Emit(ctx, resourceOf(line, "p1", ""), nil)
	if err != nil {
		t.Fatalf("Emit: %v", err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	wantID := "Patient/p1/_history/" + envelope.ContentVersion(line)
	if res.EventID != wantID || res.ClaimChecked {
		t.Fatalf("result = %+v, want id %s", res, wantID)
	}
	want := envelope.AppendDetail(nil, resourceOf(line, "p1", ""), testWindow, testExport, nil)
	got := r.sink.Events()
	if len(got) != 1 || string(got[0].Event.Detail) != string(want) {
		t.Fatalf("detail = %s\nwant     %s", got[0].Event.Detail, want)
	}
}

func TestClaimCheckLargeResource(t *testing.T) {
	for _, kms := range []string{"", "arn:aws:kms:us-east-1:000000000000:key/cdc"} {
		t.Run("kms="+kms, func(t *testing.T) {
			const limit = 4096
			r := newRig(t, fakeeventbridge.Options{MaxRequestBytes: limit})
			s3c, hdrs := newS3(t, r.env)
			p := r.publisher(t, publish.Config{MaxEntryBytes: limit})
			em := &publish.Emitter{Publisher: p, Window: testWindow, Export: testExport,
				ClaimCheck: &publish.ClaimCheck{S3: s3c, Bucket: "artifacts", KMSKeyID: kms}}
			ctx := context.Background()

			big := patientLine("big-1", "7", 5000) // ~10 KB of two-byte characters
			small := patientLine("small-1", "1", 10)
			for _, rr := range []envelope.Resource{resourceOf(big, "big-1", "7"), resourceOf(small, "small-1", "1")} {
				if _, err := em.Emit(ctx, rr, nil); err != nil {
					t.Fatalf("Emit: %v", err)
				}
			}
			// A retried invocation writes the same object again and publishes the same eventId.
			res, err := em.Emit(ctx, resourceOf(big, "big-1", "7"), nil)
			if err != nil || !res.ClaimChecked || res.EventID != "Patient/big-1/_history/7" {
				t.Fatalf("Emit again: %+v %v", res, err)
			}
			if err := p.Flush(ctx); err != nil {
				t.Fatalf("Flush: %v", err)
			}
			if em.ClaimChecked() != 2 {
				t.Fatalf("claim-checked %d, want 2", em.ClaimChecked())
			}
			evs := r.sink.Events()
			if len(evs) != 3 {
				t.Fatalf("delivered %d, want 3", len(evs))
			}
			var d envelope.Detail
			if err := json.Unmarshal(evs[0].Event.Detail, &d); err != nil {
				t.Fatalf("decode detail: %v", err)
			}
			sum := sha256.Sum256(big)
			wantKey := "claim-check/Patient/" + hex.EncodeToString(sum[:]) + ".json"
			if d.EventID != "Patient/big-1/_history/7" || d.Resource != nil || d.ResourceRef == nil ||
				*d.ResourceRef != (envelope.ResourceRef{Bucket: "artifacts", Key: wantKey, Size: int64(len(big)), SHA256: hex.EncodeToString(sum[:])}) {
				t.Fatalf("detail = %+v ref %+v", d, d.ResourceRef)
			}
			if string(evs[2].Event.Detail) != string(evs[0].Event.Detail) {
				t.Fatal("the retried emit produced a different event")
			}
			var small1 envelope.Detail
			_ = json.Unmarshal(evs[1].Event.Detail, &small1)
			if small1.ResourceRef != nil || string(small1.Resource) != string(small) {
				t.Fatalf("small resource was not inline: %+v", small1)
			}
			obj, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("artifacts"), Key: aws.String(wantKey)})
			if err != nil {
				t.Fatalf("get claim-check: %v", err)
			}
			body, _ := io.ReadAll(obj.Body)
			if string(body) != string(big) {
				t.Fatal("claim-check object is not the exported line byte for byte")
			}
			puts := hdrs.all()
			if len(puts) < 2 {
				t.Fatalf("saw %d PUTs", len(puts))
			}
			for _, h := range puts[len(puts)-2:] {
				sse, keyID := h.Get("X-Amz-Server-Side-Encryption"), h.Get("X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id")
				if kms == "" && (sse != "" || keyID != "") {
					t.Fatalf("SSE headers sent without a key: %q %q", sse, keyID)
				}
				if kms != "" && (sse != "aws:kms" || keyID != kms) {
					t.Fatalf("SSE headers = %q %q, want aws:kms %s", sse, keyID, kms)
				}
			}
		})
	}
}

func TestOversizedWithoutClaimCheckOrEvenWithIt(t *testing.T) {
	r := newRig(t, fakeeventbridge.Options{})
	p := r.publisher(t, publish.Config{MaxEntryBytes: 2000})
	em := &publish.Emitter{Publisher: p, Window: testWindow, Export: testExport}
	var tl *publish.EntryTooLargeError
	if _, err := em.Emit(context.Background(), resourceOf(patientLine("x", "1", 2000), "x", "1"), nil); !errors.As(err, &tl) {
		t.Fatalf("no claim-check: err = %v", err)
	}
	// An id so long that not even the reference fits: nothing is written.
	s3c, hdrs := newS3(t, r.env)
	em.ClaimCheck = &publish.ClaimCheck{S3: s3c, Bucket: "artifacts"}
	longID := strings.Repeat("a", 900)
	if _, err := em.Emit(context.Background(), resourceOf(patientLine(longID, "1", 2000), longID, "1"), nil); !errors.As(err, &tl) {
		t.Fatalf("huge id: err = %v", err)
	}
	if n := len(hdrs.all()); n != 1 { // only the CreateBucket PUT
		t.Fatalf("%d PUTs, want only CreateBucket", n)
	}
	if p.Pending() != 0 {
		t.Fatal("an oversized event was queued")
	}
}

func TestCheckJSONKeepsBrokenLinesOutOfClaimChecks(t *testing.T) {
	r := newRig(t, fakeeventbridge.Options{})
	s3c, hdrs := newS3(t, r.env)
	p := r.publisher(t, publish.Config{MaxEntryBytes: 2000})
	em := &publish.Emitter{Publisher: p, Window: testWindow, Export: testExport, CheckJSON: true,
		ClaimCheck: &publish.ClaimCheck{S3: s3c, Bucket: "artifacts"}}
	line := patientLine("x", "1", 2000)
	broken := append(append([]byte(nil), line[:len(line)-1]...), `,"a":tru}`...)
	var inv *publish.InvalidResourceError
	if _, err := em.Emit(context.Background(), resourceOf(broken, "x", "1"), nil); !errors.As(err, &inv) || strings.Contains(err.Error(), "Patient/x") {
		t.Fatalf("broken line: err = %v (must not name the resource)", err)
	}
	if n := len(hdrs.all()); n != 1 || p.Pending() != 0 { // only the CreateBucket PUT
		t.Fatalf("%d PUTs, %d pending: a broken line was stored or queued", n, p.Pending())
	}
	if res, err := em.Emit(context.Background(), resourceOf(line, "x", "1"), nil); err != nil || !res.ClaimChecked {
		t.Fatalf("valid line: %+v %v", res, err)
	}
	em.CheckJSON = false // the lines were validated: no second check
	if res, err := em.Emit(context.Background(), resourceOf(broken, "x", "1"), nil); err != nil || !res.ClaimChecked {
		t.Fatalf("unchecked: %+v %v", res, err)
	}
}

func TestClaimCheckKey(t *testing.T) {
	// Content-addressed: no resource id in the key (S3 keys are not
	// encrypted with the object and reach listings and access logs).
	if k := publish.ClaimCheckKey("Observation", "ab12"); k != "claim-check/Observation/ab12.json" {
		t.Fatalf("key = %s", k)
	}
	if k := publish.ClaimCheckKey("Patient/../x", "1"); strings.Count(k, "/") != 2 {
		t.Fatalf("a type added key levels: %s", k)
	}
	var cc *publish.ClaimCheck
	if _, err := cc.Store(context.Background(), "Patient", nil); err == nil {
		t.Fatal("nil claim-check stored")
	}
}

func TestEmitterInlineExactlyAtTheLimitAndOneByteOver(t *testing.T) {
	const limit = 3000
	r := newRig(t, fakeeventbridge.Options{MaxRequestBytes: limit})
	s3c, _ := newS3(t, r.env)
	p := r.publisher(t, publish.Config{MaxEntryBytes: limit})
	em := &publish.Emitter{Publisher: p, Window: testWindow, Export: testExport, ClaimCheck: &publish.ClaimCheck{S3: s3c, Bucket: "artifacts"}}
	ctx := context.Background()
	// lineOfEntrySize builds a line whose inline entry is exactly size bytes,
	// with multi-byte characters in it.
	lineOfEntrySize := func(id string, size int) []byte {
		base := patientLine(id, "1", 100) // 100 two-byte characters
		entry := p.EntrySize(len(envelope.AppendDetail(nil, resourceOf(base, id, "1"), testWindow, testExport, nil)))
		pad := size - entry
		if pad < 0 {
			t.Fatalf("base entry %d > %d", entry, size)
		}
		line := []byte(strings.Replace(string(base), `"text":{"div":"`, `"text":{"div":"`+strings.Repeat("x", pad), 1))
		if got := p.EntrySize(len(envelope.AppendDetail(nil, resourceOf(line, id, "1"), testWindow, testExport, nil))); got != size {
			t.Fatalf("built entry of %d bytes, want %d", got, size)
		}
		return line
	}
	at := lineOfEntrySize("at", limit)
	over := lineOfEntrySize("over", limit+1)
	resAt, err := em.Emit(ctx, resourceOf(at, "at", "1"), nil)
	if err != nil || resAt.ClaimChecked {
		t.Fatalf("entry at the limit: %+v %v", resAt, err)
	}
	resOver, err := em.Emit(ctx, resourceOf(over, "over", "1"), nil)
	if err != nil || !resOver.ClaimChecked {
		t.Fatalf("entry one byte over: %+v %v", resOver, err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	evs := r.sink.Events()
	if len(evs) != 2 || r.em.Stats().RejectedCalls != 0 {
		t.Fatalf("delivered %d, stats %+v", len(evs), r.em.Stats())
	}
	if p.EntrySize(len(evs[0].Event.Detail)) != limit {
		t.Fatalf("delivered entry of %d bytes, want exactly %d", p.EntrySize(len(evs[0].Event.Detail)), limit)
	}
}
