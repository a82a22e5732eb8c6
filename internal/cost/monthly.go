package cost

import "math"

// DaysPerMonth is the average month AWS bills by (730 hours).
const DaysPerMonth = 730.0 / 24

// MonthlyPrices are the list prices of what the stack is billed for by the
// month or by the byte rather than per request (us-east-1; docs/COST.md names
// the pricing page of each). Free tiers are ignored.
type MonthlyPrices struct {
	CustomMetricMonth   float64 // CloudWatch, per metric (name × dimension set) per month
	AlarmMonth          float64 // CloudWatch standard-resolution alarm
	DashboardMonth      float64 // CloudWatch dashboard
	KMSKeyMonth         float64 // customer-managed KMS key
	KMSRequest          float64 // per request
	LogsIngestGB        float64 // CloudWatch Logs standard ingestion
	LogsStoreGBMonth    float64 // CloudWatch Logs archived storage
	ArchiveIngestGB     float64 // EventBridge archive, per GB archived
	ArchiveStoreGBMonth float64 // EventBridge archive storage
	S3StoreGBMonth      float64 // S3 Standard storage
	DynamoStoreGBMonth  float64 // DynamoDB Standard table storage
	DynamoPITRGBMonth   float64 // DynamoDB continuous backups (PITR)
}

// ListMonthlyPrices returns the list prices of the monthly cost model.
func ListMonthlyPrices() MonthlyPrices {
	return MonthlyPrices{
		CustomMetricMonth:   0.30,
		AlarmMonth:          0.10,
		DashboardMonth:      3.00,
		KMSKeyMonth:         1.00,
		KMSRequest:          0.03 / 1e4,
		LogsIngestGB:        0.50,
		LogsStoreGBMonth:    0.03,
		ArchiveIngestGB:     0.10,
		ArchiveStoreGBMonth: 0.023,
		S3StoreGBMonth:      0.023,
		DynamoStoreGBMonth:  0.25,
		DynamoPITRGBMonth:   0.20,
	}
}

// Footprint is what the deployed stack holds whatever its traffic, and how
// long it keeps what the traffic leaves behind.
type Footprint struct {
	CustomMetrics int // distinct metric name × dimension set combinations the Lambdas emit
	Alarms        int
	Dashboards    int
	KMSKeys       int

	LogRetentionDays        float64
	ArchiveRetentionDays    float64 // 0: no archive
	ExportRetentionDays     float64
	ClaimCheckRetentionDays float64
	QuarantineRetentionDays float64
	ManifestRetentionDays   float64 // manifests and map results
	HistoryRetentionDays    float64 // run history and export ledger items (DynamoDB TTL)
	PITR                    bool

	// Per-run and per-file log volume, and KMS requests (modelled: see docs/COST.md).
	LogBytesPerRun     float64
	LogBytesPerFile    float64
	KMSRequestsPerRun  float64
	KMSRequestsPerFile float64
	// Bytes an S3 manifest/map-result set and a DynamoDB history item take per run.
	ManifestBytesPerRun float64
	TableBytesPerRun    float64
}

// ThisFootprint is healthlake-cdc's footprint with the stack's defaults:
// the metric names of internal/metrics with the Pipeline dimension only, the
// alarms and the one dashboard of the stack, one key, and the stack's retention
// defaults.
func ThisFootprint() Footprint {
	return Footprint{
		CustomMetrics: 17,
		Alarms:        10,
		Dashboards:    1,
		KMSKeys:       1,

		LogRetentionDays:        30,
		ArchiveRetentionDays:    7,
		ExportRetentionDays:     7,
		ClaimCheckRetentionDays: 30,
		QuarantineRetentionDays: 90,
		ManifestRetentionDays:   30,
		HistoryRetentionDays:    30,
		PITR:                    true,

		// Five Lambda invocations a run, each START/END/REPORT (~350 B), one
		// JSON summary line (~400 B) and one EMF record (~700 B); about 25
		// state-machine log events of ~1 KB at level ALL.
		LogBytesPerRun:  5*1450 + 25*1024,
		LogBytesPerFile: 1450 + 4*1024, // prepare-change invocation + Map child events
		// SSE-KMS with S3 Bucket Keys, SQS and DynamoDB data-key caching: a
		// few GenerateDataKey/Decrypt calls per run and per file.
		KMSRequestsPerRun:   12,
		KMSRequestsPerFile:  2,
		ManifestBytesPerRun: 4096,
		TableBytesPerRun:    1024,
	}
}

// Volume is a month's traffic.
type Volume struct {
	ChangesPerDay    float64
	RunsPerDay       float64
	AvgResourceBytes float64 // average exported NDJSON line
	// Redelivery is events delivered per change, ≥ 1: 1 in steady state
	// (the overlap's repeats are skipped, docs/RUNLOCK.md "Overlap"); more
	// with retries and replays.
	Redelivery float64
	// ExportedPerChange is lines exported (and read) per change, ≥
	// Redelivery: 1 + overlap ÷ schedule interval in steady state (the
	// overlap is still exported), 1.2 with the defaults. 0 = Redelivery.
	ExportedPerChange  float64
	ClaimCheckFraction float64 // share of changes whose resource is claim-checked
	AvgClaimCheckBytes float64
	QuarantineFraction float64
	StoredResources    float64 // resources in the data store (DynamoDB holds none; kept for reconciliation models)
}

