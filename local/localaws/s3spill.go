package localaws

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"

	"github.com/johannesboyne/gofakes3"
)

// SpillThreshold is the body size from which a spilling S3 keeps an object's
// bytes on disk instead of in memory.
const SpillThreshold = 64 << 10

// s3Backend is what the local S3 stores objects in: gofakes3's in-memory
// backend, which also keeps versions.
type s3Backend interface {
	gofakes3.Backend
	gofakes3.VersionedBackend
}

// spillBackend keeps the bodies of large objects (at least SpillThreshold
// bytes) in one append-only temporary file and everything else — small
// bodies, metadata, versions, listings — in the in-memory backend it wraps.
// The wrapped backend stores a spilled object as a stub: a per-process
// random marker and the record's number, so copies and versions of the
// object find its bytes without a lookup by key. Listings and conditional
// writes see the real sizes and hashes through a key index. Bytes are never
// reclaimed before Close (a simulation's run is short-lived).
type spillBackend struct {
	s3Backend
	marker []byte

	mu   sync.Mutex
	file *os.File
	end  int64
	recs []spillRec
	// current maps bucket + "/" + key to the record of its current
	// (spilled) version.
	current map[string]int
}

type spillRec struct {
	off, size int64
	hash      []byte
}

// newSpillBackend wraps inner, keeping large bodies in a new temporary file
// in dir.
func newSpillBackend(inner s3Backend, dir string) (*spillBackend, error) {
	f, err := os.CreateTemp(dir, "local-s3-*.bin")
	if err != nil {
		return nil, fmt.Errorf("s3 spill file: %w", err)
	}
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("s3 spill marker: %w", err)
	}
	return &spillBackend{
		s3Backend: inner, file: f, current: map[string]int{},
		marker: []byte("\x00localaws-spill:" + hex.EncodeToString(nonce[:]) + ":"),
	}, nil
}

// Close removes the spill file.
func (b *spillBackend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	name := b.file.Name()
	err := b.file.Close()
	if rerr := os.Remove(name); err == nil {
		err = rerr
	}
	return err
}

func spillKey(bucket, key string) string { return bucket + "/" + key }

// record returns the record a stored body stands for, if it is a stub.
func (b *spillBackend) record(body []byte) (spillRec, bool) {
	if !bytes.HasPrefix(body, b.marker) {
		return spillRec{}, false
	}
	n, err := strconv.Atoi(string(body[len(b.marker):]))
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil || n < 0 || n >= len(b.recs) {
		return spillRec{}, false
	}
	return b.recs[n], true
}

// PutObject stores large bodies in the spill file and a stub in memory.
func (b *spillBackend) PutObject(bucket, key string, meta map[string]string, input io.Reader, size int64, cond *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	if size < SpillThreshold {
		res, err := b.s3Backend.PutObject(bucket, key, meta, input, size, b.conditions(bucket, key, cond))
		if err == nil {
			b.mu.Lock()
			delete(b.current, spillKey(bucket, key))
			b.mu.Unlock()
		}
		return res, err
	}
	// Writers append at offsets they reserve under the lock and write
	// outside it.
	buf, err := io.ReadAll(io.LimitReader(input, size+1))
	if err != nil {
		return gofakes3.PutObjectResult{}, fmt.Errorf("s3 spill: read body: %w", err)
	}
	if int64(len(buf)) != size {
		return gofakes3.PutObjectResult{}, gofakes3.ErrIncompleteBody
	}
	hash := md5.Sum(buf)
	b.mu.Lock()
	off := b.end
	b.end += size
	n := len(b.recs)
	b.recs = append(b.recs, spillRec{off: off, size: size, hash: hash[:]})
	b.mu.Unlock()
	if _, err := b.file.WriteAt(buf, off); err != nil {
		return gofakes3.PutObjectResult{}, fmt.Errorf("s3 spill: write body: %w", err)
	}
	stub := append(append([]byte(nil), b.marker...), strconv.Itoa(n)...)
	res, err := b.s3Backend.PutObject(bucket, key, meta, bytes.NewReader(stub), int64(len(stub)), b.conditions(bucket, key, cond))
	if err != nil {
		return res, err
	}
	b.mu.Lock()
	b.current[spillKey(bucket, key)] = n
	b.mu.Unlock()
	return res, nil
}

