package asl

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Workflow variables (Assign; "$name" in JSONPath paths, $name in JSONata).
//
// The top-level states of an execution share one scope; each Parallel
// branch and inline Map iteration runs in a scope of its own that reads the
// outer ones; a Distributed Map child execution starts with none. Every
// reference inside a state reads the values as they were when the state was
// entered: a state's Assign takes effect when the state finishes.

// varScope is one variable scope.
type varScope struct {
	parent *varScope

	mu   sync.Mutex
	vals map[string]any
}

func newScope(parent *varScope) *varScope {
	return &varScope{parent: parent, vals: map[string]any{}}
}

// snapshot returns every visible variable, inner scopes shadowing outer.
func (v *varScope) snapshot() map[string]any {
	out := map[string]any{}
	var walk func(s *varScope)
	walk = func(s *varScope) {
		if s == nil {
			return
		}
		walk(s.parent)
		s.mu.Lock()
		for k, val := range s.vals {
			out[k] = val
		}
		s.mu.Unlock()
	}
	walk(v)
	return out
}

// assign stores new values in this scope.
func (v *varScope) assign(vals map[string]any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for k, val := range vals {
		v.vals[k] = val
	}
}

type scopeKey struct{}

func withScope(ctx context.Context, s *varScope) context.Context {
	return context.WithValue(ctx, scopeKey{}, s)
}

func scopeFrom(ctx context.Context) *varScope {
	if s, ok := ctx.Value(scopeKey{}).(*varScope); ok {
		return s
	}
	return nil
}

// evalEnv is what paths and templates evaluate against besides the data:
// the context object ($$) and the variables of the state's scope as they
// were when the state was entered.
type evalEnv struct {
	ctx  map[string]any
	vars map[string]any
}

// envParts splits what the interpreter passes as ctxObj.
func envParts(ctxObj any) (ctx any, vars map[string]any) {
	switch t := ctxObj.(type) {
	case *evalEnv:
		if t == nil {
			return nil, nil
		}
		return t.ctx, t.vars
	}
	return ctxObj, nil
}

// varNameOK reports whether name may be assigned: letters, digits and
// underscores, not starting with a digit, at most 80 characters, and not the
// reserved "states".
func varNameOK(name string) bool {
	if name == "" || len(name) > 80 || name == "states" {
		return false
	}
	for i, r := range name {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// assignment is a compiled Assign field, in either query language.
type assignment struct {
	jsonPath *template  // JSONPath: a payload template (keys ending ".$")
	jsonata  *jtemplate // JSONata
}

func parseAssign(m map[string]any, jsonata bool) (*assignment, error) {
	v, ok := m["Assign"]
	if !ok {
		return nil, nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("Assign must be an object")
	}
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		name := k
		if !jsonata {
			if n, ok := strings.CutSuffix(k, ".$"); ok {
				name = n
			}
		}
		if !varNameOK(name) {
			return nil, fmt.Errorf("Assign: %q is not a valid variable name", name)
		}
	}
	a := &assignment{}
	var err error
	if jsonata {
		a.jsonata, err = compileJSONataTemplate(v)
	} else {
		a.jsonPath, err = compileTemplate(v)
	}
	if err != nil {
		return nil, fmt.Errorf("Assign: %w", err)
	}
	return a, nil
}

// eval computes the values to assign. For JSONPath "$" is data; for
// JSONata $states is states.
func (a *assignment) eval(data any, env *evalEnv, states map[string]any) (map[string]any, error) {
	var v any
	var err error
	if a.jsonata != nil {
		v, err = a.jsonata.eval(states, env)
	} else {
		v, err = a.jsonPath.eval(data, env)
	}
	if err != nil {
		return nil, err
	}
	m, _ := v.(map[string]any)
	if err := checkSize(m, "value of Assign"); err != nil {
		return nil, err
	}
	return m, nil
}
