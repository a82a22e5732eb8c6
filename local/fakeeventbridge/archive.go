package fakeeventbridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/eventpattern"
)

// Archives and replays (EventBridge user guide, "Archiving and replaying
// events"): an archive records the events of its source bus that match its
// pattern (all when it has none), except replayed ones; StartReplay sends
// the archived events ingested in [EventStartTime, EventEndTime) back to the
// same bus — to all its rules, or to the rules of Destination.FilterArns —
// each with a "replay-name" field naming the replay. Archived events past
// RetentionDays are not replayed.

type archive struct {
	name, sourceBus, description string
	pattern                      *eventpattern.Pattern
	retentionDays                int
	created                      time.Time
	events                       []archived
	size                         int64
}

// archived is one archived event: when it was archived (Unix nanoseconds)
// and where its text is — at off (n bytes) in the emulator's archive file
// (Options.ArchiveDir), or in e.archivedText[mem-1] when mem > 0. Pointer
// free, 24 bytes: a simulation archives millions of events.
type archived struct {
	at  int64
	off int64
	n   int32
	mem int32
}

func (ev archived) time() time.Time { return time.Unix(0, ev.at).UTC() }

// archiveFile keeps archived events' text on disk (Options.ArchiveDir).
type archiveFile struct {
	f   *os.File
	end int64
}

// keep stores raw in the archive file, or in memory when there is no file
// (none configured, or it cannot be written). e.mu is held.
func (e *Emulator) keep(at time.Time, raw []byte) archived {
	inMemory := func() archived {
		e.archivedText = append(e.archivedText, raw)
		return archived{at: at.UnixNano(), mem: int32(len(e.archivedText))}
	}
	if e.opts.ArchiveDir == "" || len(raw) > math.MaxInt32 {
		return inMemory()
	}
	if e.archiveFile == nil {
		f, err := os.CreateTemp(e.opts.ArchiveDir, "local-eventbridge-archive-*.ndjson")
		if err != nil {
			e.opts.ArchiveDir = "" // memory from now on
			return inMemory()
		}
		e.archiveFile = &archiveFile{f: f}
	}
	af := e.archiveFile
	if _, err := af.f.WriteAt(raw, af.end); err != nil {
		return inMemory()
	}
	a := archived{at: at.UnixNano(), off: af.end, n: int32(len(raw))}
	af.end += int64(len(raw))
	return a
}

// text returns an archived event's text. e.mu is held.
func (e *Emulator) text(ev archived) ([]byte, error) {
	if ev.mem > 0 {
		return e.archivedText[ev.mem-1], nil
	}
	if ev.n == 0 {
		return nil, nil
	}
	if e.archiveFile == nil {
		return nil, errors.New("read archived event: the emulator is closed")
	}
	buf := make([]byte, ev.n)
	if _, err := e.archiveFile.f.ReadAt(buf, ev.off); err != nil {
		return nil, fmt.Errorf("read archived event: %w", err)
	}
	return buf, nil
}

// closeArchiveFile removes the archive file. e.mu is held.
func (e *Emulator) closeArchiveFile() {
	if e.archiveFile == nil {
		return
	}
	name := e.archiveFile.f.Name()
	_ = e.archiveFile.f.Close()
	_ = os.Remove(name)
	e.archiveFile = nil
}

type replay struct {
	name, arn, archiveARN, description string
	destination                        replayDestination
	start, end                         time.Time
	state, reason                      string
	started, ended, lastReplayed       time.Time
}

type replayDestination struct {
	Arn        string   `json:"Arn"`
	FilterArns []string `json:"FilterArns,omitempty"`
}

// ArchiveARN returns the ARN of the named archive.
func (e *Emulator) ArchiveARN(name string) string { return e.arn("archive/" + name) }

