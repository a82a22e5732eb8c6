// Package cost turns counted usage (state transitions, Lambda requests and
// GB-seconds, SQS requests, EventBridge event chunks, S3 and DynamoDB
// requests) into US dollars at list prices, and models the daily cost of this
// design and of the published one-iteration-per-record design.
package cost

import (
	"fmt"
	"sort"
	"strings"
)

// Prices are list prices in USD per unit (us-east-1, ../shared/docs/aws-facts.md).
type Prices struct {
	StateTransition     float64 // STANDARD workflow state transition
	ExpressRequest      float64 // EXPRESS workflow request
	ExpressGBSecond     float64
	LambdaRequest       float64
	LambdaGBSecondX86   float64
	LambdaGBSecondArm64 float64
	SQSRequest          float64 // per 64 KB chunk
	EventBridgeEvent    float64 // per 64 KB chunk of an entry
	DynamoDBWriteUnit   float64
	DynamoDBReadUnit    float64
	S3PutListRequest    float64
	S3GetRequest        float64
	LogsIngestByte      float64 // CloudWatch Logs standard ingestion
}

// ListPrices returns the list prices the project's cost model uses.
func ListPrices() Prices {
	return Prices{
		StateTransition:     0.025 / 1e3,
		ExpressRequest:      1.00 / 1e6,
		ExpressGBSecond:     0.00001667,
		LambdaRequest:       0.20 / 1e6,
		LambdaGBSecondX86:   0.0000166667,
		LambdaGBSecondArm64: 0.0000166667 * 0.8,
		SQSRequest:          0.40 / 1e6,
		EventBridgeEvent:    1.00 / 1e6,
		DynamoDBWriteUnit:   0.625 / 1e6,
		DynamoDBReadUnit:    0.125 / 1e6,
		S3PutListRequest:    5.00 / 1e6,
		S3GetRequest:        0.40 / 1e6,
		LogsIngestByte:      0.50 / (1 << 30),
	}
}

// Usage is what one period of operation consumed.
type Usage struct {
	StateTransitions  float64 `json:"stateTransitions"`
	ExpressRequests   float64 `json:"expressRequests"`
	ExpressGBSeconds  float64 `json:"expressGBSeconds"`
	LambdaRequests    float64 `json:"lambdaRequests"`
	LambdaGBSeconds   float64 `json:"lambdaGBSeconds"`
	LambdaArm64       bool    `json:"lambdaArm64"`
	SQSRequests       float64 `json:"sqsRequests"`
	EventChunks       float64 `json:"eventChunks"`
	DynamoWriteUnits  float64 `json:"dynamoWriteUnits"`
	DynamoReadUnits   float64 `json:"dynamoReadUnits"`
	S3PutListRequests float64 `json:"s3PutListRequests"`
	S3GetRequests     float64 `json:"s3GetRequests"`
	// LogBytes are CloudWatch Logs bytes ingested; only the fast path's
	// model counts them here (Monthly prices the pipeline's logs).
	LogBytes float64 `json:"logBytes,omitempty"`
}

// Add returns the sum of u and v (LambdaArm64 is kept from u).
func (u Usage) Add(v Usage) Usage {
	u.StateTransitions += v.StateTransitions
	u.ExpressRequests += v.ExpressRequests
	u.ExpressGBSeconds += v.ExpressGBSeconds
	u.LambdaRequests += v.LambdaRequests
	u.LambdaGBSeconds += v.LambdaGBSeconds
	u.SQSRequests += v.SQSRequests
	u.EventChunks += v.EventChunks
	u.DynamoWriteUnits += v.DynamoWriteUnits
	u.DynamoReadUnits += v.DynamoReadUnits
	u.S3PutListRequests += v.S3PutListRequests
	u.S3GetRequests += v.S3GetRequests
	u.LogBytes += v.LogBytes
	return u
}

