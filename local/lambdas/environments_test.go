package lambdas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// envRig registers "env": each environment counts its own invocations and
// answers {"env": its number, "seen": its invocations so far}; "block"
// waits for release, "panic" panics.
type envRig struct {
	r        *Registry
	made     atomic.Int64
	shutdown sync.Map // environment number → times its shutdown ran
	release  chan struct{}
	blocked  chan struct{}
}

func newEnvRig(t *testing.T, opts ...Option) *envRig {
	t.Helper()
	g := &envRig{r: New("us-east-1", "000000000000"), release: make(chan struct{}), blocked: make(chan struct{}, 1)}
	err := g.r.RegisterEnvironments("env", func() (Environment, error) {
		n := g.made.Add(1)
		seen := 0
		return Environment{
			Handler: func(ctx context.Context, in struct{ Do string }) (map[string]int, error) {
				seen++
				switch in.Do {
				case "block":
					g.blocked <- struct{}{}
					<-g.release
				case "panic":
					panic("boom")
				}
				return map[string]int{"env": int(n), "seen": seen}, nil
			},
			Shutdown: func(context.Context) {
				v, _ := g.shutdown.LoadOrStore(n, new(atomic.Int64))
				v.(*atomic.Int64).Add(1)
			},
		}, nil
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func (g *envRig) invoke(t *testing.T, do string) (env, seen int, fnErr bool) {
	t.Helper()
	out, fnErr, err := g.r.Invoke(context.Background(), "env", []byte(`{"Do":"`+do+`"}`))
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	if fnErr {
		return 0, 0, true
	}
	var got map[string]int
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	return got["env"], got["seen"], false
}

func (g *envRig) shutdowns(env int) int64 {
	v, ok := g.shutdown.Load(int64(env))
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

// TestInvocationsReuseAnIdleEnvironmentAndOverlapInNewOnes: one
// invocation at a time per environment; an idle one is reused.
func TestInvocationsReuseAnIdleEnvironmentAndOverlapInNewOnes(t *testing.T) {
	g := newEnvRig(t)
	for i := 1; i <= 3; i++ {
		if env, seen, _ := g.invoke(t, ""); env != 1 || seen != i {
			t.Fatalf("sequential invocation %d ran in environment %d (its invocation %d), want 1 (%d)", i, env, seen, i)
		}
	}
	// Two overlap: the second cannot wait for the first's environment.
	done := make(chan int)
	go func() {
		env, _, _ := g.invoke(t, "block")
		done <- env
	}()
	<-g.blocked
	if env, _, _ := g.invoke(t, ""); env != 2 {
		t.Errorf("an invocation overlapping a busy environment ran in %d, want a new one (2)", env)
	}
	close(g.release)
	if env := <-done; env != 1 {
		t.Errorf("the blocked invocation ran in %d, want 1", env)
	}
	if st := g.r.Stats()["env"]; st.Environments != 2 || st.Invocations != 5 {
		t.Errorf("stats %+v, want 2 environments for 5 invocations", st)
	}
}

// TestPickChoosesTheIdleEnvironment: with two environments idle, the most
// recently used one takes every invocation by default; with
// PickLeastRecent they take turns.
func TestPickChoosesTheIdleEnvironment(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []Option
		want []int
	}{
		{"most recent", nil, []int{1, 1, 1, 1}},
		{"least recent", []Option{WithPick(PickLeastRecent)}, []int{2, 1, 2, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newEnvRig(t, c.opts...)
			// Two overlapping invocations make environments 1 and 2;
			// environment 1 ends last.
			done := make(chan struct{})
			go func() {
				g.invoke(t, "block")
				close(done)
			}()
			<-g.blocked
			g.invoke(t, "")
			close(g.release)
			<-done
			var got []int
			for range c.want {
				env, _, _ := g.invoke(t, "")
				got = append(got, env)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("environments %v, want %v", got, c.want)
			}
		})
	}
}

// TestIdleEnvironmentIsShutDown: an environment idle for IdleShutdown gets
// its shutdown phase; the next invocation makes a new one.
func TestIdleEnvironmentIsShutDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newEnvRig(t, WithIdleShutdown(time.Minute))
		g.invoke(t, "")
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if n := g.shutdowns(1); n != 0 {
			t.Fatalf("shut down after 59 s idle (%d)", n)
		}
		// An invocation resets the idle time.
		g.invoke(t, "")
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if n := g.shutdowns(1); n != 0 {
			t.Fatalf("shut down 59 s after its last invocation (%d)", n)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := g.shutdowns(1); n != 1 {
			t.Fatalf("environment 1 shut down %d times after a minute idle, want 1", n)
		}
		if env, seen, _ := g.invoke(t, ""); env != 2 || seen != 1 {
			t.Errorf("after the shutdown an invocation ran in %d (its %d), want a new environment", env, seen)
		}
		g.r.Shutdown(context.Background())
		if g.shutdowns(2) != 1 || g.shutdowns(1) != 1 {
			t.Errorf("Shutdown: environment 2 shut down %d times, 1 %d times; want once each", g.shutdowns(2), g.shutdowns(1))
		}
		if st := g.r.Stats()["env"]; st.Environments != 2 || st.EnvironmentsShutDown != 2 {
			t.Errorf("stats %+v", st)
		}
	})
}

// TestCrashedEnvironmentIsReplacedWithoutShutdown: a panic, an injected
// crash and a timeout end the runtime: no shutdown phase, and the next
// invocation runs in a new environment; a handler error keeps it.
func TestCrashedEnvironmentIsReplacedWithoutShutdown(t *testing.T) {
	g := newEnvRig(t)
	g.invoke(t, "")
	if _, _, fnErr := g.invoke(t, "panic"); !fnErr {
		t.Fatal("a panic is not a function error")
	}
	if env, _, _ := g.invoke(t, ""); env != 2 {
		t.Errorf("after a panic the invocation ran in %d, want 2", env)
	}
	g.r.SetFaults(crashAll{})
	if _, _, fnErr := g.invoke(t, ""); !fnErr {
		t.Fatal("an injected crash is not a function error")
	}
	g.r.SetFaults(nil)
	if env, _, _ := g.invoke(t, ""); env != 3 {
		t.Errorf("after a crash the invocation ran in %d, want 3", env)
	}
	if g.shutdowns(1)+g.shutdowns(2) != 0 {
		t.Error("a crashed environment ran its shutdown phase")
	}
}

type crashAll struct{}

func (crashAll) CrashBefore(string) bool { return true }
func (crashAll) CrashAfter(string) bool  { return false }

// TestFailedInitIsAnInitError: an init that fails answers the invocation
// with Runtime.InitError, and the next invocation tries again.
func TestFailedInitIsAnInitError(t *testing.T) {
	r := New("us-east-1", "000000000000")
	fail := true
	if err := r.RegisterEnvironments("f", func() (Environment, error) {
		if fail {
			return Environment{}, errors.New("no configuration")
		}
		return Environment{Handler: func() (string, error) { return "ok", nil }}, nil
	}); err != nil {
		t.Fatal(err)
	}
	out, fnErr, err := r.Invoke(context.Background(), "f", nil)
	var e map[string]string
	_ = json.Unmarshal(out, &e)
	if err != nil || !fnErr || e["errorType"] != ErrorTypeInit {
		t.Fatalf("failed init: %s, functionError %v, %v", out, fnErr, err)
	}
	fail = false
	if out, fnErr, err := r.Invoke(context.Background(), "f", nil); err != nil || fnErr || string(out) != `"ok"` {
		t.Errorf("after the init succeeds: %s, %v, %v", out, fnErr, err)
	}
}
