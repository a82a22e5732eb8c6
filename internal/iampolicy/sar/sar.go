// Package sar holds the IAM actions of AWS's Service Authorization Reference
// (SAR) for the services the stack uses, as data (actions.json): per service
// the page it was read from and when, per action its access level, the
// resource types it applies to and the condition keys the stack uses with it.
// Tests check every action of internal/iampolicy's statements and of
// local/iam's request mapping against it, so a misnamed action (one AWS does
// not evaluate, or evaluates under another name) fails a local test.
package sar

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
)

//go:embed actions.json
var data []byte

// Action is one action of a service.
type Action struct {
	Access string `json:"access"`
	// Resources are the resource types the action applies to; empty when
	// SAR names none (the statement's Resource must be "*").
	Resources     []string `json:"resources"`
	ConditionKeys []string `json:"conditionKeys,omitempty"`
}

// Service is one service's page of SAR.
type Service struct {
	Name          string            `json:"name"`
	URL           string            `json:"url"`
	Read          string            `json:"read"`
	ResourceTypes map[string]string `json:"resourceTypes"`
	Notes         []string          `json:"notes,omitempty"`
	Actions       map[string]Action `json:"actions"`
}

// Reference is the whole data file: services by IAM prefix.
type Reference struct {
	About    string             `json:"about"`
	Services map[string]Service `json:"services"`
}

var (
	once   sync.Once
	loaded Reference
	errLd  error
)

// Load returns the reference, parsed once.
func Load() (Reference, error) {
	once.Do(func() {
		if err := json.Unmarshal(data, &loaded); err != nil {
			errLd = fmt.Errorf("sar: actions.json: %w", err)
		}
	})
	return loaded, errLd
}

// Lookup returns the action named "prefix:Name". IAM action names are
// case-insensitive; the match is too.
func (r Reference) Lookup(action string) (Action, bool) {
	prefix, name, ok := strings.Cut(action, ":")
	if !ok {
		return Action{}, false
	}
	svc, ok := r.Services[strings.ToLower(prefix)]
	if !ok {
		return Action{}, false
	}
	if a, ok := svc.Actions[name]; ok {
		return a, true
	}
	for n, a := range svc.Actions {
		if strings.EqualFold(n, name) {
			return a, true
		}
	}
	return Action{}, false
}

// Has reports whether action ("prefix:Name") is in the reference.
func (r Reference) Has(action string) bool {
	_, ok := r.Lookup(action)
	return ok
}

// Actions returns every "prefix:Name" of the reference, sorted.
func (r Reference) Actions() []string {
	var out []string
	for p, s := range r.Services {
		for n := range s.Actions {
			out = append(out, p+":"+n)
		}
	}
	sort.Strings(out)
	return out
}
