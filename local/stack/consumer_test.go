package stack

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/healthlake-cdc/healthlake-cdc/examples/consumer/replica"
	"github.com/healthlake-cdc/healthlake-cdc/examples/consumer/sqsconsumer"
	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/gen"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent/s3getter"
)

// subscriber is the example consumer subscribed to the stack's bus the way
// docs/CONSUMERS.md tells a consumer team to: an SQS queue with a
// dead-letter queue (redrive policy), a rule on the bus matching the
// pipeline's source, the queue as its target.
type subscriber struct {
	st       *Stack
	sqs      *sqs.Client
	rule     string
	queueURL string
	consumer *sqsconsumer.Consumer
	replica  *replica.Replica
}

func subscribe(t *testing.T, st *Stack) *subscriber {
	t.Helper()
	ctx := context.Background()
	s := &subscriber{st: st, sqs: sqs.NewFromConfig(st.Config), rule: st.Options().Name + "-replica"}
	name := st.Options().Name + "-replica"
	if _, err := s.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq")}); err != nil {
		t.Fatal(err)
	}
	q, err := s.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: map[string]string{
		"VisibilityTimeout": "30",
		"RedrivePolicy":     `{"maxReceiveCount":"5","deadLetterTargetArn":"` + st.Env.ARN("sqs", name+"-dlq") + `"}`,
	}})
	if err != nil {
		t.Fatal(err)
	}
	s.queueURL = aws.ToString(q.QueueUrl)
	eb := eventbridge.NewFromConfig(st.Config)
	if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(s.rule), EventBusName: aws.String(st.Res.Bus),
		EventPattern: aws.String(`{"source": ["healthlake.cdc"]}`)}); err != nil {
		t.Fatalf("put rule: %v", err)
	}
	out, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(s.rule), EventBusName: aws.String(st.Res.Bus),
		Targets: []ebtypes.Target{{Id: aws.String("replica"), Arn: aws.String(st.Env.ARN("sqs", name))}}})
	if err != nil || out.FailedEntryCount != 0 {
		t.Fatalf("put targets: %v %+v", err, out)
	}
	if s.replica, err = replica.Open(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	s.consumer = &sqsconsumer.Consumer{Queue: s.sqs, QueueURL: s.queueURL, Replica: s.replica,
		Objects: s3getter.New(awsclient.NewS3(st.Config)), WaitSeconds: -1}
	return s
}

// sync waits until the bus has handed every event to its targets, drains
// the queue through the consumer, and checks that nothing failed and the
// queue is empty.
func (s *subscriber) sync(t *testing.T, phase string) sqsconsumer.Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.st.EventBridge.WaitIdle(ctx); err != nil {
		t.Fatalf("%s: deliveries: %v", phase, err)
	}
	st, err := s.consumer.Drain(ctx)
	if err != nil {
		t.Fatalf("%s: drain: %v", phase, err)
	}
	t.Logf("%s: consumer %+v", phase, st)
	if st.Failed != 0 || st.DeleteErrors != 0 || st.Acked != st.Received {
		t.Fatalf("%s: consumer %+v", phase, st)
	}
	out, err := s.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(s.queueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range out.Attributes {
		if v != "0" {
			t.Fatalf("%s: queue %s = %s after the drain", phase, k, v)
		}
	}
	return st
}

// storeState is the data store's current state as the emulator exports it:
// every live resource's stored bytes, and the deletion (versionId,
// lastUpdated) of every deleted one.
type storeState struct {
	live    map[string]string
	deleted map[string][2]string
}

