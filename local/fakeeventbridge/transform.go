package fakeeventbridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Target input, as the EventBridge user guide ("Amazon EventBridge input
// transformation") and the API reference (InputTransformer, Target) describe
// it: Input is constant JSON text, InputPath selects part of the event, an
// InputTransformer fills an InputTemplate's <name> placeholders with values
// its InputPathsMap selects (at most 100), plus the predefined
// aws.events.rule-arn, aws.events.rule-name, aws.events.event.ingestion-time,
// aws.events.event (the event without detail) and aws.events.event.json (the
// whole event).

// MaxInputPaths is the most InputPathsMap entries a transformer may have.
const MaxInputPaths = 100

// MaxInputTemplate is the longest InputTemplate (API reference: 8192).
const MaxInputTemplate = 8192

var (
	varNameRE = regexp.MustCompile(`^[A-Za-z0-9_\-]+$`)
	pathSegRE = regexp.MustCompile(`^[A-Za-z0-9_\-/@:]+$`)
)

// pathStep is one step of a JSON path: a key, an index, or a wildcard.
type pathStep struct {
	key      string
	index    int
	isIndex  bool
	wildcard bool
}

// parsePath reads the JSONPath subset EventBridge documents: $ followed by
// .name (letters, digits, dashes, underscores, slashes), [n] and * steps.
func parsePath(p string) ([]pathStep, error) {
	if p == "$" {
		return nil, nil
	}
	if !strings.HasPrefix(p, "$") {
		return nil, fmt.Errorf("path %q does not start with $", p)
	}
	rest := p[1:]
	var steps []pathStep
	for rest != "" {
		switch rest[0] {
		case '.':
			rest = rest[1:]
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			seg := rest[:end]
			rest = rest[end:]
			switch {
			case seg == "*":
				steps = append(steps, pathStep{wildcard: true})
			case pathSegRE.MatchString(seg):
				steps = append(steps, pathStep{key: seg})
			default:
				return nil, fmt.Errorf("path %q has an unsupported step %q", p, seg)
			}
		case '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, fmt.Errorf("path %q has an unclosed [", p)
			}
			seg := rest[1:end]
			rest = rest[end+1:]
			if seg == "*" {
				steps = append(steps, pathStep{wildcard: true})
				continue
			}
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("path %q has an unsupported index [%s]", p, seg)
			}
			steps = append(steps, pathStep{index: n, isIndex: true})
		default:
			return nil, fmt.Errorf("path %q is not a JSON path of the supported form", p)
		}
	}
	return steps, nil
}

// selectPath evaluates steps on v; ok is false when nothing is there. A
// wildcard gives the list of what it reaches.
func selectPath(v any, steps []pathStep) (any, bool) {
	for i, s := range steps {
		switch {
		case s.wildcard:
			var out []any
			var children []any
			switch t := v.(type) {
			case []any:
				children = t
			case map[string]any:
				for _, c := range t {
					children = append(children, c)
				}
			default:
				return nil, false
			}
			for _, c := range children {
				if x, ok := selectPath(c, steps[i+1:]); ok {
					out = append(out, x)
				}
			}
			return out, true
		case s.isIndex:
			a, ok := v.([]any)
			if !ok || s.index >= len(a) {
				return nil, false
			}
			v = a[s.index]
		default:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = m[s.key]; !ok {
				return nil, false
			}
		}
	}
	return v, true
}

// reserved are the predefined variables; InputPathsMap may not define them.
var reserved = map[string]bool{
	"aws.events.rule-arn": true, "aws.events.rule-name": true, "aws.events.event.ingestion-time": true,
	"aws.events.event": true, "aws.events.event.json": true,
}

func validateTransformer(t *InputTransformer) error {
	if len(t.InputPathsMap) > MaxInputPaths {
		return fmt.Errorf("InputPathsMap has %d entries, at most %d are allowed", len(t.InputPathsMap), MaxInputPaths)
	}
	if t.InputTemplate == "" || len(t.InputTemplate) > MaxInputTemplate {
		return fmt.Errorf("InputTemplate must have 1 to %d characters", MaxInputTemplate)
	}
	for k, p := range t.InputPathsMap {
		if reserved[k] || strings.HasPrefix(k, "aws.") {
			return fmt.Errorf("InputPathsMap key %q is reserved", k)
		}
		if !varNameRE.MatchString(k) {
			return fmt.Errorf("InputPathsMap key %q must be letters, digits, _ and -", k)
		}
		if _, err := parsePath(p); err != nil {
			return err
		}
	}
	if strings.HasPrefix(strings.TrimSpace(t.InputTemplate), "{") {
		// "The placeholder cannot be used as an object key."
		if placeholderKeyRE.MatchString(t.InputTemplate) {
			return fmt.Errorf("a placeholder cannot be used as an object key")
		}
	}
	return nil
}

