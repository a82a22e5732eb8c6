package localaws

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/sigv4"
)

// The messages AWS answers a refused signature with.
const (
	msgUnknownToken = "The security token included in the request is invalid."
	msgBadSignature = "The request signature we calculated does not match the signature you provided. " +
		"Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
	msgS3UnknownKey   = "The AWS Access Key Id you provided does not exist in our records."
	msgS3BadSignature = "The request signature we calculated does not match the signature you provided. Check your key and signing method."
	msgS3Skewed       = "The difference between the request time and the current time is too large."
)

// writeSignatureError answers a request whose signature was refused the way
// the service does:
//
//   - S3 (REST-XML): 403 InvalidAccessKeyId, SignatureDoesNotMatch (with the
//     string to sign and the canonical request), RequestTimeTooSkewed
//     (RequestTime, ServerTime, MaxAllowedSkewMilliseconds), AccessDenied
//     "Request has expired" for a presigned URL, 400
//     XAmzContentSHA256Mismatch or AuthorizationHeaderMalformed.
//   - SQS: 403 InvalidClientTokenId or SignatureDoesNotMatch (also for a
//     skewed clock: "Signature expired: …"), 400 IncompleteSignature; in the
//     JSON protocol with the query-compatible x-amzn-query-error header,
//     in the query protocol as an ErrorResponse document.
//   - DynamoDB, EventBridge, Step Functions (AWS JSON): 400
//     UnrecognizedClientException, InvalidSignatureException (also for a
//     skewed clock), IncompleteSignatureException.
//   - HealthLake: as its emulator answers on its own: 403
//     UnrecognizedClientException or InvalidSignatureException.
//
// The Date header is the gateway's clock, so that an SDK that corrects clock
// skew (aws-sdk-go-v2 does, from that header) corrects it to the gateway's.
func writeSignatureError(w http.ResponseWriter, r *http.Request, service string, err error, now time.Time) {
	var e *sigv4.Error
	if !errors.As(err, &e) {
		e = &sigv4.Error{Kind: sigv4.Malformed, Message: err.Error()}
	}
	w.Header().Set("Date", now.UTC().Format(http.TimeFormat))
	switch service {
	case ServiceS3:
		writeS3SignatureError(w, e)
	case ServiceSQS:
		writeSQSSignatureError(w, r, e)
	case ServiceHealthLake:
		code := "InvalidSignatureException"
		msg := e.Message
		switch e.Kind {
		case sigv4.UnknownKey:
			code, msg = "UnrecognizedClientException", "The security token included in the request is invalid (unknown access key "+e.AccessKeyID+")."
		case sigv4.BadSignature:
			msg = msgBadSignature
		}
		if r.Header.Get("X-Amz-Target") != "" {
			writeAWSJSONError(w, http.StatusForbidden, "application/x-amz-json-1.0", code, msg)
			return
		}
		w.Header().Set("X-Amzn-ErrorType", code)
		writeJSONBody(w, http.StatusForbidden, "application/json", map[string]string{"message": msg})
	default:
		code, msg := jsonSignatureError(e)
		ct := "application/x-amz-json-1.1"
		if service == ServiceDynamoDB {
			ct = "application/x-amz-json-1.0"
		}
		status := http.StatusBadRequest
		if service == ServiceLambda {
			// Lambda (REST-JSON) answers these with 403.
			status, ct = http.StatusForbidden, "application/json"
		}
		writeAWSJSONError(w, status, ct, code, msg)
	}
}

// jsonSignatureError is the code and message of the AWS JSON services.
func jsonSignatureError(e *sigv4.Error) (code, msg string) {
	switch e.Kind {
	case sigv4.UnknownKey:
		return "UnrecognizedClientException", msgUnknownToken
	case sigv4.BadSignature:
		if e.CanonicalRequest == "" {
			return "InvalidSignatureException", e.Message
		}
		return "InvalidSignatureException", msgBadSignature
	case sigv4.Skewed, sigv4.Expired:
		return "InvalidSignatureException", e.Message
	case sigv4.PayloadMismatch:
		return "InvalidSignatureException", msgBadSignature
	}
	return "IncompleteSignatureException", e.Message
}

func writeAWSJSONError(w http.ResponseWriter, status int, contentType, code, msg string) {
	w.Header().Set("X-Amzn-ErrorType", code)
	writeJSONBody(w, status, contentType, map[string]string{"__type": "com.amazon.coral.service#" + code, "message": msg})
}

