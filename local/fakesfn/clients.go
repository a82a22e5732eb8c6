package fakesfn

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// SQSSender is the part of the SQS client the sqs:sendMessage integration uses.
type SQSSender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// ObjectStore is the part of the S3 client the Distributed Map uses: the
// ItemReader's GetObject and the ResultWriter's PutObject.
type ObjectStore interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

type roleKey struct{}

// withRole marks ctx as an execution's of a state machine with that role.
func withRole(ctx context.Context, roleARN string) context.Context {
	return context.WithValue(ctx, roleKey{}, roleARN)
}

// RoleARN returns the role of the state machine whose execution (or
// Distributed Map child) makes a Task, ItemReader or ResultWriter call with
// ctx; "" outside one. Step Functions makes those calls as that role, so an
// embedding that serves several machines with different roles picks the
// credentials from it.
func RoleARN(ctx context.Context) string {
	r, _ := ctx.Value(roleKey{}).(string)
	return r
}