func currentState(t *testing.T, st *Stack) storeState {
	t.Helper()
	ds, ok := st.HealthLake.Datastore(st.Res.DatastoreID)
	if !ok {
		t.Fatal("no data store")
	}
	var buf bytes.Buffer
	if err := ds.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	s := storeState{live: map[string]string{}, deleted: map[string][2]string{}}
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var l struct {
			ResourceType, ID, VersionID, LastUpdated string
			Deleted                                  bool
			Resource                                 json.RawMessage
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		key := l.ResourceType + "/" + l.ID
		delete(s.live, key)
		delete(s.deleted, key)
		if l.Deleted {
			s.deleted[key] = [2]string{l.VersionID, l.LastUpdated}
		} else {
			s.live[key] = string(l.Resource)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return s
}

// assertReplicaIsTheStore compares the replica with the data store's
// current state, byte for byte, deleted resources absent.
func (s *subscriber) assertReplicaIsTheStore(t *testing.T, phase string) {
	t.Helper()
	want := currentState(t, s.st).live
	got := map[string]string{}
	if err := s.replica.Walk(func(typ, id string, body []byte) error {
		got[typ+"/"+id] = string(body)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for k, w := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: %s missing from the replica", phase, k)
		} else if g != w {
			t.Errorf("%s: %s differs from the data store (%d bytes, store %d)", phase, k, len(g), len(w))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: %s in the replica, not in the data store", phase, k)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// updated returns body with "language" set to lang: a new version of the
// same resource.
func updated(t *testing.T, body []byte, lang string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	m["language"] = json.RawMessage(strconv.Quote(lang))
	delete(m, "meta")
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The example consumer, subscribed by a rule with an SQS target, keeps a
// replica equal to the data store through the seed, updates, a claim-checked
// resource, deletes (soft ones from their window, a hard one from the
// reconciliation), re-creations,
// a checkpoint replay and an archive replay.
func TestConsumerReplicaFollowsTheDataStore(t *testing.T) {
	t.Parallel()
	st := startStack(t, func(o *Options) { o.SampleSize = 16 })
	sub := subscribe(t, st)
	ctx := context.Background()

	// 1. Seed: the first window snapshots the store.
	first := runWindow(t, st)
	if first.Status != "SUCCEEDED" || first.Window == nil {
		t.Fatalf("first window %+v", first)
	}
	if got := sub.sync(t, "seed"); got.Upserted != int64(st.Seeded()) || got.Duplicates+got.Stale != 0 {
		t.Fatalf("seed: consumer %+v for %d seeded resources", got, st.Seeded())
	}
	sub.assertReplicaIsTheStore(t, "seed")

	// 2. Updates: PUTs of three seeded resources and a new one.
	live := currentState(t, st).live
	var keys []string
	for k := range live {
		keys = append(keys, k)
	}
	keys = keys[:3]
	for _, k := range keys {
		typ, id, _ := strings.Cut(k, "/")
		if _, err := st.PutResource(ctx, typ, id, updated(t, []byte(live[k]), "en-US")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.PutResource(ctx, "Patient", "consumer-new", []byte(`{"resourceType":"Patient","id":"consumer-new","active":true}`)); err != nil {
		t.Fatal(err)
	}
	runWindow(t, st)
	if got := sub.sync(t, "updates"); got.Upserted != 4 {
		t.Fatalf("updates: consumer %+v", got)
	}
	sub.assertReplicaIsTheStore(t, "updates")

	// 3. A resource too large for an event travels as a claim-check.
	g := gen.New(7)
	g.SetClock(time.Now())
	big, err := g.Resource("DocumentReference", gen.Options{ID: "consumer-large", Size: 300 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutResource(ctx, "DocumentReference", "consumer-large", big); err != nil {
		t.Fatal(err)
	}
	before := st.Delivered.Len()
	runWindow(t, st)
	claimChecked := 0
	for _, d := range st.Delivered.Since(before) {
		det, err := cdcevent.DecodeDetail(d.Event.Detail)
		if err != nil {
			t.Fatal(err)
		}
		if det.ResourceRef != nil && det.ResourceID == "consumer-large" {
			claimChecked++
		}
	}
	if claimChecked != 1 {
		t.Fatalf("the large resource was not claim-checked (%d)", claimChecked)
	}
	if got := sub.sync(t, "claim-check"); got.Upserted != 1 {
		t.Fatalf("claim-check: consumer %+v", got)
	}
	sub.assertReplicaIsTheStore(t, "claim-check")

	// 4. Deletes: three FHIR DELETEs (one of the claim-checked resource),
	// published by the window they happen in, and a hard delete (history
	// gone too, so the delete's version is "{last delivered}-deleted"),
	// found by the reconciliation.
	for _, k := range []string{keys[0], "DocumentReference/consumer-large", keys[1]} {
		typ, id, _ := strings.Cut(k, "/")
		deleteResource(t, st, typ, id)
	}
	hardTyp, hardID, _ := strings.Cut(keys[2], "/")
	if ds, _ := st.HealthLake.Datastore(st.Res.DatastoreID); !ds.HardDelete(hardTyp, hardID) {
		t.Fatalf("hard delete of %s failed", keys[2])
	}
	before = st.Delivered.Len()
	committed(t, st) // the window's delete scan: the three soft deletes
	fromWindow := st.Delivered.Len()
	reconcileNow(t, st) // the hard delete left no history: the reconciliation's
	deletes := map[string]string{}
	for i, c := range changesOf(t, st.Delivered.Since(before)) {
		if c.Operation == envelope.OperationDelete {
			deletes[c.ResourceType+"/"+c.ResourceID] = c.VersionID
			if hard := c.ResourceType+"/"+c.ResourceID == keys[2]; hard != (before+i >= fromWindow) {
				t.Errorf("delete of %s came from the %s", c.ResourceType, map[bool]string{true: "window, not the reconciliation", false: "reconciliation, not its window"}[hard])
			}
		}
	}
	state := currentState(t, st)
	if len(deletes) != 4 || deletes[keys[2]] != "2-deleted" {
		t.Fatalf("window and reconciliation sent deletes %v, want 4 with %s at 2-deleted", deletes, keys[2])
	}
	for k, del := range state.deleted {
		if deletes[k] != del[0] {
			t.Errorf("delete of %s has version %q, the DELETE's is %q", k, deletes[k], del[0])
		}
	}
	if got := sub.sync(t, "deletes"); got.Deleted != 4 || got.Upserted != 0 {
		t.Fatalf("deletes: consumer %+v", got)
	}
	sub.assertReplicaIsTheStore(t, "deletes")

	// Re-creation: a later upsert of a deleted id wins, also after a hard
	// delete, where the store starts again at version 1.
	for i, k := range keys[1:3] {
		typ, id, _ := strings.Cut(k, "/")
		if _, err := st.PutResource(ctx, typ, id, updated(t, []byte(live[k]), []string{"fr", "de"}[i])); err != nil {
			t.Fatal(err)
		}
	}
	committed(t, st)
	if got := sub.sync(t, "re-creation"); got.Upserted != 2 {
		t.Fatalf("re-creation: consumer %+v", got)
	}
	sub.assertReplicaIsTheStore(t, "re-creation")
	// A second reconciliation changes nothing.
	reconcileNow(t, st)
	if got := sub.sync(t, "second reconciliation"); got.Upserted+got.Deleted != 0 {
		t.Fatalf("second reconciliation: consumer %+v", got)
	}
	sub.assertReplicaIsTheStore(t, "second reconciliation")

	// 5a. `cdcctl replay` moves the checkpoint back: the next window
	// re-emits every live resource; all are duplicates.
	cdcctl(t, st, "replay", "--since", first.Window.Since, "--reason", "consumer e2e")
	runWindow(t, st)
	liveNow := len(currentState(t, st).live)
	if got := sub.sync(t, "checkpoint replay"); got.Upserted+got.Deleted != 0 || got.Duplicates != int64(liveNow) {
		t.Fatalf("checkpoint replay: consumer %+v for %d live resources", got, liveNow)
	}
	sub.assertReplicaIsTheStore(t, "checkpoint replay")

	// 5b. The bus archive replayed into the rule: every event ever put —
	// old versions, deletes, duplicates — in whatever order the workers
	// deliver it; none changes the replica.
	eb := eventbridge.NewFromConfig(st.Config)
	archived := st.Delivered.Len()
	if _, err := eb.StartReplay(ctx, &eventbridge.StartReplayInput{
		ReplayName: aws.String(st.Options().Name + "-consumer"), EventSourceArn: aws.String(st.EventBridge.ArchiveARN(st.ArchiveName())),
		EventStartTime: aws.Time(st.started.Add(-time.Minute)), EventEndTime: aws.Time(time.Now()),
		Destination: &ebtypes.ReplayDestination{Arn: aws.String(st.EventBridge.BusARN(st.Res.Bus)),
			FilterArns: []string{st.EventBridge.RuleARN(st.Res.Bus, sub.rule)}},
	}); err != nil {
		t.Fatalf("start replay: %v", err)
	}
	for {
		out, err := eb.DescribeReplay(ctx, &eventbridge.DescribeReplayInput{ReplayName: aws.String(st.Options().Name + "-consumer")})
		if err != nil {
			t.Fatal(err)
		}
		if out.State == ebtypes.ReplayStateCompleted {
			break
		}
		if out.State == ebtypes.ReplayStateFailed || out.State == ebtypes.ReplayStateCancelled {
			t.Fatalf("replay %s: %s", out.State, aws.ToString(out.StateReason))
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := sub.sync(t, "archive replay")
	if got.Upserted+got.Deleted != 0 || got.Received != int64(archived) || got.Stale == 0 {
		t.Fatalf("archive replay: consumer %+v for %d archived events", got, archived)
	}
	sub.assertReplicaIsTheStore(t, "archive replay")
	if n := len(currentState(t, st).deleted); n != 2 {
		t.Fatalf("%d resources deleted in the data store, want 2 (one re-created, one hard-deleted and re-created)", n)
	}
}