var placeholderKeyRE = regexp.MustCompile(`[{,]\s*<[^<>]+>\s*:`)

// transformContext is what the predefined variables are made of.
type transformContext struct {
	ruleName, ruleARN, ingestionTime string
}

// targetInput returns what a target receives for event (the event's JSON
// text): the event itself, Input, the InputPath selection, or the
// transformer's output.
func targetInput(t Target, event []byte, tc transformContext) ([]byte, error) {
	switch {
	case t.Input != nil:
		return []byte(*t.Input), nil
	case t.InputPath != nil:
		ev, err := decodeEvent(event)
		if err != nil {
			return nil, err
		}
		steps, err := parsePath(*t.InputPath)
		if err != nil {
			return nil, err
		}
		v, ok := selectPath(ev, steps)
		if !ok {
			v = nil
		}
		return json.Marshal(v)
	case t.InputTransformer != nil:
		return applyTransformer(t.InputTransformer, event, tc)
	}
	return event, nil
}

func decodeEvent(event []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(event))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("event is not JSON: %w", err)
	}
	return v, nil
}

// applyTransformer renders tr for event. In a template that is JSON (it
// starts with '{', '[' or '"'), a placeholder inside a JSON string is
// replaced by the value's text escaped for that string (a string without its
// quotes); outside strings by the value's JSON. In a plain-text template
// every value is inserted as text. A path that selects nothing gives null
// (inside a string: nothing). <name> that is not a variable stays as it is.
func applyTransformer(tr *InputTransformer, event []byte, tc transformContext) ([]byte, error) {
	ev, err := decodeEvent(event)
	if err != nil {
		return nil, err
	}
	values := map[string]any{
		"aws.events.rule-arn": tc.ruleARN, "aws.events.rule-name": tc.ruleName,
		"aws.events.event.ingestion-time": tc.ingestionTime,
		"aws.events.event.json":           json.RawMessage(event),
	}
	if m, ok := ev.(map[string]any); ok {
		noDetail := make(map[string]any, len(m))
		for k, v := range m {
			if k != "detail" {
				noDetail[k] = v
			}
		}
		values["aws.events.event"] = noDetail
	}
	for name, p := range tr.InputPathsMap {
		steps, err := parsePath(p)
		if err != nil {
			return nil, err
		}
		v, ok := selectPath(ev, steps)
		if !ok {
			v = nil
		}
		values[name] = v
	}
	tpl := tr.InputTemplate
	trimmed := strings.TrimSpace(tpl)
	isJSON := strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, "[") || strings.HasPrefix(trimmed, `"`)
	var out bytes.Buffer
	inString := false
	for i := 0; i < len(tpl); i++ {
		c := tpl[i]
		if isJSON && inString && c == '\\' && i+1 < len(tpl) {
			out.WriteByte(c)
			out.WriteByte(tpl[i+1])
			i++
			continue
		}
		if c == '"' {
			inString = !inString
		}
		if c != '<' {
			out.WriteByte(c)
			continue
		}
		end := strings.IndexByte(tpl[i:], '>')
		if end < 0 {
			out.WriteByte(c)
			continue
		}
		v, ok := values[tpl[i+1:i+end]]
		if !ok {
			out.WriteByte(c)
			continue
		}
		i += end
		switch {
		case !isJSON:
			out.WriteString(textOf(v))
		case inString:
			b, _ := json.Marshal(textOf(v))
			out.Write(b[1 : len(b)-1])
		default:
			b, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("input transformer: %w", err)
			}
			out.Write(b)
		}
	}
	return out.Bytes(), nil
}

// textOf is a value as text: a string as it is, null as nothing, anything
// else as its JSON.
func textOf(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	}
	b, _ := json.Marshal(v)
	return string(b)
}
