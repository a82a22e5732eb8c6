package resume

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

// cutBody serves data[from:] and fails with io.ErrUnexpectedEOF after
// limit bytes (limit < 0: never).
type cutBody struct {
	data  []byte
	limit int
	chunk int
}

func (b *cutBody) Read(p []byte) (int, error) {
	if len(b.data) == 0 {
		return 0, io.EOF
	}
	if b.limit == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n := min(len(p), len(b.data), b.chunk)
	if b.limit > 0 {
		n = min(n, b.limit)
		b.limit -= n
	}
	copy(p, b.data[:n])
	b.data = b.data[n:]
	return n, nil
}

func (b *cutBody) Close() error { return nil }

// store is an object whose successive bodies end after the given cuts.
type store struct {
	data    []byte
	version string
	cuts    []int // bytes each successive reopened body serves before failing; -1 whole
	opened  []int64
	openErr error
}

func (s *store) open(_ context.Context, off int64) (io.ReadCloser, string, error) {
	s.opened = append(s.opened, off)
	if s.openErr != nil {
		return nil, "", s.openErr
	}
	limit := -1
	if len(s.cuts) > 0 {
		limit, s.cuts = s.cuts[0], s.cuts[1:]
	}
	return &cutBody{data: s.data[off:], limit: limit, chunk: 7}, s.version, nil
}

func fast() Options { return Options{Base: time.Microsecond, Max: time.Microsecond} }

func TestAReadCutPartWayGoesOnFromTheNextByte(t *testing.T) {
	data := []byte{}
	for i := range 1000 {
		data = append(data, fmt.Sprintf("line %d\n", i)...)
	}
	s := &store{data: data, version: `"v1"`, cuts: []int{100, 1, 2000, -1}}
	first := &cutBody{data: data, limit: 333, chunk: 7}
	r := New(context.Background(), first, `"v1"`, s.open, fast())
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, want the object's %d unchanged", len(got), len(data))
	}
	if r.Resumed() != 4 {
		t.Errorf("Resumed = %d, want 4", r.Resumed())
	}
	want := []int64{333, 433, 434, 2434}
	if fmt.Sprint(s.opened) != fmt.Sprint(want) {
		t.Errorf("reopened at %v, want %v", s.opened, want)
	}
}

func TestAReadThatMakesNoProgressGivesUp(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 100)
	s := &store{data: data, version: "v", cuts: []int{0, 0, 0, 0, 0}}
	r := New(context.Background(), &cutBody{data: data, limit: 10, chunk: 100}, "v", s.open, fast())
	got, err := io.ReadAll(r)
	if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want the read error after %d stalls", err, DefaultMaxStalls)
	}
	if len(got) != 10 || len(s.opened) != DefaultMaxStalls {
		t.Errorf("read %d bytes over %d reopens, want 10 over %d", len(got), len(s.opened), DefaultMaxStalls)
	}
	if _, again := r.Read(make([]byte, 1)); again == nil {
		t.Error("a Reader that gave up read again")
	}
}

func TestAnObjectChangedUnderTheReadIsRefused(t *testing.T) {
	data := bytes.Repeat([]byte("y"), 100)
	s := &store{data: data, version: `"v2"`}
	r := New(context.Background(), &cutBody{data: data, limit: 50, chunk: 100}, `"v1"`, s.open, fast())
	_, err := io.ReadAll(r)
	var changed *ChangedError
	if !errors.As(err, &changed) || changed.Offset != 50 {
		t.Fatalf("err = %v, want a ChangedError at byte 50", err)
	}
}

func TestAFailedReopenEndsTheRead(t *testing.T) {
	data := bytes.Repeat([]byte("z"), 100)
	denied := errors.New("AccessDenied")
	s := &store{data: data, version: "v", openErr: denied}
	r := New(context.Background(), &cutBody{data: data, limit: 40, chunk: 100}, "v", s.open, fast())
	_, err := io.ReadAll(r)
	if !errors.Is(err, denied) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want both the read error and the reopen's", err)
	}
}

func TestAnEndedContextIsNotResumed(t *testing.T) {
	data := bytes.Repeat([]byte("w"), 100)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := &store{data: data, version: "v"}
	r := New(ctx, &cutBody{data: data, limit: 40, chunk: 100}, "v", s.open, fast())
	if _, err := io.ReadAll(r); err == nil {
		t.Fatal("read on past an ended context")
	}
	if len(s.opened) != 0 {
		t.Errorf("reopened %d times after the context ended", len(s.opened))
	}
}
