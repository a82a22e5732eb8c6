package prepare

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
)

// FastPathMaxSpan bounds how far back a window reads the fast path's
// record objects (one per fast-path invocation, docs/FASTPATH.md): a
// longer window — a catch-up after an outage, a replay — publishes what it
// exports without consulting them (the fast path's versions come again,
// with the same eventIds).
const FastPathMaxSpan = 6 * time.Hour

// fastPathSlack widens the span read to the left, for the clocks of the
// fast path's writer and HealthLake's meta.lastUpdated.
const fastPathSlack = time.Minute

// fastPathReaders is how many record objects are read at once.
const fastPathReaders = 8

// FastPathSet returns the versions the fast path published that a window
// of the export window w may meet: those recorded in the objects written
// from w.Since (less a minute's slack) until now. It returns nil — consult
// nothing — when the fast path is off, the run does not continue a
// committed window (a first window or a replay publishes on purpose), or
// the span is longer than FastPathMaxSpan.
func (h *Handler) FastPathSet(ctx context.Context, since time.Time, continues bool) (*delivered.Set, error) {
	if !h.cfg.FastPath || !continues {
		return nil, nil
	}
	from := since.Add(-fastPathSlack)
	now := time.Now()
	if h.cfg.Now != nil {
		now = h.cfg.Now()
	}
	if now.Sub(from) > FastPathMaxSpan {
		return nil, nil
	}
	var keys []string
	for i, prefix := range delivered.FastPathHours(from, now) {
		startAfter := ""
		if i == 0 {
			startAfter = delivered.FastPathStartAfter(from)
		}
		more, err := h.listKeys(ctx, prefix, startAfter)
		if err != nil {
			return nil, err
		}
		keys = append(keys, more...)
	}
	set := &delivered.Set{}
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		next     = make(chan string)
	)
	for range min(fastPathReaders, len(keys)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local []delivered.Entry
			for key := range next {
				err := h.readEntries(ctx, key, func(e delivered.Entry) { local = append(local, e) })
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
			mu.Lock()
			for _, e := range local {
				set.Add(e)
			}
			mu.Unlock()
		}()
	}
	for _, k := range keys {
		next <- k
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return set, nil
}

// listKeys returns the keys under prefix (after startAfter when set).
func (h *Handler) listKeys(ctx context.Context, prefix, startAfter string) ([]string, error) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(h.cfg.Bucket), Prefix: aws.String(prefix)}
	if startAfter != "" {
		in.StartAfter = aws.String(startAfter)
	}
	var keys []string
	p := s3.NewListObjectsV2Paginator(h.s3, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list s3://%s/%s: %w", h.cfg.Bucket, prefix, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys, nil
}

// readEntries calls fn with each entry of the index object at key.
func (h *Handler) readEntries(ctx context.Context, key string, fn func(delivered.Entry)) error {
	obj, err := h.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(h.cfg.Bucket), Key: aws.String(key)})
	if err != nil {
		return fmt.Errorf("get s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	defer obj.Body.Close()
	if err := delivered.ReadAll(obj.Body, nil, func(e delivered.Entry) error { fn(e); return nil }); err != nil {
		return fmt.Errorf("s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	return nil
}