// Scale returns u with every count multiplied by f.
func (u Usage) Scale(f float64) Usage {
	return Usage{
		StateTransitions: u.StateTransitions * f, ExpressRequests: u.ExpressRequests * f,
		ExpressGBSeconds: u.ExpressGBSeconds * f, LambdaRequests: u.LambdaRequests * f,
		LambdaGBSeconds: u.LambdaGBSeconds * f, LambdaArm64: u.LambdaArm64,
		SQSRequests: u.SQSRequests * f, EventChunks: u.EventChunks * f,
		DynamoWriteUnits: u.DynamoWriteUnits * f, DynamoReadUnits: u.DynamoReadUnits * f,
		S3PutListRequests: u.S3PutListRequests * f, S3GetRequests: u.S3GetRequests * f,
	}
}

// Bill is the cost of a Usage, item by item.
type Bill struct {
	Items map[string]float64 `json:"items"`
	Total float64            `json:"total"`
}

// Price returns the bill for u at prices p.
func Price(u Usage, p Prices) Bill {
	gbs := p.LambdaGBSecondX86
	if u.LambdaArm64 {
		gbs = p.LambdaGBSecondArm64
	}
	items := map[string]float64{
		"stepFunctionsStandard": u.StateTransitions * p.StateTransition,
		"stepFunctionsExpress":  u.ExpressRequests*p.ExpressRequest + u.ExpressGBSeconds*p.ExpressGBSecond,
		"lambda":                u.LambdaRequests*p.LambdaRequest + u.LambdaGBSeconds*gbs,
		"sqs":                   u.SQSRequests * p.SQSRequest,
		"eventBridge":           u.EventChunks * p.EventBridgeEvent,
		"dynamoDB":              u.DynamoWriteUnits*p.DynamoDBWriteUnit + u.DynamoReadUnits*p.DynamoDBReadUnit,
		"s3":                    u.S3PutListRequests*p.S3PutListRequest + u.S3GetRequests*p.S3GetRequest,
	}
	if u.LogBytes > 0 {
		items["logs"] = u.LogBytes * p.LogsIngestByte
	}
	total := 0.0
	for _, v := range items {
		total += v
	}
	return Bill{Items: items, Total: total}
}

// PerMillion returns the cost of a bill per million changes delivered.
func PerMillion(b Bill, changes float64) (float64, error) {
	if changes <= 0 {
		return 0, fmt.Errorf("cost per million changes: no changes were delivered")
	}
	return b.Total / changes * 1e6, nil
}

// String renders a bill as "item $x" lines in a stable order.
func (b Bill) String() string {
	keys := make([]string, 0, len(b.Items))
	for k := range b.Items {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "%-22s $%.6f\n", k, b.Items[k])
	}
	fmt.Fprintf(&sb, "%-22s $%.6f\n", "total", b.Total)
	return sb.String()
}

// FromCalls converts the per-API call counts the local gateway keeps
// ("service:Operation") into the request-priced part of a Usage. Lambda,
// Step Functions and event-chunk figures are not visible as HTTP calls and
// are added by the caller from the emulators' own counters.
func FromCalls(calls map[string]int64) Usage {
	var u Usage
	for key, n := range calls {
		service, op, _ := strings.Cut(key, ":")
		f := float64(n)
		switch service {
		case "sqs":
			u.SQSRequests += f
		case "dynamodb":
			switch op {
			case "GetItem", "Query", "Scan", "BatchGetItem", "DescribeTable":
				if op != "DescribeTable" {
					u.DynamoReadUnits += f
				}
			case "CreateTable", "UpdateTimeToLive", "DescribeTimeToLive", "ListTables":
			default:
				u.DynamoWriteUnits += f
			}
		case "s3":
			switch op {
			case "GETObject", "HEADObject":
				u.S3GetRequests += f
			case "PUTObject", "POSTObject", "ListObjects", "PUTBucket":
				u.S3PutListRequests += f
			}
		}
	}
	return u
}
