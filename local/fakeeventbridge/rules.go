package fakeeventbridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/eventpattern"
)

// Limits of rules and targets (EventBridge API reference: PutRule,
// PutTargets; EventBridge quotas: "Targets per rule: 5").
const (
	MaxPatternLength  = 4096
	MaxTargetsPerRule = 5
	MaxTargetsPerCall = 10
	MaxRetryAttempts  = 185
	MinEventAge       = 60
	MaxEventAge       = 86400
)

var (
	nameRE     = regexp.MustCompile(`^[\.\-_A-Za-z0-9]{1,64}$`)
	targetIDRE = regexp.MustCompile(`^[\.\-_A-Za-z0-9]{1,64}$`)
)

// rule is one rule of a bus.
type rule struct {
	name, bus   string
	pattern     *eventpattern.Pattern
	state       string
	description string
	roleARN     string
	created     time.Time
	targets     []Target // by Id
}

// Target is a rule target as PutTargets gives it and ListTargetsByRule
// returns it (the fields the emulator supports).
type Target struct {
	ID               string            `json:"Id"`
	Arn              string            `json:"Arn"`
	RoleArn          string            `json:"RoleArn,omitempty"`
	Input            *string           `json:"Input,omitempty"`
	InputPath        *string           `json:"InputPath,omitempty"`
	InputTransformer *InputTransformer `json:"InputTransformer,omitempty"`
	RetryPolicy      *RetryPolicy      `json:"RetryPolicy,omitempty"`
	DeadLetterConfig *DeadLetterConfig `json:"DeadLetterConfig,omitempty"`
	HTTPParameters   *HTTPParameters   `json:"HttpParameters,omitempty"`
	SqsParameters    *SqsParameters    `json:"SqsParameters,omitempty"`
}

// InputTransformer is a target's InputPathsMap and InputTemplate.
type InputTransformer struct {
	InputPathsMap map[string]string `json:"InputPathsMap,omitempty"`
	InputTemplate string            `json:"InputTemplate"`
}

// RetryPolicy bounds a target's retries; nil fields take AWS's defaults
// (185 attempts, 24 hours).
type RetryPolicy struct {
	MaximumRetryAttempts     *int `json:"MaximumRetryAttempts,omitempty"`
	MaximumEventAgeInSeconds *int `json:"MaximumEventAgeInSeconds,omitempty"`
}

// DeadLetterConfig names the SQS queue of events the target could not take.
type DeadLetterConfig struct {
	Arn string `json:"Arn,omitempty"`
}

// HTTPParameters are an API destination target's request parameters.
type HTTPParameters struct {
	HeaderParameters      map[string]string `json:"HeaderParameters,omitempty"`
	QueryStringParameters map[string]string `json:"QueryStringParameters,omitempty"`
	PathParameterValues   []string          `json:"PathParameterValues,omitempty"`
}

// SqsParameters are a FIFO queue target's parameters.
type SqsParameters struct {
	MessageGroupID string `json:"MessageGroupId,omitempty"`
}

func malformed() *apiError {
	return &apiError{status: http.StatusBadRequest, code: "SerializationException", message: "malformed request"}
}

func decodeBody(body []byte, v any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return malformed()
	}
	return nil
}

func invalidPattern(err error) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "InvalidEventPatternException", message: err.Error()}
}

func ruleNotFound(name, bus string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "ResourceNotFoundException", message: "Rule " + name + " does not exist on EventBus " + bus + "."}
}

// RuleARN returns the ARN of a rule: rule/NAME on the default bus,
// rule/BUS/NAME on others.
func (e *Emulator) RuleARN(bus, name string) string {
	if bus == DefaultBus {
		return e.arn("rule/" + name)
	}
	return e.arn("rule/" + bus + "/" + name)
}

func (e *Emulator) arn(resource string) string {
	return "arn:aws:events:" + e.opts.Region + ":" + e.opts.AccountID + ":" + resource
}

