package fakehealthlake

import (
	"container/heap"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"time"
)

// HealthLake FHIR Subscriptions (R5 Backport topic-based subscriptions on
// the R4 endpoint, EventBridge channel), as the AWS HealthLake developer
// guide documents them (managing-fhir-subscriptions*.html; docs/LOCAL.md
// "HealthLake Subscriptions (modelled)"):
//
//   - Subscription and SubscriptionTopic are ordinary stored resources.
//   - A Subscription written with status "requested" is checked, after
//     SubscriptionOptions.ActivationDelay, against its topic and channel: if
//     valid, a handshake bundle goes to the channel and the Subscription
//     (and its topic, when "unknown") becomes "active"; otherwise the
//     Subscription becomes "error" with the reason in its `error`.
//   - Every create, update and delete of a resource its topic triggers on
//     (and its filter accepts) becomes one notification event, delivered as
//     an EventBridge event (Options.OnNotification) after a modelled delay,
//     with modelled drops, duplicates, late deliveries and retries.
//
// Everything moves on at Tick, Advance and RunJobs (the stack ticks every
// 50 ms), never at a request; the notifier is called without the lock.

// NotificationSource and NotificationDetailType are the source and detail
// type of every subscription notification HealthLake puts on the channel's
// bus (handshake and event notifications alike; "Example notification
// payloads", managing-fhir-subs-ex-notif-payload.html).
const (
	NotificationSource     = "healthlake"
	NotificationDetailType = "FHIR Subscription Notification"
)

// Notification is one EventBridge event HealthLake sends for a
// subscription: what Options.OnNotification receives.
type Notification struct {
	// BusARN is the Subscription's channel.endpoint, as written.
	BusARN string
	// Source is NotificationSource, DetailType NotificationDetailType.
	Source, DetailType string
	// Time is when the emulator hands the event over (each attempt).
	Time time.Time
	// Detail is {"subscriptionUrl": the Subscription's absolute URL,
	// "notificationBundlePayload": the notification Bundle}.
	Detail json.RawMessage
}

// SubscriptionOptions configure the subscription model. Every figure is
// modelled: HealthLake documents only the 5–10 minute activation, the
// 256 KB full-resource limit and the 14 days of retries. A zero duration
// takes the default; a negative one means none.
type SubscriptionOptions struct {
	// ActivationDelay is how long a Subscription stays "requested" before
	// it is checked and its handshake sent ("Subscriptions usually take
	// 5-10 minutes to create successfully"). Default 5 minutes.
	ActivationDelay time.Duration
	// NotificationDelay is the least time from a write to the delivery of
	// its notification. Default 2 s.
	NotificationDelay time.Duration
	// NotificationJitter is a uniform extra delay in [0, jitter) drawn for
	// each delivery; it reorders notifications. Default 1 s.
	NotificationJitter time.Duration
	// DropRate is the probability that a notification event is never
	// delivered (listed by DroppedNotifications).
	DropRate float64
	// DuplicateRate is the probability that an event is delivered twice
	// (the copy with its own delay, so in another bundle or the same one).
	DuplicateRate float64
	// DelayRate is the probability that an event's delivery is late by
	// ExtraDelay more (default 1 minute).
	DelayRate  float64
	ExtraDelay time.Duration
	// Seed seeds the dice and the generated ids; 0 picks a random seed.
	Seed uint64
	// EventsPerBundle is the most events one notification bundle carries:
	// the events of one subscription due at the same Tick are batched.
	// Default 1.
	EventsPerBundle int
	// MaxFullResourceBytes is the largest full-resource notification (the
	// event detail, in bytes); a larger one is sent id-only. Default
	// 262144 ("max size of 256 KB. If the size is greater than 256KB, it
	// will go back to ID-only").
	MaxFullResourceBytes int
	// RetryInitial and RetryMax bound the exponential backoff between
	// attempts when OnNotification fails (defaults 1 s and 5 minutes);
	// RetryFor is how long after the event HealthLake stops retrying
	// (default 14 days: "HealthLake attempts retries for 14 days and then
	// stops retrying").
	RetryInitial, RetryMax, RetryFor time.Duration
	// UpdateMethod and DeleteMethod are the entry.request.method of a
	// full-resource entry for an update and a delete (defaults "UPDATE"
	// and "DELETE"; HealthLake documents only "CREATE").
	UpdateMethod, DeleteMethod string
	// OnDelivered, when set, is called (without the emulator's lock) for
	// every event of every bundle OnNotification accepted, duplicates
	// included: eventID is "Type/id/_history/v", written when the version
	// was written, delivered when the accepted attempt was made.
	OnDelivered func(eventID string, written, delivered time.Time)
}

