package localaws

import (
	"encoding/json"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// placeholder is an expression attribute name in an expression.
var placeholder = regexp.MustCompile(`#[A-Za-z0-9_]+`)

// page answers a Query or Scan with at most 1 MB of items: it reads the
// whole items the request selects (without its projection), keeps those
// that fit, sets LastEvaluatedKey to the last one's key, and projects them.
// Requests it cannot size (Select COUNT, AttributesToGet, a projection of
// nested paths) go on unchanged; with a filter the limit is applied to what the filter
// kept, not to what was read (modelled).
func (d *dynamoLimits) page(w http.ResponseWriter, r *http.Request, body []byte, h http.Handler) bool {
	var in map[string]json.RawMessage
	if json.Unmarshal(body, &in) != nil {
		return false
	}
	str := func(name string) string {
		var s string
		_ = json.Unmarshal(in[name], &s)
		return s
	}
	if str("Select") == "COUNT" {
		return false
	}
	var names map[string]string
	_ = json.Unmarshal(in["ExpressionAttributeNames"], &names)
	var projection []string
	if p := str("ProjectionExpression"); p != "" {
		for _, part := range strings.Split(p, ",") {
			part = strings.TrimSpace(part)
			if strings.ContainsAny(part, ".[") {
				return false
			}
			if n, ok := names[part]; ok {
				part = n
			}
			projection = append(projection, part)
		}
	}
	// The probe reads the whole items: the request itself, or without its
	// projection (and the names only the projection used).
	probe := json.RawMessage(body)
	if projection != nil {
		without := maps.Clone(in)
		delete(without, "ProjectionExpression")
		delete(without, "Select")
		used := map[string]string{}
		for _, e := range []string{str("KeyConditionExpression"), str("FilterExpression")} {
			for _, p := range placeholder.FindAllString(e, -1) {
				if n, ok := names[p]; ok {
					used[p] = n
				}
			}
		}
		if len(used) == 0 {
			delete(without, "ExpressionAttributeNames")
		} else {
			without["ExpressionAttributeNames"], _ = json.Marshal(used)
		}
		probe, _ = json.Marshal(without)
	}
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	rec, err := call(h, r, op, probe)
	if err != nil {
		return false
	}
	var out map[string]json.RawMessage
	if json.Unmarshal(rec.Body.Bytes(), &out) != nil {
		return false
	}
	var items []map[string]json.RawMessage
	if json.Unmarshal(out["Items"], &items) != nil {
		return false
	}
	kept, total := 0, 0
	for _, it := range items {
		n, err := itemSize(it)
		if err != nil {
			return false
		}
		if kept > 0 && total+n > dynamoMaxPageSize {
			break
		}
		total += n
		kept++
	}
	if kept == len(items) && projection == nil {
		// The page fits and is the request's own answer.
		copyRecorded(w, rec)
		return true
	}
	if kept < len(items) {
		keys, err := d.keyNames(h, r, str("TableName"), str("IndexName"))
		if err != nil {
			return false
		}
		last := map[string]json.RawMessage{}
		for _, k := range keys {
			v, ok := items[kept-1][k]
			if !ok {
				return false
			}
			last[k] = v
		}
		out["LastEvaluatedKey"], _ = json.Marshal(last)
		items = items[:kept]
		n, _ := json.Marshal(kept)
		out["Count"] = n
		if _, filtered := in["FilterExpression"]; !filtered {
			out["ScannedCount"] = n
		}
	}
	if projection != nil {
		for i, it := range items {
			p := map[string]json.RawMessage{}
			for _, name := range projection {
				if v, ok := it[name]; ok {
					p[name] = v
				}
			}
			items[i] = p
		}
	}
	out["Items"], _ = json.Marshal(items)
	b, _ := json.Marshal(out)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return true
}

// keyNames returns the key attributes a LastEvaluatedKey carries: the
// table's, and the index's when the request names one.
func (d *dynamoLimits) keyNames(h http.Handler, r *http.Request, table, index string) ([]string, error) {
	d.mu.Lock()
	k, ok := d.keys[table]
	d.mu.Unlock()
	if !ok {
		rec, err := call(h, r, "DescribeTable", map[string]string{"TableName": table})
		if err != nil {
			return nil, err
		}
		type schema []struct{ AttributeName string }
		var out struct {
			Table struct {
				KeySchema              schema
				GlobalSecondaryIndexes []struct {
					IndexName string
					KeySchema schema
				}
				LocalSecondaryIndexes []struct {
					IndexName string
					KeySchema schema
				}
			}
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			return nil, err
		}
		names := func(s schema) []string {
			var n []string
			for _, a := range s {
				n = append(n, a.AttributeName)
			}
			return n
		}
		k = tableKeys{table: names(out.Table.KeySchema), indexes: map[string][]string{}}
		for _, i := range out.Table.GlobalSecondaryIndexes {
			k.indexes[i.IndexName] = names(i.KeySchema)
		}
		for _, i := range out.Table.LocalSecondaryIndexes {
			k.indexes[i.IndexName] = names(i.KeySchema)
		}
		d.mu.Lock()
		d.keys[table] = k
		d.mu.Unlock()
	}
	keys := append([]string(nil), k.table...)
	if index != "" {
		for _, n := range k.indexes[index] {
			if !slices.Contains(keys, n) {
				keys = append(keys, n)
			}
		}
	}
	return keys, nil
}
