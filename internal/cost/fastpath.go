package cost

import (
	"math"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fastrecord"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// FastPathModel is how the Subscriptions fast path (docs/FASTPATH.md)
// consumes resources beside the export path. Every figure but the prices is
// modelled: HealthLake documents neither how many events one notification
// carries nor how the notifications are billed, and the event-source
// mapping's batching depends on the arrival rate.
type FastPathModel struct {
	// EventsPerBundle is the notification events one EventBridge event
	// (one SQS message) carries: 1 unless HealthLake batches.
	EventsPerBundle float64
	// Pollers is the event-source mapping's concurrent pollers (Lambda's
	// SQS mappings start with five; cdc-local's fast-path mapping runs
	// five) and BatchingWindowSeconds its MaximumBatchingWindow (none as
	// deployed by default, stackconfig.Config.FastPathBatchingWindow): with
	// a window, at most Pollers invocations per window.
	Pollers, BatchingWindowSeconds float64
	// ReceiveSeconds is how long one ReceiveMessage takes to answer once a
	// message is there (a round trip; 0.02 modelled). A poller gathering a
	// batch receives again at once, so each receive returns what arrived
	// during the last one: about the poller's arrival rate ×
	// ReceiveSeconds, at least 1 and at most 10 messages. At 1 M changes a
	// day that is one receive per message, as the simulation measures
	// (docs/SIMULATION.md: its local mapping receives the same way), not
	// one per ten.
	ReceiveSeconds float64
	// SecondsPerInvocation and SecondsPerMessage give an invocation's
	// duration; MemoryGB its memory (0.5 as deployed).
	SecondsPerInvocation, SecondsPerMessage, MemoryGB float64
	// Environments is how many execution environments report their counts,
	// each at most once per ReportEverySeconds (stackconfig.FastPathReportEvery,
	// 10 s).
	Environments, ReportEverySeconds float64
	// Each invocation writes its record as one DynamoDB item
	// (internal/fastrecord) of RecordItemBytes plus RecordEntryBytes per
	// version (gzip-compressed), billed in 1 KB write units.
	RecordItemBytes, RecordEntryBytes float64
	// WindowsPerDay read the record items of their span (SpanSeconds: the
	// window, the safety lag and the export, about 8 minutes), each in
	// ReadersPerWindow invocations (the Map's batches and the delete scan)
	// with strongly consistent queries of every shard of every hour the
	// span touches (4 KB read units, at least one per query).
	WindowsPerDay, SpanSeconds, ReadersPerWindow float64
	// VReadsPerChange is 1 with id-only payloads, about 0.0002 with
	// full-resource ones (the resources over 256 KB, sent id-only).
	VReadsPerChange float64
	// PlatformLogBytes are the log bytes Lambda writes per invocation
	// (START, END and REPORT lines, about 255 bytes; 0 with the system log
	// level at WARN, as deployed); ReportBytes one report of the fast path
	// (its log line and EMF record, about 1,260 bytes: an environment
	// reports at most once per ReportEverySeconds, internal/fastpath).
	PlatformLogBytes, ReportBytes float64
	// ReportEveryInvocation models a report per invocation (the fast path
	// before it summed its counts per environment), for comparison.
	ReportEveryInvocation bool
	// NotificationsBilled counts HealthLake's puts on the notification bus
	// as custom events of the account (HealthLake's pricing page does not
	// say): the model prices them apart.
	NotificationsBilled bool
}

// DeployedFastPath is the fast path as the CDK app deploys it, with a
// full-resource Subscription and one event per notification.
func DeployedFastPath() FastPathModel {
	return FastPathModel{
		EventsPerBundle: 1, Pollers: 5, BatchingWindowSeconds: stackconfig.Default().FastPathBatchingWindow.Seconds(), ReceiveSeconds: 0.02,
		SecondsPerInvocation: 0.05, SecondsPerMessage: 0.005, MemoryGB: 0.5,
		Environments: 5, ReportEverySeconds: stackconfig.FastPathReportEvery.Seconds(),
		RecordItemBytes: 130, RecordEntryBytes: 40,
		WindowsPerDay: 288, SpanSeconds: 480, ReadersPerWindow: 2,
		VReadsPerChange:  0.0002,
		PlatformLogBytes: 0, ReportBytes: 1260,
	}
}

// FastPathDaily is the usage the fast path adds to a day of changesPerDay
// changes, and the HealthLake version reads (priced apart, as HealthLake
// queries) and notification events (priced apart, see NotificationsBilled).
// The versions it publishes replace the export path's PutEvents of the
// same versions, so no event chunks are added.
func FastPathDaily(changesPerDay float64, m FastPathModel) (u Usage, vreads, notifications float64) {
	if changesPerDay <= 0 {
		return Usage{}, 0, 0
	}
	per := math.Max(m.EventsPerBundle, 1)
	messages := changesPerDay / per
	perReceive := math.Min(math.Max(messages/86400/math.Max(m.Pollers, 1)*m.ReceiveSeconds, 1), 10)
	receives := messages / perReceive
	// With a window a poller invokes at most once per window; without one
	// it invokes each receive's messages.
	invocations := receives
	if m.BatchingWindowSeconds > 0 {
		invocations = math.Min(messages, m.Pollers*86400/m.BatchingWindowSeconds)
	}
	perInvocation := messages / invocations
	deletes := invocations * math.Ceil(perInvocation/10) // DeleteMessageBatch takes 10
	emptyPolls := m.Pollers * 3 * 60 * 24                // 20 s long polls of idle pollers, at most
	reports := math.Min(invocations, m.Environments*86400/math.Max(m.ReportEverySeconds, 1))
	if m.ReportEveryInvocation {
		reports = invocations
	}
	// One item per invocation (MaxEntriesPerItem versions at most).
	items := invocations * math.Ceil(perInvocation*per/fastrecord.MaxEntriesPerItem)
	itemBytes := m.RecordItemBytes + m.RecordEntryBytes*changesPerDay/items
	writeUnits := items * math.Ceil(itemBytes/1024)
	// A reader queries each partition of the span once (one page unless
	// it holds more than 1 MB), reading every item of the span.
	buckets := math.Ceil(m.SpanSeconds/fastrecord.Bucket.Seconds()) + 1
	spanBytes := math.Min(m.SpanSeconds/86400, 1) * items * itemBytes
	readUnits := m.WindowsPerDay * m.ReadersPerWindow * (buckets*fastrecord.Shards + math.Ceil(spanBytes/4096))
	u = Usage{
		SQSRequests:      messages + receives + deletes + emptyPolls,
		LambdaRequests:   invocations,
		LambdaGBSeconds:  (invocations*m.SecondsPerInvocation + messages*m.SecondsPerMessage) * m.MemoryGB,
		LambdaArm64:      true,
		DynamoWriteUnits: writeUnits,
		DynamoReadUnits:  readUnits,
		LogBytes:         invocations*m.PlatformLogBytes + reports*m.ReportBytes,
	}
	return u, changesPerDay * m.VReadsPerChange, messages
}