// withDefaults fills the zero fields and turns negative durations into 0.
func (o SubscriptionOptions) withDefaults() SubscriptionOptions {
	dur := func(d *time.Duration, def time.Duration) {
		switch {
		case *d < 0:
			*d = 0
		case *d == 0:
			*d = def
		}
	}
	dur(&o.ActivationDelay, 5*time.Minute)
	dur(&o.NotificationDelay, 2*time.Second)
	dur(&o.NotificationJitter, time.Second)
	dur(&o.ExtraDelay, time.Minute)
	dur(&o.RetryInitial, time.Second)
	dur(&o.RetryMax, 5*time.Minute)
	dur(&o.RetryFor, 14*24*time.Hour)
	if o.EventsPerBundle <= 0 {
		o.EventsPerBundle = 1
	}
	if o.MaxFullResourceBytes <= 0 {
		o.MaxFullResourceBytes = 256 << 10
	}
	if o.UpdateMethod == "" {
		o.UpdateMethod = "UPDATE"
	}
	if o.DeleteMethod == "" {
		o.DeleteMethod = "DELETE"
	}
	return o
}

// SubscriptionStats counts what the subscription model did. Event counts
// are of notification events (one per matching write and subscription).
type SubscriptionStats struct {
	// Matched is the events produced by writes.
	Matched int
	// Sent is the events in bundles OnNotification accepted (a duplicate
	// counts twice); Bundles those bundles; Handshakes the handshake
	// bundles accepted.
	Sent, Bundles, Handshakes int
	// Dropped is the events never delivered (DropRate); Duplicated those
	// given a second delivery; Delayed the deliveries made ExtraDelay late.
	Dropped, Duplicated, Delayed int
	// Retried is the failed OnNotification calls of event bundles that
	// were scheduled again; GivenUp the events abandoned once RetryFor had
	// passed since they were written.
	Retried, GivenUp int
	// Downgraded is the events sent id-only because their full-resource
	// bundle was over MaxFullResourceBytes.
	Downgraded int
	// Cancelled is the events not delivered because their Subscription was
	// deleted or no longer active when their turn came.
	Cancelled int
	// Pending is the event deliveries waiting (retries included).
	Pending int
}

// Resource types and statuses of the model.
const (
	subscriptionType = "Subscription"
	topicType        = "SubscriptionTopic"

	subRequested = "requested"
	subActive    = "active"
	subError     = "error"
)

// Interactions a topic triggers on (bits).
const (
	interactionCreate uint8 = 1 << iota
	interactionUpdate
	interactionDelete
)

// subscriptions is the emulator's subscription state; guarded by e.mu.
type subscriptions struct {
	opts SubscriptionOptions
	byDS map[string]*dsSubs
	// queue holds the waiting deliveries, earliest first.
	queue deliveryQueue
	seq   uint64
	// dice draws drops, duplicates, delays and jitter at write time; ids
	// draws bundle and status ids at delivery (two streams, so the dice do
	// not depend on when ticks happen).
	dice, ids *rand.Rand
	// internal is set while the emulator writes a Subscription's status.
	internal bool
	stats    SubscriptionStats
	dropped  []string
}

func newSubscriptions(o SubscriptionOptions) subscriptions {
	seed := o.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	return subscriptions{
		opts: o.withDefaults(),
		byDS: map[string]*dsSubs{},
		dice: rand.New(rand.NewPCG(seed, seed^0x5bd1e9955bd1e995)),
		ids:  rand.New(rand.NewPCG(seed^0xa0761d6478bd642f, seed)),
	}
}

