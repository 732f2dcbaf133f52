package postgres

// Waiters is how many callers of this replica wait for key's lock.
func Waiters(s *Store, key string) int {
	s.released.mu.Lock()
	defer s.released.mu.Unlock()
	if w, ok := s.released.m[key]; ok {
		return w.n
	}
	return 0
}
