package localaws

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// SQS parameter limits that goaws does not enforce, as the SQS API
// reference documents them (SendMessage, SendMessageBatch,
// ChangeMessageVisibility, ReceiveMessage): DelaySeconds 0–900,
// VisibilityTimeout 0–43,200 (12 hours), WaitTimeSeconds 0–20,
// MaxNumberOfMessages 1–10. A value out of range is refused with
// InvalidParameterValue, as SQS refuses it, instead of being accepted.
var sqsLimits = map[string][2]int{
	"DelaySeconds":        {0, 900},
	"VisibilityTimeout":   {0, 43200},
	"WaitTimeSeconds":     {0, 20},
	"MaxNumberOfMessages": {1, 10},
}

// sqsLimitError returns the first out-of-range limited parameter of an SQS
// request (JSON protocol, or the query protocol's form), or "". The body is
// restored for the emulator.
func sqsLimitError(r *http.Request) string {
	if r.Body == nil {
		return ""
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return ""
	}
	check := func(name string, v int) string {
		lim := sqsLimits[name]
		if v < lim[0] || v > lim[1] {
			return fmt.Sprintf("Value %d for parameter %s is invalid. Reason: must be between %d and %d.", v, name, lim[0], lim[1])
		}
		return ""
	}
	if strings.Contains(r.Header.Get("Content-Type"), "json") {
		var req struct {
			DelaySeconds        *int
			VisibilityTimeout   *int
			WaitTimeSeconds     *int
			MaxNumberOfMessages *int
			Entries             []struct{ DelaySeconds, VisibilityTimeout *int }
		}
		if json.Unmarshal(body, &req) != nil {
			return ""
		}
		params := map[string]*int{"DelaySeconds": req.DelaySeconds, "VisibilityTimeout": req.VisibilityTimeout,
			"WaitTimeSeconds": req.WaitTimeSeconds, "MaxNumberOfMessages": req.MaxNumberOfMessages}
		for _, e := range req.Entries {
			for name, v := range map[string]*int{"DelaySeconds": e.DelaySeconds, "VisibilityTimeout": e.VisibilityTimeout} {
				if v != nil {
					if msg := check(name, *v); msg != "" {
						return msg
					}
				}
			}
		}
		for name, v := range params {
			if v != nil {
				if msg := check(name, *v); msg != "" {
					return msg
				}
			}
		}
		return ""
	}
	form := string(body)
	for _, kv := range strings.Split(form, "&") {
		k, v, _ := strings.Cut(kv, "=")
		name := k[strings.LastIndexByte(k, '.')+1:]
		if _, limited := sqsLimits[name]; !limited {
			continue
		}
		if n, err := strconv.Atoi(v); err == nil {
			if msg := check(name, n); msg != "" {
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
