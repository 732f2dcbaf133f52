package gateway

import "time"

// SetLocalLimiterClock makes l read the time from now, so tests can move it.
func SetLocalLimiterClock(l *LocalLimiter, now func() time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.now = now
}

// LocalLimiterKeys is how many keys l holds a bucket for.
func LocalLimiterKeys(l *LocalLimiter) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