// dsSubs is one data store's subscriptions and topics, mirrored from the
// stored resources.
type dsSubs struct {
	subs   map[string]*subRecord
	topics map[string]*topicState
	// order lists subs by id, active the active ones (deterministic
	// matching order, so a seed gives the same dice).
	order, active []*subRecord
}

// rebuild recomputes order and active after a change.
func (st *dsSubs) rebuild() {
	st.order = st.order[:0]
	for _, r := range st.subs {
		st.order = append(st.order, r)
	}
	sort.Slice(st.order, func(i, j int) bool { return st.order[i].id < st.order[j].id })
	st.active = st.active[:0]
	for _, r := range st.order {
		if r.status == subActive {
			st.active = append(st.active, r)
		}
	}
}

// subRecord is one Subscription as the model holds it.
type subRecord struct {
	id string
	// status is the stored status: requested, active, error or off.
	status string
	// activateAt is when a requested Subscription is checked.
	activateAt time.Time
	cfg        subConfig
	// cfgErr is why an active Subscription written (or restored) with
	// settings that do not pass the checks goes to error at the next Tick.
	cfgErr string
	// gen changes at every write by a client: a handshake whose
	// Subscription was written meanwhile has no effect.
	gen uint64
	// inFlight is set while its handshake is being delivered.
	inFlight bool
}

// subEvent is one notification event.
type subEvent struct {
	eventID     string // Type/id/_history/v
	focus       string // Type/id
	notifID     string // notificationEvent.id: one per subscription and version
	interaction uint8
	written     time.Time
	body        []byte // full-resource: the stored bytes; nil otherwise
}

// delivery is one waiting delivery: a fresh event (attempt 0) or a bundle
// to try again.
type delivery struct {
	due   time.Time
	seq   uint64
	dsID  string
	rec   *subRecord
	evs   []*subEvent
	first time.Time // the earliest write among evs
	tries int
	n     Notification // a bundle's built event (tries > 0)
}

type deliveryQueue []*delivery

func (q deliveryQueue) Len() int { return len(q) }
func (q deliveryQueue) Less(i, j int) bool {
	if !q[i].due.Equal(q[j].due) {
		return q[i].due.Before(q[j].due)
	}
	return q[i].seq < q[j].seq
}
func (q deliveryQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *deliveryQueue) Push(x any)   { *q = append(*q, x.(*delivery)) }
func (q *deliveryQueue) Pop() any {
	old := *q
	d := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return d
}

// SubscriptionStats returns the subscription model's counts.
func (e *Emulator) SubscriptionStats() SubscriptionStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.subs.stats
	for _, d := range e.subs.queue {
		s.Pending += len(d.evs)
	}
	return s
}

// DroppedNotifications returns the events DropRate dropped, as
// "Type/id/_history/v", in the order they were written (one per dropped
// event and subscription): the versions a consumer of notifications
// never hears of.
func (e *Emulator) DroppedNotifications() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.subs.dropped)
}

// subsOf returns a data store's subscription state, building it from the
// stored Subscriptions and SubscriptionTopics the first time (and after a
// Restore). The caller holds e.mu.
func (e *Emulator) subsOf(d *Datastore) *dsSubs {
	if st, ok := e.subs.byDS[d.id]; ok {
		return st
	}
	st := &dsSubs{subs: map[string]*subRecord{}, topics: map[string]*topicState{}}
	e.subs.byDS[d.id] = st
	d.eachCurrent(topicType, func(id string, _ *version, body []byte) {
		st.topics[id] = parseTopicState(body)
	})
	d.eachCurrent(subscriptionType, func(id string, v *version, body []byte) {
		rec := &subRecord{id: id, status: statusOf(body)}
		switch rec.status {
		case subRequested:
			rec.activateAt = v.lastUpdated().Add(e.subs.opts.ActivationDelay)
		case subActive:
			rec.cfg, rec.cfgErr = e.subscriptionConfig(d, st, body)
		}
		st.subs[id] = rec
	})
	st.rebuild()
	return st
}

