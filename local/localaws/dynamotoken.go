package localaws

import (
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"time"
)

// dynamoTokenWindow is how long a TransactWriteItems client request token
// is remembered: "A client request token is valid for 10 minutes after the
// first request that uses it is completed" (TransactWriteItems API
// reference, ClientRequestToken).
const dynamoTokenWindow = 10 * time.Minute

// dynamoIdempotentMismatch is the message of the answer to a token reused
// with other parameters within its window (IdempotentParameterMismatchException;
// DynamoDB's own wording is not documented).
const dynamoIdempotentMismatch = "the client request token was used with other parameters within its 10 minutes" // modelled wording

// tokenUse is one completed transaction with a client request token.
type tokenUse struct {
	request [sha256.Size]byte // the request's canonical hash
	answer  []byte            // the answer to replay
	at      time.Time         // when it completed (the gateway's clock)
}

// transactOnce serves a TransactWriteItems (the write lock held) so that a
// request repeated with the same ClientRequestToken within the token's 10
// minutes changes nothing: the same request answers as the first did, the
// token with other parameters answers IdempotentParameterMismatchException
// (TransactWriteItems API reference: "multiple identical calls have the
// same effect as one single call"). The SDKs fill the token in once per
// call, so a call retried after its answer was lost (answerloss.go) is
// such a repetition. Only a transaction that succeeded keeps its token:
// whether a cancelled one's token answers the same again is not
// documented (modelled: it is tried anew). serve writes the answer of a
// transaction tried for the first time.
func (d *dynamoLimits) transactOnce(w http.ResponseWriter, body []byte, serve func(http.ResponseWriter)) {
	var in struct{ ClientRequestToken string }
	_ = json.Unmarshal(body, &in)
	if in.ClientRequestToken == "" {
		serve(w)
		return
	}
	now := d.now()
	sum := canonicalHash(body)
	d.mu.Lock()
	for tok, u := range d.tokens {
		if now.Sub(u.at) >= dynamoTokenWindow {
			delete(d.tokens, tok)
		}
	}
	prev, seen := d.tokens[in.ClientRequestToken]
	d.mu.Unlock()
	if seen {
		if prev.request != sum {
			writeDynamoError(w, "IdempotentParameterMismatchException", dynamoIdempotentMismatch)
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(prev.answer)
		return
	}
	rec := httptest.NewRecorder()
	serve(rec)
	if rec.Code == http.StatusOK {
		d.mu.Lock()
		d.tokens[in.ClientRequestToken] = tokenUse{request: sum, answer: rec.Body.Bytes(), at: d.now()}
		d.mu.Unlock()
	}
	copyRecorded(w, rec)
}

// canonicalHash hashes a JSON request whatever the order of its objects'
// members (an SDK writes a map's members in any order): the same
// parameters give the same hash.
func canonicalHash(body []byte) [sha256.Size]byte {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return sha256.Sum256(body)
	}
	b, err := json.Marshal(v) // objects' members sorted
	if err != nil {
		return sha256.Sum256(body)
	}
	return sha256.Sum256(b)
}