// conditions checks If-Match against the real hash of a spilled object
// (the wrapped backend only knows the stub's) and passes the rest on. A
// failed If-Match returns conditions that cannot hold.
func (b *spillBackend) conditions(bucket, key string, cond *gofakes3.PutConditions) *gofakes3.PutConditions {
	if cond == nil || cond.IfMatch == nil {
		return cond
	}
	b.mu.Lock()
	n, ok := b.current[spillKey(bucket, key)]
	var hash []byte
	if ok {
		hash = b.recs[n].hash
	}
	b.mu.Unlock()
	if !ok {
		return cond
	}
	out := *cond
	out.IfMatch = nil
	etag := `"` + hex.EncodeToString(hash) + `"`
	if *cond.IfMatch != etag && *cond.IfMatch != "*" {
		impossible := `"never"`
		out.IfMatch = &impossible
	}
	return &out
}

// stubMax bounds the size of a stub: the marker and a record number.
func (b *spillBackend) stubMax() int64 { return int64(len(b.marker) + 20) }

// resolve turns a stub object (read whole) into the spilled one, with the
// range applied; spilled is false for any other object, whose contents are
// then gone (the caller reads it again).
func (b *spillBackend) resolve(obj *gofakes3.Object, rng *gofakes3.ObjectRangeRequest, withBody bool) (out *gofakes3.Object, spilled bool, err error) {
	if obj == nil || obj.Contents == nil || obj.IsDeleteMarker || obj.Size > b.stubMax() {
		return obj, false, nil
	}
	head, err := io.ReadAll(obj.Contents)
	_ = obj.Contents.Close()
	if err != nil {
		return nil, false, fmt.Errorf("s3 spill: read stub: %w", err)
	}
	rec, ok := b.record(head)
	if !ok {
		obj.Contents = io.NopCloser(bytes.NewReader(head))
		return obj, false, nil
	}
	obj.Size, obj.Hash, obj.Range = rec.size, rec.hash, nil
	if !withBody {
		obj.Contents = io.NopCloser(bytes.NewReader(nil))
		return obj, true, nil
	}
	start, length := int64(0), rec.size
	if rng != nil {
		r, err := rng.Range(rec.size)
		if err != nil {
			return nil, true, err
		}
		if r != nil {
			obj.Range = r
			start, length = r.Start, r.Length
		}
	}
	obj.Contents = io.NopCloser(io.NewSectionReader(b.file, rec.off+start, length))
	return obj, true, nil
}

// get reads an object (or version) whole from the wrapped backend; a stub
// resolves to the spilled body, anything else is read again with the range.
func (b *spillBackend) get(read func(*gofakes3.ObjectRangeRequest) (*gofakes3.Object, error), rng *gofakes3.ObjectRangeRequest, withBody bool) (*gofakes3.Object, error) {
	obj, err := read(nil)
	if err != nil {
		return nil, err
	}
	out, spilled, err := b.resolve(obj, rng, withBody)
	if err != nil || spilled || rng == nil {
		return out, err
	}
	// An object kept in memory, read again with the range applied.
	if out.Contents != nil {
		_ = out.Contents.Close()
	}
	return read(rng)
}

// GetObject reads a spilled body from the file (ranges included).
func (b *spillBackend) GetObject(bucket, key string, rng *gofakes3.ObjectRangeRequest) (*gofakes3.Object, error) {
	return b.get(func(r *gofakes3.ObjectRangeRequest) (*gofakes3.Object, error) {
		return b.s3Backend.GetObject(bucket, key, r)
	}, rng, true)
}

