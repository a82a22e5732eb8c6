package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/healthlake-cdc/healthlake-cdc/cdk/pipeline"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent"
)

// Lambdas lists the Lambda functions of the pipeline (pipeline.Lambdas), by the name of
// their cmd/ directory and of their build/<name>/bootstrap binary.
var Lambdas = pipeline.Lambdas

// Synth-time settings, read from CDK context (cdk.json or `-c key=value`).
// Everything that may differ between deployments of the same build is a
// CloudFormation parameter instead (see params.go and docs/DEPLOY.md).
const (
	// ContextLambdaDir names the directory holding <name>/bootstrap per Lambda.
	ContextLambdaDir = "lambdaDir"
	// ContextASLFile names the state machine definition file.
	ContextASLFile = "aslFile"
	// ContextStackName names the stack; it is also the pipeline name (the
	// `Pipeline` metric dimension and CDC_PIPELINE_NAME).
	ContextStackName = "stackName"
	// ContextSettings overrides settings of internal/stackconfig: an object
	// of name → value in cdk.json, or the same object as a JSON string with
	// `-c settings='{"RunTimeout":"12h"}'`.
	ContextSettings = "settings"
	// ContextEventSource and ContextDetailType set the `source` and
	// `detail-type` of every change event: the consumers' contract, which
	// the schema registry and consumer rules are built from at synth time.
	ContextEventSource = "eventSource"
	ContextDetailType  = "detailType"
	// ContextPermissionsBoundary names the IAM policy (a name, or a policy
	// ARN) set as the permissions boundary of every role the stack creates,
	// for accounts whose guardrails refuse iam:CreateRole without one.
	ContextPermissionsBoundary = "permissionsBoundary"
	// ContextVPCSubnetIDs and ContextVPCSecurityGroupIDs place every
	// function in the account's VPC: comma-separated subnet and security
	// group ids, both or neither (pipeline.VPC).
	ContextVPCSubnetIDs        = "vpcSubnetIds"
	ContextVPCSecurityGroupIDs = "vpcSecurityGroupIds"
	// ContextClaimCheckReaders names other AWS accounts, comma-separated,
	// whose principals may read the claim-check objects
	// (pipeline.Props.ClaimCheckReaders).
	ContextClaimCheckReaders = "claimCheckReaderAccounts"
)

// Defaults of the context values, relative to the cdk/ directory.
const (
	DefaultLambdaDir = "../build"
	DefaultASLFile   = "../statemachine/cdc.asl.json"
	DefaultStackName = "HealthLakeCdc"
)

// Config is what the stack needs at synth time.
type Config struct {
	// StackName is the CloudFormation stack name and the pipeline name.
	StackName string
	// LambdaDir holds one directory per Lambda with a linux/arm64 `bootstrap`.
	LambdaDir string
	// ASLFile is the state machine definition with ${...} placeholders.
	ASLFile string
	// EventSource and DetailType are the `source` and `detail-type` of
	// every change event; empty means cdcevent.DefaultSource and
	// DefaultDetailType.
	EventSource, DetailType string
	// Settings is the deployed configuration shared with cdc-local: Lambda
	// timeouts and memory, queue limits, the export wait, the run timeout
	// and lease, the PutEvents budget.
	Settings stackconfig.Config
	// PermissionsBoundary is the managed policy, by name or ARN, every role
	// of the stack gets as its permissions boundary; "" sets none.
	PermissionsBoundary string
	// VPC places the functions in the account's subnets; nil: outside any VPC.
	VPC *pipeline.VPC
	// ClaimCheckReaders are the other accounts that may read claim-checks.
	ClaimCheckReaders []string
	// Region is where the stack will be deployed when synth knows it
	// (CDK_DEFAULT_REGION, which the CDK CLI sets from the credentials'
	// profile); "" when it does not. The template stays Region-agnostic;
	// the Region only lets synth compare PutEventsQuota with the Region's
	// default quota (stackconfig.QuotaAdvice) and warn.
	Region string
}

// DefaultConfig returns the configuration used when no context is given.
func DefaultConfig() Config {
	return Config{StackName: DefaultStackName, LambdaDir: DefaultLambdaDir, ASLFile: DefaultASLFile,
		EventSource: cdcevent.DefaultSource, DetailType: cdcevent.DefaultDetailType,
		Settings: stackconfig.Default()}
}

