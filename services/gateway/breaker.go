package gateway

import (
	"sync/atomic"
	"time"
)

// breaker keeps calls off a shared store (Redis) for a cool-down after one
// of them fails. A Redis that refuses connections fails in microseconds,
// but a hung one costs every call its full timeout: without the cool-down
// every request would pay it, and without the single probe every request
// arriving as a cool-down ends would pay it again, each second.
//
// Its zero value trusts the store.
type breaker struct {
	// downUntil is when the store may be tried again (UnixNano), or 0 while
	// it is trusted.
	downUntil atomic.Int64
}

// defaultCooldown is the cool-down of a store whose user sets none.
const defaultCooldown = time.Second

// cooldownOr is d, or defaultCooldown when d is not positive: a zero
// cool-down would send every request to a dead store.
func cooldownOr(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return defaultCooldown
}

// allow reports whether to call the store. After a cool-down exactly one
// caller is let through to probe it; the others keep off until the probe
// succeeds, or until one more cool-down has passed, so a probe whose
// caller never reports back cannot keep the store out for good.
func (b *breaker) allow(now time.Time, cooldown time.Duration) bool {
	until := b.downUntil.Load()
	if until == 0 {
		return true
	}
	if now.UnixNano() < until {
		return false
	}
	return b.downUntil.CompareAndSwap(until, now.Add(cooldown).UnixNano())
}

// succeeded trusts the store again. It reports whether the store had been
// kept out, so the caller can log the recovery once.
func (b *breaker) succeeded() bool {
	if b.downUntil.Load() == 0 {
		return false
	}
	return b.downUntil.Swap(0) != 0
}

// failed keeps the store out for a cool-down from now. It reports whether
// the store had been trusted until then, so the caller can log the outage
// once rather than once per request in flight.
func (b *breaker) failed(now time.Time, cooldown time.Duration) bool {
	return b.downUntil.Swap(now.Add(cooldown).UnixNano()) == 0
}
