// Package statemachine holds the pipeline's one state machine definition,
// statemachine/cdc.asl.json, with the ${Name} placeholders that CDK's
// DefinitionSubstitutions and cdc-local fill in.
package statemachine

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

//go:embed cdc.asl.json
var definition []byte

//go:embed reconcile.asl.json
var reconcileDefinition []byte

// ReconcileFunctionArn is the reconcile Lambda, a placeholder of the
// reconciliation's definition (statemachine/reconcile.asl.json), which
// otherwise uses the pipeline's own placeholders.
const ReconcileFunctionArn = "ReconcileFunctionArn"

// ReconcileName is the reconciliation state machine's name in cdc-local
// and the default in CDK.
const ReconcileName = "healthlake-cdc-reconcile"

// ReconcileDefinition returns a copy of the reconciliation's definition
// with its placeholders unset (docs/RECONCILE.md).
func ReconcileDefinition() []byte {
	return append([]byte(nil), reconcileDefinition...)
}

// ReconcilePlaceholders returns the names of the reconciliation
// definition's placeholders, sorted.
func ReconcilePlaceholders() []string {
	return placeholdersIn(reconcileDefinition)
}

// Placeholder names used by the definition.
const (
	RunLockFunctionArn       = "RunLockFunctionArn"
	PrepareChangeFunctionArn = "PrepareChangeFunctionArn"
	StartQueueURL            = "StartQueueUrl"
	ArtifactBucket           = "ArtifactBucket"
	ExportHeartbeatSeconds   = "ExportHeartbeatSeconds"
	ExportTimeoutSeconds     = "ExportTimeoutSeconds"
	MapMaxConcurrency        = "MapMaxConcurrency"
	// RunTimeoutSeconds is the machine's top-level TimeoutSeconds: an
	// execution that runs longer ends TIMED_OUT, before the run lock's
	// lease (derived from the same setting) can expire under it.
	RunTimeoutSeconds = "RunTimeoutSeconds"
)

// Name is the state machine's name in cdc-local and the default in CDK.
const Name = "healthlake-cdc"

var placeholderRE = regexp.MustCompile(`\$\{([A-Za-z][A-Za-z0-9_]*)\}`)

// Definition returns a copy of the definition with its placeholders unset
// (not valid JSON until substituted: numeric placeholders stand unquoted).
func Definition() []byte {
	return append([]byte(nil), definition...)
}

// Placeholders returns the names of the definition's ${Name} placeholders, sorted.
func Placeholders() []string {
	return placeholdersIn(definition)
}

func placeholdersIn(def []byte) []string {
	set := map[string]bool{}
	for _, m := range placeholderRE.FindAllSubmatch(def, -1) {
		set[string(m[1])] = true
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Substitute replaces every ${Name} in def with values[Name], as CDK's
// DefinitionSubstitutions does (text replacement). It fails when a
// placeholder has no value, when "${" is left over, or when the result is
// not JSON. Values the definition does not use are allowed.
func Substitute(def []byte, values map[string]string) ([]byte, error) {
	var missing []string
	out := placeholderRE.ReplaceAllFunc(def, func(m []byte) []byte {
		name := string(m[2 : len(m)-1])
		v, ok := values[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		return []byte(v)
	})
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("substitute state machine definition: no value for %s", strings.Join(uniq(missing), ", "))
	}
	if i := strings.Index(string(out), "${"); i >= 0 {
		end := min(i+40, len(out))
		return nil, fmt.Errorf("substitute state machine definition: unresolved %q", out[i:end])
	}
	if !json.Valid(out) {
		return nil, fmt.Errorf("substitute state machine definition: the result is not valid JSON (check that numeric placeholders got numbers)")
	}
	return out, nil
}

func uniq(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
