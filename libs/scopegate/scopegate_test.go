package scopegate

import (
	"context"
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
		g.mu.Lock()
		waiting := g.in["a"].waiting
		g.mu.Unlock()
		if waiting == 2 {
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
