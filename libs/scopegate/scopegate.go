// Package scopegate admits work of many scopes (partners, accounts) up to
// a limit each, in one process, with a short bounded wait for a slot.
//
// Work of a full scope otherwise goes on to ask a shared store whether it
// may run, only to learn it may not: with thousands waiting, that churn
// is most of what the process and its database do, and the scope's slots
// stand empty until the refused work comes back. A Gate makes it wait for
// a slot here instead, up to a bound; only so many wait, for a scope and
// in all, so one scope's flood leaves the rest to others, and the rest is
// turned away at once. The store stays the rule across replicas: a Gate
// only spares it what it would refuse.
package scopegate

import (
	"context"
	"sync"
	"time"
)

// Gate counts each scope's work in flight, up to its limit. A slot freed
// while work of its scope waits passes straight to the longest waiting:
// one wake-up a slot, first come first served, however many wait.
type Gate struct {
	limit, perScope, total int
	mu                     sync.Mutex
	waiting                int // in all scopes
	in                     map[string]*scope
}

type scope struct {
	running int
	// queue is the work waiting, oldest first; ready is closed to hand
	// one a slot.
	queue []chan struct{}
}

// New returns a gate of limit slots a scope, with up to perScope of a
// scope's work and total of all scopes' waiting for one.
func New(limit, perScope, total int) *Gate {
	return &Gate{limit: limit, perScope: perScope, total: total, in: map[string]*scope{}}
}

// Enter reports whether work of key may go on: at once when its scope
// has a slot, else after waiting up to wait for one; false when it has
// none by then, or too many wait already, or ctx ended. Work that entered
// calls Leave when it ends.
func (g *Gate) Enter(ctx context.Context, key string, wait time.Duration) bool {
	g.mu.Lock()
	s := g.in[key]
	if s == nil {
		s = &scope{}
		g.in[key] = s
	}
	if s.running < g.limit {
		s.running++
		g.mu.Unlock()
		return true
	}
	if len(s.queue) >= g.perScope || g.waiting >= g.total {
		g.mu.Unlock()
		return false
	}
	ready := make(chan struct{})
	s.queue = append(s.queue, ready)
	g.waiting++
	g.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ready:
		return true
	case <-timer.C:
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-ready:
		// Handed a slot as the wait ended: it is this work's.
		return true
	default:
	}
	for i, r := range s.queue {
		if r == ready {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			break
		}
	}
	g.waiting--
	g.forget(key, s)
	return false
}

// Leave ends work that entered: its slot goes to the work of its scope
// waiting longest, if any.
func (g *Gate) Leave(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.in[key]
	if len(s.queue) > 0 {
		next := s.queue[0]
		s.queue = s.queue[1:]
		g.waiting--
		close(next)
		return
	}
	s.running--
	g.forget(key, s)
}

// forget drops an idle scope's entry.
func (g *Gate) forget(key string, s *scope) {
	if s.running == 0 && len(s.queue) == 0 {
		delete(g.in, key)
	}
}

// Waiting is how much of key's work waits for a slot now.
func (g *Gate) Waiting(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s := g.in[key]; s != nil {
		return len(s.queue)
	}
	return 0
}
