package fakesfn

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/healthlake-cdc/healthlake-cdc/local/asl"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/s3read"
)

// Service integrations the emulator runs.
const (
	ResourceLambdaInvoke      = "arn:aws:states:::lambda:invoke"
	ResourceSQSSendMessage    = "arn:aws:states:::sqs:sendMessage"
	ResourceSQSSendMessageTok = "arn:aws:states:::sqs:sendMessage.waitForTaskToken"
	ResourceS3GetObject       = "arn:aws:states:::s3:getObject"
	ResourceS3PutObject       = "arn:aws:states:::s3:putObject"
)

// supportedResource reports whether a Task resource can run here.
func supportedResource(r string) bool {
	switch r {
	case ResourceLambdaInvoke, ResourceLambdaInvoke + ".waitForTaskToken", ResourceSQSSendMessage, ResourceSQSSendMessageTok:
		return true
	}
	return strings.HasPrefix(r, "arn:aws:lambda:") && strings.Contains(r, ":function:")
}

// taskRunner implements asl.TaskRunner over the emulator's clients.
type taskRunner struct{ e *Emulator }

// RunTask performs one Task resource.
func (t taskRunner) RunTask(ctx context.Context, call asl.TaskCall) (any, error) {
	switch {
	case call.Resource == ResourceLambdaInvoke:
		return t.e.lambdaInvoke(ctx, call)
	case call.Resource == ResourceSQSSendMessage:
		return t.e.sqsSendMessage(ctx, call)
	case strings.HasPrefix(call.Resource, "arn:aws:lambda:"):
		out, err := t.e.invoke(ctx, call.Resource, call.Parameters)
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	return nil, asl.Errorf(asl.ErrorRuntime, "resource %s is not supported by the emulator", call.Resource)
}

func requestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// invoke calls the Lambda and returns its decoded payload, or the error a
// state sees: the function's errorType, or Lambda.ServiceException.
func (e *Emulator) invoke(ctx context.Context, function string, payload any) (any, error) {
	if e.opts.Lambda == nil {
		return nil, &asl.Error{Name: asl.ErrorLambdaServiceException, Cause: "no Lambda invoker is configured in the emulator"}
	}
	body := []byte("{}")
	if payload != nil {
		s, err := asl.MarshalJSON(payload)
		if err != nil {
			return nil, asl.Errorf(asl.ErrorRuntime, "encode Lambda payload: %v", err)
		}
		body = []byte(s)
	}
	out, fnErr, err := e.opts.Lambda.Invoke(ctx, function, body)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &asl.Error{Name: asl.ErrorLambdaServiceException, Cause: err.Error()}
	}
	if fnErr {
		name := asl.ErrorLambdaUnknown
		if v, perr := asl.ParseJSON(string(out)); perr == nil {
			if m, ok := v.(map[string]any); ok {
				if et, _ := m["errorType"].(string); et != "" {
					name = et
				}
			}
		}
		return nil, &asl.Error{Name: name, Cause: string(out)}
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return nil, nil
	}
	v, err := asl.ParseJSON(string(out))
	if err != nil {
		return string(out), nil
	}
	return v, nil
}

func (e *Emulator) lambdaInvoke(ctx context.Context, call asl.TaskCall) (any, error) {
	p, _ := call.Parameters.(map[string]any)
	fn, _ := p["FunctionName"].(string)
	if fn == "" {
		return nil, asl.Errorf(asl.ErrorRuntime, "lambda:invoke in state '%s' needs a FunctionName", call.StateName)
	}
	payload, ok := p["Payload"]
	if !ok {
		payload = map[string]any{}
	}
	out, err := e.invoke(ctx, fn, payload)
	if err != nil {
		return nil, err
	}
	id := requestID()
	return map[string]any{
		"ExecutedVersion": "$LATEST",
		"Payload":         out,
		"SdkHttpMetadata": map[string]any{
			"AllHttpHeaders": map[string]any{
				"X-Amz-Executed-Version":         []any{"$LATEST"},
				"x-amzn-Remapped-Content-Length": []any{"0"},
				"Connection":                     []any{"keep-alive"},
				"x-amzn-RequestId":               []any{id},
				"Content-Type":                   []any{"application/json"},
			},
			"HttpHeaders": map[string]any{
				"Connection":             "keep-alive",
				"Content-Type":           "application/json",
				"X-Amz-Executed-Version": "$LATEST",
				"x-amzn-RequestId":       id,
			},
			"HttpStatusCode": int64(200),
		},
		"SdkResponseMetadata": map[string]any{"RequestId": id},
		"StatusCode":          int64(200),
	}, nil
}