// recordInArchives appends raw to the archives of bus whose pattern matches.
// e.mu is held.
func (e *Emulator) recordInArchives(bus string, raw []byte, value func() (map[string]any, bool), now time.Time) {
	// A replayed event is never archived again. The envelope carries
	// "replay-name" only on replays; the bytes are checked first so that
	// most events need no decoding.
	if bytes.Contains(raw, []byte(`"replay-name"`)) {
		if ev, ok := value(); !ok {
			return
		} else if _, replayed := ev["replay-name"]; replayed {
			return
		}
	}
	for _, a := range e.archives {
		if a.sourceBus != bus {
			continue
		}
		if a.pattern != nil {
			ev, ok := value()
			if !ok || !a.pattern.MatchesValue(ev) {
				continue
			}
		}
		a.events = append(a.events, e.keep(now, raw))
		a.size += int64(len(raw))
	}
}

func (e *Emulator) createArchive(body []byte) (any, *apiError) {
	var in struct {
		ArchiveName    string `json:"ArchiveName"`
		EventSourceArn string `json:"EventSourceArn"`
		Description    string `json:"Description"`
		EventPattern   string `json:"EventPattern"`
		RetentionDays  int    `json:"RetentionDays"`
	}
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	if !nameRE.MatchString(in.ArchiveName) || len(in.ArchiveName) > 48 {
		return nil, validation(fmt.Sprintf("1 validation error detected: Value '%s' at 'archiveName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\.\\-_A-Za-z0-9]+ and have length less than or equal to 48", in.ArchiveName))
	}
	if in.RetentionDays < 0 {
		return nil, validation("1 validation error detected: Value at 'retentionDays' failed to satisfy constraint: Member must have value greater than or equal to 0")
	}
	var p *eventpattern.Pattern
	if in.EventPattern != "" {
		var err error
		if p, err = eventpattern.Parse(in.EventPattern); err != nil {
			return nil, invalidPattern(err)
		}
	}
	bus := busOfARN(in.EventSourceArn)
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.buses[bus]; !ok || in.EventSourceArn != e.BusARN(bus) {
		return nil, &apiError{status: http.StatusBadRequest, code: "ResourceNotFoundException", message: "Event bus " + in.EventSourceArn + " does not exist."}
	}
	if _, ok := e.archives[in.ArchiveName]; ok {
		return nil, &apiError{status: http.StatusBadRequest, code: "ResourceAlreadyExistsException", message: "Archive " + in.ArchiveName + " already exists."}
	}
	now := e.opts.Now().UTC()
	e.archives[in.ArchiveName] = &archive{name: in.ArchiveName, sourceBus: bus, description: in.Description, pattern: p,
		retentionDays: in.RetentionDays, created: now}
	return map[string]any{"ArchiveArn": e.ArchiveARN(in.ArchiveName), "State": "ENABLED", "CreationTime": epoch(now)}, nil
}

// busOfARN returns the bus name of an event-bus ARN ("" for anything else).
func busOfARN(arn string) string {
	if i := strings.LastIndex(arn, ":event-bus/"); i >= 0 {
		return arn[i+len(":event-bus/"):]
	}
	return ""
}

type archiveOut struct {
	ArchiveArn     string  `json:"ArchiveArn,omitempty"`
	ArchiveName    string  `json:"ArchiveName"`
	EventSourceArn string  `json:"EventSourceArn"`
	Description    string  `json:"Description,omitempty"`
	EventPattern   string  `json:"EventPattern,omitempty"`
	State          string  `json:"State"`
	RetentionDays  int     `json:"RetentionDays"`
	SizeBytes      int64   `json:"SizeBytes"`
	EventCount     int     `json:"EventCount"`
	CreationTime   float64 `json:"CreationTime"`
}

func (e *Emulator) archiveOut(a *archive, full bool) archiveOut {
	out := archiveOut{ArchiveName: a.name, EventSourceArn: e.BusARN(a.sourceBus), State: "ENABLED",
		RetentionDays: a.retentionDays, SizeBytes: a.size, EventCount: len(a.events), CreationTime: epoch(a.created)}
	if full {
		out.ArchiveArn, out.Description = e.ArchiveARN(a.name), a.description
		if a.pattern != nil {
			out.EventPattern = a.pattern.String()
		}
	}
	return out
}