// eachCurrent calls fn with every live resource of a type (its current
// version not deleted), skipping bodies that cannot be read back. The
// caller holds e.mu.
func (d *Datastore) eachCurrent(typ string, fn func(id string, v *version, body []byte)) {
	tl, ok := d.byType[typ]
	if !ok {
		return
	}
	for _, vi := range tl.vers {
		v := &d.vers[vi]
		r := &d.res[v.res]
		if r.gone || r.last != vi || v.deleted() {
			continue
		}
		b, err := d.body(v)
		if err != nil {
			continue
		}
		fn(idOf(r.key), v, b)
	}
}

// subsReset forgets a data store's subscription state (Restore replaced
// its resources); it is built again from the store when next needed. The
// caller holds e.mu.
func (e *Emulator) subsReset(dsID string) {
	delete(e.subs.byDS, dsID)
}

// subsErased drops an erased Subscription or SubscriptionTopic from the
// model. The caller holds e.mu.
func (e *Emulator) subsErased(d *Datastore, ri int32) {
	st, ok := e.subs.byDS[d.id]
	if !ok {
		return
	}
	key := d.res[ri].key
	switch typeOf(key) {
	case topicType:
		delete(st.topics, idOf(key))
	case subscriptionType:
		delete(st.subs, idOf(key))
		st.rebuild()
	}
}

// checkSubscriptionWrite refuses a client's write of a Subscription with
// status "active" that the emulator has not activated: a Subscription is
// created "requested" and HealthLake sets it active (lifecycle page). The
// caller holds e.mu.
func (e *Emulator) checkSubscriptionWrite(d *Datastore, typ, id string, ms []member) error {
	if typ != subscriptionType || e.opts.OnNotification == nil {
		return nil
	}
	if raw, ok := find(ms, "status"); !ok || !stringIs(raw, subActive) {
		return nil
	}
	if rec := e.subsOf(d).subs[id]; rec != nil && rec.status == subActive {
		return nil
	}
	return badRequest{`a Subscription is created with status "requested"; HealthLake sets it "active" once its handshake is delivered`}
}

// subsWritten is called as a version is stored (body: its stored bytes;
// nil for a deletion): it keeps the model's Subscriptions and topics in
// step and queues the notification events the write triggers. The caller
// holds e.mu.
func (e *Emulator) subsWritten(d *Datastore, ri int32, v *version, body []byte, created bool) {
	if e.opts.OnNotification == nil {
		return
	}
	st := e.subsOf(d)
	key := d.res[ri].key
	typ, id := typeOf(key), idOf(key)
	switch typ {
	case topicType:
		if v.deleted() {
			delete(st.topics, id)
		} else {
			st.topics[id] = parseTopicState(body)
		}
	case subscriptionType:
		if !e.subs.internal {
			e.subscriptionWritten(d, st, id, v, body)
		}
	}
	if len(st.active) == 0 {
		return
	}
	interaction := interactionUpdate
	switch {
	case v.deleted():
		interaction = interactionDelete
	case created:
		interaction = interactionCreate
	}
	now := e.opts.Now()
	var (
		res     map[string]any
		decoded bool
		kept    []byte
	)
	for _, rec := range st.active {
		cfg := &rec.cfg
		if !cfg.end.IsZero() && !now.Before(cfg.end) {
			continue // `end` has passed
		}
		tp := st.topics[cfg.topicID]
		if tp == nil || tp.triggers[typ]&interaction == 0 {
			continue
		}
		if cfg.hasFilterFor(typ) {
			if !decoded {
				res, decoded = d.filterView(v, body), true
			}
			if !cfg.accepts(typ, id, res) {
				continue
			}
		}
		ev := &subEvent{
			eventID: key + "/_history/" + strconv.FormatUint(uint64(v.vid), 10), focus: key,
			interaction: interaction, written: now,
		}
		ev.notifID = eventUUID(d.id, rec.id, ev.eventID, v.ms)
		if cfg.full && !v.deleted() {
			if kept == nil {
				kept = slices.Clone(body)
			}
			ev.body = kept
		}
		e.queueSubEvent(d.id, rec, ev, now)
	}
}

