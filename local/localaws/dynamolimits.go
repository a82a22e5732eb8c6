package localaws

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DynamoDB limits minidyn does not enforce, as the DynamoDB Developer Guide
// documents them: an item is at most 400 KB ("Quotas in Amazon DynamoDB",
// item size), measured as "DynamoDB item sizes and formats" describes
// (itemSize, dynamosize.go); a Query or Scan reads at most 1 MB before it
// answers with a LastEvaluatedKey ("Paginating table query results",
// "Filter expressions for the Query operation"). Writes: dynamowrites.go;
// pages: dynamopage.go; time to live: dynamottl.go; transactions' client
// request tokens: dynamotoken.go.
const (
	dynamoMaxItemSize = 400 * 1024
	dynamoMaxPageSize = 1 << 20
)

// Messages DynamoDB answers an item over the limit with (ValidationException).
const (
	dynamoItemTooLarge   = "Item size has exceeded the maximum allowed size"
	dynamoUpdateTooLarge = "Item size to update has exceeded the maximum allowed size"
	dynamoTooManyActions = "1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to 100"
)

// dynamoMaxTransactActions is the most actions of one TransactWriteItems
// ("groups up to 100 action requests", API reference).
const dynamoMaxTransactActions = 100

// dynamoLimits is what the gateway adds in front of minidyn: those limits
// and time to live. Writes hold its lock alone, every other call shares
// it: a write undone is never seen, and a TransactGetItems reads its items
// with no write between them.
type dynamoLimits struct {
	lock sync.RWMutex
	mu   sync.Mutex
	// keys are each table's key attribute names, and each index's, from
	// DescribeTable.
	keys map[string]tableKeys
	// ttl is each table's time to live (dynamottl.go), deleteAfter how
	// long after it an expired item is deleted (< 0: never), expired how
	// many were, now the gateway's clock.
	ttl         map[string]*ttlSpec
	deleteAfter time.Duration
	expired     atomic.Int64
	now         func() time.Time
	// tokens are the client request tokens of recent transactions
	// (dynamotoken.go).
	tokens map[string]tokenUse
	// ongoing holds the items of each transaction from its arrival until
	// it is served (dynamoconflict.go).
	ongoing map[uint64][]string
	txnSeq  uint64
}

type tableKeys struct {
	table   []string
	indexes map[string][]string
}

func newDynamoLimits(now func() time.Time) *dynamoLimits {
	return &dynamoLimits{keys: map[string]tableKeys{}, ttl: map[string]*ttlSpec{}, deleteAfter: DefaultTTLDeleteAfter, now: now, tokens: map[string]tokenUse{}, ongoing: map[uint64][]string{}}
}

// IsDynamoDBWrite reports whether op is a DynamoDB operation that writes
// items: PutItem, UpdateItem, DeleteItem, BatchWriteItem,
// TransactWriteItems.
func IsDynamoDBWrite(op string) bool {
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems":
		return true
	}
	return false
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
	tableName := func() string {
		var t struct{ TableName string }
		_ = json.Unmarshal(body, &t)
		return t.TableName
	}
	if d.sweepsDue() {
		if table := tableName(); d.sweepDue(table) {
			d.lock.Lock()
			d.sweep(r, table, h)
			d.lock.Unlock()
		}
	}
	switch {
	case op == "UpdateTimeToLive":
		d.lock.Lock()
		defer d.lock.Unlock()
		d.updateTTL(w, r, body, h)
		return
	case op == "DescribeTimeToLive":
		d.lock.RLock()
		defer d.lock.RUnlock()
		d.describeTTL(w, r, body, h)
		return
	case IsDynamoDBWrite(op):
		d.lock.Lock()
		defer d.lock.Unlock()
		write := func(w http.ResponseWriter) {
			if msg := writeRefused(op, body); msg != "" {
				writeDynamoValidation(w, msg)
				return
			}
			if d.conflicts(w, r, h, op, body) {
				return
			}
			if (op == "UpdateItem" || op == "TransactWriteItems") && d.updates(w, r, op, body, h) {
				return
			}
			h.ServeHTTP(w, r)
		}
		if op == "TransactWriteItems" {
			d.transactOnce(w, body, write)
		} else {
			write(w)
		}
		return
	case op == "CreateTable", op == "DeleteTable", op == "UpdateTable":
		d.lock.Lock()
		defer d.lock.Unlock()
		table := tableName()
		d.mu.Lock()
		delete(d.keys, table)
		if op != "UpdateTable" {
			delete(d.ttl, table)
		}
		d.mu.Unlock()
	case op == "Query", op == "Scan":
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
