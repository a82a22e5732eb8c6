package fakesfn

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/asl"
)

type stateMachine struct {
	arn, name, typ, roleARN string
	definition              []byte
	machine                 *asl.Machine
	created                 time.Time
}

type execution struct {
	x  *asl.Execution
	sm *stateMachine
}

var nameRE = regexp.MustCompile(`^[^\s<>{}\[\]?*"#%\\^|~` + "`" + `$&,;:/\x00-\x1f\x7f-\x9f]{1,80}$`)

func (e *Emulator) runner() *asl.Runner {
	e.runOnce.Do(func() {
		e.run = asl.NewRunner(asl.Config{
			Tasks:              taskRunner{e},
			Objects:            objectStore{e.opts.S3},
			Tokens:             e.tokens,
			Clock:              e.opts.Clock,
			TimeScale:          e.opts.TimeScale,
			ExpressMaxDuration: e.opts.ExpressMaxDuration,
			Region:             e.opts.Region,
			AccountID:          e.opts.AccountID,
			OnTransition:       e.opts.OnTransition,
			OnChildExecution:   e.addChild,
		})
	})
	return e.run
}

func (e *Emulator) addChild(x *asl.Execution) {
	info := x.Info()
	e.mu.Lock()
	defer e.mu.Unlock()
	ex := &execution{x: x, sm: e.machines[info.StateMachineARN]}
	e.executions[info.ARN] = ex
	e.order = append(e.order, ex)
}

// StateMachineARN returns the ARN a state machine of that name has here.
func (e *Emulator) StateMachineARN(name string) string {
	return fmt.Sprintf("arn:aws:states:%s:%s:stateMachine:%s", e.opts.Region, e.opts.AccountID, name)
}

// ExecutionARN returns the ARN of the named execution of a state machine.
func (e *Emulator) ExecutionARN(stateMachineName, executionName string) string {
	return fmt.Sprintf("arn:aws:states:%s:%s:execution:%s:%s", e.opts.Region, e.opts.AccountID, stateMachineName, executionName)
}

// RegisterStateMachine creates a STANDARD state machine from an ASL
// definition (placeholders already substituted) and returns its ARN.
// Registering the same name with the same definition again returns the same ARN.
func (e *Emulator) RegisterStateMachine(name string, definition []byte) (string, error) {
	sm, err := e.createMachine(name, definition, asl.TypeStandard, "arn:aws:iam::"+e.opts.AccountID+":role/healthlake-cdc-local")
	if err != nil {
		return "", err
	}
	return sm.arn, nil
}

func (e *Emulator) createMachine(name string, definition []byte, typ, role string) (*stateMachine, error) {
	if !nameRE.MatchString(name) {
		return nil, errf("InvalidName", "Invalid Name: '%s'", name)
	}
	if typ == "" {
		typ = asl.TypeStandard
	}
	if typ != asl.TypeStandard && typ != asl.TypeExpress {
		return nil, errf("ValidationException", "type must be STANDARD or EXPRESS")
	}
	m, err := asl.ParseDefinition(definition)
	if err != nil {
		return nil, errf("InvalidDefinition", "Invalid State Machine Definition: '%v'", err)
	}
	for _, r := range m.Resources() {
		if !supportedResource(r) {
			return nil, errf("InvalidDefinition", "Invalid State Machine Definition: resource %s is not supported by the emulator", r)
		}
	}
	arn := e.StateMachineARN(name)
	e.mu.Lock()
	defer e.mu.Unlock()
	if old, ok := e.machines[arn]; ok {
		if bytes.Equal(old.definition, definition) && old.typ == typ {
			return old, nil
		}
		return nil, errf("StateMachineAlreadyExists", "State Machine Already Exists: '%s'", arn)
	}
	sm := &stateMachine{arn: arn, name: name, typ: typ, roleARN: role, definition: append([]byte(nil), definition...), machine: m, created: e.opts.Clock.Now()}
	e.machines[arn] = sm
	return sm, nil
}

// StartExecution starts an execution of a registered state machine; an
// empty name gets a generated one. It returns the execution ARN.
func (e *Emulator) StartExecution(ctx context.Context, stateMachineARN, name, input string) (string, error) {
	ex, err := e.start(stateMachineARN, name, input)
	if err != nil {
		return "", err
	}
	return ex.x.Info().ARN, nil
}

