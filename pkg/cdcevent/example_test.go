package cdcevent_test

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent"
)

// An event as an EventBridge rule target (a Lambda, an SQS queue) receives it.
const inlineEvent = `{
  "version": "0", "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
  "detail-type": "FHIR Resource Changed", "source": "healthlake.cdc",
  "account": "123456789012", "time": "2026-11-21T10:02:00Z", "region": "us-east-1", "resources": [],
  "detail": {
    "schemaVersion": "1", "eventId": "Patient/123/_history/2", "operation": "upsert",
    "resourceType": "Patient", "resourceId": "123", "versionId": "2",
    "lastUpdated": "2026-11-21T09:59:30.120Z",
    "window": {"since": "2026-11-21T09:55:00.000Z", "until": "2026-11-21T10:00:00.000Z"},
    "export": {"datastoreId": "ds1", "jobId": "job1"},
    "resource": {"resourceType":"Patient","id":"123","meta":{"versionId":"2","lastUpdated":"2026-11-21T09:59:30.120Z"}}
  }
}`

func ExampleDecode() {
	ev, err := cdcevent.Decode([]byte(inlineEvent))
	if err != nil {
		fmt.Println("bad event:", err)
		return
	}
	seen := map[string]bool{} // in production: a table with a TTL
	if seen[ev.Detail.DedupeKey()] {
		return // a retried or replayed window delivered it again
	}
	seen[ev.Detail.DedupeKey()] = true

	resource, err := cdcevent.Resolve(context.Background(), nil, &ev.Detail) // inline: no S3 needed
	if err != nil {
		fmt.Println("resolve:", err)
		return
	}
	fmt.Println(ev.Source, "|", ev.DetailType)
	fmt.Println(ev.Detail.DedupeKey(), ev.Detail.Window.Until.Format("15:04"))
	fmt.Println(string(resource))
	// Output:
	// healthlake.cdc | FHIR Resource Changed
	// Patient/123/_history/2 10:00
	// {"resourceType":"Patient","id":"123","meta":{"versionId":"2","lastUpdated":"2026-11-21T09:59:30.120Z"}}
}

// objects is an in-memory cdcevent.ObjectGetter, so the example runs
// anywhere; in production pass s3getter.New(s3Client).
type objects map[string][]byte

func (o objects) GetObject(_ context.Context, bucket, key string) (io.ReadCloser, error) {
	b, ok := o[bucket+"/"+key]
	if !ok {
		return nil, fmt.Errorf("no object %s/%s", bucket, key)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func ExampleResolve() {
	line := []byte(`{"resourceType":"DocumentReference","id":"d1","meta":{"versionId":"1"}}`)
	s3c := objects{"artifacts/claim-check/DocumentReference/d1/_history/1.json": line}
	detail := []byte(`{"schemaVersion":"1","eventId":"DocumentReference/d1/_history/1","operation":"upsert",
	  "resourceType":"DocumentReference","resourceId":"d1","versionId":"1","lastUpdated":"2026-11-21T09:59:00Z",
	  "window":{"since":"2026-11-21T09:55:00.000Z","until":"2026-11-21T10:00:00.000Z"},"export":{"datastoreId":"ds1","jobId":"job1"},
	  "resourceRef":{"bucket":"artifacts","key":"claim-check/DocumentReference/d1/_history/1.json","size":71,
	    "sha256":"70f8185d9ff52827742f928a85af21dd440b8db17e554dcc9d17a91293b1209a"}}`)
	d, err := cdcevent.DecodeDetail(detail)
	if err != nil {
		fmt.Println(err)
		return
	}
	resource, err := cdcevent.Resolve(context.Background(), s3c, d)
	if err != nil {
		fmt.Println(err) // errors.Is(err, cdcevent.ErrChecksumMismatch) for a tampered object
		return
	}
	fmt.Println(d.DedupeKey(), len(resource), "bytes verified")
	// Output:
	// DocumentReference/d1/_history/1 71 bytes verified
}

// A consumer keeping a replica: apply upserts, remove on deletes. A later
// upsert of the same id (a re-creation) has a higher version and wins.
func ExampleDetail_IsDelete() {
	details := []string{
		`{"schemaVersion":"1","eventId":"Patient/123/_history/2","operation":"upsert","resourceType":"Patient","resourceId":"123","versionId":"2",
		  "lastUpdated":"2026-11-21T09:59:30.120Z","window":{"since":"2026-11-21T09:55:00.000Z","until":"2026-11-21T10:00:00.000Z"},
		  "export":{"datastoreId":"ds1","jobId":"job1"},"resource":{"resourceType":"Patient","id":"123"}}`,
		`{"schemaVersion":"1","eventId":"Patient/123/_history/3","operation":"delete","resourceType":"Patient","resourceId":"123","versionId":"3",
		  "lastUpdated":"2026-11-21T10:01:10.000Z","window":{"since":"2026-11-21T10:00:00.000Z","until":"2026-11-21T10:05:00.000Z"},
		  "export":{"datastoreId":"ds1","jobId":"job2"}}`,
	}
	replica := map[string][]byte{}
	for _, raw := range details {
		d, err := cdcevent.DecodeDetail([]byte(raw))
		if err != nil {
			fmt.Println("bad event:", err)
			return
		}
		key := d.ResourceType + "/" + d.ResourceID
		if d.IsDelete() {
			delete(replica, key) // remove this resource
			fmt.Println("deleted", key, "at version", d.VersionID)
			continue
		}
		resource, err := cdcevent.Resolve(context.Background(), nil, d)
		if err != nil {
			fmt.Println("resolve:", err)
			return
		}
		replica[key] = resource
		fmt.Println("upserted", key, "version", d.VersionID)
	}
	fmt.Println(len(replica), "resources left")
	// Output:
	// upserted Patient/123 version 2
	// deleted Patient/123 at version 3
	// 0 resources left
}
