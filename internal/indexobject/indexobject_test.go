package indexobject_test

import (
	"context"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/indexobject"
)

// TestPutWritesAReadableIndexObject: over a real S3 client (gofakes3), Put
// writes the entries as one gzip TSV object that delivered.ReadAll reads
// back, with the index object's content type and encoding; no entries,
// no object.
func TestPutWritesAReadableIndexObject(t *testing.T) {
	env := localawstest.Start(t)
	ctx := context.Background()
	c := localawstest.Bucket(t, env, "art")
	entries := []delivered.Entry{
		{Type: "Patient", ID: "p1", VersionID: "2", LastUpdated: "2026-11-26T10:00:00.000Z"},
		{Type: "Observation", ID: "o1", VersionID: "3", LastUpdated: "2026-11-26T10:00:01.000Z", Deleted: true},
	}
	if err := indexobject.Put(ctx, c, "art", "", "delivered/x.tsv.gz", entries); err != nil {
		t.Fatal(err)
	}
	obj, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("art"), Key: aws.String("delivered/x.tsv.gz")})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	if aws.ToString(obj.ContentType) != indexobject.ContentType || aws.ToString(obj.ContentEncoding) != indexobject.ContentEncoding {
		t.Errorf("content type %q, encoding %q", aws.ToString(obj.ContentType), aws.ToString(obj.ContentEncoding))
	}
	var got []delivered.Entry
	if err := delivered.ReadAll(obj.Body, nil, func(e delivered.Entry) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != entries[0] || got[1] != entries[1] {
		t.Fatalf("read back %+v, want %+v", got, entries)
	}
	if err := indexobject.Put(ctx, c, "art", "", "delivered/none.tsv.gz", nil); err != nil {
		t.Fatal(err)
	}
	_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("art"), Key: aws.String("delivered/none.tsv.gz")})
	if err == nil {
		t.Errorf("an empty index object was written")
	}
}
