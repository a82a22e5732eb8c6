package stack

import (
	"fmt"
	"strings"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// startLatency installs Options.Latency (docs/LOCAL.md, "Latency model")
// once the stack is set up, so that only the pipeline's calls pay it: the
// gateway delays every request, the Lambda registry every invocation (its
// overhead, before the handler), and onTransition every state transition.
func (s *Stack) startLatency() error {
	if s.opts.Latency == nil || s.opts.Latency.Off {
		return nil
	}
	m, err := localaws.NewLatencyModel(*s.opts.Latency)
	if err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	// Not delayed: the admin key (the stack's setup, the EventBridge
	// emulator's deliveries to queues, the stack's and the simulator's
	// observers, cdcctl) and the HealthLake export role, whose writes are
	// part of the export duration model (the emulator makes them holding
	// its lock, which a sleep under synctest would turn into a deadlock).
	m.Exempt(localaws.AccessKeyID, localaws.PrincipalAccessKeyID(string(iampolicy.HealthLakeExport)))
	s.Env.Gateway.SetLatency(m)
	s.Lambdas.SetInvokeLatency(func(string) time.Duration {
		return m.Sample(localaws.ServiceLambda, localaws.OpInvoke)
	})
	return nil
}

// onTransition is the Step Functions emulator's transition hook: it counts
// the transition (cost model) and, with a latency model, waits the
// transition's modelled latency before the state runs.
func (s *Stack) onTransition(executionARN, state string) {
	s.countTransition(executionARN, state)
	m := s.Env.Gateway.Latency()
	if m == nil {
		return
	}
	op := localaws.OpStateTransition
	if strings.Contains(executionARN, ":express:") {
		op = localaws.OpExpressStateTransition
	}
	if d := m.Sample(localaws.ServiceSFN, op); d > 0 {
		time.Sleep(d)
	}
}
