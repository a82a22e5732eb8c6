package asl

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Machine is a parsed, validated state machine definition (JSONPath or
// JSONata query language).
type Machine struct {
	Comment        string
	TimeoutSeconds int64
	root           *processor
}

// processor is a set of states with a start: the machine, a Map's
// ItemProcessor or a Parallel branch.
type processor struct {
	startAt       string
	states        map[string]*state
	mode          string // Map: INLINE or DISTRIBUTED
	executionType string // Map: STANDARD or EXPRESS
}

// optPath is an InputPath/OutputPath/ResultPath: absent, null, or a path.
type optPath struct {
	set  bool
	null bool
	p    *path
}

type retrier struct {
	errorEquals []string
	interval    float64
	maxAttempts int
	backoff     float64
	maxDelay    float64
	jitterFull  bool
}

type catcher struct {
	errorEquals []string
	next        string
	resultPath  optPath
	assign      *assignment
	output      *jtemplate // JSONata
}

type state struct {
	name, typ, next string
	end             bool

	// jsonata: the state's QueryLanguage is JSONata.
	jsonata           bool
	assign            *assignment
	arguments, output *jtemplate // JSONata Arguments and Output
	// jx holds JSONata expressions given for scalar fields (TimeoutSeconds,
	// HeartbeatSeconds, Seconds, Timestamp, Items, MaxConcurrency, Error,
	// Cause).
	jx            map[string]*jtemplate
	jItemSelector *jtemplate

	inputPath, outputPath, resultPath optPath
	parameters, resultSelector        *template
	result                            any
	hasResult                         bool

	// Task
	resource             string
	timeoutSeconds       int64
	timeoutSecondsPath   *path
	heartbeatSeconds     int64
	heartbeatSecondsPath *path
	retry                []retrier
	catch                []catcher

	// Choice
	choices []*choiceRule
	deflt   string

	// Wait
	seconds       int64
	hasSeconds    bool
	timestamp     time.Time
	hasTimestamp  bool
	secondsPath   *path
	timestampPath *path

	// Fail
	errName, cause       string
	errorPath, causePath *template

	// Map
	itemsPath                 *path
	itemSelector              *template
	itemProcessor             *processor
	maxConcurrency            int64
	maxConcurrencyPath        *path
	itemReader                *itemReader
	resultWriter              *resultWriter
	itemBatcher               *itemBatcher
	toleratedPercent          float64
	toleratedPercentPath      *path
	toleratedCount            int64
	toleratedCountPath        *path
	hasToleratedPct, hasTolCt bool
	label                     string

	// Parallel
	branches []*processor
}

type itemReader struct {
	resource   string
	parameters *template
	inputType  string
	maxItems   int64
	maxPath    *path
}

// itemBatcher is a Distributed Map's ItemBatcher: the child executions get
// {"BatchInput": ..., "Items": [...]} instead of one item each.
type itemBatcher struct {
	batchInput   *template // nil: no BatchInput field in the child input
	maxItems     int64     // 0: no count limit (unless maxItemsPath)
	maxItemsPath *path
	maxBytes     int64 // 0: no byte limit but MaxPayloadBytes (unless maxBytesPath)
	maxBytesPath *path
}

// itemBatcherFields are the fields an ItemBatcher may have.
var itemBatcherFields = map[string]bool{
	"BatchInput": true, "MaxItemsPerBatch": true, "MaxItemsPerBatchPath": true,
	"MaxInputBytesPerBatch": true, "MaxInputBytesPerBatchPath": true,
}

type resultWriter struct {
	resource   string
	parameters *template
}

// Query languages.
const (
	QueryJSONPath = "JSONPath"
	QueryJSONata  = "JSONata"
)

// ParseDefinition parses and validates an ASL definition. Any problem is
// an error naming the offending field, never a panic.
func ParseDefinition(def []byte) (mach *Machine, err error) {
	defer func() {
		if r := recover(); r != nil {
			mach, err = nil, fmt.Errorf("state machine definition: %v", r)
		}
	}()
	v, err := ParseJSON(string(def))
	if err != nil {
		return nil, fmt.Errorf("state machine definition: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("state machine definition: not a JSON object")
	}
	ql := QueryJSONPath
	if v, ok := m["QueryLanguage"]; ok {
		ql, _ = v.(string)
		if ql != QueryJSONPath && ql != QueryJSONata {
			return nil, fmt.Errorf("state machine definition: QueryLanguage must be %q or %q", QueryJSONPath, QueryJSONata)
		}
	}
	mach = &Machine{}
	mach.Comment, _ = m["Comment"].(string)
	if t, ok := m["TimeoutSeconds"]; ok {
		n, ok := isInteger(t)
		if !ok || n <= 0 {
			return nil, fmt.Errorf("state machine definition: TimeoutSeconds must be a positive integer")
		}
		mach.TimeoutSeconds = n
	}
	root, err := parseProcessor(m, "", ql)
	if err != nil {
		return nil, fmt.Errorf("state machine definition: %w", err)
	}
	mach.root = root
	return mach, nil
}

func parseProcessor(m map[string]any, where, ql string) (*processor, error) {
	start, _ := m["StartAt"].(string)
	if start == "" {
		return nil, fmt.Errorf("%sStartAt is missing", where)
	}
	raw, ok := m["States"].(map[string]any)
	if !ok || len(raw) == 0 {
		return nil, fmt.Errorf("%sStates is missing or empty", where)
	}
	p := &processor{startAt: start, states: map[string]*state{}}
	names := make([]string, 0, len(raw))
	for n := range raw {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		sm, ok := raw[n].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%sstate %q is not an object", where, n)
		}
		s, err := parseState(n, sm, where, ql)
		if err != nil {
			return nil, err
		}
		p.states[n] = s
	}
	if _, ok := p.states[start]; !ok {
		return nil, fmt.Errorf("%sStartAt %q names no state", where, start)
	}
	if err := p.checkReachable(where); err != nil {
		return nil, err
	}
	for _, s := range p.states {
		targets := []string{s.next, s.deflt}
		for _, c := range s.catch {
			targets = append(targets, c.next)
		}
		for _, c := range s.choices {
			targets = append(targets, c.next)
		}
		for _, t := range targets {
			if t != "" {
				if _, ok := p.states[t]; !ok {
					return nil, fmt.Errorf("%sstate %q: transition to unknown state %q", where, s.name, t)
				}
			}
		}
	}
	return p, nil
}

func parseOptPath(m map[string]any, key string) (optPath, error) {
	v, ok := m[key]
	if !ok {
		return optPath{}, nil
	}
	if v == nil {
		return optPath{set: true, null: true}, nil
	}
	s, ok := v.(string)
	if !ok {
		return optPath{}, fmt.Errorf("%s must be a string or null", key)
	}
	p, err := compilePath(s)
	if err != nil {
		return optPath{}, fmt.Errorf("%s: %w", key, err)
	}
	return optPath{set: true, p: p}, nil
}

func optTemplate(m map[string]any, key string) (*template, error) {
	v, ok := m[key]
	if !ok {
		return nil, nil
	}
	t, err := compileTemplate(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return t, nil
}

func optPathField(m map[string]any, key string) (*path, error) {
	v, ok := m[key]
	if !ok {
		return nil, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("%s must be a path string", key)
	}
	p, err := compilePath(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return p, nil
}

func optInt(m map[string]any, key string) (int64, bool, error) {
	v, ok := m[key]
	if !ok {
		return 0, false, nil
	}
	n, ok := isInteger(v)
	if !ok || n < 0 {
		return 0, false, fmt.Errorf("%s must be a non-negative integer", key)
	}
	return n, true, nil
}

func optNumber(m map[string]any, key string, def float64) (float64, error) {
	v, ok := m[key]
	if !ok {
		return def, nil
	}
	f, ok := toFloat(v)
	if !ok {
		return 0, fmt.Errorf("%s must be a number", key)
	}
	return f, nil
}

func stringList(v any) ([]string, bool) {
	a, ok := v.([]any)
	if !ok || len(a) == 0 {
		return nil, false
	}
	out := make([]string, len(a))
	for i, e := range a {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out[i] = s
	}
	return out, true
}

var stateFields = map[string][]string{
	"Task":     {"Resource", "Parameters", "ResultSelector", "ResultPath", "InputPath", "OutputPath", "TimeoutSeconds", "TimeoutSecondsPath", "HeartbeatSeconds", "HeartbeatSecondsPath", "Retry", "Catch", "Credentials", "Assign", "Next", "End"},
	"Pass":     {"Result", "Parameters", "ResultPath", "InputPath", "OutputPath", "Assign", "Next", "End"},
	"Choice":   {"Choices", "Default", "InputPath", "OutputPath", "Assign"},
	"Wait":     {"Seconds", "Timestamp", "SecondsPath", "TimestampPath", "InputPath", "OutputPath", "Assign", "Next", "End"},
	"Succeed":  {"InputPath", "OutputPath"},
	"Fail":     {"Error", "Cause", "ErrorPath", "CausePath"},
	"Map":      {"ItemProcessor", "Iterator", "ItemsPath", "ItemSelector", "Parameters", "ItemReader", "ItemBatcher", "ResultWriter", "MaxConcurrency", "MaxConcurrencyPath", "ToleratedFailurePercentage", "ToleratedFailurePercentagePath", "ToleratedFailureCount", "ToleratedFailureCountPath", "Label", "ResultSelector", "ResultPath", "InputPath", "OutputPath", "Retry", "Catch", "Assign", "Next", "End"},
	"Parallel": {"Branches", "Parameters", "ResultSelector", "ResultPath", "InputPath", "OutputPath", "Retry", "Catch", "Assign", "Next", "End"},
}

// jsonataFields are the fields of JSONata states.
var jsonataFields = map[string][]string{
	"Task":     {"Resource", "Arguments", "Output", "Assign", "TimeoutSeconds", "HeartbeatSeconds", "Retry", "Catch", "Credentials", "Next", "End"},
	"Pass":     {"Output", "Assign", "Next", "End"},
	"Choice":   {"Choices", "Default", "Output", "Assign"},
	"Wait":     {"Seconds", "Timestamp", "Output", "Assign", "Next", "End"},
	"Succeed":  {"Output"},
	"Fail":     {"Error", "Cause"},
	"Map":      {"ItemProcessor", "Items", "ItemSelector", "MaxConcurrency", "Label", "Output", "Assign", "Retry", "Catch", "Next", "End"},
	"Parallel": {"Branches", "Arguments", "Output", "Assign", "Retry", "Catch", "Next", "End"},
}

// jsonataUnsupported are JSONata-state fields Step Functions takes that the
// emulator refuses rather than misrun.
var jsonataUnsupported = map[string]bool{
	"ItemReader": true, "ItemBatcher": true, "ResultWriter": true,
	"ToleratedFailurePercentage": true, "ToleratedFailureCount": true,
}

// jsonataScalars are the fields whose value may be one JSONata expression
// in place of a number or string.
var jsonataScalars = []string{"TimeoutSeconds", "HeartbeatSeconds", "Seconds", "Timestamp", "Items", "MaxConcurrency", "Error", "Cause"}

func parseState(name string, m map[string]any, where, defaultQL string) (s *state, err error) {
	typ, _ := m["Type"].(string)
	allowed, ok := stateFields[typ]
	if !ok {
		return nil, fmt.Errorf("%sstate %q: unknown Type %q", where, name, typ)
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%sstate %q: %w", where, name, err)
		}
	}()
	ql := defaultQL
	if v, ok := m["QueryLanguage"]; ok {
		ql, _ = v.(string)
		if ql != QueryJSONPath && ql != QueryJSONata {
			return nil, fmt.Errorf("QueryLanguage must be %q or %q", QueryJSONPath, QueryJSONata)
		}
	}
	s = &state{name: name, typ: typ, jsonata: ql == QueryJSONata}
	if s.jsonata {
		allowed = jsonataFields[typ]
		// JSONata expressions given for scalar fields are taken out of m so
		// that the JSONPath-era parsing below sees only literals.
		m = shallowCopy(m)
		for _, k := range jsonataScalars {
			str, isStr := m[k].(string)
			if !isStr {
				continue
			}
			if _, isExpr := jsonataSource(str); !isExpr {
				continue
			}
			t, err := compileJSONataTemplate(str)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			if s.jx == nil {
				s.jx = map[string]*jtemplate{}
			}
			s.jx[k] = t
			delete(m, k)
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "Type" || k == "Comment" || k == "QueryLanguage" {
			continue
		}
		if s.jsonata && jsonataUnsupported[k] {
			return nil, fmt.Errorf("field %q of a JSONata %s state is not supported by the local emulator", k, typ)
		}
		found := false
		for _, a := range allowed {
			if a == k {
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("field %q is not allowed in a %s %s state", k, ql, typ)
		}
	}
	s.next, _ = m["Next"].(string)
	s.end, _ = m["End"].(bool)
	switch typ {
	case "Task", "Pass", "Wait", "Map", "Parallel":
		if (s.next == "") == !s.end {
			return nil, fmt.Errorf("exactly one of Next and End is required")
		}
	}
	if s.inputPath, err = parseOptPath(m, "InputPath"); err != nil {
		return nil, err
	}
	if s.outputPath, err = parseOptPath(m, "OutputPath"); err != nil {
		return nil, err
	}
	if s.resultPath, err = parseOptPath(m, "ResultPath"); err != nil {
		return nil, err
	}
	if s.resultPath.p != nil && (!s.resultPath.p.def || s.resultPath.p.ctx || s.resultPath.p.varName != "") {
		return nil, fmt.Errorf("ResultPath must be a reference path")
	}
	if s.parameters, err = optTemplate(m, "Parameters"); err != nil {
		return nil, err
	}
	if s.resultSelector, err = optTemplate(m, "ResultSelector"); err != nil {
		return nil, err
	}
	if r, ok := m["Result"]; ok {
		s.result, s.hasResult = r, true
	}
	if s.retry, err = parseRetry(m["Retry"]); err != nil {
		return nil, err
	}
	if s.catch, err = parseCatch(m["Catch"], s.jsonata); err != nil {
		return nil, err
	}
	if s.assign, err = parseAssign(m, s.jsonata); err != nil {
		return nil, err
	}
	if s.jsonata {
		if s.arguments, err = optJSONata(m, "Arguments"); err != nil {
			return nil, err
		}
		if s.arguments != nil && !s.arguments.isObj && !s.arguments.isExpr() {
			return nil, fmt.Errorf("Arguments must be an object or a JSONata expression")
		}
		if s.output, err = optJSONata(m, "Output"); err != nil {
			return nil, err
		}
	}
	switch typ {
	case "Task":
		s.resource, _ = m["Resource"].(string)
		if s.resource == "" {
			return nil, fmt.Errorf("Resource is required")
		}
		if s.timeoutSeconds, _, err = optInt(m, "TimeoutSeconds"); err != nil {
			return nil, err
		}
		if s.heartbeatSeconds, _, err = optInt(m, "HeartbeatSeconds"); err != nil {
			return nil, err
		}
		if s.timeoutSecondsPath, err = optPathField(m, "TimeoutSecondsPath"); err != nil {
			return nil, err
		}
		if s.heartbeatSecondsPath, err = optPathField(m, "HeartbeatSecondsPath"); err != nil {
			return nil, err
		}
		if s.timeoutSeconds > 0 && s.heartbeatSeconds >= s.timeoutSeconds {
			return nil, fmt.Errorf("HeartbeatSeconds must be smaller than TimeoutSeconds")
		}
	case "Choice":
		raw, ok := m["Choices"].([]any)
		if !ok || len(raw) == 0 {
			return nil, fmt.Errorf("Choices must be a non-empty array")
		}
		for i, r := range raw {
			rm, ok := r.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("Choices[%d] is not an object", i)
			}
			c, err := parseChoiceRule(rm, true, s.jsonata)
			if err != nil {
				return nil, fmt.Errorf("Choices[%d]: %w", i, err)
			}
			s.choices = append(s.choices, c)
		}
		s.deflt, _ = m["Default"].(string)
	case "Wait":
		n := 0
		if v, ok := m["Seconds"]; ok {
			n++
			if s.seconds, ok = isInteger(v); !ok || s.seconds < 0 {
				return nil, fmt.Errorf("Seconds must be a non-negative integer")
			}
			s.hasSeconds = true
		}
		if v, ok := m["Timestamp"]; ok {
			n++
			ts, _ := v.(string)
			if s.timestamp, err = parseTimestamp(ts); err != nil {
				return nil, fmt.Errorf("Timestamp: %w", err)
			}
			s.hasTimestamp = true
		}
		if s.secondsPath, err = optPathField(m, "SecondsPath"); err != nil {
			return nil, err
		}
		if s.timestampPath, err = optPathField(m, "TimestampPath"); err != nil {
			return nil, err
		}
		if s.secondsPath != nil {
			n++
		}
		if s.timestampPath != nil {
			n++
		}
		if s.jx["Seconds"] != nil {
			n++
		}
		if s.jx["Timestamp"] != nil {
			n++
		}
		if n != 1 {
			return nil, fmt.Errorf("exactly one of Seconds, Timestamp, SecondsPath, TimestampPath is required")
		}
	case "Fail":
		s.errName, _ = m["Error"].(string)
		s.cause, _ = m["Cause"].(string)
		for key, dst := range map[string]**template{"ErrorPath": &s.errorPath, "CausePath": &s.causePath} {
			if v, ok := m[key]; ok {
				str, ok := v.(string)
				if !ok {
					return nil, fmt.Errorf("%s must be a string", key)
				}
				if *dst, err = compileDynamic(str); err != nil {
					return nil, fmt.Errorf("%s: %w", key, err)
				}
			}
		}
		if s.errorPath != nil && s.errName != "" || s.causePath != nil && s.cause != "" {
			return nil, fmt.Errorf("Error/ErrorPath and Cause/CausePath are mutually exclusive")
		}
	case "Map":
		if err := parseMap(s, m, where, defaultQL); err != nil {
			return nil, err
		}
	case "Parallel":
		raw, ok := m["Branches"].([]any)
		if !ok || len(raw) == 0 {
			return nil, fmt.Errorf("Branches must be a non-empty array")
		}
		for i, b := range raw {
			bm, ok := b.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("Branches[%d] is not an object", i)
			}
			p, err := parseProcessor(bm, fmt.Sprintf("%s%s.Branches[%d]: ", where, name, i), defaultQL)
			if err != nil {
				return nil, err
			}
			s.branches = append(s.branches, p)
		}
	}
	return s, nil
}

func parseMap(s *state, m map[string]any, where, ql string) (err error) {
	procRaw, ok := m["ItemProcessor"].(map[string]any)
	if !ok {
		procRaw, ok = m["Iterator"].(map[string]any)
	}
	if !ok {
		return fmt.Errorf("ItemProcessor is required")
	}
	if s.itemProcessor, err = parseProcessor(procRaw, where+s.name+".ItemProcessor: ", ql); err != nil {
		return err
	}
	s.itemProcessor.mode = "INLINE"
	s.itemProcessor.executionType = "STANDARD"
	if pc, ok := procRaw["ProcessorConfig"].(map[string]any); ok {
		if md, _ := pc["Mode"].(string); md != "" {
			if md != "INLINE" && md != "DISTRIBUTED" {
				return fmt.Errorf("ProcessorConfig.Mode %q is not INLINE or DISTRIBUTED", md)
			}
			s.itemProcessor.mode = md
		}
		if et, _ := pc["ExecutionType"].(string); et != "" {
			if et != "STANDARD" && et != "EXPRESS" {
				return fmt.Errorf("ProcessorConfig.ExecutionType %q is not STANDARD or EXPRESS", et)
			}
			s.itemProcessor.executionType = et
		}
	}
	distributed := s.itemProcessor.mode == "DISTRIBUTED"
	if s.jsonata {
		if distributed {
			return fmt.Errorf("ItemProcessor.ProcessorConfig.Mode DISTRIBUTED is not supported in a JSONata Map state by the local emulator")
		}
		if v, ok := m["Items"]; ok && s.jx["Items"] == nil {
			if _, isArr := v.([]any); !isArr {
				return fmt.Errorf("Items must be an array or a JSONata expression")
			}
			if s.jx == nil {
				s.jx = map[string]*jtemplate{}
			}
			if s.jx["Items"], err = compileJSONataTemplate(v); err != nil {
				return fmt.Errorf("Items: %w", err)
			}
		}
		if s.jItemSelector, err = optJSONata(m, "ItemSelector"); err != nil {
			return err
		}
		if s.maxConcurrency, _, err = optInt(m, "MaxConcurrency"); err != nil {
			return err
		}
		s.label, _ = m["Label"].(string)
		return nil
	}
	if s.itemsPath, err = optPathField(m, "ItemsPath"); err != nil {
		return err
	}
	if s.itemSelector, err = optTemplate(m, "ItemSelector"); err != nil {
		return err
	}
	if s.itemSelector == nil && s.parameters != nil {
		s.itemSelector, s.parameters = s.parameters, nil
	}
	if s.maxConcurrency, _, err = optInt(m, "MaxConcurrency"); err != nil {
		return err
	}
	if s.maxConcurrencyPath, err = optPathField(m, "MaxConcurrencyPath"); err != nil {
		return err
	}
	if _, ok := m["ToleratedFailurePercentage"]; ok {
		if s.toleratedPercent, err = optNumber(m, "ToleratedFailurePercentage", 0); err != nil {
			return err
		}
		if s.toleratedPercent < 0 || s.toleratedPercent > 100 {
			return fmt.Errorf("ToleratedFailurePercentage must be between 0 and 100")
		}
		s.hasToleratedPct = true
	}
	if s.toleratedCount, s.hasTolCt, err = optInt(m, "ToleratedFailureCount"); err != nil {
		return err
	}
	if s.toleratedPercentPath, err = optPathField(m, "ToleratedFailurePercentagePath"); err != nil {
		return err
	}
	if s.toleratedCountPath, err = optPathField(m, "ToleratedFailureCountPath"); err != nil {
		return err
	}
	s.label, _ = m["Label"].(string)
	if v, ok := m["ItemBatcher"]; ok {
		if !distributed {
			return fmt.Errorf("ItemBatcher needs ProcessorConfig.Mode DISTRIBUTED")
		}
		if s.itemBatcher, err = parseItemBatcher(v); err != nil {
			return fmt.Errorf("ItemBatcher: %w", err)
		}
	}
	if r, ok := m["ItemReader"].(map[string]any); ok {
		if !distributed {
			return fmt.Errorf("ItemReader needs ProcessorConfig.Mode DISTRIBUTED")
		}
		ir := &itemReader{}
		ir.resource, _ = r["Resource"].(string)
		if ir.resource != "arn:aws:states:::s3:getObject" {
			return fmt.Errorf("ItemReader.Resource %q is not supported (arn:aws:states:::s3:getObject only)", ir.resource)
		}
		if ir.parameters, err = optTemplate(r, "Parameters"); err != nil {
			return fmt.Errorf("ItemReader: %w", err)
		}
		if ir.parameters == nil {
			return fmt.Errorf("ItemReader.Parameters is required")
		}
		ir.inputType = "JSON"
		if rc, ok := r["ReaderConfig"].(map[string]any); ok {
			if it, _ := rc["InputType"].(string); it != "" {
				ir.inputType = it
			}
			if ir.maxItems, _, err = optInt(rc, "MaxItems"); err != nil {
				return fmt.Errorf("ItemReader.ReaderConfig: %w", err)
			}
			if ir.maxPath, err = optPathField(rc, "MaxItemsPath"); err != nil {
				return fmt.Errorf("ItemReader.ReaderConfig: %w", err)
			}
		}
		if ir.inputType != "JSON" {
			return fmt.Errorf("ItemReader.ReaderConfig.InputType %q is not supported (JSON only)", ir.inputType)
		}
		s.itemReader = ir
	}
	if w, ok := m["ResultWriter"].(map[string]any); ok {
		if !distributed {
			return fmt.Errorf("ResultWriter needs ProcessorConfig.Mode DISTRIBUTED")
		}
		rw := &resultWriter{}
		rw.resource, _ = w["Resource"].(string)
		if rw.resource != "arn:aws:states:::s3:putObject" {
			return fmt.Errorf("ResultWriter.Resource %q is not supported (arn:aws:states:::s3:putObject only)", rw.resource)
		}
		if rw.parameters, err = optTemplate(w, "Parameters"); err != nil {
			return fmt.Errorf("ResultWriter: %w", err)
		}
		if rw.parameters == nil {
			return fmt.Errorf("ResultWriter.Parameters is required")
		}
		s.resultWriter = rw
	}
	return nil
}

// parseItemBatcher parses an ItemBatcher: at least one of MaxItemsPerBatch,
// MaxItemsPerBatchPath, MaxInputBytesPerBatch, MaxInputBytesPerBatchPath,
// never a field and its Path twin together; limits are positive integers,
// the byte limit at most 256 KiB; BatchInput is a payload template object.
func parseItemBatcher(v any) (*itemBatcher, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("must be an object")
	}
	for k := range m {
		if !itemBatcherFields[k] {
			return nil, fmt.Errorf("unknown field %q", k)
		}
	}
	b := &itemBatcher{}
	var err error
	if bi, ok := m["BatchInput"]; ok {
		if _, isObj := bi.(map[string]any); !isObj {
			return nil, fmt.Errorf("BatchInput must be an object")
		}
		if b.batchInput, err = compileTemplate(bi); err != nil {
			return nil, fmt.Errorf("BatchInput: %w", err)
		}
	}
	positive := func(key string, limit int64) (int64, error) {
		n, ok, err := optInt(m, key)
		if err != nil || (ok && (n <= 0 || (limit > 0 && n > limit))) {
			if limit > 0 {
				return 0, fmt.Errorf("%s must be a positive integer of at most %d", key, limit)
			}
			return 0, fmt.Errorf("%s must be a positive integer", key)
		}
		return n, nil
	}
	if b.maxItems, err = positive("MaxItemsPerBatch", 0); err != nil {
		return nil, err
	}
	if b.maxBytes, err = positive("MaxInputBytesPerBatch", MaxPayloadBytes); err != nil {
		return nil, err
	}
	if b.maxItemsPath, err = optPathField(m, "MaxItemsPerBatchPath"); err != nil {
		return nil, err
	}
	if b.maxBytesPath, err = optPathField(m, "MaxInputBytesPerBatchPath"); err != nil {
		return nil, err
	}
	_, hasItems := m["MaxItemsPerBatch"]
	_, hasBytes := m["MaxInputBytesPerBatch"]
	switch {
	case hasItems && b.maxItemsPath != nil:
		return nil, fmt.Errorf("MaxItemsPerBatch and MaxItemsPerBatchPath are mutually exclusive")
	case hasBytes && b.maxBytesPath != nil:
		return nil, fmt.Errorf("MaxInputBytesPerBatch and MaxInputBytesPerBatchPath are mutually exclusive")
	case !hasItems && !hasBytes && b.maxItemsPath == nil && b.maxBytesPath == nil:
		return nil, fmt.Errorf("needs MaxItemsPerBatch, MaxInputBytesPerBatch or one of their Path fields")
	}
	return b, nil
}

func parseRetry(v any) ([]retrier, error) {
	if v == nil {
		return nil, nil
	}
	raw, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("Retry must be an array")
	}
	out := make([]retrier, 0, len(raw))
	for i, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("Retry[%d] is not an object", i)
		}
		eq, ok := stringList(m["ErrorEquals"])
		if !ok {
			return nil, fmt.Errorf("Retry[%d].ErrorEquals must be a non-empty string array", i)
		}
		if err := checkAllLast(eq, i, len(raw)); err != nil {
			return nil, fmt.Errorf("Retry[%d]: %w", i, err)
		}
		rt := retrier{errorEquals: eq}
		var err error
		if rt.interval, err = optNumber(m, "IntervalSeconds", 1); err != nil {
			return nil, fmt.Errorf("Retry[%d]: %w", i, err)
		}
		ma, err := optNumber(m, "MaxAttempts", 3)
		if err != nil || ma < 0 {
			return nil, fmt.Errorf("Retry[%d]: MaxAttempts must be a non-negative integer", i)
		}
		rt.maxAttempts = int(ma)
		if rt.backoff, err = optNumber(m, "BackoffRate", 2); err != nil || rt.backoff < 1 {
			return nil, fmt.Errorf("Retry[%d]: BackoffRate must be a number >= 1", i)
		}
		if rt.maxDelay, err = optNumber(m, "MaxDelaySeconds", 0); err != nil {
			return nil, fmt.Errorf("Retry[%d]: %w", i, err)
		}
		switch js, _ := m["JitterStrategy"].(string); js {
		case "", "NONE":
		case "FULL":
			rt.jitterFull = true
		default:
			return nil, fmt.Errorf("Retry[%d]: JitterStrategy %q is not FULL or NONE", i, js)
		}
		if rt.interval < 1 && rt.interval != 0 {
			return nil, fmt.Errorf("Retry[%d]: IntervalSeconds must be a positive integer", i)
		}
		out = append(out, rt)
	}
	return out, nil
}

