//lint:file-ignore SA1019 CDK 2.270 marks cxapi.SynthesisMessage deprecated (its definition moved to @aws-cdk/cloud-assembly-api), yet assertions.Annotations returns it and the Go binding has no other type: this file is the one place that reads it.

package main

import (
	"fmt"
	"sort"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// errorAnnotations returns the stack's error annotations (cdk-nag's
// findings among them) as sorted "path: message" lines.
func errorAnnotations(stack awscdk.Stack) []string {
	var out []string
	for _, m := range *assertions.Annotations_FromStack(stack).FindError(jsii.String("*"), assertions.Match_AnyValue()) {
		out = append(out, fmt.Sprintf("%s: %v", *m.Id, m.Entry.Data))
	}
	sort.Strings(out)
	return out
}

// warningAnnotations is errorAnnotations for warnings.
func warningAnnotations(stack awscdk.Stack) []string {
	var out []string
	for _, m := range *assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"), assertions.Match_AnyValue()) {
		out = append(out, fmt.Sprintf("%s: %v", *m.Id, m.Entry.Data))
	}
	sort.Strings(out)
	return out
}