// envelopeBytes is the detail envelope and event metadata around a resource.
const envelopeBytes = 450

// gb converts bytes to GB (10^9, as AWS bills storage and ingestion).
func gb(b float64) float64 { return b / 1e9 }

// Monthly prices one month of operation: the request-priced usage of the
// design at the volume, plus everything billed by the month or the byte —
// metrics, alarms, dashboards, the key and its requests, log ingestion and
// storage, the event archive, S3 storage of exports, claim-checks,
// quarantine and manifests, DynamoDB storage and backups. Storage is priced
// at steady state: what a day adds times the days it is kept.
func Monthly(d Design, f Footprint, v Volume, p Prices, mp MonthlyPrices) Bill {
	ratio := math.Max(v.Redelivery, 1)
	exported := math.Max(v.ExportedPerChange, ratio)
	perWindow := 0.0
	if v.RunsPerDay > 0 {
		perWindow = v.ChangesPerDay / v.RunsPerDay
	}
	filesPerDay := d.Files(perWindow) * v.RunsPerDay
	bill := Price(d.Daily(v.ChangesPerDay*ratio, v.RunsPerDay).Scale(DaysPerMonth), p)

	exportBytesDay := v.ChangesPerDay * exported * v.AvgResourceBytes
	eventBytesDay := v.ChangesPerDay * ratio * (math.Min(v.AvgResourceBytes, 256*1024) + envelopeBytes)
	claimBytesDay := v.ChangesPerDay * v.ClaimCheckFraction * v.AvgClaimCheckBytes
	quarantineBytesDay := v.ChangesPerDay * v.QuarantineFraction * v.AvgResourceBytes
	logBytesDay := v.RunsPerDay*f.LogBytesPerRun + filesPerDay*f.LogBytesPerFile
	tableBytes := v.RunsPerDay * f.TableBytesPerRun * f.HistoryRetentionDays

	items := map[string]float64{
		"cloudWatchMetrics":    float64(f.CustomMetrics) * mp.CustomMetricMonth,
		"cloudWatchAlarms":     float64(f.Alarms) * mp.AlarmMonth,
		"cloudWatchDashboards": float64(f.Dashboards) * mp.DashboardMonth,
		"kmsKeys":              float64(f.KMSKeys) * mp.KMSKeyMonth,
		"kmsRequests":          (v.RunsPerDay*f.KMSRequestsPerRun + filesPerDay*f.KMSRequestsPerFile) * DaysPerMonth * mp.KMSRequest,
		"logsIngestion":        gb(logBytesDay) * DaysPerMonth * mp.LogsIngestGB,
		"logsStorage":          gb(logBytesDay*f.LogRetentionDays) * mp.LogsStoreGBMonth,
		"s3Storage": gb(exportBytesDay*f.ExportRetentionDays+claimBytesDay*f.ClaimCheckRetentionDays+
			quarantineBytesDay*f.QuarantineRetentionDays+v.RunsPerDay*f.ManifestBytesPerRun*f.ManifestRetentionDays) * mp.S3StoreGBMonth,
		"dynamoDBStorage": gb(tableBytes) * mp.DynamoStoreGBMonth,
	}
	if f.ArchiveRetentionDays > 0 {
		items["eventArchiveIngestion"] = gb(eventBytesDay) * DaysPerMonth * mp.ArchiveIngestGB
		items["eventArchiveStorage"] = gb(eventBytesDay*f.ArchiveRetentionDays) * mp.ArchiveStoreGBMonth
	}
	if f.PITR {
		items["dynamoDBBackups"] = gb(tableBytes) * mp.DynamoPITRGBMonth
	}
	for k, x := range items {
		bill.Items[k] = x
		bill.Total += x
	}
	return bill
}

// FixedMonthly is the part of a month's bill that does not depend on
// traffic: metrics, alarms, dashboards and keys.
func FixedMonthly(f Footprint, mp MonthlyPrices) float64 {
	return float64(f.CustomMetrics)*mp.CustomMetricMonth + float64(f.Alarms)*mp.AlarmMonth +
		float64(f.Dashboards)*mp.DashboardMonth + float64(f.KMSKeys)*mp.KMSKeyMonth
}

// Floor is the least a month at b's volume can cost: PutEvents of the
// distinct events, the archive of them, and the fixed items — what any
// pipeline publishing each change once to an archived bus pays. b must be
// priced with Volume.Redelivery 1 (each change published once).
func Floor(b Bill, f Footprint, mp MonthlyPrices) float64 {
	return b.Items["eventBridge"] + b.Items["eventArchiveIngestion"] + b.Items["eventArchiveStorage"] + FixedMonthly(f, mp)
}
