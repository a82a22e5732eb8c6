package fakesfn

import (
	"context"
	"sync"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/local/asl"
)

// roleRecorder records the role each invocation's context carries.
type roleRecorder struct {
	mu    sync.Mutex
	roles map[string]string
}

func (r *roleRecorder) Invoke(ctx context.Context, fn string, _ []byte) ([]byte, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.roles[fn] = RoleARN(ctx)
	return []byte(`{}`), false, nil
}

// TestTasksCarryTheirMachinesRole: each machine's Task calls, also those of
// its Distributed Map children, carry the role the machine was created with,
// so an embedding can act as that role.
func TestTasksCarryTheirMachinesRole(t *testing.T) {
	rec := &roleRecorder{roles: map[string]string{}}
	em := New(Options{Lambda: rec})
	t.Cleanup(em.Close)
	def := func(fn string) []byte {
		return []byte(`{"StartAt":"M","States":{"M":{"Type":"Map","ItemsPath":"$.items",
		  "ItemProcessor":{"ProcessorConfig":{"Mode":"DISTRIBUTED","ExecutionType":"EXPRESS"},"StartAt":"Call",
		    "States":{"Call":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Parameters":{"FunctionName":"` + fn + `","Payload":{}},"End":true}}},
		  "End":true}}}`)
	}
	for _, m := range []struct{ name, role string }{{"a", "arn:aws:iam::0:role/a"}, {"b", "arn:aws:iam::0:role/b"}} {
		sm, err := em.createMachine(m.name, def("fn-"+m.name), asl.TypeStandard, m.role)
		if err != nil {
			t.Fatal(err)
		}
		ex, err := em.StartExecution(context.Background(), sm.arn, "run", `{"items":[1]}`)
		if err != nil {
			t.Fatal(err)
		}
		waitDone(t, em, ex)
	}
	if rec.roles["fn-a"] != "arn:aws:iam::0:role/a" || rec.roles["fn-b"] != "arn:aws:iam::0:role/b" {
		t.Errorf("roles seen by the tasks = %v", rec.roles)
	}
	if RoleARN(context.Background()) != "" {
		t.Error("a context outside an execution has a role")
	}
}