func checkAllLast(eq []string, i, n int) error {
	for _, e := range eq {
		if e == ErrorAll && (len(eq) != 1 || i != n-1) {
			return fmt.Errorf("States.ALL must appear alone in the last entry")
		}
	}
	return nil
}

func parseCatch(v any, jsonata bool) ([]catcher, error) {
	if v == nil {
		return nil, nil
	}
	raw, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("Catch must be an array")
	}
	out := make([]catcher, 0, len(raw))
	for i, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("Catch[%d] is not an object", i)
		}
		eq, ok := stringList(m["ErrorEquals"])
		if !ok {
			return nil, fmt.Errorf("Catch[%d].ErrorEquals must be a non-empty string array", i)
		}
		if err := checkAllLast(eq, i, len(raw)); err != nil {
			return nil, fmt.Errorf("Catch[%d]: %w", i, err)
		}
		c := catcher{errorEquals: eq}
		c.next, _ = m["Next"].(string)
		if c.next == "" {
			return nil, fmt.Errorf("Catch[%d].Next is required", i)
		}
		allowed := map[string]bool{"ErrorEquals": true, "Next": true, "Comment": true, "Assign": true, "ResultPath": !jsonata, "Output": jsonata}
		for k := range m {
			if !allowed[k] {
				return nil, fmt.Errorf("Catch[%d]: field %q is not allowed", i, k)
			}
		}
		var err error
		if c.resultPath, err = parseOptPath(m, "ResultPath"); err != nil {
			return nil, fmt.Errorf("Catch[%d]: %w", i, err)
		}
		if c.assign, err = parseAssign(m, jsonata); err != nil {
			return nil, fmt.Errorf("Catch[%d]: %w", i, err)
		}
		if jsonata {
			if c.output, err = optJSONata(m, "Output"); err != nil {
				return nil, fmt.Errorf("Catch[%d]: %w", i, err)
			}
		}
		out = append(out, c)
	}
	return out, nil
}

