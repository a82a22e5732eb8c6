package fakehealthlake

import (
	"errors"
	"fmt"
)

// errBodyRead marks a failure to read a stored body back: a request that
// needs it answers 500, an export fails.
var errBodyRead = errors.New("read stored resource")

// bodyStore keeps the stored bytes of every version of a data store. add
// returns where a body is; read gives it back (the caller must not modify
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
	m.bodies = append(m.bodies, body)
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

// newBodyStore returns an empty body store for a data store.
func (e *Emulator) newBodyStore() bodyStore { return &memBodies{} }
