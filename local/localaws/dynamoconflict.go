package localaws

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// Transaction conflicts, as the DynamoDB Developer Guide describes them
// ("Transaction conflict handling in DynamoDB"): a PutItem, UpdateItem or
// DeleteItem of an item that an ongoing TransactWriteItems includes fails
// with TransactionConflictException, and a TransactWriteItems with an item
// another ongoing transaction includes is cancelled
// (TransactionCanceledException, reason TransactionConflict). The SDKs
// retry neither answer.
//
// A transaction is ongoing from its arrival at the gateway until it is
// served, its modelled latency included (modelled: how long DynamoDB holds
// a transaction's items is not documented). A write conflicts when a
// transaction that arrived before it, and includes one of its items, was
// still ongoing when it arrived: of two overlapping transactions, the
// later is cancelled. With the latency model off, a transaction is ongoing
// only while it is served, and conflicts need requests that arrive
// together.

// dynamoConflictMessage is the message of TransactionConflictException (the
// API reference's description of the error; DynamoDB's own wording is not
// documented).
const dynamoConflictMessage = "Operation was rejected because there is an ongoing transaction for the item."

// heldOnArrival is the context key of the items ongoing transactions held
// when a write arrived.
type heldOnArrival struct{}

// arrive notes, for a write, the items the transactions ongoing at its
// arrival hold, and registers a TransactWriteItems as ongoing until the
// returned release is called. It returns the request carrying what it
// noted. Other requests pass through.
func (d *dynamoLimits) arrive(r *http.Request, h http.Handler) (*http.Request, func()) {
	op, _ := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems":
	default:
		return r, func() {}
	}
	d.mu.Lock()
	held := map[string]bool{}
	for _, ks := range d.ongoing {
		for _, k := range ks {
			held[k] = true
		}
	}
	d.mu.Unlock()
	if len(held) > 0 {
		r = r.WithContext(context.WithValue(r.Context(), heldOnArrival{}, held))
	}
	if op != "TransactWriteItems" || r.Body == nil {
		return r, func() {}
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return r, func() {}
	}
	d.lock.RLock()
	keys, ok := d.writeKeys(h, r, op, body)
	d.lock.RUnlock()
	if !ok {
		return r, func() {}
	}
	d.mu.Lock()
	d.txnSeq++
	id := d.txnSeq
	d.ongoing[id] = keys
	d.mu.Unlock()
	return r, func() {
		d.mu.Lock()
		delete(d.ongoing, id)
		d.mu.Unlock()
	}
}

// conflicts answers a write (the write lock held) that includes an item a
// transaction ongoing at its arrival includes, as DynamoDB does, and
// reports whether it answered.
func (d *dynamoLimits) conflicts(w http.ResponseWriter, r *http.Request, h http.Handler, op string, body []byte) bool {
	held, _ := r.Context().Value(heldOnArrival{}).(map[string]bool)
	if len(held) == 0 {
		return false
	}
	keys, ok := d.writeKeys(h, r, op, body)
	if !ok {
		return false
	}
	hit := make([]bool, len(keys))
	found := false
	for i, k := range keys {
		hit[i] = held[k]
		found = found || hit[i]
	}
	if !found {
		return false
	}
	if op != "TransactWriteItems" {
		writeDynamoError(w, "TransactionConflictException", dynamoConflictMessage)
		return true
	}
	type reason struct {
		Code    string
		Message string `json:",omitempty"`
	}
	reasons := make([]reason, len(hit))
	codes := make([]string, len(hit))
	for i, c := range hit {
		reasons[i], codes[i] = reason{Code: "None"}, "None"
		if c {
			reasons[i] = reason{Code: "TransactionConflict", Message: "Transaction is ongoing for the item"}
			codes[i] = "TransactionConflict"
		}
	}
	b, _ := json.Marshal(map[string]any{
		"__type":              "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
		"Message":             "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]",
		"CancellationReasons": reasons,
	})
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-ErrorType", "TransactionCanceledException")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(b)
	return true
}

// writeKeys returns the items a write includes, in the order of its
// actions, each as "table\x00canonical key"; ok is false for a write it
// cannot read (minidyn answers it).
func (d *dynamoLimits) writeKeys(h http.Handler, r *http.Request, op string, body []byte) ([]string, bool) {
	type target struct {
		TableName string
		Key       map[string]json.RawMessage
		Item      map[string]json.RawMessage
	}
	var targets []target
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem":
		var t target
		if json.Unmarshal(body, &t) != nil {
			return nil, false
		}
		targets = append(targets, t)
	case "TransactWriteItems":
		var in struct {
			TransactItems []struct{ Put, Update, Delete, ConditionCheck *target }
		}
		if json.Unmarshal(body, &in) != nil {
			return nil, false
		}
		for _, a := range in.TransactItems {
			switch {
			case a.Put != nil:
				targets = append(targets, *a.Put)
			case a.Update != nil:
				targets = append(targets, *a.Update)
			case a.Delete != nil:
				targets = append(targets, *a.Delete)
			case a.ConditionCheck != nil:
				targets = append(targets, *a.ConditionCheck)
			default:
				return nil, false
			}
		}
	default:
		return nil, false
	}
	out := make([]string, len(targets))
	for i, t := range targets {
		key := t.Key
		if t.Item != nil {
			names, err := d.keyNames(h, r, t.TableName, "")
			if err != nil {
				return nil, false
			}
			key = map[string]json.RawMessage{}
			for _, n := range names {
				key[n] = t.Item[n]
			}
		}
		b, err := json.Marshal(key) // map keys sorted: one spelling per key
		if err != nil {
			return nil, false
		}
		out[i] = t.TableName + "\x00" + string(b)
	}
	return out, true
}