// filterView decodes the resource a filter looks at: the version written,
// or for a deletion the version before it (nil when unreadable). The
// caller holds e.mu.
func (d *Datastore) filterView(v *version, body []byte) map[string]any {
	if v.deleted() {
		if v.prev < 0 {
			return nil
		}
		b, err := d.body(&d.vers[v.prev])
		if err != nil {
			return nil
		}
		body = b
	}
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return nil
	}
	return m
}

// subscriptionWritten updates the model after a client wrote (or deleted)
// a Subscription. The caller holds e.mu.
func (e *Emulator) subscriptionWritten(d *Datastore, st *dsSubs, id string, v *version, body []byte) {
	defer st.rebuild()
	if v.deleted() {
		delete(st.subs, id)
		return
	}
	rec := st.subs[id]
	if rec == nil {
		rec = &subRecord{id: id}
		st.subs[id] = rec
	}
	rec.gen++
	rec.inFlight = false
	rec.cfgErr = ""
	rec.status = statusOf(body)
	switch rec.status {
	case subRequested:
		rec.activateAt = e.opts.Now().Add(e.subs.opts.ActivationDelay)
	case subActive:
		// An update of an active Subscription (checked by
		// checkSubscriptionWrite): its new settings apply at once.
		rec.cfg, rec.cfgErr = e.subscriptionConfig(d, st, body)
	}
}

// queueSubEvent rolls the dice for a new event and queues its deliveries.
// The caller holds e.mu.
func (e *Emulator) queueSubEvent(dsID string, rec *subRecord, ev *subEvent, now time.Time) {
	s := &e.subs
	o := &s.opts
	s.stats.Matched++
	if o.DropRate > 0 && s.dice.Float64() < o.DropRate {
		s.stats.Dropped++
		s.dropped = append(s.dropped, ev.eventID)
		return
	}
	delay := func() time.Duration {
		d := o.NotificationDelay
		if o.NotificationJitter > 0 {
			d += time.Duration(s.dice.Float64() * float64(o.NotificationJitter))
		}
		return d
	}
	first := delay()
	if o.DelayRate > 0 && s.dice.Float64() < o.DelayRate {
		first += o.ExtraDelay
		s.stats.Delayed++
	}
	e.pushDelivery(&delivery{due: now.Add(first), dsID: dsID, rec: rec, evs: []*subEvent{ev}, first: ev.written})
	if o.DuplicateRate > 0 && s.dice.Float64() < o.DuplicateRate {
		s.stats.Duplicated++
		e.pushDelivery(&delivery{due: now.Add(delay()), dsID: dsID, rec: rec, evs: []*subEvent{ev}, first: ev.written})
	}
}

// pushDelivery queues a delivery. The caller holds e.mu.
func (e *Emulator) pushDelivery(d *delivery) {
	e.subs.seq++
	d.seq = e.subs.seq
	heap.Push(&e.subs.queue, d)
}

// subWork is one OnNotification call: a handshake or an event bundle.
type subWork struct {
	ds        *Datastore
	rec       *subRecord
	gen       uint64
	handshake bool
	d         *delivery
	n         Notification
	err       error
}

