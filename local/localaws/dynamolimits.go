package localaws

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// DynamoDB limits minidyn does not enforce, as the DynamoDB Developer Guide
// documents them: an item is at most 400 KB ("Quotas in Amazon DynamoDB",
// item size), measured as "DynamoDB item sizes and formats" describes
// (ItemSize); a Query or Scan reads at most 1 MB before it answers with a
// LastEvaluatedKey ("Paginating table query results", "Filter expressions
// for the Query operation").
const (
	dynamoMaxItemSize = 400 * 1024
	dynamoMaxPageSize = 1 << 20
)

// Messages DynamoDB answers an item over the limit with (ValidationException).
const (
	dynamoItemTooLarge   = "Item size has exceeded the maximum allowed size"
	dynamoUpdateTooLarge = "Item size to update has exceeded the maximum allowed size"
)

// dynamoLimits enforces those limits in front of minidyn. Writes hold its
// lock alone, every other call shares it: a write undone is never seen, and
// a TransactGetItems reads its items with no write between them.
type dynamoLimits struct {
	lock sync.RWMutex
	mu   sync.Mutex
	// keys are each table's key attribute names, and each index's, from
	// DescribeTable.
	keys map[string]tableKeys
}

type tableKeys struct {
	table   []string
	indexes map[string][]string
}

func newDynamoLimits() *dynamoLimits { return &dynamoLimits{keys: map[string]tableKeys{}} }

// attrValue is one DynamoDB attribute value in the JSON protocol: one
// member named by its type.
type attrValue map[string]json.RawMessage

// itemSize is an item's size as DynamoDB counts it: each attribute's UTF-8
// name and its value; a string's UTF-8 bytes, a binary's raw bytes, a
// number's one byte per two significant digits and one, a Boolean or null
// one byte, a List or Map three bytes and one per element beside the
// elements (a Map's element with its name), a set its elements.
func itemSize(it map[string]json.RawMessage) (int, error) {
	n := 0
	for name, raw := range it {
		var v attrValue
		if err := json.Unmarshal(raw, &v); err != nil {
			return 0, fmt.Errorf("attribute %q: %w", name, err)
		}
		s, err := v.size()
		if err != nil {
			return 0, fmt.Errorf("attribute %q: %w", name, err)
		}
		n += len(name) + s
	}
	return n, nil
}