func (e *Emulator) start(smARN, name, input string) (*execution, error) {
	ex, created, err := e.startLocked(smARN, name, input)
	if err == nil && created && e.opts.OnStart != nil {
		e.opts.OnStart(ex.x.Info().ARN, smARN)
	}
	return ex, err
}

// startLocked starts the execution under the emulator's lock; created is
// false for an idempotent retry of a running one.
func (e *Emulator) startLocked(smARN, name, input string) (ex *execution, created bool, err error) {
	if name == "" {
		name = requestID()
	}
	if !nameRE.MatchString(name) {
		return nil, false, errf("InvalidName", "Invalid Name: '%s'", name)
	}
	if input == "" {
		input = "{}"
	}
	if len(input) > asl.MaxPayloadBytes {
		return nil, false, errf("InvalidExecutionInput", "Invalid execution input: larger than %d bytes", asl.MaxPayloadBytes)
	}
	if _, err := asl.ParseJSON(input); err != nil {
		return nil, false, errf("InvalidExecutionInput", "Invalid State Machine Execution Input: '%v'", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	sm, ok := e.machines[smARN]
	if !ok {
		return nil, false, errf("StateMachineDoesNotExist", "State Machine Does Not Exist: '%s'", smARN)
	}
	arn := e.ExecutionARN(sm.name, name)
	if sm.typ == asl.TypeExpress {
		arn = fmt.Sprintf("arn:aws:states:%s:%s:express:%s:%s:%s", e.opts.Region, e.opts.AccountID, sm.name, name, requestID())
	}
	if old, ok := e.executions[arn]; ok {
		info := old.x.Info()
		if info.Status == asl.StatusRunning && info.Input == input {
			return old, false, nil // idempotent retry of the same request
		}
		return nil, false, errf("ExecutionAlreadyExists", "Execution Already Exists: '%s'", arn)
	}
	x, err := e.runner().Start(withRole(e.ctx, sm.roleARN), sm.machine, asl.StartInput{
		ExecutionARN: arn, Name: name, StateMachineARN: sm.arn, StateMachineName: sm.name,
		RoleARN: sm.roleARN, Type: sm.typ, Input: input,
	})
	if err != nil {
		return nil, false, errf("InvalidExecutionInput", "%v", err)
	}
	ex = &execution{x: x, sm: sm}
	e.executions[arn] = ex
	e.order = append(e.order, ex)
	return ex, true, nil
}

// Execution returns an execution (parent or Distributed Map child) by ARN:
// its Info, History and Transitions.
func (e *Emulator) Execution(arn string) (*asl.Execution, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ex, ok := e.executions[arn]
	if !ok {
		return nil, false
	}
	return ex.x, true
}

// WaitExecution blocks until the execution finishes or ctx ends and
// returns its final state.
func (e *Emulator) WaitExecution(ctx context.Context, arn string) (asl.ExecutionInfo, error) {
	x, ok := e.Execution(arn)
	if !ok {
		return asl.ExecutionInfo{}, fmt.Errorf("wait for execution %s: %w", arn, errf("ExecutionDoesNotExist", "Execution Does Not Exist: '%s'", arn))
	}
	return x.Wait(ctx)
}

// History returns the events of an execution, oldest first.
func (e *Emulator) History(arn string) ([]asl.Event, error) {
	x, ok := e.Execution(arn)
	if !ok {
		return nil, errf("ExecutionDoesNotExist", "Execution Does Not Exist: '%s'", arn)
	}
	return x.History(), nil
}

// Transitions returns the state transitions an execution has made so far
// (its own; Distributed Map children count separately, see MapRunChildren).
func (e *Emulator) Transitions(arn string) (int, error) {
	x, ok := e.Execution(arn)
	if !ok {
		return 0, errf("ExecutionDoesNotExist", "Execution Does Not Exist: '%s'", arn)
	}
	return x.Transitions(), nil
}

// Executions lists every execution of a state machine, children included
// (children carry a MapRunARN), oldest first.
func (e *Emulator) Executions(stateMachineARN string) []asl.ExecutionInfo {
	e.mu.Lock()
	list := append([]*execution(nil), e.order...)
	e.mu.Unlock()
	var out []asl.ExecutionInfo
	for _, ex := range list {
		info := ex.x.Info()
		if stateMachineARN == "" || info.StateMachineARN == stateMachineARN {
			out = append(out, info)
		}
	}
	return out
}

// MapRunChildren lists the child executions of a Distributed Map run.
func (e *Emulator) MapRunChildren(mapRunARN string) []asl.ExecutionInfo {
	var out []asl.ExecutionInfo
	for _, info := range e.Executions("") {
		if info.MapRunARN == mapRunARN {
			out = append(out, info)
		}
	}
	return out
}

// StopExecution aborts a running execution.
func (e *Emulator) StopExecution(arn, errName, cause string) error {
	x, ok := e.Execution(arn)
	if !ok {
		return errf("ExecutionDoesNotExist", "Execution Does Not Exist: '%s'", arn)
	}
	x.Stop(errName, cause)
	<-x.Done()
	return nil
}

// TimeOutExecution ends a running execution TIMED_OUT, as its state
// machine's TimeoutSeconds would (the cause names it); Step Functions has no
// call for it, so tests arrange a timed-out owner with it.
func (e *Emulator) TimeOutExecution(arn string) error {
	x, ok := e.Execution(arn)
	if !ok {
		return errf("ExecutionDoesNotExist", "Execution Does Not Exist: '%s'", arn)
	}
	x.TimeOut("The execution ran longer than the state machine's TimeoutSeconds")
	<-x.Done()
	return nil
}

// ---- AWS JSON handlers ----

func epoch(t time.Time) *float64 {
	if t.IsZero() {
		return nil
	}
	f := float64(t.UnixMilli()) / 1000
	return &f
}

func (e *Emulator) createStateMachine(_ context.Context, body []byte) (any, error) {
	var in struct {
		Name       string `json:"name"`
		Definition string `json:"definition"`
		RoleArn    string `json:"roleArn"`
		Type       string `json:"type"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if in.Name == "" || in.Definition == "" {
		return nil, errf("ValidationException", "name and definition are required")
	}
	sm, err := e.createMachine(in.Name, []byte(in.Definition), in.Type, in.RoleArn)
	if err != nil {
		return nil, err
	}
	return map[string]any{"stateMachineArn": sm.arn, "creationDate": epoch(sm.created)}, nil
}

func (e *Emulator) machine(arn string) (*stateMachine, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	sm, ok := e.machines[arn]
	if !ok {
		return nil, errf("StateMachineDoesNotExist", "State Machine Does Not Exist: '%s'", arn)
	}
	return sm, nil
}

func (e *Emulator) describeStateMachine(_ context.Context, body []byte) (any, error) {
	var in struct {
		StateMachineArn string `json:"stateMachineArn"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	sm, err := e.machine(in.StateMachineArn)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"stateMachineArn": sm.arn, "name": sm.name, "status": "ACTIVE", "definition": string(sm.definition),
		"roleArn": sm.roleARN, "type": sm.typ, "creationDate": epoch(sm.created),
	}, nil
}

func (e *Emulator) listStateMachines(_ context.Context, _ []byte) (any, error) {
	e.mu.Lock()
	list := make([]*stateMachine, 0, len(e.machines))
	for _, sm := range e.machines {
		list = append(list, sm)
	}
	e.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].name < list[j].name })
	items := make([]map[string]any, len(list))
	for i, sm := range list {
		items[i] = map[string]any{"stateMachineArn": sm.arn, "name": sm.name, "type": sm.typ, "creationDate": epoch(sm.created)}
	}
	return map[string]any{"stateMachines": items}, nil
}

