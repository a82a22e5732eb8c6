// Package cfnresponse answers a CloudFormation custom resource request: the
// response document PUT to the request's pre-signed ResponseURL, retried,
// its errors free of that URL. The stack's custom resources
// (internal/subscription, internal/datastorecheck) answer through it.
package cfnresponse

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/aws/aws-lambda-go/cfn"

	"github.com/healthlake-cdc/healthlake-cdc/internal/clip"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/backoff"
)

// MaxReason bounds a FAILED response's Reason: CloudFormation takes a
// response of up to 4,096 bytes in all ("Custom resource response
// objects", CloudFormation User Guide).
const MaxReason = 1000

// Reason is a FAILED response's Reason for err: its text, cut to MaxReason
// bytes.
func Reason(err error) string { return clip.String(err.Error(), MaxReason) }

// Sender PUTs responses. The zero value sends with a 30-second HTTP client,
// up to 5 attempts, waiting between them with backoff.Sleep.
type Sender struct {
	// HTTPClient sends the PUT.
	HTTPClient *http.Client
	// Attempts bounds the tries.
	Attempts int
	// Sleep waits between tries.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Send PUTs resp to the pre-signed responseURL, retrying transport errors
// and non-2xx answers.
func (s Sender) Send(ctx context.Context, responseURL string, resp cfn.Response) error {
	if responseURL == "" {
		return errors.New("respond to CloudFormation: the event has no ResponseURL")
	}
	body, err := json.Marshal(resp)
	if err != nil {
		return fmt.Errorf("respond to CloudFormation: encode: %w", err)
	}
	attempts, sleep := s.Attempts, s.Sleep
	if attempts <= 0 {
		attempts = 5
	}
	if sleep == nil {
		sleep = backoff.Sleep
	}
	for attempt := 1; ; attempt++ {
		err := s.put(ctx, responseURL, body)
		if err == nil {
			return nil
		}
		if attempt >= attempts || ctx.Err() != nil {
			return fmt.Errorf("respond to CloudFormation after %d attempts: %w", attempt, err)
		}
		if serr := sleep(ctx, backoff.Ceiling(500*time.Millisecond, 5*time.Second, attempt)); serr != nil {
			return fmt.Errorf("respond to CloudFormation: waiting to retry: %w (last error: %v)", serr, err)
		}
	}
}

// put sends the response once. Its errors never carry the pre-signed URL.
func (s Sender) put(ctx context.Context, responseURL string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, responseURL, bytes.NewReader(body))
	if err != nil {
		return errors.New("the ResponseURL is not a URL")
	}
	client := s.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	// No Content-Type: the URL is pre-signed without one.
	res, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("send: %w", err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return fmt.Errorf("answered HTTP %d", res.StatusCode)
	}
	return nil
}
