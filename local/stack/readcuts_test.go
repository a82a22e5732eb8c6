package stack

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// TestEveryObjectReadCutPartWayIsResumed: S3 ends part way the first body
// of every object a Lambda reads — export files, the previous window's
// overlap index, the Distributed Map's results, the reconciliation's
// indexes and the export line a repair re-reads. Each reader goes on from
// the byte it reached: two windows and a reconciliation that repairs a
// dropped event finish with no function error at all, and the repair is
// delivered.
func TestEveryObjectReadCutPartWayIsResumed(t *testing.T) {
	t.Parallel()
	st := reconcileStack(t, nil)
	machines := map[string]bool{
		localaws.PrincipalAccessKeyID(string(iampolicy.StateMachine)):          true,
		localaws.PrincipalAccessKeyID(string(iampolicy.ReconcileStateMachine)): true,
	}
	var mu sync.Mutex
	cut := map[string]string{} // path → the principal's key
	st.Env.Gateway.SetBodyCuts(func(service, op string, r *http.Request) (float64, bool) {
		key, _ := localaws.Credential(r)
		if service != localaws.ServiceS3 || op != "GETObject" || !localaws.IsPrincipalAccessKeyID(key) || machines[key] {
			return 0, false
		}
		mu.Lock()
		defer mu.Unlock()
		if _, done := cut[r.URL.Path]; done {
			return 0, false
		}
		cut[r.URL.Path] = key
		return 0.5, true
	})
	defer st.Env.Gateway.SetBodyCuts(nil)

	committed(t, st)
	reconcileNow(t, st)
	putPatient(t, st, "cut-dropped")
	w := committed(t, st)
	if dropDeliveredIndex(t, st, w.RunID) == 0 {
		t.Fatal("the window wrote no delivered index")
	}
	before := st.Delivered.Len()
	r := reconcileNow(t, st)
	if r.Last.Counts.Repairs != 1 || st.Delivered.Len()-before != 1 {
		t.Fatalf("reconciliation: counts %+v, %d events; want the one repair", r.Last.Counts, st.Delivered.Len()-before)
	}
	mu.Lock()
	defer mu.Unlock()
	// Each reader of the stack was among those cut.
	for _, want := range []struct{ reader, path string }{
		{"prepare-change: an export file", "FHIR_EXPORT"},
		{"run-lock: the Distributed Map's results", "/map-results/"},
		{"reconcile: a store index", "/store/"},
		{"reconcile: a delivered index", "/delivered/"},
	} {
		found := false
		for p := range cut {
			found = found || strings.Contains(p, want.path)
		}
		if !found {
			t.Errorf("no read of %s was cut", want.reader)
		}
	}
	for fn, s := range st.Lambdas.Stats() {
		if s.FunctionErrors != 0 {
			t.Errorf("%s: %d function errors", fn, s.FunctionErrors)
		}
	}
}
