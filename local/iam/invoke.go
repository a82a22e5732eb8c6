package iam

import (
	"context"
	"strings"

	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
)

// Invoker is the in-process Lambda Invoke of local/lambdas.
type Invoker interface {
	Invoke(ctx context.Context, function string, payload []byte) (out []byte, functionError bool, err error)
}

// CheckedInvoker checks lambda:InvokeFunction for a principal that invokes
// functions without HTTP (the state machine's lambda:invoke tasks) before it
// hands the call on.
type CheckedInvoker struct {
	Next      Invoker
	Auth      *Authorizer
	Principal iampolicy.Principal
	// FunctionARN turns a function name into its ARN; names that are ARNs
	// already are used as given.
	FunctionARN func(name string) string
}

// Invoke implements Invoker. A denied call fails as the invocation itself
// (err), the way Lambda's Invoke answers AccessDeniedException.
func (c CheckedInvoker) Invoke(ctx context.Context, function string, payload []byte) ([]byte, bool, error) {
	arn := function
	if !strings.HasPrefix(arn, "arn:") && c.FunctionARN != nil {
		arn = c.FunctionARN(function)
	}
	if d := c.Auth.Check(c.Principal, Check{Request: Request{Action: "lambda:InvokeFunction", Resource: arn}}); d != nil {
		return nil, false, d
	}
	return c.Next.Invoke(ctx, function, payload)
}
