package fakehealthlake

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The notification Bundle as HealthLake emits it ("Example notification
// payloads", managing-fhir-subs-ex-notif-payload.html), which departs from
// the backport IG: entry[0] is an R4B-style SubscriptionStatus (no
// request), focus and additionalContext are strings, the Bundle has a
// top-level "status" ("requested" in every example), event notifications
// carry eventsSinceSubscriptionStart "-1" and eventNumber "0", and a
// full-resource entry has a relative fullUrl and request.method "CREATE".

// nanoLayout is HealthLake's notification time: RFC 3339, nanoseconds, UTC.
const nanoLayout = "2006-01-02T15:04:05.000000000Z07:00"

type notificationDetail struct {
	SubscriptionURL           string          `json:"subscriptionUrl"`
	NotificationBundlePayload json.RawMessage `json:"notificationBundlePayload"`
}

type notificationBundle struct {
	ResourceType string        `json:"resourceType"`
	ID           string        `json:"id"`
	Type         string        `json:"type"`
	Timestamp    string        `json:"timestamp"`
	Status       string        `json:"status"`
	Entry        []bundleEntry `json:"entry"`
}

type reference struct {
	Reference string `json:"reference"`
}

type subscriptionStatus struct {
	ResourceType                 string              `json:"resourceType"`
	ID                           string              `json:"id"`
	Status                       string              `json:"status"`
	Type                         string              `json:"type"`
	EventsSinceSubscriptionStart string              `json:"eventsSinceSubscriptionStart"`
	Subscription                 reference           `json:"subscription"`
	Topic                        string              `json:"topic"`
	NotificationEvent            []notificationEvent `json:"notificationEvent,omitempty"`
}

type notificationEvent struct {
	EventNumber       string `json:"eventNumber"`
	Timestamp         string `json:"timestamp"`
	Focus             string `json:"focus"`
	AdditionalContext string `json:"additionalContext"`
	ID                string `json:"id"`
}

// subscriptionURL is a Subscription's absolute URL under Options.Endpoint.
func (e *Emulator) subscriptionURL(dsID, id string) string {
	return strings.TrimSuffix(e.opts.Endpoint, "/") + "/datastore/" + dsID + "/r4/Subscription/" + id
}

// handshake builds a Subscription's handshake notification. The caller
// holds e.mu.
func (e *Emulator) handshake(ds *Datastore, rec *subRecord, now time.Time) Notification {
	sid := e.newSubUUID()
	status, _ := encode(subscriptionStatus{
		ResourceType: "SubscriptionStatus", ID: sid, Status: subRequested, Type: "handshake",
		EventsSinceSubscriptionStart: "0",
		Subscription:                 reference{e.subscriptionURL(ds.id, rec.id)}, Topic: rec.cfg.topicURL,
	})
	return e.notification(ds.id, rec, now, []bundleEntry{{FullURL: "urn:uuid:" + sid, Resource: status}})
}

// eventNotification builds an event bundle: entry[0] the
// SubscriptionStatus with one notificationEvent per event, then for
// full-resource one entry per event (a deletion's without resource). A
// full-resource bundle over MaxFullResourceBytes is built id-only. The
// caller holds e.mu.
func (e *Emulator) eventNotification(d *delivery, now time.Time) Notification {
	full := d.rec.cfg.full
	n := e.buildEvents(d, now, full)
	if full && len(n.Detail) > e.subs.opts.MaxFullResourceBytes {
		e.subs.stats.Downgraded += len(d.evs)
		n = e.buildEvents(d, now, false)
	}
	return n
}

func (e *Emulator) buildEvents(d *delivery, now time.Time, full bool) Notification {
	st := subscriptionStatus{
		ResourceType: "SubscriptionStatus", ID: e.newSubUUID(), Status: subActive, Type: "event-notification",
		EventsSinceSubscriptionStart: "-1",
		Subscription:                 reference{e.subscriptionURL(d.dsID, d.rec.id)}, Topic: d.rec.cfg.topicURL,
	}
	var more []bundleEntry
	for _, ev := range d.evs {
		st.NotificationEvent = append(st.NotificationEvent, notificationEvent{
			EventNumber: "0", Timestamp: ev.written.UTC().Format(nanoLayout),
			Focus: ev.focus, AdditionalContext: ev.eventID, ID: ev.notifID,
		})
		if !full {
			continue
		}
		method := "CREATE"
		switch ev.interaction {
		case interactionUpdate:
			method = e.subs.opts.UpdateMethod
		case interactionDelete:
			method = e.subs.opts.DeleteMethod
		}
		more = append(more, bundleEntry{FullURL: ev.focus, Resource: ev.body, Request: &entryRequest{Method: method, URL: ev.focus}})
	}
	status, _ := encode(st)
	entries := append([]bundleEntry{{FullURL: "urn:uuid:" + st.ID, Resource: status}}, more...)
	return e.notification(d.dsID, d.rec, now, entries)
}

// notification wraps entries in the Bundle and the EventBridge event.
func (e *Emulator) notification(dsID string, rec *subRecord, now time.Time, entries []bundleEntry) Notification {
	b, _ := encode(notificationBundle{
		ResourceType: "Bundle", ID: e.newSubUUID(), Type: "history",
		Timestamp: now.UTC().Format(nanoLayout), Status: subRequested, Entry: entries,
	})
	detail, _ := encode(notificationDetail{SubscriptionURL: e.subscriptionURL(dsID, rec.id), NotificationBundlePayload: b})
	return Notification{BusARN: rec.cfg.bus, Source: NotificationSource, DetailType: NotificationDetailType, Time: now, Detail: detail}
}

// encode marshals without HTML escaping, so embedded stored bytes stay
// exactly as stored. It cannot fail on the model's types.
func encode(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode notification: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// newSubUUID returns a random (version 4) UUID from the subscription ids
// stream. The caller holds e.mu.
func (e *Emulator) newSubUUID() string {
	var b [16]byte
	for i := 0; i < 16; i += 8 {
		v := e.subs.ids.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return uuidString(b)
}

// eventUUID is a notificationEvent.id: the same for every delivery of one
// event (so duplicates carry it), distinct per subscription and version
// (the version's lastUpdated keeps a version number reused after $erase
// apart).
func eventUUID(dsID, subID, eventID string, ms int64) string {
	sum := sha256.Sum256([]byte(dsID + "\x00" + subID + "\x00" + eventID + "\x00" + strconv.FormatInt(ms, 10)))
	var b [16]byte
	copy(b[:], sum[:16])
	b[6] = b[6]&0x0f | 0x50
	b[8] = b[8]&0x3f | 0x80
	return uuidString(b)
}

func uuidString(b [16]byte) string {
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