func (e *Emulator) describeArchive(body []byte) (any, *apiError) {
	var in struct {
		ArchiveName string `json:"ArchiveName"`
	}
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	a, ok := e.archives[in.ArchiveName]
	if !ok {
		return nil, &apiError{status: http.StatusBadRequest, code: "ResourceNotFoundException", message: "Archive " + in.ArchiveName + " does not exist."}
	}
	return e.archiveOut(a, true), nil
}

func (e *Emulator) listArchives(body []byte) (any, *apiError) {
	var in struct {
		NamePrefix     string `json:"NamePrefix"`
		EventSourceArn string `json:"EventSourceArn"`
	}
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	names := make([]string, 0, len(e.archives))
	for n, a := range e.archives {
		if strings.HasPrefix(n, in.NamePrefix) && (in.EventSourceArn == "" || in.EventSourceArn == e.BusARN(a.sourceBus)) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	out := make([]archiveOut, 0, len(names))
	for _, n := range names {
		out = append(out, e.archiveOut(e.archives[n], false))
	}
	return map[string]any{"Archives": out}, nil
}

func (e *Emulator) deleteArchive(body []byte) (any, *apiError) {
	var in struct {
		ArchiveName string `json:"ArchiveName"`
	}
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.archives[in.ArchiveName]; !ok {
		return nil, &apiError{status: http.StatusBadRequest, code: "ResourceNotFoundException", message: "Archive " + in.ArchiveName + " does not exist."}
	}
	delete(e.archives, in.ArchiveName)
	return struct{}{}, nil
}

func timeOf(n json.Number) (time.Time, bool) {
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return time.Time{}, false
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC(), true
}

func (e *Emulator) startReplay(body []byte) (any, *apiError) {
	var in struct {
		ReplayName     string            `json:"ReplayName"`
		Description    string            `json:"Description"`
		EventSourceArn string            `json:"EventSourceArn"`
		EventStartTime json.Number       `json:"EventStartTime"`
		EventEndTime   json.Number       `json:"EventEndTime"`
		Destination    replayDestination `json:"Destination"`
	}
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	if !nameRE.MatchString(in.ReplayName) {
		return nil, validation(fmt.Sprintf("1 validation error detected: Value '%s' at 'replayName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\.\\-_A-Za-z0-9]+", in.ReplayName))
	}
	start, ok1 := timeOf(in.EventStartTime)
	end, ok2 := timeOf(in.EventEndTime)
	if !ok1 || !ok2 {
		return nil, validation("EventStartTime and EventEndTime are required timestamps.")
	}
	if !start.Before(end) {
		return nil, validation("Parameter EventStartTime is not valid. Reason: EventStartTime must be before EventEndTime.")
	}
	archiveName := ""
	if i := strings.LastIndex(in.EventSourceArn, ":archive/"); i >= 0 {
		archiveName = in.EventSourceArn[i+len(":archive/"):]
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	a, ok := e.archives[archiveName]
	if !ok || in.EventSourceArn != e.ArchiveARN(archiveName) {
		return nil, &apiError{status: http.StatusBadRequest, code: "ResourceNotFoundException", message: "Archive " + in.EventSourceArn + " does not exist."}
	}
	if in.Destination.Arn != e.BusARN(a.sourceBus) {
		return nil, validation("Parameter Destination.Arn is not valid. Reason: Cross event bus replay is not permitted.")
	}
	for _, f := range in.Destination.FilterArns {
		if !strings.HasPrefix(f, e.RuleARN(a.sourceBus, "")) || e.rules[a.sourceBus][strings.TrimPrefix(f, e.RuleARN(a.sourceBus, ""))] == nil {
			return nil, validation("Parameter Destination.FilterArns is not valid. Reason: " + f + " is not a rule of the archive's event bus.")
		}
	}
	if _, ok := e.replays[in.ReplayName]; ok {
		return nil, &apiError{status: http.StatusBadRequest, code: "ResourceAlreadyExistsException", message: "Replay " + in.ReplayName + " already exists."}
	}
	now := e.opts.Now().UTC()
	r := &replay{name: in.ReplayName, arn: e.arn("replay/" + in.ReplayName), archiveARN: in.EventSourceArn, description: in.Description,
		destination: in.Destination, start: start, end: end, state: "STARTING", started: now}
	e.replays[in.ReplayName] = r
	e.inflight++
	go e.runReplay(r, a)
	return map[string]any{"ReplayArn": r.arn, "State": r.state, "ReplayStartTime": epoch(now)}, nil
}

// runReplay routes the archived events of r's window to the bus.
func (e *Emulator) runReplay(r *replay, a *archive) {
	defer e.finish()
	e.mu.Lock()
	defer e.mu.Unlock()
	r.state = "RUNNING"
	var only map[string]bool
	if len(r.destination.FilterArns) > 0 {
		only = map[string]bool{}
		for _, f := range r.destination.FilterArns {
			only[f] = true
		}
	}
	now := e.opts.Now()
	name, _ := json.Marshal(r.name)
	for _, ev := range a.events {
		at := ev.time()
		if at.Before(r.start) || !at.Before(r.end) {
			continue
		}
		if a.retentionDays > 0 && now.Sub(at) > time.Duration(a.retentionDays)*24*time.Hour {
			continue
		}
		raw, err := e.text(ev)
		if err != nil {
			r.state, r.reason, r.ended = "FAILED", "The archived events could not be read.", e.opts.Now().UTC()
			return
		}
		e.route(a.sourceBus, withReplayName(raw, name), only, false)
		r.lastReplayed = at
	}
	r.state, r.ended = "COMPLETED", e.opts.Now().UTC()
}

// withReplayName adds "replay-name" (name is its JSON) to an event object's
// JSON text, as AWS adds it to replayed events.
func withReplayName(raw, name []byte) []byte {
	t := bytes.TrimRight(raw, " \t\r\n")
	if len(t) < 2 || t[len(t)-1] != '}' {
		return raw
	}
	out := make([]byte, 0, len(t)+len(name)+16)
	out = append(out, t[:len(t)-1]...)
	if len(bytes.TrimSpace(t[1:len(t)-1])) > 0 {
		out = append(out, ',')
	}
	out = append(out, `"replay-name":`...)
	out = append(out, name...)
	return append(out, '}')
}

func (e *Emulator) describeReplay(body []byte) (any, *apiError) {
	var in struct {
		ReplayName string `json:"ReplayName"`
	}
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.replays[in.ReplayName]
	if !ok {
		return nil, &apiError{status: http.StatusBadRequest, code: "ResourceNotFoundException", message: "Replay " + in.ReplayName + " does not exist."}
	}
	out := map[string]any{
		"ReplayName": r.name, "ReplayArn": r.arn, "State": r.state,
		"EventSourceArn": r.archiveARN, "Destination": r.destination,
		"EventStartTime": epoch(r.start), "EventEndTime": epoch(r.end), "ReplayStartTime": epoch(r.started),
	}
	if r.description != "" {
		out["Description"] = r.description
	}
	if r.reason != "" {
		out["StateReason"] = r.reason
	}
	if !r.lastReplayed.IsZero() {
		out["EventLastReplayedTime"] = epoch(r.lastReplayed)
	}
	if !r.ended.IsZero() {
		out["ReplayEndTime"] = epoch(r.ended)
	}
	return out, nil
}

func (e *Emulator) listReplays(body []byte) (any, *apiError) {
	var in struct {
		NamePrefix string `json:"NamePrefix"`
	}
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	names := make([]string, 0, len(e.replays))
	for n := range e.replays {
		if strings.HasPrefix(n, in.NamePrefix) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	out := make([]map[string]any, 0, len(names))
	for _, n := range names {
		r := e.replays[n]
		out = append(out, map[string]any{"ReplayName": r.name, "State": r.state, "EventSourceArn": r.archiveARN,
			"EventStartTime": epoch(r.start), "EventEndTime": epoch(r.end), "ReplayStartTime": epoch(r.started)})
	}
	return map[string]any{"Replays": out}, nil
}
