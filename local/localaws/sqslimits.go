package localaws

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// sqsLimited are the operations that carry a limited parameter.
var sqsLimited = map[string]bool{"SendMessage": true, "SendMessageBatch": true, "ChangeMessageVisibility": true,
	"ChangeMessageVisibilityBatch": true, "ReceiveMessage": true}

// SQS parameter limits that goaws does not enforce, as the SQS API
// reference documents them (SendMessage, SendMessageBatch,
// ChangeMessageVisibility, ReceiveMessage): DelaySeconds 0–900,
// VisibilityTimeout 0–43,200 (12 hours), WaitTimeSeconds 0–20,
// MaxNumberOfMessages 1–10. A value out of range is refused with
// InvalidParameterValue, as SQS refuses it, instead of being accepted
// (sqsGated checks them).
var sqsLimits = map[string][2]int{
	"DelaySeconds":        {0, 900},
	"VisibilityTimeout":   {0, 43200},
	"WaitTimeSeconds":     {0, 20},
	"MaxNumberOfMessages": {1, 10},
}

// limitError returns the first out-of-range limited parameter of the
// request, its own or one of its batch entries', or "".
func (q sqsRequest) limitError() string {
	check := func(name string, v float64) string {
		lim := sqsLimits[name]
		if v < float64(lim[0]) || v > float64(lim[1]) {
			return fmt.Sprintf("Value %s for parameter %s is invalid. Reason: must be between %d and %d.",
				strconv.FormatFloat(v, 'f', -1, 64), name, lim[0], lim[1])
		}
		return ""
	}
	if q.json != nil {
		params := []map[string]any{q.json}
		if entries, ok := q.json["Entries"].([]any); ok {
			for _, e := range entries {
				if m, ok := e.(map[string]any); ok {
					params = append(params, m)
				}
			}
		}
		for _, p := range params {
			for name := range sqsLimits {
				if v, ok := p[name].(float64); ok {
					if msg := check(name, v); msg != "" {
						return msg
					}
				}
			}
		}
		return ""
	}
	for k, vs := range q.form {
		name := k[strings.LastIndexByte(k, '.')+1:]
		if _, limited := sqsLimits[name]; !limited || len(vs) == 0 {
			continue
		}
		if n, err := strconv.Atoi(vs[0]); err == nil {
			if msg := check(name, float64(n)); msg != "" {
				return msg
			}
		}
	}
	return ""
}

// writeSQSInvalidParameter answers as SQS does for an out-of-range value,
// in the JSON protocol (with the query-compatible error header) or as XML.
func writeSQSInvalidParameter(w http.ResponseWriter, r *http.Request, msg string) {
	w.Header().Set("x-amzn-query-error", "InvalidParameterValue;Sender")
	if strings.Contains(r.Header.Get("Content-Type"), "json") {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		b, _ := json.Marshal(map[string]string{"__type": "com.amazonaws.sqs#InvalidParameterValue", "message": msg})
		_, _ = w.Write(b)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(http.StatusBadRequest)
	var esc bytes.Buffer
	_ = xml.EscapeText(&esc, []byte(msg))
	fmt.Fprintf(w, `<?xml version="1.0"?><ErrorResponse><Error><Type>Sender</Type><Code>InvalidParameterValue</Code><Message>%s</Message></Error><RequestId>00000000-0000-0000-0000-000000000000</RequestId></ErrorResponse>`, esc.String())
}
