package websession

// CopySize is copySize, for the tests to work out budgets.
func CopySize(s *Session) int64 { return copySize(s) }

// Copies returns how many copies m keeps, the byte total it counts, and
// the sum of their sizes worked out again from what they hold now.
func (m *Manager) Copies() (n int, total, sum int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.seen {
		sum += copySize(s)
	}
	return len(m.seen), m.seenBytes, sum
}