// ConfigFromContext overlays the context values that are set (non-empty
// strings, and the settings object) on the defaults. lookup returns the raw
// context value or nil. A settings value that is not an object of names to
// values, or names an unknown setting, is an error.
func ConfigFromContext(lookup func(key string) any) (Config, error) {
	c := DefaultConfig()
	set := func(key string, dst *string) {
		if v, ok := lookup(key).(string); ok && v != "" {
			*dst = v
		}
	}
	set(ContextStackName, &c.StackName)
	set(ContextLambdaDir, &c.LambdaDir)
	set(ContextASLFile, &c.ASLFile)
	set(ContextEventSource, &c.EventSource)
	set(ContextDetailType, &c.DetailType)
	set(ContextPermissionsBoundary, &c.PermissionsBoundary)
	var subnets, groups string
	set(ContextVPCSubnetIDs, &subnets)
	set(ContextVPCSecurityGroupIDs, &groups)
	if subnets != "" || groups != "" {
		c.VPC = &pipeline.VPC{SubnetIDs: splitIDs(subnets), SecurityGroupIDs: splitIDs(groups)}
	}
	var readers string
	set(ContextClaimCheckReaders, &readers)
	c.ClaimCheckReaders = splitIDs(readers)
	values, err := settingsFromContext(lookup(ContextSettings))
	if err != nil {
		return c, err
	}
	for _, k := range sortedKeys(values) {
		if err := c.Settings.Set(k, values[k]); err != nil {
			return c, fmt.Errorf("context %s: %w", ContextSettings, err)
		}
	}
	return c, nil
}

// settingsFromContext accepts the settings context as an object (cdk.json)
// or as a JSON string holding one (-c on the command line); values may be
// strings or numbers.
func settingsFromContext(v any) (map[string]string, error) {
	if v == nil {
		return nil, nil
	}
	if s, ok := v.(string); ok {
		if strings.TrimSpace(s) == "" {
			return nil, nil
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			return nil, fmt.Errorf("context %s: not a JSON object of setting names to values: %w", ContextSettings, err)
		}
		v = m
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("context %s: want an object of setting names to values, got %T", ContextSettings, v)
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		switch x := x.(type) {
		case string:
			out[k] = x
		case float64:
			out[k] = strconv.FormatFloat(x, 'f', -1, 64)
		default:
			return nil, fmt.Errorf("context %s: %s: want a string or a number, got %T", ContextSettings, k, x)
		}
	}
	return out, nil
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Validate checks the values (validateValues) and that every input file
// exists, so that a missing build fails with a hint instead of a jsii stack
// trace.
func (c Config) Validate() error {
	if err := c.validateValues(); err != nil {
		return err
	}
	for _, l := range pipeline.LambdasOf(c.Settings) {
		p := filepath.Join(c.LambdaDir, l, "bootstrap")
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			return fmt.Errorf("lambda %s: %s is missing (run `make build`, or set -c %s=DIR)", l, p, ContextLambdaDir)
		}
	}
	if _, err := os.Stat(c.ASLFile); err != nil {
		return fmt.Errorf("state machine definition: %w (set -c %s=FILE)", err, ContextASLFile)
	}
	return nil
}

// validateValues checks what the configuration says, not the files it
// names: the stack name, the settings (stackconfig.Config.Validate), the
// event names, the permissions boundary and the VPC placement.
func (c Config) validateValues() error {
	if err := ValidateStackName(c.StackName); err != nil {
		return err
	}
	if err := c.Settings.Validate(); err != nil {
		return err
	}
	if err := ValidateEventNames(c.eventNames()); err != nil {
		return err
	}
	if err := ValidatePermissionsBoundary(c.PermissionsBoundary); err != nil {
		return err
	}
	if err := pipeline.CheckClaimCheckReaders(c.ClaimCheckReaders); err != nil {
		return fmt.Errorf("%w (set -c %s=ACCOUNT,ACCOUNT)", err, ContextClaimCheckReaders)
	}
	return ValidateVPC(c.VPC)
}

