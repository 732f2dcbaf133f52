package scopegate

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A scope's runs go on up to the limit; up to perScope more wait, each
// taking the slot a run leaves, and the rest are turned away at once, as
// are waiters whose wait ends first. Other scopes go past, and wait only
// while fewer than total wait in all.
func TestGate(t *testing.T) {
	ctx := context.Background()
	g := New(2, 2, 3)
	for range 2 {
		if !g.Enter(ctx, "a", time.Hour) {
			t.Fatal("a run under the limit was turned away")
		}
	}
	if !g.Enter(ctx, "b", time.Hour) {
		t.Fatal("another scope's run was turned away")
	}
	entered := make(chan bool, 2)
	for range 2 {
		go func() { entered <- g.Enter(ctx, "a", time.Hour) }()
	}
	// Both wait: a third waiter is one too many.
	for {
		if g.Waiting("a") == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if g.Enter(ctx, "a", time.Hour) {
		t.Fatal("a run past the scope's waiters went on")
	}
	if !g.Enter(ctx, "b", time.Hour) {
		t.Fatal("another scope's run was turned away")
	}
	// b is full, and three wait in all when one of b's waits.
	bWaits := make(chan bool, 1)
	go func() { bWaits <- g.Enter(ctx, "b", time.Hour) }()
	for {
		g.mu.Lock()
		waiting := g.waiting
		g.mu.Unlock()
		if waiting == 3 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if g.Enter(ctx, "b", time.Hour) {
		t.Fatal("a run past the waiters in all went on")
	}
	g.Leave("b")
	if !<-bWaits {
		t.Fatal("b's waiter was turned away when a run left")
	}
	g.Leave("a")
	if !<-entered {
		t.Fatal("a waiter was turned away when a run left")
	}
	select {
	case ok := <-entered:
		t.Fatalf("both waiters answered (%v) after one run left", ok)
	default:
	}
	g.Leave("a")
	if !<-entered {
		t.Fatal("the second waiter was turned away when a run left")
	}
	// Full again: a waiter whose wait ends is turned away.
	if g.Enter(ctx, "a", time.Millisecond) {
		t.Fatal("a run of a full scope went on when its wait ended")
	}
	g.Leave("a")
	g.Leave("a")
	g.Leave("b")
	g.Leave("b")
	if len(g.in) != 0 {
		t.Errorf("idle scopes left: %v", g.in)
	}
}

// A freed slot goes to the work waiting longest, and to it alone.
func TestWaitersGoFirstComeFirstServed(t *testing.T) {
	ctx := context.Background()
	g := New(1, 2, 2)
	if !g.Enter(ctx, "a", time.Hour) {
		t.Fatal("the first run was turned away")
	}
	first, second := make(chan bool, 1), make(chan bool, 1)
	go func() { first <- g.Enter(ctx, "a", time.Hour) }()
	for g.Waiting("a") != 1 {
		time.Sleep(time.Millisecond)
	}
	go func() { second <- g.Enter(ctx, "a", time.Hour) }()
	for g.Waiting("a") != 2 {
		time.Sleep(time.Millisecond)
	}
	g.Leave("a")
	if !<-first {
		t.Fatal("the first waiter was turned away")
	}
	if g.Waiting("a") != 1 || len(second) != 0 {
		t.Fatal("the second waiter went on with the first's slot")
	}
	g.Leave("a")
	if !<-second {
		t.Fatal("the second waiter was turned away")
	}
	g.Leave("a")
	if len(g.in) != 0 || g.waiting != 0 {
		t.Errorf("left behind: %v, %d waiting", g.in, g.waiting)
	}
}

// Under churn, with waits ending as slots are handed over, no scope ever
// runs more than its limit and nothing is left behind.
func TestNeverPastTheLimit(t *testing.T) {
	ctx := context.Background()
	const limit = 3
	g := New(limit, 8, 12)
	var running [2]atomic.Int32
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			key := []string{"a", "b"}[i%2]
			if !g.Enter(ctx, key, time.Duration(i%5)*100*time.Microsecond) {
				return
			}
			if n := running[i%2].Add(1); n > limit {
				t.Errorf("%d runs of %s at once", n, key)
			}
			time.Sleep(50 * time.Microsecond)
			running[i%2].Add(-1)
			g.Leave(key)
		})
	}
	wg.Wait()
	if len(g.in) != 0 || g.waiting != 0 {
		t.Errorf("left behind: %v, %d waiting", g.in, g.waiting)
	}
}