func shallowCopy(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// parseTimestamp accepts RFC 3339 timestamps as the States Language does.
func parseTimestamp(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 timestamp", s)
	}
	return t, nil
}

// Resources lists the Task resources the machine uses, including those of
// Map item processors and Parallel branches, sorted and without duplicates.
func (m *Machine) Resources() []string {
	set := map[string]bool{}
	var walk func(p *processor)
	walk = func(p *processor) {
		for _, s := range p.states {
			if s.resource != "" {
				set[s.resource] = true
			}
			if s.itemProcessor != nil {
				walk(s.itemProcessor)
			}
			for _, b := range s.branches {
				walk(b)
			}
		}
	}
	walk(m.root)
	out := make([]string, 0, len(set))
	for r := range set {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// transitions lists the states s can move to.
func (s *state) transitions() []string {
	out := []string{s.next, s.deflt}
	for _, c := range s.catch {
		out = append(out, c.next)
	}
	for _, c := range s.choices {
		out = append(out, c.next)
	}
	return out
}

// checkReachable fails when a state cannot be reached from StartAt, as
// Step Functions rejects such definitions.
func (p *processor) checkReachable(where string) error {
	seen := map[string]bool{}
	queue := []string{p.startAt}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		s, ok := p.states[n]
		if !ok || seen[n] {
			continue
		}
		seen[n] = true
		for _, t := range s.transitions() {
			if t != "" && !seen[t] {
				queue = append(queue, t)
			}
		}
	}
	var lost []string
	for n := range p.states {
		if !seen[n] {
			lost = append(lost, n)
		}
	}
	if len(lost) > 0 {
		sort.Strings(lost)
		return fmt.Errorf("%sstates %s cannot be reached from StartAt", where, strings.Join(lost, ", "))
	}
	return nil
}
