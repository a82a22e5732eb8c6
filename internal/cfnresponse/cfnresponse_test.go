package cfnresponse_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"

	"github.com/healthlake-cdc/healthlake-cdc/internal/cfnresponse"
	"github.com/healthlake-cdc/healthlake-cdc/internal/cfnresponse/cfntest"
)

// TestSendRetriesUntilTheAnswerIsTaken: failed PUTs are retried (up to
// Attempts), the answer arrives once, and an undeliverable answer's error
// never names the pre-signed URL.
func TestSendRetriesUntilTheAnswerIsTaken(t *testing.T) {
	e := cfntest.New(t)
	slept := 0
	s := cfnresponse.Sender{Attempts: 3, Sleep: func(context.Context, time.Duration) error { slept++; return nil }}
	e.SetFailFirst(2)
	if err := s.Send(context.Background(), e.URL(), cfn.Response{Status: cfn.StatusSuccess, RequestID: "r1"}); err != nil {
		t.Fatal(err)
	}
	if r := e.Last(t); r.RequestID != "r1" || slept != 2 {
		t.Errorf("answer %+v after %d waits, want r1 after 2", r, slept)
	}
	e.SetFailFirst(3)
	err := s.Send(context.Background(), e.URL(), cfn.Response{Status: cfn.StatusSuccess, RequestID: "r2"})
	if err == nil || !strings.Contains(err.Error(), "after 3 attempts") || strings.Contains(err.Error(), "X-Amz-Signature") {
		t.Errorf("undeliverable answer: %v", err)
	}
	if err := s.Send(context.Background(), "", cfn.Response{}); err == nil {
		t.Error("no ResponseURL accepted")
	}
}

// TestReasonIsCut: a FAILED response's reason stays within MaxReason bytes
// so that CloudFormation takes the response.
func TestReasonIsCut(t *testing.T) {
	if r := cfnresponse.Reason(errors.New(strings.Repeat("é", 2000))); len(r) > cfnresponse.MaxReason || !strings.HasPrefix(r, "é") {
		t.Errorf("reason of %d bytes", len(r))
	}
	if r := cfnresponse.Reason(errors.New("short")); r != "short" {
		t.Errorf("reason %q", r)
	}
}
