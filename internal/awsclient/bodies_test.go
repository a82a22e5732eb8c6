package awsclient

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/smithy-go/middleware"
)

// heldBody stands between the transport and the SDK's request body: once
// the body's bytes are out, the transport's next call on it (its check
// that nothing is left) waits until the SDK closes the body, as happens
// when the response comes first.
type heldBody struct {
	inner  io.ReadCloser
	left   int64
	closed chan struct{}
	once   sync.Once
}

func (b *heldBody) wait() {
	select {
	case <-b.closed:
	case <-time.After(5 * time.Second):
	}
}

func (b *heldBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		b.wait()
	}
	n, err := b.inner.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *heldBody) Close() error {
	err := b.inner.Close()
	b.once.Do(func() { close(b.closed) })
	return err
}

// heldWriterTo is a heldBody whose inner body offers WriteTo.
type heldWriterTo struct{ *heldBody }

func (b heldWriterTo) WriteTo(w io.Writer) (int64, error) {
	if b.left <= 0 {
		b.wait()
	}
	return b.inner.(io.WriterTo).WriteTo(w)
}

// holding makes every request's body a heldBody and reports when the SDK
// closed it.
type holding struct {
	rt     http.RoundTripper
	closed chan struct{}
}

func (h holding) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.ContentLength > 0 {
		hb := &heldBody{inner: r.Body, left: r.ContentLength, closed: h.closed}
		if _, ok := r.Body.(io.WriterTo); ok {
			r.Body = heldWriterTo{hb}
		} else {
			r.Body = hb
		}
	}
	return h.rt.RoundTrip(r)
}

// describeAfterTheRace makes one DescribeStateMachine call whose answer is
// long and whose second half is sent only after the SDK closed the request
// body: what the race between a response and the transport's last look at
// the body does on a busy machine.
func describeAfterTheRace(t *testing.T, cfg aws.Config) error {
	t.Helper()
	closed := make(chan struct{})
	var bodies []string
	var mu sync.Mutex
	definition := strings.Repeat("x", 256<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		body := `{"stateMachineArn":"arn:aws:states:eu-west-2:111122223333:stateMachine:m","name":"m","status":"ACTIVE","definition":"` + definition + `","roleArn":"arn:aws:iam::111122223333:role/r","type":"STANDARD","creationDate":1}`
		half := len(body) / 2
		_, _ = io.WriteString(w, body[:half])
		w.(http.Flusher).Flush()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
		}
		time.Sleep(50 * time.Millisecond)
		_, _ = io.WriteString(w, body[half:])
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cfg.BaseEndpoint = aws.String(srv.URL)
	cfg.RetryMaxAttempts = 1
	cfg.HTTPClient = &http.Client{Transport: holding{rt: tr, closed: closed}}
	out, err := sfn.NewFromConfig(cfg).DescribeStateMachine(context.Background(), &sfn.DescribeStateMachineInput{
		StateMachineArn: aws.String("arn:aws:states:eu-west-2:111122223333:stateMachine:m"),
	})
	if err != nil {
		return err
	}
	if len(aws.ToString(out.Definition)) != len(definition) {
		t.Fatalf("definition: %d bytes, want %d", len(aws.ToString(out.Definition)), len(definition))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 || !strings.Contains(bodies[0], `"stateMachineArn"`) {
		t.Fatalf("server received %q", bodies)
	}
	return nil
}

// The SDK as it is loses a long response when the transport looks at the
// request body after the response came in; this is what ReadOnlyBodies
// exists for, and the day an SDK release fixes it this test says so.
func TestLongResponseIsLostWhenTheBodyIsClosedFirst(t *testing.T) {
	err := describeAfterTheRace(t, testConfig())
	if err == nil || !strings.Contains(err.Error(), "use of closed network connection") {
		t.Fatalf("without ReadOnlyBodies: %v, want the SDK's closed-connection failure (if an SDK release fixed it, drop ReadOnlyBodies)", err)
	}
}

func TestReadOnlyBodiesKeepTheResponse(t *testing.T) {
	cfg := testConfig()
	cfg.APIOptions = append(cfg.APIOptions, ReadOnlyBodies)
	if err := describeAfterTheRace(t, cfg); err != nil {
		t.Fatalf("with ReadOnlyBodies: %v", err)
	}
}

// The configuration every Lambda loads sends its bodies that way.
func TestLoadedConfigurationKeepsTheResponse(t *testing.T) {
	t.Setenv("AWS_REGION", "eu-west-2")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKID")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	cfg, err := Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := describeAfterTheRace(t, cfg); err != nil {
		t.Fatalf("with Load's configuration: %v", err)
	}
}

func testConfig() aws.Config {
	return aws.Config{Region: "eu-west-2", Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")}
}

// A body sent through ReadOnlyBodies is still signed over its bytes and
// rewound for a retry: the second attempt carries the same body.
func TestReadOnlyBodiesAreRewoundForARetry(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		n := len(got)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"__type":"InternalFailure","message":"try again"}`)
			return
		}
		_, _ = io.WriteString(w, `{"stateMachineArn":"a","name":"m","status":"ACTIVE","definition":"{}","roleArn":"r","type":"STANDARD","creationDate":1}`)
	}))
	defer srv.Close()
	cfg := testConfig()
	cfg.BaseEndpoint = aws.String(srv.URL)
	cfg.APIOptions = []func(*middleware.Stack) error{ReadOnlyBodies}
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = 2; o.MaxBackoff = time.Millisecond })
	}
	if _, err := sfn.NewFromConfig(cfg).DescribeStateMachine(context.Background(), &sfn.DescribeStateMachineInput{StateMachineArn: aws.String("arn:aws:states:eu-west-2:111122223333:stateMachine:m")}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0] != got[1] || !strings.Contains(got[0], "stateMachine:m") {
		t.Fatalf("bodies of the two attempts: %q", got)
	}
}