// GetObjectVersion reads a spilled version's body from the file.
func (b *spillBackend) GetObjectVersion(bucket, key string, v gofakes3.VersionID, rng *gofakes3.ObjectRangeRequest) (*gofakes3.Object, error) {
	return b.get(func(r *gofakes3.ObjectRangeRequest) (*gofakes3.Object, error) {
		return b.s3Backend.GetObjectVersion(bucket, key, v, r)
	}, rng, true)
}

// HeadObject answers with the spilled size and hash.
func (b *spillBackend) HeadObject(bucket, key string) (*gofakes3.Object, error) {
	head, err := b.s3Backend.HeadObject(bucket, key)
	if err != nil || head.Size > b.stubMax() {
		return head, err
	}
	return b.get(func(*gofakes3.ObjectRangeRequest) (*gofakes3.Object, error) {
		return b.s3Backend.GetObject(bucket, key, nil)
	}, nil, false)
}

// HeadObjectVersion answers with the spilled size and hash.
func (b *spillBackend) HeadObjectVersion(bucket, key string, v gofakes3.VersionID) (*gofakes3.Object, error) {
	head, err := b.s3Backend.HeadObjectVersion(bucket, key, v)
	if err != nil || head.Size > b.stubMax() {
		return head, err
	}
	return b.get(func(*gofakes3.ObjectRangeRequest) (*gofakes3.Object, error) {
		return b.s3Backend.GetObjectVersion(bucket, key, v, nil)
	}, nil, false)
}

// fixList gives spilled objects of a listing their real size and ETag.
func (b *spillBackend) fixList(bucket string, l *gofakes3.ObjectList) {
	if l == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range l.Contents {
		if n, ok := b.current[spillKey(bucket, c.Key)]; ok {
			c.Size = b.recs[n].size
			c.ETag = `"` + hex.EncodeToString(b.recs[n].hash) + `"`
		}
	}
}

// ListBucket lists with real sizes and ETags.
func (b *spillBackend) ListBucket(bucket string, prefix *gofakes3.Prefix, page gofakes3.ListBucketPage) (*gofakes3.ObjectList, error) {
	l, err := b.s3Backend.ListBucket(bucket, prefix, page)
	if err == nil {
		b.fixList(bucket, l)
	}
	return l, err
}

// DeleteObject forgets the key's spilled record (its bytes stay until
// Close; a version may still refer to them).
func (b *spillBackend) DeleteObject(bucket, key string) (gofakes3.ObjectDeleteResult, error) {
	res, err := b.s3Backend.DeleteObject(bucket, key)
	if err == nil {
		b.mu.Lock()
		delete(b.current, spillKey(bucket, key))
		b.mu.Unlock()
	}
	return res, err
}

// DeleteMulti forgets the deleted keys' spilled records.
func (b *spillBackend) DeleteMulti(bucket string, keys ...string) (gofakes3.MultiDeleteResult, error) {
	res, err := b.s3Backend.DeleteMulti(bucket, keys...)
	b.mu.Lock()
	for _, d := range res.Deleted {
		delete(b.current, spillKey(bucket, d.Key))
	}
	b.mu.Unlock()
	return res, err
}

// CopyObject copies the stub, so the copy refers to the same bytes.
func (b *spillBackend) CopyObject(srcBucket, srcKey, dstBucket, dstKey string, meta map[string]string) (gofakes3.CopyObjectResult, error) {
	res, err := b.s3Backend.CopyObject(srcBucket, srcKey, dstBucket, dstKey, meta)
	if err != nil {
		return res, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if n, ok := b.current[spillKey(srcBucket, srcKey)]; ok {
		b.current[spillKey(dstBucket, dstKey)] = n
		res.ETag = `"` + hex.EncodeToString(b.recs[n].hash) + `"`
	} else {
		delete(b.current, spillKey(dstBucket, dstKey))
	}
	return res, nil
}

// ForceDeleteBucket forgets the bucket's spilled records.
func (b *spillBackend) ForceDeleteBucket(bucket string) error {
	if err := b.s3Backend.ForceDeleteBucket(bucket); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.current {
		if len(k) > len(bucket) && k[:len(bucket)+1] == bucket+"/" {
			delete(b.current, k)
		}
	}
	return nil
}
