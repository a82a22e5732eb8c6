package localaws

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/Admiral-Piett/goaws/app/gosqs"
	"github.com/Admiral-Piett/goaws/app/models"
	goawsrouter "github.com/Admiral-Piett/goaws/app/router"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/middleware"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/sirupsen/logrus"
	minidyn "github.com/truora/minidyn/server"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
)

// The administrator's credentials, which local clients sign with unless they
// act as a principal (ConfigFor); the gateway verifies every request's SigV4
// signature against the secret of the key that signed it (keys.go).
const (
	AccessKeyID     = "AKIDLOCALCDC"
	SecretAccessKey = "local-secret-for-healthlake-cdc"
	DefaultRegion   = "us-east-1"
	DefaultAccount  = "000000000000"
	// ConventionalAccessKeyID and ConventionalSecretAccessKey are the
	// credentials local AWS users already export (test/test); cdc-local
	// takes them as an administrator, like the credentials it prints.
	ConventionalAccessKeyID     = "test"
	ConventionalSecretAccessKey = "test"
)

// Options configure Start.
type Options struct {
	// Addr is the listen address; default "127.0.0.1:0" (a free port).
	Addr string
	// Region and AccountID appear in ARNs and queue URLs.
	Region, AccountID string
	// InMemory serves the gateway over in-memory pipes instead of a TCP
	// listener (Addr is ignored; the URL's host is MemHost): only clients
	// built from Config, ConfigFor or HTTPClient reach it. Nothing then
	// waits on real network I/O, so the whole Env can run inside a
	// testing/synctest bubble on its fake clock (local/sim).
	InMemory bool
	// SpillDir, when set, keeps S3 object bodies of SpillThreshold bytes
	// or more in a temporary file in this directory instead of memory
	// (removed by Close): a simulation's export files would otherwise
	// hold gigabytes of heap.
	SpillDir string
	// TTLDeleteAfter is how long after its time to live the local DynamoDB
	// deletes an expired item: 0 is DefaultTTLDeleteAfter (two days), < 0
	// never (dynamottl.go).
	TTLDeleteAfter time.Duration
}

// Env is a running local AWS: one listener, the gateway, and the built-in
// S3, SQS and DynamoDB emulators.
type Env struct {
	URL       string
	Region    string
	AccountID string
	Gateway   *Gateway
	server    *http.Server
	listener  net.Listener
	// mem is the in-memory listener (Options.InMemory), else nil.
	mem *memListener
	// stopSQS ends this Env's own goaws housekeeping (in-memory Envs).
	stopSQS chan bool
	// spill keeps large S3 bodies on disk (Options.SpillDir), else nil.
	spill *spillBackend
}

var (
	sqsOnce       sync.Once
	sqsTickerOnce sync.Once
	sqsMu         sync.Mutex
)

// Start listens on opts.Addr and serves S3, SQS and DynamoDB behind a new
// gateway. goaws keeps its queues in package globals, so every Env in a
// process shares one SQS: give queues unique names.
func Start(opts Options) (*Env, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.Region == "" {
		opts.Region = DefaultRegion
	}
	if opts.AccountID == "" {
		opts.AccountID = DefaultAccount
	}
	var ln net.Listener
	var mem *memListener
	if opts.InMemory {
		mem = newMemListener()
		ln = mem
	} else {
		var err error
		if ln, err = net.Listen("tcp", opts.Addr); err != nil {
			return nil, fmt.Errorf("listen on %s: %w", opts.Addr, err)
		}
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())

	sqsMu.Lock()
	sqsOnce.Do(func() {
		logrus.SetOutput(io.Discard)
		models.CurrentEnvironment = models.Environment{
			Host: host, Port: port, Region: "", AccountID: opts.AccountID,
			QueueAttributeDefaults: models.EnvQueueAttributes{
				VisibilityTimeout:  30,
				MaximumMessageSize: 262144,
			},
		}
	})
	// goaws's housekeeping (visibility timeouts): once per process for TCP
	// Envs; an in-memory Env runs its own and stops it on Close, so that a
	// synctest bubble holding it can end.
	var stopSQS chan bool
	if opts.InMemory {
		stopSQS = make(chan bool)
		go gosqs.PeriodicTasks(100*time.Millisecond, stopSQS)
	} else {
		sqsTickerOnce.Do(func() { go gosqs.PeriodicTasks(100*time.Millisecond, make(chan bool)) })
	}
	sqsMu.Unlock()

	var backend s3Backend = s3mem.New()
	var spill *spillBackend
	if opts.SpillDir != "" {
		var err error
		if spill, err = newSpillBackend(backend.(*s3mem.Backend), opts.SpillDir); err != nil {
			_ = ln.Close()
			return nil, err
		}
		backend = spill
	}
	g := NewGateway()
	g.SetVerifySignatures(true)
	if opts.TTLDeleteAfter != 0 {
		g.SetTTLDeleteAfter(opts.TTLDeleteAfter)
	}
	// The gateway checks the signing time against its clock (SetClock):
	// gofakes3's own check, on the wall clock, is off.
	g.Handle(ServiceS3, gofakes3.New(backend, gofakes3.WithAutoBucket(true), gofakes3.WithTimeSkewLimit(0)).Server())
	g.Handle(ServiceSQS, sqsGated{next: goawsrouter.New(), region: opts.Region, account: opts.AccountID})
	g.Handle(ServiceDynamoDB, minidyn.NewServer())

	env := &Env{
		URL:       "http://" + net.JoinHostPort(host, port),
		Region:    opts.Region,
		AccountID: opts.AccountID,
		Gateway:   g,
		listener:  ln,
		mem:       mem,
		stopSQS:   stopSQS,
		spill:     spill,
		server:    &http.Server{Handler: g, ReadHeaderTimeout: 10 * time.Second},
	}
	go func() { _ = env.server.Serve(ln) }()
	return env, nil
}