// runSubscriptions activates the Subscriptions whose ActivationDelay has
// passed and delivers the notifications that are due: it collects the work
// under the lock, calls OnNotification without it, then records the
// outcomes (and calls OnDelivered without the lock).
func (e *Emulator) runSubscriptions() {
	hook := e.opts.OnNotification
	if hook == nil {
		return
	}
	e.mu.Lock()
	work := e.collectSubscriptionWork(e.opts.Now())
	e.mu.Unlock()
	if len(work) == 0 {
		return
	}
	for i := range work {
		work[i].err = hook(work[i].n)
	}
	type delivered struct {
		id              string
		written, handed time.Time
	}
	var done []delivered
	e.mu.Lock()
	now := e.opts.Now()
	for i := range work {
		w := &work[i]
		if w.handshake {
			e.handshakeDone(w)
			continue
		}
		if w.err == nil {
			e.subs.stats.Sent += len(w.d.evs)
			e.subs.stats.Bundles++
			for _, ev := range w.d.evs {
				done = append(done, delivered{ev.eventID, ev.written, w.n.Time})
			}
			continue
		}
		e.retryLater(w.d, now)
	}
	cb := e.subs.opts.OnDelivered
	e.mu.Unlock()
	if cb != nil {
		for _, d := range done {
			cb(d.id, d.written, d.handed)
		}
	}
}

// retryLater schedules a failed bundle again with exponential backoff, or
// gives it up once the next attempt would be over RetryFor after its
// earliest event. The caller holds e.mu.
func (e *Emulator) retryLater(d *delivery, now time.Time) {
	o := &e.subs.opts
	d.tries++
	backoff := o.RetryInitial
	for i := 1; i < d.tries && backoff < o.RetryMax; i++ {
		backoff *= 2
	}
	backoff = min(backoff, o.RetryMax)
	next := now.Add(backoff)
	if next.After(d.first.Add(o.RetryFor)) {
		e.subs.stats.GivenUp += len(d.evs)
		return
	}
	e.subs.stats.Retried++
	d.due = next
	e.pushDelivery(d)
}

// live reports whether a delivery's Subscription is still the active one
// it was matched for. The caller holds e.mu.
func (e *Emulator) live(d *delivery) bool {
	st, ok := e.subs.byDS[d.dsID]
	return ok && st.subs[d.rec.id] == d.rec && d.rec.status == subActive
}

// collectSubscriptionWork does the due activations' checks (a failed one
// is written at once) and builds the due handshakes and event bundles.
// The caller holds e.mu.
func (e *Emulator) collectSubscriptionWork(now time.Time) []subWork {
	var work []subWork
	ids := make([]string, 0, len(e.datastores))
	for id := range e.datastores {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		ds := e.datastores[id]
		st := e.subsOf(ds)
		for _, rec := range slices.Clone(st.order) {
			switch {
			case rec.status == subRequested && !rec.inFlight && !now.Before(rec.activateAt):
				body, ok := ds.currentBody(subscriptionType, rec.id)
				if !ok {
					continue
				}
				cfg, reason := e.subscriptionConfig(ds, st, body)
				if reason != "" {
					e.setSubscriptionStatus(ds, st, rec, subError, reason)
					continue
				}
				rec.cfg, rec.inFlight = cfg, true
				work = append(work, subWork{ds: ds, rec: rec, gen: rec.gen, handshake: true, n: e.handshake(ds, rec, now)})
			case rec.status == subActive && rec.cfgErr != "":
				e.setSubscriptionStatus(ds, st, rec, subError, rec.cfgErr)
			}
		}
	}
	// Fresh events due now are batched per Subscription, in due order.
	var (
		order []*subRecord
		fresh map[*subRecord][]*delivery
	)
	q := &e.subs.queue
	for q.Len() > 0 && !(*q)[0].due.After(now) {
		d := heap.Pop(q).(*delivery)
		if !e.live(d) {
			e.subs.stats.Cancelled += len(d.evs)
			continue
		}
		if d.tries > 0 {
			d.n.Time = now
			work = append(work, subWork{d: d, rec: d.rec, n: d.n})
			continue
		}
		if fresh == nil {
			fresh = map[*subRecord][]*delivery{}
		}
		if _, ok := fresh[d.rec]; !ok {
			order = append(order, d.rec)
		}
		fresh[d.rec] = append(fresh[d.rec], d)
	}
	per := e.subs.opts.EventsPerBundle
	for _, rec := range order {
		ds := fresh[rec]
		for len(ds) > 0 {
			k := min(per, len(ds))
			b := &delivery{dsID: ds[0].dsID, rec: rec, first: ds[0].first}
			for _, d := range ds[:k] {
				b.evs = append(b.evs, d.evs...)
				if d.first.Before(b.first) {
					b.first = d.first
				}
			}
			ds = ds[k:]
			b.n = e.eventNotification(b, now)
			work = append(work, subWork{d: b, rec: rec, n: b.n})
		}
	}
	return work
}

