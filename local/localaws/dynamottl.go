package localaws

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"
)

// DefaultTTLDeleteAfter is how long after its TTL an expired item is
// deleted: DynamoDB "typically deletes expired items within two days of
// expiration" (UpdateTimeToLive API reference) — the local model takes
// the two days (Options.TTLDeleteAfter).
const DefaultTTLDeleteAfter = 48 * time.Hour

// ttlChangeInterval is how long after one UpdateTimeToLive another for the
// same table is refused ("It can take up to one hour for the change to
// fully process. Any additional UpdateTimeToLive calls for the same table
// during this one hour duration result in a ValidationException").
const ttlChangeInterval = time.Hour

// ttlSweepEvery is how often, at most, a table's expired items are looked
// for (at its next call): each look scans the table's keys.
const ttlSweepEvery = time.Hour

// ttlSpec is one table's time to live.
type ttlSpec struct {
	attr      string
	enabled   bool
	changedAt time.Time
	sweptAt   time.Time
}

// updateTTL answers UpdateTimeToLive (minidyn has none); the caller holds
// the write lock.
func (d *dynamoLimits) updateTTL(w http.ResponseWriter, r *http.Request, body []byte, h http.Handler) {
	var in struct {
		TableName               string
		TimeToLiveSpecification struct {
			AttributeName string
			Enabled       *bool
		}
	}
	if err := json.Unmarshal(body, &in); err != nil || in.TableName == "" || in.TimeToLiveSpecification.AttributeName == "" || in.TimeToLiveSpecification.Enabled == nil {
		writeDynamoValidation(w, "TableName and TimeToLiveSpecification (AttributeName, Enabled) are required")
		return
	}
	if !tableFound(w, r, h, in.TableName) {
		return
	}
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	spec := d.ttl[in.TableName]
	enable := *in.TimeToLiveSpecification.Enabled
	switch {
	case spec != nil && now.Sub(spec.changedAt) < ttlChangeInterval:
		writeDynamoValidation(w, "Time to live has been modified multiple times within a fixed interval")
		return
	case enable && spec != nil && spec.enabled:
		writeDynamoValidation(w, "TimeToLive is already enabled")
		return
	case !enable && (spec == nil || !spec.enabled):
		writeDynamoValidation(w, "TimeToLive is already disabled")
		return
	}
	d.ttl[in.TableName] = &ttlSpec{attr: in.TimeToLiveSpecification.AttributeName, enabled: enable, changedAt: now, sweptAt: now}
	writeDynamoJSON(w, map[string]any{"TimeToLiveSpecification": map[string]any{
		"AttributeName": in.TimeToLiveSpecification.AttributeName, "Enabled": enable}})
}

// describeTTL answers DescribeTimeToLive: ENABLED or DISABLED at once
// (AWS passes through ENABLING and DISABLING for up to an hour: not
// modelled).
func (d *dynamoLimits) describeTTL(w http.ResponseWriter, r *http.Request, body []byte, h http.Handler) {
	var in struct{ TableName string }
	_ = json.Unmarshal(body, &in)
	if !tableFound(w, r, h, in.TableName) {
		return
	}
	d.mu.Lock()
	spec := d.ttl[in.TableName]
	d.mu.Unlock()
	desc := map[string]any{"TimeToLiveStatus": "DISABLED"}
	if spec != nil && spec.enabled {
		desc = map[string]any{"TimeToLiveStatus": "ENABLED", "AttributeName": spec.attr}
	}
	writeDynamoJSON(w, map[string]any{"TimeToLiveDescription": desc})
}

// tableFound reports whether table exists, answering ResourceNotFoundException
// when it does not.
func tableFound(w http.ResponseWriter, r *http.Request, h http.Handler, table string) bool {
	if _, err := call(h, r, "DescribeTable", map[string]string{"TableName": table}); err != nil {
		writeDynamoError(w, "ResourceNotFoundException", "Requested resource not found: Table: "+table+" not found")
		return false
	}
	return true
}

// sweepsDue reports whether any table's expired items are to be looked for
// now: the cheap check before a request's table is read from its body.
func (d *dynamoLimits) sweepsDue() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	for _, spec := range d.ttl {
		if d.dueLocked(spec, now) {
			return true
		}
	}
	return false
}

// sweepDue reports whether table's expired items are to be looked for now.
func (d *dynamoLimits) sweepDue(table string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dueLocked(d.ttl[table], d.now())
}

// dueLocked reports whether spec's table is to be swept at now; d.mu is held.
func (d *dynamoLimits) dueLocked(spec *ttlSpec, now time.Time) bool {
	return d.deleteAfter >= 0 && spec != nil && spec.enabled && now.Sub(spec.sweptAt) >= ttlSweepEvery
}

// sweep deletes the items of table whose TTL attribute (a number of epoch
// seconds) lies more than the delete delay in the past, at most once per
// ttlSweepEvery; the caller holds the write lock. Until then an expired
// item is read, queried and scanned like any other, as in DynamoDB.
func (d *dynamoLimits) sweep(r *http.Request, table string, h http.Handler) {
	now := d.now()
	d.mu.Lock()
	spec, deleteAfter := d.ttl[table], d.deleteAfter
	if !d.dueLocked(spec, now) {
		d.mu.Unlock()
		return
	}
	spec.sweptAt = now
	attr := spec.attr
	d.mu.Unlock()
	keys, err := d.keyNames(h, r, table, "")
	if err != nil {
		return
	}
	cutoff := now.Add(-deleteAfter).Unix()
	// Only the keys and the time to live are read.
	names := map[string]string{"#t": attr}
	proj := "#t"
	for i, k := range keys {
		p := "#k" + strconv.Itoa(i)
		names[p] = k
		proj += ", " + p
	}
	in := map[string]any{"TableName": table, "ConsistentRead": true, "ProjectionExpression": proj, "ExpressionAttributeNames": names}
	for {
		rec, err := call(h, r, "Scan", in)
		if err != nil {
			return
		}
		var out struct {
			Items            []map[string]json.RawMessage
			LastEvaluatedKey map[string]json.RawMessage
		}
		if json.Unmarshal(rec.Body.Bytes(), &out) != nil {
			return
		}
		for _, it := range out.Items {
			if !expired(it[attr], cutoff) {
				continue
			}
			k := map[string]json.RawMessage{}
			for _, n := range keys {
				k[n] = it[n]
			}
			_, _ = call(h, r, "DeleteItem", map[string]any{"TableName": table, "Key": k})
			d.expired.Add(1)
		}
		if len(out.LastEvaluatedKey) == 0 {
			return
		}
		in["ExclusiveStartKey"] = out.LastEvaluatedKey
	}
}

// expired reports whether a TTL attribute holds a number of epoch seconds
// before cutoff. Any other type, or none, never expires (as in DynamoDB).
func expired(raw json.RawMessage, cutoff int64) bool {
	if raw == nil {
		return false
	}
	var v struct{ N *string }
	if json.Unmarshal(raw, &v) != nil || v.N == nil {
		return false
	}
	f, err := strconv.ParseFloat(*v.N, 64)
	if err != nil || math.IsNaN(f) {
		return false
	}
	return int64(f) < cutoff
}

func writeDynamoJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_, _ = w.Write(b)
}

func writeDynamoError(w http.ResponseWriter, typ, msg string) {
	b, _ := json.Marshal(map[string]string{"__type": "com.amazonaws.dynamodb.v20120810#" + typ, "message": msg})
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(b)
}
