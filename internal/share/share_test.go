package share_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
	"github.com/healthlake-cdc/healthlake-cdc/internal/share"
)

func TestOfDividesTheShareAmongLiveChildren(t *testing.T) {
	for _, c := range []struct {
		total float64
		live  int
		want  float64
	}{{200, 10, 20}, {200, 2, 100}, {200, 1, 200}, {200, 0, 200}} {
		if got := share.Of(c.total, c.live); got != c.want {
			t.Errorf("Of(%v, %d) = %v, want %v", c.total, c.live, got, c.want)
		}
	}
	a, again, b := share.ChildID("exports/a"), share.ChildID("exports/a"), share.ChildID("exports/b")
	if a == b || a != again || len(a) != 16 {
		t.Errorf("ChildID: %q, %q, %q; want a stable 16-hex name per batch", a, again, b)
	}
}

// TestBoardCountsLiveChildren: over real DynamoDB requests (minidyn), beats
// count the children of one run only, a retried child is counted once, a
// child that leaves or whose lease expires stops counting.
func TestBoardCountsLiveChildren(t *testing.T) {
	env := localawstest.Start(t)
	db := dynamodb.NewFromConfig(env.Config())
	ctx := context.Background()
	if err := runlock.CreateTable(ctx, db, "cdc"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	b := &share.Board{DB: db, Table: "cdc", Lease: 6 * time.Second, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	beat := func(run, child string) int {
		t.Helper()
		n, err := b.Beat(ctx, run, child)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := beat("run-1", "a"); n != 1 {
		t.Fatalf("first beat: %d live", n)
	}
	beat("run-1", "b")
	beat("run-2", "x") // another run's children do not count
	if n := beat("run-1", "c"); n != 3 {
		t.Fatalf("three children: %d live", n)
	}
	if n := beat("run-1", "c"); n != 3 {
		t.Fatalf("a retried child counted twice: %d live", n)
	}
	if err := b.Leave(ctx, "run-1", "b"); err != nil {
		t.Fatal(err)
	}
	if n := beat("run-1", "a"); n != 2 {
		t.Fatalf("after b left: %d live", n)
	}
	advance(4 * time.Second)
	beat("run-1", "a") // c last beat 4 s ago: still live
	advance(3 * time.Second)
	if n := beat("run-1", "a"); n != 1 {
		t.Fatalf("c's lease expired 1 s ago: %d live, want only a", n)
	}
}

// TestKeepBeatsBeforeItReturnsAndLeavesAtStop: Keep gives the child its
// part before it returns (so it never starts above it), follows the number
// of live siblings at each beat, and stop leaves the board.
func TestKeepBeatsBeforeItReturnsAndLeavesAtStop(t *testing.T) {
	env := localawstest.Start(t)
	db := dynamodb.NewFromConfig(env.Config())
	ctx := context.Background()
	if err := runlock.CreateTable(ctx, db, "cdc"); err != nil {
		t.Fatal(err)
	}
	b := &share.Board{DB: db, Table: "cdc"}
	if _, err := b.Beat(ctx, "run-1", "sibling"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var rates []float64
	stop := b.Keep(ctx, "run-1", "scan", 100, 10*time.Millisecond, func(rate float64, live int) {
		mu.Lock()
		rates = append(rates, rate)
		mu.Unlock()
	}, func(err error) { t.Errorf("warned: %v", err) })
	mu.Lock()
	first := append([]float64(nil), rates...)
	mu.Unlock()
	if len(first) != 1 || first[0] != 50 {
		t.Fatalf("rates when Keep returned: %v, want [50] (the share of two)", first)
	}
	if err := b.Leave(ctx, "run-1", "sibling"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		last := rates[len(rates)-1]
		mu.Unlock()
		if last == 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sibling left, the rate stayed at %v", last)
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	if n, err := b.Beat(ctx, "run-1", "other"); err != nil || n != 1 {
		t.Fatalf("live after stop: %d, %v; want the new child alone", n, err)
	}
}
