package localaws

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
)

// writeRefused checks every whole item a write carries, and a transaction's
// number of actions; it answers the ValidationException message, or "".
func writeRefused(op string, body []byte) string {
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
		if len(in.TransactItems) > dynamoMaxTransactActions {
			return dynamoTooManyActions
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

// restore puts an item back as it was, or deletes it if there was none.
func restore(h http.Handler, orig *http.Request, k itemKey, it map[string]json.RawMessage) {
	if it == nil {
		_, _ = call(h, orig, "DeleteItem", map[string]any{"TableName": k.Table, "Key": k.Key})
		return
	}
	_, _ = call(h, orig, "PutItem", map[string]any{"TableName": k.Table, "Item": it})
}