func writeJSONBody(w http.ResponseWriter, status int, contentType string, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeSQSSignatureError(w http.ResponseWriter, r *http.Request, e *sigv4.Error) {
	code, msg, status := "IncompleteSignature", e.Message, http.StatusBadRequest
	switch e.Kind {
	case sigv4.UnknownKey:
		code, msg, status = "InvalidClientTokenId", msgUnknownToken, http.StatusForbidden
	case sigv4.BadSignature, sigv4.PayloadMismatch:
		code, status = "SignatureDoesNotMatch", http.StatusForbidden
		if e.CanonicalRequest != "" || e.Kind == sigv4.PayloadMismatch {
			msg = msgBadSignature
		}
	case sigv4.Skewed, sigv4.Expired:
		code, status = "SignatureDoesNotMatch", http.StatusForbidden
	}
	if r.Header.Get("X-Amz-Target") != "" {
		// JSON protocol; aws-sdk-go-v2 takes the code from
		// x-amzn-query-error (awsQueryCompatible).
		w.Header().Set("x-amzn-query-error", code+";Sender")
		writeAWSJSONError(w, status, "application/x-amz-json-1.0", code, msg)
		return
	}
	type sqsError struct {
		Type    string `xml:"Type"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
		Detail  string `xml:"Detail"`
	}
	type errorResponse struct {
		XMLName   xml.Name `xml:"ErrorResponse"`
		Xmlns     string   `xml:"xmlns,attr"`
		Error     sqsError `xml:"Error"`
		RequestID string   `xml:"RequestId"`
	}
	b, _ := xml.Marshal(errorResponse{Xmlns: "http://queue.amazonaws.com/doc/2012-11-05/",
		Error: sqsError{Type: "Sender", Code: code, Message: msg}, RequestID: "local-sigv4"})
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	_, _ = w.Write(append([]byte(xml.Header), b...))
}

func writeS3SignatureError(w http.ResponseWriter, e *sigv4.Error) {
	type s3Error struct {
		XMLName                     xml.Name `xml:"Error"`
		Code                        string   `xml:"Code"`
		Message                     string   `xml:"Message"`
		AWSAccessKeyID              string   `xml:"AWSAccessKeyId,omitempty"`
		StringToSign                string   `xml:"StringToSign,omitempty"`
		SignatureProvided           string   `xml:"SignatureProvided,omitempty"`
		CanonicalRequest            string   `xml:"CanonicalRequest,omitempty"`
		RequestTime                 string   `xml:"RequestTime,omitempty"`
		ServerTime                  string   `xml:"ServerTime,omitempty"`
		MaxAllowedSkewMilliseconds  string   `xml:"MaxAllowedSkewMilliseconds,omitempty"`
		XAmzExpires                 string   `xml:"X-Amz-Expires,omitempty"`
		ClientComputedContentSHA256 string   `xml:"ClientComputedContentSHA256,omitempty"`
		S3ComputedContentSHA256     string   `xml:"S3ComputedContentSHA256,omitempty"`
		RequestID                   string   `xml:"RequestId"`
	}
	out := s3Error{RequestID: "local-sigv4"}
	status := http.StatusForbidden
	switch e.Kind {
	case sigv4.UnknownKey:
		out.Code, out.Message, out.AWSAccessKeyID = "InvalidAccessKeyId", msgS3UnknownKey, e.AccessKeyID
	case sigv4.BadSignature:
		out.Code, out.Message, out.AWSAccessKeyID = "SignatureDoesNotMatch", msgS3BadSignature, e.AccessKeyID
		out.StringToSign, out.SignatureProvided, out.CanonicalRequest = e.StringToSign, e.SignatureProvided, e.CanonicalRequest
		if e.CanonicalRequest == "" {
			out.Message = e.Message
		}
	case sigv4.Skewed:
		out.Code, out.Message = "RequestTimeTooSkewed", msgS3Skewed
		out.RequestTime, out.ServerTime = e.RequestTime, e.ServerTime.UTC().Format(time.RFC3339)
		out.MaxAllowedSkewMilliseconds = strconv.FormatInt(sigv4.DefaultMaxSkew.Milliseconds(), 10)
	case sigv4.Expired:
		out.Code, out.Message = "AccessDenied", "Request has expired"
		out.XAmzExpires = strconv.Itoa(int(e.Expires / time.Second))
		out.ServerTime = e.ServerTime.UTC().Format(time.RFC3339)
	case sigv4.PayloadMismatch:
		out.Code, out.Message, status = "XAmzContentSHA256Mismatch", e.Message, http.StatusBadRequest
		out.ClientComputedContentSHA256, out.S3ComputedContentSHA256 = e.DeclaredHash, e.ComputedHash
	default:
		out.Code, out.Message, status = "AuthorizationHeaderMalformed", e.Message, http.StatusBadRequest
	}
	b, _ := xml.Marshal(out)
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_, _ = w.Write(append([]byte(xml.Header), b...))
}