// handshakeDone records a handshake's outcome: the Subscription becomes
// active (and its topic, when "unknown"), or error when the handshake could
// not be delivered. Nothing changes when the Subscription was written or
// deleted meanwhile. The caller holds e.mu.
func (e *Emulator) handshakeDone(w *subWork) {
	if w.err == nil {
		e.subs.stats.Handshakes++
	}
	st, ok := e.subs.byDS[w.ds.id]
	if !ok || st.subs[w.rec.id] != w.rec || w.rec.gen != w.gen {
		return
	}
	w.rec.inFlight = false
	if w.rec.status != subRequested {
		return
	}
	if w.err != nil {
		e.setSubscriptionStatus(w.ds, st, w.rec, subError, "the handshake bundle could not be delivered to the channel: "+w.err.Error())
		return
	}
	if !e.setSubscriptionStatus(w.ds, st, w.rec, subActive, "") {
		return
	}
	if tp := st.topics[w.rec.cfg.topicID]; tp != nil && tp.status == "unknown" {
		if body, ok := w.ds.currentBody(topicType, w.rec.cfg.topicID); ok {
			if nb, err := withStatus(body, subActive, ""); err == nil {
				_, _, _ = w.ds.put(topicType, w.rec.cfg.topicID, nb, false) // a failed write leaves it unknown
			}
		}
	}
}

// currentBody returns the stored bytes of a live resource. The caller
// holds e.mu.
func (d *Datastore) currentBody(typ, id string) ([]byte, bool) {
	ri, ok := d.lookup(typ, id)
	if !ok || d.current(ri).deleted() {
		return nil, false
	}
	b, err := d.body(d.current(ri))
	return b, err == nil
}

// setSubscriptionStatus writes a new version of a Subscription with the
// given status (and `error` text, removed when empty), as HealthLake does
// when it activates or fails one. It reports whether the version was
// written; when it could not be, the model is unchanged and the next Tick
// tries again. The caller holds e.mu.
func (e *Emulator) setSubscriptionStatus(ds *Datastore, st *dsSubs, rec *subRecord, status, reason string) bool {
	body, ok := ds.currentBody(subscriptionType, rec.id)
	if !ok {
		return false
	}
	nb, err := withStatus(body, status, reason)
	if err != nil {
		return false
	}
	e.subs.internal = true
	_, _, err = ds.put(subscriptionType, rec.id, nb, false)
	e.subs.internal = false
	if err != nil {
		return false
	}
	rec.status, rec.cfgErr = status, ""
	st.rebuild()
	return true
}

// withStatus returns stored (compact) resource bytes with "status" set and
// "error" set after it (or removed when errText is empty), the other
// members kept in order.
func withStatus(body []byte, status, errText string) ([]byte, error) {
	var buf [64]member
	ms, err := splitObject(body, buf[:0])
	if err != nil {
		return nil, err
	}
	quote := func(s string) []byte { b, _ := json.Marshal(s); return b }
	out := []byte{'{'}
	add := func(k, v []byte) {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(out, k...), ':'), v...)
	}
	done := false
	for _, m := range ms {
		switch {
		case stringIs(m.key, "error"):
		case stringIs(m.key, "status"):
			add(m.key, quote(status))
			if errText != "" {
				add([]byte(`"error"`), quote(errText))
			}
			done = true
		default:
			add(m.key, m.value)
		}
	}
	if !done {
		add([]byte(`"status"`), quote(status))
		if errText != "" {
			add([]byte(`"error"`), quote(errText))
		}
	}
	return append(out, '}'), nil
}

// statusOf is a stored resource's top-level status ("" when absent).
func statusOf(body []byte) string {
	var doc struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(body, &doc)
	return doc.Status
}