// Close stops the listener.
func (e *Env) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if e.stopSQS != nil {
		close(e.stopSQS)
		e.stopSQS = nil
	}
	err := e.server.Shutdown(ctx)
	// Shutdown leaves a connection a client dialed but never used (the
	// transport's spare dial) for 5 s; close it, so that nothing of an
	// in-memory Env outlives it in a testing/synctest bubble.
	_ = e.server.Close()
	if e.spill != nil {
		if serr := e.spill.Close(); err == nil {
			err = serr
		}
		e.spill = nil
	}
	return err
}

// Port returns the port the Env listens on.
func (e *Env) Port() int {
	_, p, _ := net.SplitHostPort(e.listener.Addr().String())
	n, _ := strconv.Atoi(p)
	return n
}

// Config returns an aws.Config whose clients all talk to this Env, signed
// with the local test credentials, sending request bodies as the Lambdas'
// configuration does (awsclient.ReadOnlyBodies). Build S3 clients with
// UsePathStyle.
func (e *Env) Config() aws.Config {
	return aws.Config{
		Region:           e.Region,
		Credentials:      credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		BaseEndpoint:     aws.String(e.URL),
		RetryMaxAttempts: 2,
		HTTPClient:       e.httpClient(),
		APIOptions:       []func(*middleware.Stack) error{awsclient.ReadOnlyBodies},
	}
}

// httpClient is Config's HTTP client: the default transport over TCP, the
// in-memory one otherwise.
func (e *Env) httpClient() *http.Client {
	if e.mem != nil {
		return e.HTTPClient()
	}
	return &http.Client{Timeout: ClientTimeout}
}

// ClientTimeout bounds one request of the local clients, its body included.
// The deployed Lambdas' SDK clients have no such bound (aws-sdk-go-v2's
// default BuildableClient sets no http.Client Timeout), and prepare-change
// reads an export object while it publishes at its paced rate, up to its
// internal deadline; a shorter bound here failed reads that AWS serves. It is
// Lambda's longest function timeout, so a hung request still ends.
const ClientTimeout = 15 * time.Minute

// ConfigFor returns Config signed with another access key id and its
// secret: each principal of the stack signs with its own key, by which the
// gateway's authorizer knows it. A key id the Env does not know yet is
// issued, with PrincipalSecretAccessKey as its secret.
func (e *Env) ConfigFor(accessKeyID string) aws.Config {
	cfg := e.Config()
	cfg.Credentials = credentials.NewStaticCredentialsProvider(accessKeyID, e.Gateway.IssueAccessKey(accessKeyID), "")
	return cfg
}

// ARN builds an ARN in this Env's region and account.
func (e *Env) ARN(service, resource string) string {
	return "arn:aws:" + service + ":" + e.Region + ":" + e.AccountID + ":" + resource
}
