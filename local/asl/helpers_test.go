package asl

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"testing"
	"time"
)

type taskFunc func(ctx context.Context, call TaskCall) (any, error)

func (f taskFunc) RunTask(ctx context.Context, call TaskCall) (any, error) { return f(ctx, call) }

type memStore struct {
	mu      sync.Mutex
	objects map[string][]byte
}

func newMemStore() *memStore { return &memStore{objects: map[string][]byte{}} }

func (m *memStore) GetObject(_ context.Context, bucket, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objects[bucket+"/"+key]
	if !ok {
		return nil, &Error{Name: "NoSuchKey", Cause: key}
	}
	return b, nil
}

func (m *memStore) PutObject(_ context.Context, bucket, key string, body []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objects[bucket+"/"+key] = append([]byte(nil), body...)
	return nil
}

func (m *memStore) get(t *testing.T, bucket, key string) []byte {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objects[bucket+"/"+key]
	if !ok {
		keys := []string{}
		for k := range m.objects {
			keys = append(keys, k)
		}
		t.Fatalf("object %s/%s not written; have %v", bucket, key, keys)
	}
	return b
}

// start parses def and starts an execution with cfg.
func start(t *testing.T, cfg Config, def, input string) *Execution {
	t.Helper()
	m, err := ParseDefinition([]byte(def))
	if err != nil {
		t.Fatalf("parse definition: %v", err)
	}
	r := NewRunner(cfg)
	x, err := r.Start(context.Background(), m, StartInput{
		ExecutionARN:     "arn:aws:states:us-east-1:000000000000:execution:test:run-1",
		Name:             "run-1",
		StateMachineARN:  "arn:aws:states:us-east-1:000000000000:stateMachine:test",
		StateMachineName: "test",
		RoleARN:          "arn:aws:iam::000000000000:role/sfn",
		Input:            input,
	})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return x
}

// finish waits for the execution (a safety bound, not a timing assertion).
func finish(t *testing.T, x *Execution) ExecutionInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := x.Wait(ctx)
	if err != nil {
		t.Fatalf("execution did not finish: %v; history %v", err, eventTypes(x.History()))
	}
	return info
}

func runDef(t *testing.T, cfg Config, def, input string) ExecutionInfo {
	t.Helper()
	return finish(t, start(t, cfg, def, input))
}

func eventTypes(evs []Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
		if e.StateName != "" {
			out[i] += "(" + e.StateName + ")"
		}
	}
	return out
}

// jsonEq fails unless got and want are the same JSON.
func jsonEq(t *testing.T, what, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("%s: %q is not JSON: %v", what, got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: want %q is not JSON: %v", what, want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s =\n  %s\nwant\n  %s", what, got, want)
	}
}

func fastCfg(tasks TaskRunner) Config {
	return Config{Tasks: tasks, TimeScale: 0.0001}
}
