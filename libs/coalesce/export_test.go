package coalesce

// Queued reports how many calls wait for a slot, so tests can order events
// without sleeping.
func Queued[In, Out any](b *Batcher[In, Out]) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}
