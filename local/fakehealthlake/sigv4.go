package fakehealthlake

import (
	"errors"
	"net/http"

	"github.com/healthlake-cdc/healthlake-cdc/local/sigv4"
)

// unknownKeyError is a request signed with another access key id.
type unknownKeyError struct{ key string }

func (e unknownKeyError) Error() string {
	return "The security token included in the request is invalid (unknown access key " + e.key + ")."
}

// requestAccessKey returns the access key id a request is signed with, or "".
func requestAccessKey(r *http.Request) string {
	a, err := sigv4.Parse(r)
	if err != nil {
		return ""
	}
	return a.AccessKeyID
}

// verifySigV4 checks the request's signature with local/sigv4 (the
// verifier the local gateway runs for every service) against the one key
// pair given. A request the gateway in front has already verified is not
// checked again. Standalone, the emulator does not check the signing time
// against its clock (Options.Now may be a test's fixed clock); the gateway
// does.
func verifySigV4(r *http.Request, body []byte, accessKey, secret string) error {
	if _, ok := sigv4.Verified(r.Context()); ok {
		return nil
	}
	if !sigv4.Signed(r) {
		return errors.New("missing or unsupported Authorization header: SigV4 (AWS4-HMAC-SHA256) is required")
	}
	v := sigv4.Verifier{
		Secret: func(id string) (string, bool) {
			if id == accessKey {
				return secret, true
			}
			return "", false
		},
		MaxSkew: -1,
	}
	_, err := v.VerifyBody(r, body)
	var e *sigv4.Error
	if errors.As(err, &e) {
		switch e.Kind {
		case sigv4.UnknownKey:
			return unknownKeyError{key: e.AccessKeyID}
		case sigv4.BadSignature:
			if e.CanonicalRequest != "" {
				return errors.New("The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method.")
			}
		}
	}
	return err
}
