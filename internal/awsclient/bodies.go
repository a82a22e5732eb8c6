package awsclient

import (
	"context"
	"fmt"
	"io"

	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// ReadOnlyBodies is an SDK API option that sends every request body through
// Read alone, hiding the io.WriterTo of the SDK's own body reader.
//
// Why: net/http's transport, once it has written a body of known length,
// copies whatever the body still holds into io.Discard, and smithy-go
// closes the request body as soon as the response headers are in. The
// SDK's body wrapper then answers WriteTo with io.EOF as an error (its Read
// answers a plain end of stream), the transport takes that for a failed
// write and closes the connection under the response being read. A
// response longer than the transport's read buffer then fails with "use of
// closed network connection" and status 200, after the service did the
// work (aws-sdk-go-v2 issues 1825 and 2935 report it against DynamoDB). The
// SDK retries it, so a read costs a retry, and a write the service already
// applied is sent again. Through Read alone the copy ends cleanly.
func ReadOnlyBodies(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("awsclient.ReadOnlyBodies",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			req, ok := in.Request.(*smithyhttp.Request)
			if !ok {
				return next.HandleFinalize(ctx, in)
			}
			stream := req.GetStream()
			if _, ok := stream.(io.WriterTo); !ok {
				return next.HandleFinalize(ctx, in)
			}
			var body io.Reader = readOnly{stream}
			if s, ok := stream.(io.ReadSeeker); ok {
				body = readSeekOnly{s}
			}
			length := req.ContentLength
			r, err := req.SetStream(body)
			if err != nil {
				return middleware.FinalizeOutput{}, middleware.Metadata{}, fmt.Errorf("awsclient: request body: %w", err)
			}
			r.ContentLength = length
			in.Request = r
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

// readOnly offers a stream's Read and nothing else.
type readOnly struct{ r io.Reader }

func (b readOnly) Read(p []byte) (int, error) { return b.r.Read(p) }

// readSeekOnly offers a seekable stream's Read and Seek, so that the SDK
// still rewinds it for a retry.
type readSeekOnly struct{ s io.ReadSeeker }

func (b readSeekOnly) Read(p []byte) (int, error) { return b.s.Read(p) }

func (b readSeekOnly) Seek(offset int64, whence int) (int64, error) {
	return b.s.Seek(offset, whence)
}
