package fakehealthlake

import (
	"errors"
	"fmt"
	"os"
)

// errBodyRead marks a failure to read a stored body back: a request that
// needs it answers 500, an export fails.
var errBodyRead = errors.New("read stored resource")

// bodyStore keeps the stored bytes of every version of a data store. add
// copies a body and returns where it is; read gives it back (the caller must not modify
// the bytes). Both are called with the emulator's lock held; reader returns
// a view that reads every body added so far without the lock.
type bodyStore interface {
	add(body []byte) (off int64, err error)
	read(off int64, n uint32) ([]byte, error)
	reader() bodyReader
	close() error
}

// bodyReader reads bodies stored before it was made, without the lock.
type bodyReader interface {
	read(off int64, n uint32) ([]byte, error)
}

// memBodies keeps every body in memory: off is the body's index.
type memBodies struct{ bodies [][]byte }

func (m *memBodies) add(body []byte) (int64, error) {
	m.bodies = append(m.bodies, append([]byte(nil), body...))
	return int64(len(m.bodies) - 1), nil
}

func (m *memBodies) read(off int64, n uint32) ([]byte, error) { return memView(m.bodies).read(off, n) }

// reader captures the list as it is: later adds never change its elements.
func (m *memBodies) reader() bodyReader { return memView(m.bodies) }

func (m *memBodies) close() error { return nil }

type memView [][]byte

func (v memView) read(off int64, n uint32) ([]byte, error) {
	if off < 0 || off >= int64(len(v)) || uint32(len(v[off])) != n {
		return nil, fmt.Errorf("%w: body %d not stored", errBodyRead, off)
	}
	return v[off], nil
}

// newBodyStore returns an empty body store for a data store: in memory, or
// in a file of Options.BodyDir.
func (e *Emulator) newBodyStore() bodyStore {
	if e.opts.BodyDir != "" {
		return &fileBodies{dir: e.opts.BodyDir}
	}
	return &memBodies{}
}

// fileBufSize is how many bytes fileBodies gathers before writing them.
const fileBufSize = 1 << 20

// fileBodies appends every body to one temporary file of dir (created at
// the first add, removed by close): off is the body's offset in the file.
// Recent bodies wait in buf until it is full.
type fileBodies struct {
	dir  string
	f    *os.File
	size int64  // bytes written to f
	buf  []byte // bytes added after size, not yet written
	err  error  // the write error after which nothing more is stored
}

func (s *fileBodies) add(body []byte) (int64, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.f == nil {
		f, err := os.CreateTemp(s.dir, "healthlake-bodies-*")
		if err != nil {
			return 0, fmt.Errorf("create body file: %w", err)
		}
		s.f = f
	}
	off := s.size + int64(len(s.buf))
	if len(s.buf)+len(body) > fileBufSize {
		if err := s.flush(); err != nil {
			return 0, err
		}
	}
	if len(body) < fileBufSize {
		s.buf = append(s.buf, body...)
		return off, nil
	}
	n, err := s.f.Write(body)
	s.size += int64(n)
	if err != nil {
		s.err = fmt.Errorf("write body file: %w", err)
		return 0, s.err
	}
	return off, nil
}

// flush writes the gathered bytes to the file.
func (s *fileBodies) flush() error {
	if s.err != nil {
		return s.err
	}
	if len(s.buf) == 0 {
		return nil
	}
	n, err := s.f.Write(s.buf)
	s.size += int64(n)
	s.buf = s.buf[:0]
	if err != nil {
		s.err = fmt.Errorf("write body file: %w", err)
		return s.err
	}
	return nil
}

func (s *fileBodies) read(off int64, n uint32) ([]byte, error) {
	if off >= s.size {
		start := off - s.size
		if start+int64(n) > int64(len(s.buf)) {
			return nil, fmt.Errorf("%w: body at %d not stored", errBodyRead, off)
		}
		return append([]byte(nil), s.buf[start:start+int64(n)]...), nil
	}
	return fileView{s.f}.read(off, n)
}

// reader writes out the gathered bytes, so that the file alone holds every
// body stored so far (later writes only append).
func (s *fileBodies) reader() bodyReader {
	_ = s.flush() // a failed write shows as a failed read
	return fileView{s.f}
}

// close closes and removes the file; a second close does nothing.
func (s *fileBodies) close() error {
	if s.f == nil {
		return nil
	}
	name := s.f.Name()
	err := s.f.Close()
	if rerr := os.Remove(name); rerr != nil && err == nil {
		err = rerr
	}
	s.f, s.buf, s.size = nil, nil, 0
	s.err = errors.New("body file closed")
	if err != nil {
		return fmt.Errorf("close body file: %w", err)
	}
	return nil
}

// fileView reads bodies from the file (safe without the lock: ReadAt).
type fileView struct{ f *os.File }

func (v fileView) read(off int64, n uint32) ([]byte, error) {
	if v.f == nil {
		return nil, fmt.Errorf("%w: no body file", errBodyRead)
	}
	b := make([]byte, n)
	if _, err := v.f.ReadAt(b, off); err != nil {
		return nil, fmt.Errorf("%w: %w", errBodyRead, err)
	}
	return b, nil
}