// stackNameRE is CloudFormation's stack name: a letter, then letters,
// digits and hyphens (CreateStack StackName, at most 128 characters).
var stackNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]*$`)

// ValidateStackName refuses a stackName CloudFormation, or one of the names
// the pipeline derives from it (pipeline.CheckName: the event archive's 48
// characters allow 41), would refuse at deploy time, naming the context key.
func ValidateStackName(name string) error {
	if name == "" {
		return fmt.Errorf("empty stack name (set -c %s=NAME)", ContextStackName)
	}
	if !stackNameRE.MatchString(name) || len(name) > 128 {
		return fmt.Errorf("stack name %q: want a letter, then letters, digits and '-', at most %d characters (set -c %s=NAME)",
			name, pipeline.MaxNameLength, ContextStackName)
	}
	if err := pipeline.CheckName(name); err != nil {
		return fmt.Errorf("%s: %w (set -c %s=NAME)", ContextStackName, err, ContextStackName)
	}
	return nil
}

// policyNameRE is an IAM managed policy's name (CreatePolicy PolicyName:
// 1–128 of letters, digits and +=,.@_-); CDK's ${Qualifier} placeholder
// stands for the bootstrap qualifier. policyARNRE is a customer or AWS
// managed policy's ARN, with an optional path.
var (
	policyNameRE = regexp.MustCompile(`^(?:[\w+=,.@-]|\$\{Qualifier\})+$`)
	policyARNRE  = regexp.MustCompile(`^arn:aws[a-z-]*:iam::(?:\d{12}|aws|\$\{AWS::AccountId\}):policy/(?:[\w+=,.@-]+/)*[\w+=,.@-]+$`)
)

// ValidatePermissionsBoundary accepts "" (no boundary), a managed policy's
// name or its ARN, and refuses anything CloudFormation would refuse when it
// creates the first role — after the bucket, key and table already exist.
func ValidatePermissionsBoundary(v string) error {
	if v == "" {
		return nil
	}
	if strings.HasPrefix(v, "arn:") {
		if !policyARNRE.MatchString(v) {
			return fmt.Errorf("permissions boundary %q: not an IAM policy ARN (arn:aws:iam::ACCOUNT:policy/NAME) (set -c %s=NAME|ARN)", v, ContextPermissionsBoundary)
		}
		return nil
	}
	if len(v) > 128 || !policyNameRE.MatchString(v) {
		return fmt.Errorf("permissions boundary %q: want a managed policy name (at most 128 of letters, digits and +=,.@_-) or its ARN (set -c %s=NAME|ARN)", v, ContextPermissionsBoundary)
	}
	return nil
}

// splitIDs splits a comma-separated list of ids, dropping blanks.
func splitIDs(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// ValidateVPC checks the functions' VPC placement (pipeline.VPC.Check) and
// names the context keys to fix.
func ValidateVPC(v *pipeline.VPC) error {
	if v == nil {
		return nil
	}
	if err := v.Check(); err != nil {
		return fmt.Errorf("%w (set -c %s=subnet-…,subnet-… -c %s=sg-…)", err, ContextVPCSubnetIDs, ContextVPCSecurityGroupIDs)
	}
	return nil
}

// readCDKJSONContext returns the "context" object of a cdk.json file, or nil.
// The CDK CLI passes cdk.json's context to the app itself; `go run .` without
// the CLI reads it here so that both paths synthesize the same template.
func readCDKJSONContext(path string) map[string]any {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var f struct {
		Context map[string]any `json:"context"`
	}
	if json.Unmarshal(b, &f) != nil {
		return nil
	}
	return f.Context
}

// nodeEOLWarningEnv silences jsii's banner about the machine's Node.js
// release; jsii expects the silenced major versions, comma-separated ("20"),
// so the value 1 does not silence it.
const nodeEOLWarningEnv = "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"

// silenceNodeWarning makes sure the jsii runtime starts with Node 20 listed
// in nodeEOLWarningEnv. jsii-runtime-go fixes the child's environment when the
// program starts, so a later os.Setenv has no effect: when the variable lacks
// "20", the program re-executes itself once with it added. If that fails the
// program simply goes on (the banner is cosmetic).
func silenceNodeWarning() {
	v := os.Getenv(nodeEOLWarningEnv)
	for _, f := range strings.Split(v, ",") {
		if strings.TrimSpace(f) == "20" {
			return
		}
	}
	if v != "" {
		v += ","
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	env := append(os.Environ(), nodeEOLWarningEnv+"="+v+"20")
	_ = syscall.Exec(exe, os.Args, env)
}

// eventNames returns the event source and detail type, defaults for empty ones.
func (c Config) eventNames() (source, detailType string) {
	source, detailType = c.EventSource, c.DetailType
	if source == "" {
		source = cdcevent.DefaultSource
	}
	if detailType == "" {
		detailType = cdcevent.DefaultDetailType
	}
	return source, detailType
}

// ValidateEventNames checks a `source` and `detail-type` of the change
// events (pipeline.ValidateEventNames) and names the context keys to fix.
func ValidateEventNames(source, detailType string) error {
	if err := pipeline.ValidateEventNames(source, detailType); err != nil {
		return fmt.Errorf("%w (set -c %s=NAME, -c %s=TEXT)", err, ContextEventSource, ContextDetailType)
	}
	return nil
}