func (e *Emulator) sqsSendMessage(ctx context.Context, call asl.TaskCall) (any, error) {
	p, _ := call.Parameters.(map[string]any)
	queue, _ := p["QueueUrl"].(string)
	if queue == "" {
		return nil, asl.Errorf(asl.ErrorRuntime, "sqs:sendMessage in state '%s' needs a QueueUrl", call.StateName)
	}
	var body string
	switch b := p["MessageBody"].(type) {
	case string:
		body = b
	case nil:
		return nil, asl.Errorf(asl.ErrorRuntime, "sqs:sendMessage in state '%s' needs a MessageBody", call.StateName)
	default:
		s, err := asl.MarshalJSON(b)
		if err != nil {
			return nil, asl.Errorf(asl.ErrorRuntime, "encode MessageBody: %v", err)
		}
		body = s
	}
	if e.opts.SQS == nil {
		return nil, &asl.Error{Name: "SQS.SdkClientException", Cause: "no SQS client is configured in the emulator"}
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(queue), MessageBody: aws.String(body)}
	if d, ok := p["DelaySeconds"]; ok {
		f, ok := d.(int64)
		if !ok || f < 0 || f > 900 {
			return nil, asl.Errorf(asl.ErrorRuntime, "DelaySeconds must be an integer between 0 and 900")
		}
		in.DelaySeconds = int32(f)
	}
	if g, ok := p["MessageGroupId"].(string); ok {
		in.MessageGroupId = aws.String(g)
	}
	if d, ok := p["MessageDeduplicationId"].(string); ok {
		in.MessageDeduplicationId = aws.String(d)
	}
	out, err := e.opts.SQS.SendMessage(ctx, in)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ae smithy.APIError
		if errors.As(err, &ae) {
			return nil, &asl.Error{Name: "SQS." + ae.ErrorCode(), Cause: ae.ErrorMessage()}
		}
		return nil, &asl.Error{Name: "SQS.SdkClientException", Cause: err.Error()}
	}
	id := requestID()
	return map[string]any{
		"MD5OfMessageBody": aws.ToString(out.MD5OfMessageBody),
		"MessageId":        aws.ToString(out.MessageId),
		"SdkHttpMetadata": map[string]any{
			"HttpHeaders":    map[string]any{"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": id},
			"HttpStatusCode": int64(200),
		},
		"SdkResponseMetadata": map[string]any{"RequestId": id},
	}, nil
}

// objectStore adapts the S3 client to asl.ObjectStore.
type objectStore struct{ c ObjectStore }

// GetObject reads a whole object. A body that ends part way is read on
// (pkg/s3read), as Step Functions' own reads are not the pipeline's
// to fail: the fault plan's body cuts model the Lambdas' connections.
func (o objectStore) GetObject(ctx context.Context, bucket, key string) ([]byte, error) {
	if o.c == nil {
		return nil, fmt.Errorf("no S3 client is configured in the emulator")
	}
	body, err := s3read.Object(ctx, o.c, bucket, key)
	if err != nil {
		return nil, fmt.Errorf("get s3://%s/%s: %w", bucket, key, err)
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, fmt.Errorf("read s3://%s/%s: %w", bucket, key, err)
	}
	return b, nil
}

// PutObject writes a whole JSON object.
func (o objectStore) PutObject(ctx context.Context, bucket, key string, body []byte) error {
	if o.c == nil {
		return fmt.Errorf("no S3 client is configured in the emulator")
	}
	_, err := o.c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body),
		ContentType: aws.String("application/json"), ContentLength: aws.Int64(int64(len(body))),
	})
	if err != nil {
		return fmt.Errorf("put s3://%s/%s: %w", bucket, key, err)
	}
	return nil
}