func (e *Emulator) startExecution(_ context.Context, body []byte) (any, error) {
	var in struct {
		StateMachineArn string  `json:"stateMachineArn"`
		Name            string  `json:"name"`
		Input           *string `json:"input"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	input := ""
	if in.Input != nil {
		input = *in.Input
	}
	ex, err := e.start(in.StateMachineArn, in.Name, input)
	if err != nil {
		return nil, err
	}
	info := ex.x.Info()
	return map[string]any{"executionArn": info.ARN, "startDate": epoch(info.StartDate)}, nil
}

func (e *Emulator) execution(arn string) (*asl.Execution, error) {
	x, ok := e.Execution(arn)
	if !ok {
		return nil, errf("ExecutionDoesNotExist", "Execution Does Not Exist: '%s'", arn)
	}
	return x, nil
}

func (e *Emulator) describeExecution(_ context.Context, body []byte) (any, error) {
	var in struct {
		ExecutionArn string `json:"executionArn"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	x, err := e.execution(in.ExecutionArn)
	if err != nil {
		return nil, err
	}
	info := x.Info()
	out := map[string]any{
		"executionArn": info.ARN, "stateMachineArn": info.StateMachineARN, "name": info.Name,
		"status": info.Status, "startDate": epoch(info.StartDate), "input": info.Input,
		"inputDetails": map[string]any{"included": true}, "redriveCount": 0,
	}
	if !info.StopDate.IsZero() {
		out["stopDate"] = epoch(info.StopDate)
	}
	if info.Status == asl.StatusSucceeded {
		out["output"] = info.Output
		out["outputDetails"] = map[string]any{"included": true}
	}
	if info.Error != "" {
		out["error"] = info.Error
	}
	if info.Cause != "" {
		out["cause"] = info.Cause
	}
	if info.MapRunARN != "" {
		out["mapRunArn"] = info.MapRunARN
	}
	return out, nil
}

func pageOf(nextToken string, maxResults, n int) (start, end int, next string, err error) {
	if nextToken != "" {
		start, err = strconv.Atoi(nextToken)
		if err != nil || start < 0 || start > n {
			return 0, 0, "", errf("InvalidToken", "Invalid Token: '%s'", nextToken)
		}
	}
	if maxResults <= 0 || maxResults > 1000 {
		maxResults = 1000
	}
	end = min(start+maxResults, n)
	if end < n {
		next = strconv.Itoa(end)
	}
	return start, end, next, nil
}

func (e *Emulator) listExecutions(_ context.Context, body []byte) (any, error) {
	var in struct {
		StateMachineArn string `json:"stateMachineArn"`
		MapRunArn       string `json:"mapRunArn"`
		StatusFilter    string `json:"statusFilter"`
		MaxResults      int    `json:"maxResults"`
		NextToken       string `json:"nextToken"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if in.StateMachineArn == "" && in.MapRunArn == "" {
		return nil, errf("ValidationException", "stateMachineArn or mapRunArn is required")
	}
	if in.StateMachineArn != "" {
		if _, err := e.machine(in.StateMachineArn); err != nil {
			return nil, err
		}
	}
	var match []asl.ExecutionInfo
	all := e.Executions(in.StateMachineArn)
	for i := len(all) - 1; i >= 0; i-- { // newest first
		info := all[i]
		if in.MapRunArn != "" && info.MapRunARN != in.MapRunArn {
			continue
		}
		if in.MapRunArn == "" && info.MapRunARN != "" {
			continue // children are listed by map run
		}
		if in.StatusFilter != "" && info.Status != in.StatusFilter {
			continue
		}
		match = append(match, info)
	}
	start, end, next, err := pageOf(in.NextToken, in.MaxResults, len(match))
	if err != nil {
		return nil, err
	}
	items := make([]map[string]any, 0, end-start)
	for _, info := range match[start:end] {
		it := map[string]any{
			"executionArn": info.ARN, "stateMachineArn": info.StateMachineARN, "name": info.Name,
			"status": info.Status, "startDate": epoch(info.StartDate),
		}
		if !info.StopDate.IsZero() {
			it["stopDate"] = epoch(info.StopDate)
		}
		if info.MapRunARN != "" {
			it["mapRunArn"] = info.MapRunARN
		}
		items = append(items, it)
	}
	out := map[string]any{"executions": items}
	if next != "" {
		out["nextToken"] = next
	}
	return out, nil
}

func (e *Emulator) stopExecution(_ context.Context, body []byte) (any, error) {
	var in struct {
		ExecutionArn string `json:"executionArn"`
		Error        string `json:"error"`
		Cause        string `json:"cause"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := e.StopExecution(in.ExecutionArn, in.Error, in.Cause); err != nil {
		return nil, err
	}
	x, _ := e.Execution(in.ExecutionArn)
	return map[string]any{"stopDate": epoch(x.Info().StopDate)}, nil
}

func (e *Emulator) getExecutionHistory(_ context.Context, body []byte) (any, error) {
	var in struct {
		ExecutionArn         string `json:"executionArn"`
		MaxResults           int    `json:"maxResults"`
		NextToken            string `json:"nextToken"`
		ReverseOrder         bool   `json:"reverseOrder"`
		IncludeExecutionData *bool  `json:"includeExecutionData"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	x, err := e.execution(in.ExecutionArn)
	if err != nil {
		return nil, err
	}
	evs := x.History()
	if in.ReverseOrder {
		for i, j := 0, len(evs)-1; i < j; i, j = i+1, j-1 {
			evs[i], evs[j] = evs[j], evs[i]
		}
	}
	start, end, next, err := pageOf(in.NextToken, in.MaxResults, len(evs))
	if err != nil {
		return nil, err
	}
	data := in.IncludeExecutionData == nil || *in.IncludeExecutionData
	items := make([]map[string]any, 0, end-start)
	for _, ev := range evs[start:end] {
		items = append(items, historyEvent(ev, e.opts.Region, data))
	}
	out := map[string]any{"events": items}
	if next != "" {
		out["nextToken"] = next
	}
	return out, nil
}

// historyEvent renders an event in the GetExecutionHistory wire shape.
func historyEvent(ev asl.Event, region string, data bool) map[string]any {
	m := map[string]any{"id": ev.ID, "previousEventId": ev.PreviousEventID, "type": ev.Type, "timestamp": epoch(ev.Timestamp)}
	payload := func(s string) string {
		if data {
			return s
		}
		return ""
	}
	details := func(d map[string]any) map[string]any {
		for k, v := range d {
			if s, ok := v.(string); ok && s == "" && k != "input" && k != "output" {
				delete(d, k)
			}
		}
		return d
	}
	lower := strings.ToLower(ev.Type[:1]) + ev.Type[1:]
	switch {
	case ev.Type == "ExecutionStarted":
		m["executionStartedEventDetails"] = details(map[string]any{"input": payload(ev.Input), "inputDetails": map[string]any{"truncated": false}, "roleArn": ev.RoleARN})
	case ev.Type == "ExecutionSucceeded":
		m["executionSucceededEventDetails"] = map[string]any{"output": payload(ev.Output), "outputDetails": map[string]any{"truncated": false}}
	case ev.Type == "ExecutionFailed", ev.Type == "ExecutionAborted", ev.Type == "ExecutionTimedOut":
		m[lower+"EventDetails"] = details(map[string]any{"error": ev.Error, "cause": payload(ev.Cause)})
	case strings.HasSuffix(ev.Type, "StateEntered"):
		m["stateEnteredEventDetails"] = map[string]any{"name": ev.StateName, "input": payload(ev.Input), "inputDetails": map[string]any{"truncated": false}}
	case strings.HasSuffix(ev.Type, "StateExited"):
		m["stateExitedEventDetails"] = map[string]any{"name": ev.StateName, "output": payload(ev.Output), "outputDetails": map[string]any{"truncated": false}}
	case ev.Type == "TaskScheduled":
		d := map[string]any{"resourceType": ev.ResourceType, "resource": ev.Resource, "region": region, "parameters": payload(ev.Parameters)}
		if ev.TimeoutSeconds > 0 {
			d["timeoutInSeconds"] = ev.TimeoutSeconds
		}
		if ev.HeartbeatSeconds > 0 {
			d["heartbeatInSeconds"] = ev.HeartbeatSeconds
		}
		m["taskScheduledEventDetails"] = d
	case ev.Type == "TaskStarted":
		m["taskStartedEventDetails"] = map[string]any{"resourceType": ev.ResourceType, "resource": ev.Resource}
	case ev.Type == "TaskSubmitted", ev.Type == "TaskSucceeded":
		m[lower+"EventDetails"] = map[string]any{"resourceType": ev.ResourceType, "resource": ev.Resource, "output": payload(ev.Output), "outputDetails": map[string]any{"truncated": false}}
	case ev.Type == "TaskFailed", ev.Type == "TaskTimedOut":
		m[lower+"EventDetails"] = details(map[string]any{"resourceType": ev.ResourceType, "resource": ev.Resource, "error": ev.Error, "cause": payload(ev.Cause)})
	case ev.Type == "MapStateStarted":
		m["mapStateStartedEventDetails"] = map[string]any{"length": ev.Length}
	case strings.HasPrefix(ev.Type, "MapIteration"):
		m[lower+"EventDetails"] = map[string]any{"name": ev.StateName, "index": ev.Index}
	case ev.Type == "MapRunStarted":
		m["mapRunStartedEventDetails"] = map[string]any{"mapRunArn": ev.MapRunARN}
	case ev.Type == "MapRunFailed":
		m["mapRunFailedEventDetails"] = details(map[string]any{"error": ev.Error, "cause": payload(ev.Cause)})
	}
	return m
}