func (v attrValue) size() (int, error) {
	for typ, raw := range v {
		switch typ {
		case "S":
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return 0, err
			}
			return len(s), nil
		case "N":
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return 0, err
			}
			return numberSize(s), nil
		case "B":
			var b []byte // base64 in JSON
			if err := json.Unmarshal(raw, &b); err != nil {
				return 0, err
			}
			return len(b), nil
		case "BOOL", "NULL":
			return 1, nil
		case "SS":
			var ss []string
			if err := json.Unmarshal(raw, &ss); err != nil {
				return 0, err
			}
			n := 0
			for _, s := range ss {
				n += len(s)
			}
			return n, nil
		case "NS":
			var ss []string
			if err := json.Unmarshal(raw, &ss); err != nil {
				return 0, err
			}
			n := 0
			for _, s := range ss {
				n += numberSize(s)
			}
			return n, nil
		case "BS":
			var bs []string
			if err := json.Unmarshal(raw, &bs); err != nil {
				return 0, err
			}
			n := 0
			for _, b := range bs {
				raw, err := base64.StdEncoding.DecodeString(b)
				if err != nil {
					return 0, err
				}
				n += len(raw)
			}
			return n, nil
		case "L":
			var l []attrValue
			if err := json.Unmarshal(raw, &l); err != nil {
				return 0, err
			}
			n := 3
			for _, e := range l {
				s, err := e.size()
				if err != nil {
					return 0, err
				}
				n += 1 + s
			}
			return n, nil
		case "M":
			var m map[string]attrValue
			if err := json.Unmarshal(raw, &m); err != nil {
				return 0, err
			}
			n := 3
			for k, e := range m {
				s, err := e.size()
				if err != nil {
					return 0, err
				}
				n += 1 + len(k) + s
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("no known type in %v", mapKeys(v))
}

func mapKeys(v attrValue) []string {
	out := make([]string, 0, len(v))
	for k := range v {
		out = append(out, k)
	}
	return out
}

// numberSize is a number's size: its significant digits (leading and
// trailing zeros trimmed), one byte per two, and one byte.
func numberSize(s string) int {
	s = strings.TrimLeft(s, "+-")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	s = strings.Replace(s, ".", "", 1)
	s = strings.Trim(s, "0")
	return (utf8.RuneCountInString(s)+1)/2 + 1
}

// serve answers one DynamoDB request: through h, with the limits enforced.
func (d *dynamoLimits) serve(w http.ResponseWriter, r *http.Request, h http.Handler) {
	op, _ := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	var body []byte
	if r.Body != nil {
		var err error
		body, err = io.ReadAll(r.Body)
		if err != nil {
			writeDynamoValidation(w, "cannot read the request body")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	switch op {
	case "PutItem", "BatchWriteItem", "TransactWriteItems", "UpdateItem", "DeleteItem":
		d.lock.Lock()
		defer d.lock.Unlock()
		if msg := putsTooLarge(op, body); msg != "" {
			writeDynamoValidation(w, msg)
			return
		}
		if op == "UpdateItem" || op == "TransactWriteItems" {
			if d.updates(w, r, op, body, h) {
				return
			}
		}
	case "CreateTable", "DeleteTable", "UpdateTable":
		d.lock.Lock()
		defer d.lock.Unlock()
		var in struct{ TableName string }
		_ = json.Unmarshal(body, &in)
		d.mu.Lock()
		delete(d.keys, in.TableName)
		d.mu.Unlock()
	case "Query", "Scan":
		d.lock.RLock()
		defer d.lock.RUnlock()
		if d.page(w, r, body, h) {
			return
		}
	default:
		d.lock.RLock()
		defer d.lock.RUnlock()
	}
	h.ServeHTTP(w, r)
}

// putsTooLarge checks every whole item a write carries.
func putsTooLarge(op string, body []byte) string {
	var items []map[string]json.RawMessage
	switch op {
	case "PutItem":
		var in struct{ Item map[string]json.RawMessage }
		if json.Unmarshal(body, &in) != nil {
			return ""
		}
		items = append(items, in.Item)
	case "BatchWriteItem":
		var in struct {
			RequestItems map[string][]struct {
				PutRequest *struct{ Item map[string]json.RawMessage }
			}
		}
		if json.Unmarshal(body, &in) != nil {
			return ""
		}
		for _, reqs := range in.RequestItems {
			for _, q := range reqs {
				if q.PutRequest != nil {
					items = append(items, q.PutRequest.Item)
				}
			}
		}
	case "TransactWriteItems":
		var in struct {
			TransactItems []struct {
				Put *struct{ Item map[string]json.RawMessage }
			}
		}
		if json.Unmarshal(body, &in) != nil {
			return ""
		}
		for _, t := range in.TransactItems {
			if t.Put != nil {
				items = append(items, t.Put.Item)
			}
		}
	}
	for _, it := range items {
		if n, err := itemSize(it); err == nil && n > dynamoMaxItemSize {
			return dynamoItemTooLarge
		}
	}
	return ""
}

// itemKey names one item: its table and key.
type itemKey struct {
	Table string
	Key   json.RawMessage
}

// updates applies an UpdateItem, or a transaction with updates, and undoes
// it when an updated item ends over the limit: each item it updates is
// read before and after (the caller holds the write lock). It reports
// whether it answered.
func (d *dynamoLimits) updates(w http.ResponseWriter, r *http.Request, op string, body []byte, h http.Handler) bool {
	var keys []itemKey
	updated := 0
	switch op {
	case "UpdateItem":
		var in struct {
			TableName string
			Key       json.RawMessage
		}
		if json.Unmarshal(body, &in) != nil {
			return false
		}
		keys = append(keys, itemKey{in.TableName, in.Key})
		updated++
	case "TransactWriteItems":
		type target struct {
			TableName string
			Key       json.RawMessage
			Item      map[string]json.RawMessage
		}
		var in struct {
			TransactItems []struct{ Put, Update, Delete *target }
		}
		if json.Unmarshal(body, &in) != nil {
			return false
		}
		// Every item the transaction writes is put back if it is refused.
		for _, t := range in.TransactItems {
			switch {
			case t.Update != nil:
				keys = append(keys, itemKey{t.Update.TableName, t.Update.Key})
				updated++
			case t.Delete != nil:
				keys = append(keys, itemKey{t.Delete.TableName, t.Delete.Key})
			case t.Put != nil:
				names, err := d.keyNames(h, r, t.Put.TableName, "")
				if err != nil {
					return false
				}
				k := map[string]json.RawMessage{}
				for _, n := range names {
					k[n] = t.Put.Item[n]
				}
				b, _ := json.Marshal(k)
				keys = append(keys, itemKey{t.Put.TableName, b})
			}
		}
	}
	if updated == 0 {
		return false
	}
	before := make([]map[string]json.RawMessage, len(keys))
	for i, k := range keys {
		it, err := getItem(h, r, k)
		if err != nil {
			return false
		}
		before[i] = it
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Code == http.StatusOK {
		for _, k := range keys {
			after, err := getItem(h, r, k)
			if err != nil {
				break
			}
			if n, err := itemSize(after); err == nil && n > dynamoMaxItemSize {
				for i, k := range keys {
					restore(h, r, k, before[i])
				}
				writeDynamoValidation(w, dynamoUpdateTooLarge)
				return true
			}
		}
	}
	copyRecorded(w, rec)
	return true
}

// call sends one request of the DynamoDB JSON protocol straight to h, as
// the gateway would after checking it.
func call(h http.Handler, orig *http.Request, op string, in any) (*httptest.ResponseRecorder, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	req := httptest.NewRequestWithContext(orig.Context(), http.MethodPost, "/", bytes.NewReader(b))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	if a := orig.Header.Get("Authorization"); a != "" {
		req.Header.Set("Authorization", a)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d", op, rec.Code)
	}
	return rec, nil
}

func getItem(h http.Handler, orig *http.Request, k itemKey) (map[string]json.RawMessage, error) {
	rec, err := call(h, orig, "GetItem", map[string]any{"TableName": k.Table, "Key": k.Key, "ConsistentRead": true})
	if err != nil {
		return nil, err
	}
	var out struct{ Item map[string]json.RawMessage }
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		return nil, err
	}
	return out.Item, nil
}

// restore puts an item back as it was, or deletes it if there was none.
func restore(h http.Handler, orig *http.Request, k itemKey, it map[string]json.RawMessage) {
	if it == nil {
		_, _ = call(h, orig, "DeleteItem", map[string]any{"TableName": k.Table, "Key": k.Key})
		return
	}
	_, _ = call(h, orig, "PutItem", map[string]any{"TableName": k.Table, "Item": it})
}

func copyRecorded(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func writeDynamoValidation(w http.ResponseWriter, msg string) {
	b, _ := json.Marshal(map[string]string{"__type": "com.amazon.coral.validate#ValidationException", "message": msg})
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-ErrorType", "ValidationException")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(b)
}

var placeholder = regexp.MustCompile(`#[A-Za-z0-9_]+`)

// page answers a Query or Scan with at most 1 MB of items: it reads the
// whole items the request selects (without its projection), keeps those
// that fit, sets LastEvaluatedKey to the last one's key, and projects them.
// Requests it cannot size (Select COUNT, a projection of nested paths) go
// on unchanged; with a filter the limit is applied to what the filter
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
	probe := map[string]json.RawMessage{}
	for k, v := range in {
		probe[k] = v
	}
	if projection != nil {
		delete(probe, "ProjectionExpression")
		delete(probe, "Select")
		used := map[string]string{}
		for _, e := range []string{str("KeyConditionExpression"), str("FilterExpression")} {
			for _, p := range placeholder.FindAllString(e, -1) {
				if n, ok := names[p]; ok {
					used[p] = n
				}
			}
		}
		if len(used) == 0 {
			delete(probe, "ExpressionAttributeNames")
		} else {
			b, _ := json.Marshal(used)
			probe["ExpressionAttributeNames"] = b
		}
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
			if !contains(keys, n) {
				keys = append(keys, n)
			}
		}
	}
	return keys, nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