func epoch(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

// ruleOf returns the rule or a ResourceNotFoundException; e.mu is held.
func (e *Emulator) ruleOf(bus, name string) (*rule, *apiError) {
	if _, ok := e.buses[bus]; !ok {
		return nil, notFound(bus)
	}
	r, ok := e.rules[bus][name]
	if !ok {
		return nil, ruleNotFound(name, bus)
	}
	return r, nil
}

func (e *Emulator) putRule(body []byte) (any, *apiError) {
	var in struct {
		Name               string `json:"Name"`
		EventBusName       string `json:"EventBusName"`
		EventPattern       string `json:"EventPattern"`
		ScheduleExpression string `json:"ScheduleExpression"`
		State              string `json:"State"`
		Description        string `json:"Description"`
		RoleArn            string `json:"RoleArn"`
	}
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	if !nameRE.MatchString(in.Name) {
		return nil, validation(fmt.Sprintf("1 validation error detected: Value '%s' at 'name' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\.\\-_A-Za-z0-9]+", in.Name))
	}
	if in.ScheduleExpression != "" {
		return nil, validation("ScheduleExpression is not supported by the local EventBridge emulator; use EventPattern.")
	}
	if in.EventPattern == "" {
		return nil, validation("Parameter(s) EventPattern or ScheduleExpression must be specified.")
	}
	if len(in.EventPattern) > MaxPatternLength {
		return nil, validation("1 validation error detected: Value at 'eventPattern' failed to satisfy constraint: Member must have length less than or equal to 4096")
	}
	p, err := eventpattern.Parse(in.EventPattern)
	if err != nil {
		return nil, invalidPattern(err)
	}
	switch in.State {
	case "":
		in.State = "ENABLED"
	case "ENABLED", "DISABLED":
	default:
		return nil, validation(fmt.Sprintf("1 validation error detected: Value '%s' at 'state' failed to satisfy constraint: Member must satisfy enum value set: [ENABLED, DISABLED]", in.State))
	}
	bus := busName(in.EventBusName)
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.buses[bus]; !ok {
		return nil, notFound(bus)
	}
	if e.rules[bus] == nil {
		e.rules[bus] = map[string]*rule{}
	}
	r, ok := e.rules[bus][in.Name]
	if !ok {
		r = &rule{name: in.Name, bus: bus, created: e.opts.Now().UTC()}
		e.rules[bus][in.Name] = r
	}
	r.pattern, r.state, r.description, r.roleARN = p, in.State, in.Description, in.RoleArn
	return map[string]string{"RuleArn": e.RuleARN(bus, in.Name)}, nil
}

type ruleIn struct {
	Name         string `json:"Name"`
	EventBusName string `json:"EventBusName"`
}

func (e *Emulator) describeRule(body []byte) (any, *apiError) {
	var in ruleIn
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	r, a := e.ruleOf(busName(in.EventBusName), in.Name)
	if a != nil {
		return nil, a
	}
	return e.ruleOut(r), nil
}

type ruleOut struct {
	Name         string `json:"Name"`
	Arn          string `json:"Arn"`
	EventPattern string `json:"EventPattern"`
	State        string `json:"State"`
	Description  string `json:"Description,omitempty"`
	RoleArn      string `json:"RoleArn,omitempty"`
	EventBusName string `json:"EventBusName"`
	CreatedBy    string `json:"CreatedBy,omitempty"`
}

func (e *Emulator) ruleOut(r *rule) ruleOut {
	return ruleOut{Name: r.name, Arn: e.RuleARN(r.bus, r.name), EventPattern: r.pattern.String(), State: r.state,
		Description: r.description, RoleArn: r.roleARN, EventBusName: r.bus, CreatedBy: e.opts.AccountID}
}

func (e *Emulator) listRules(body []byte) (any, *apiError) {
	var in struct {
		NamePrefix   string `json:"NamePrefix"`
		EventBusName string `json:"EventBusName"`
		Limit        int    `json:"Limit"`
		NextToken    string `json:"NextToken"`
	}
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	limit, a := listLimit(in.Limit)
	if a != nil {
		return nil, a
	}
	bus := busName(in.EventBusName)
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.buses[bus]; !ok {
		return nil, notFound(bus)
	}
	var out struct {
		Rules     []ruleOut `json:"Rules"`
		NextToken string    `json:"NextToken,omitempty"`
	}
	var names []string
	names, out.NextToken = namePage(e.rules[bus], in.NamePrefix, in.NextToken, limit)
	out.Rules = make([]ruleOut, 0, len(names))
	for _, n := range names {
		out.Rules = append(out.Rules, e.ruleOut(e.rules[bus][n]))
	}
	return out, nil
}

func (e *Emulator) deleteRule(body []byte) (any, *apiError) {
	var in ruleIn
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	bus := busName(in.EventBusName)
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.rules[bus][in.Name]
	if !ok {
		return struct{}{}, nil // AWS answers success for a rule that does not exist
	}
	if len(r.targets) > 0 {
		return nil, validation("Rule can't be deleted since it has targets.")
	}
	delete(e.rules[bus], in.Name)
	return struct{}{}, nil
}

func (e *Emulator) setRuleState(body []byte, state string) (any, *apiError) {
	var in ruleIn
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	r, a := e.ruleOf(busName(in.EventBusName), in.Name)
	if a != nil {
		return nil, a
	}
	r.state = state
	return struct{}{}, nil
}

type failedEntry struct {
	TargetID     string `json:"TargetId"`
	ErrorCode    string `json:"ErrorCode"`
	ErrorMessage string `json:"ErrorMessage"`
}

type targetsResult struct {
	FailedEntryCount int           `json:"FailedEntryCount"`
	FailedEntries    []failedEntry `json:"FailedEntries"`
}

func (e *Emulator) putTargets(body []byte) (any, *apiError) {
	var in struct {
		Rule         string   `json:"Rule"`
		EventBusName string   `json:"EventBusName"`
		Targets      []Target `json:"Targets"`
	}
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	if len(in.Targets) == 0 || len(in.Targets) > MaxTargetsPerCall {
		return nil, validation("1 validation error detected: Value at 'targets' failed to satisfy constraint: Member must have length between 1 and 10")
	}
	for _, t := range in.Targets {
		if a := e.validateTarget(t); a != nil {
			return nil, a
		}
	}
	bus := busName(in.EventBusName)
	e.mu.Lock()
	defer e.mu.Unlock()
	r, a := e.ruleOf(bus, in.Rule)
	if a != nil {
		return nil, a
	}
	ids := map[string]bool{}
	for _, t := range r.targets {
		ids[t.ID] = true
	}
	for _, t := range in.Targets {
		ids[t.ID] = true
	}
	if len(ids) > MaxTargetsPerRule {
		return nil, &apiError{status: http.StatusBadRequest, code: "LimitExceededException",
			message: fmt.Sprintf("The requested resource exceeds the maximum number allowed: a rule can have %d targets.", MaxTargetsPerRule)}
	}
	for _, t := range in.Targets {
		replaced := false
		for i := range r.targets {
			if r.targets[i].ID == t.ID {
				r.targets[i], replaced = t, true
			}
		}
		if !replaced {
			r.targets = append(r.targets, t)
		}
	}
	sort.Slice(r.targets, func(i, j int) bool { return r.targets[i].ID < r.targets[j].ID })
	return targetsResult{FailedEntries: []failedEntry{}}, nil
}

// validateTarget checks one target as PutTargets does, and refuses target
// types the emulator cannot deliver to.
func (e *Emulator) validateTarget(t Target) *apiError {
	if !targetIDRE.MatchString(t.ID) {
		return validation(fmt.Sprintf("1 validation error detected: Value '%s' at 'targets.id' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\.\\-_A-Za-z0-9]+", t.ID))
	}
	if kind := targetKind(t.Arn); kind == "" {
		return validation("Target " + t.ID + ": the local EventBridge emulator delivers to SQS queues, event buses and API destinations only; " + t.Arn + " is none of them.")
	}
	n := 0
	if t.Input != nil {
		n++
		if !json.Valid([]byte(*t.Input)) {
			return validation("Target " + t.ID + ": Input is not valid JSON text.")
		}
	}
	if t.InputPath != nil {
		n++
		if _, err := parsePath(*t.InputPath); err != nil {
			return validation("Target " + t.ID + ": InputPath is not valid: " + err.Error())
		}
	}
	if t.InputTransformer != nil {
		n++
		if err := validateTransformer(t.InputTransformer); err != nil {
			return validation("Target " + t.ID + ": InputTransformer is not valid: " + err.Error())
		}
	}
	if n > 1 {
		return validation("Target " + t.ID + ": only one of Input, InputPath and InputTransformer may be given.")
	}
	if rp := t.RetryPolicy; rp != nil {
		if v := rp.MaximumRetryAttempts; v != nil && (*v < 0 || *v > MaxRetryAttempts) {
			return validation("1 validation error detected: Value at 'targets.retryPolicy.maximumRetryAttempts' failed to satisfy constraint: Member must have value between 0 and 185")
		}
		if v := rp.MaximumEventAgeInSeconds; v != nil && (*v < MinEventAge || *v > MaxEventAge) {
			return validation("1 validation error detected: Value at 'targets.retryPolicy.maximumEventAgeInSeconds' failed to satisfy constraint: Member must have value between 60 and 86400")
		}
	}
	if d := t.DeadLetterConfig; d != nil && d.Arn != "" && targetKind(d.Arn) != kindSQS {
		return validation("Target " + t.ID + ": DeadLetterConfig Arn must be an SQS queue ARN.")
	}
	return nil
}

func (e *Emulator) listTargetsByRule(body []byte) (any, *apiError) {
	var in struct {
		Rule         string `json:"Rule"`
		EventBusName string `json:"EventBusName"`
	}
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	r, a := e.ruleOf(busName(in.EventBusName), in.Rule)
	if a != nil {
		return nil, a
	}
	return map[string][]Target{"Targets": append([]Target{}, r.targets...)}, nil
}

func (e *Emulator) removeTargets(body []byte) (any, *apiError) {
	var in struct {
		Rule         string   `json:"Rule"`
		EventBusName string   `json:"EventBusName"`
		IDs          []string `json:"Ids"`
	}
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	r, a := e.ruleOf(busName(in.EventBusName), in.Rule)
	if a != nil {
		return nil, a
	}
	drop := map[string]bool{}
	for _, id := range in.IDs {
		drop[id] = true
	}
	kept := r.targets[:0]
	for _, t := range r.targets {
		if !drop[t.ID] {
			kept = append(kept, t)
		}
	}
	r.targets = kept
	return targetsResult{FailedEntries: []failedEntry{}}, nil
}

// eventFields are the fields TestEventPattern requires of its Event. The
// API reference lists resources too, but AWS accepts an event without it
// (as PutEvents does an entry without Resources), so it is not required.
var eventFields = []string{"id", "account", "source", "time", "region", "detail-type"}

func (e *Emulator) testEventPattern(body []byte) (any, *apiError) {
	var in struct {
		EventPattern string `json:"EventPattern"`
		Event        string `json:"Event"`
	}
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	p, err := eventpattern.Parse(in.EventPattern)
	if err != nil {
		return nil, invalidPattern(err)
	}
	var ev map[string]any
	d := json.NewDecoder(strings.NewReader(in.Event))
	d.UseNumber()
	if err := d.Decode(&ev); err != nil || ev == nil {
		return nil, validation("Parameter Event is not valid.")
	}
	for _, f := range eventFields {
		if _, ok := ev[f]; !ok {
			return nil, validation("Parameter Event is not valid. Reason: field " + f + " is missing.")
		}
	}
	return map[string]bool{"Result": p.MatchesValue(ev)}, nil
}
