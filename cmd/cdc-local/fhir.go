package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/stack"
)

// runFHIR sends one SigV4-signed FHIR request: `fhir METHOD PATH` (GET, PUT,
// POST or DELETE) with the body read from stdin for PUT and POST, the
// response body to stdout. A DELETE that succeeds (204, no body) says so on
// stderr.
func runFHIR(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cdc-local fhir", flag.ContinueOnError)
	fs.SetOutput(stderr)
	endpoint := fs.String("endpoint", envOr("AWS_ENDPOINT_URL", "http://"+stack.DefaultAddr), "HealthLake endpoint")
	datastore := fs.String("datastore", envOr(stackconfig.EnvDatastoreID, stack.DefaultDatastoreID), "data store id")
	region := fs.String("region", envOr("AWS_REGION", localaws.DefaultRegion), "signing region")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cdc-local fhir GET|PUT|POST|DELETE PATH [--endpoint URL] [--datastore ID] < body")
		fmt.Fprintln(stderr, "  e.g. cdc-local fhir PUT Patient/123 < patient.json; cdc-local fhir DELETE Patient/123;")
		fmt.Fprintln(stderr, "       cdc-local fhir GET Patient/123/_history")
		fs.PrintDefaults()
	}
	// Flags may follow the two positional arguments.
	var pos []string
	rest := args
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitUsage
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(pos) != 2 {
		fs.Usage()
		return exitUsage
	}
	method, path := strings.ToUpper(pos[0]), strings.TrimPrefix(pos[1], "/")
	switch method {
	case http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete:
	default:
		fmt.Fprintf(stderr, "cdc-local fhir: method %q: use GET, PUT, POST or DELETE\n", pos[0])
		fs.Usage()
		return exitUsage
	}
	var body []byte
	if method == http.MethodPut || method == http.MethodPost {
		b, err := io.ReadAll(stdin)
		if err != nil {
			fmt.Fprintln(stderr, "cdc-local fhir: read body:", err)
			return exitFailed
		}
		body = b
	}
	url := strings.TrimSuffix(*endpoint, "/") + "/datastore/" + *datastore + "/r4/" + path
	status, resp, err := signedFHIR(ctx, method, url, *region, body)
	if err != nil {
		fmt.Fprintln(stderr, "cdc-local fhir:", err)
		return exitFailed
	}
	_, _ = stdout.Write(resp)
	if len(resp) > 0 && resp[len(resp)-1] != '\n' {
		fmt.Fprintln(stdout)
	}
	if status >= 300 {
		fmt.Fprintf(stderr, "cdc-local fhir: HTTP %d\n", status)
		return exitFailed
	}
	if method == http.MethodDelete {
		fmt.Fprintf(stderr, "cdc-local fhir: deleted (HTTP %d)\n", status)
	}
	return exitOK
}

// signedFHIR sends a request signed for the healthlake service with the
// local credentials (or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY when set).
func signedFHIR(ctx context.Context, method, url, region string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/fhir+json")
	}
	sum := sha256.Sum256(body)
	creds := aws.Credentials{
		AccessKeyID:     envOr("AWS_ACCESS_KEY_ID", localaws.AccessKeyID),
		SecretAccessKey: envOr("AWS_SECRET_ACCESS_KEY", localaws.SecretAccessKey),
	}
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), localaws.ServiceHealthLake, region, time.Now()); err != nil {
		return 0, nil, fmt.Errorf("sign: %w", err)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("read response: %w", err)
	}
	return resp.StatusCode, b, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
