package store

import (
	"slices"
	"sync"

	"github.com/vdibroker/vdibroker"
)

// hostCache answers HostByCredential on SQLite from memory. Every heartbeat
// authenticates with a lookup by credential hash; on a SQLite read
// connection each such read, coming after the group committer's latest
// commit, threw away and re-read the connection's page cache, which was a
// fifth of the broker's CPU at 1,000 heartbeats/s.
//
// It is coherent because an embedded SQLite file has one broker process,
// and all of that process's writes run one at a time on the single writer
// connection (writeOnce): every write transaction names the hosts it
// changes (tx.touch, tx.touchPool), and writeOnce drops their entries
// before its commit and again after it. A write that knows the host as it
// committed it (RegisterHost, ApplyHeartbeat) stores that copy after the
// commit, but only when no other write transaction has begun since, so a
// later write's change is never overwritten with an older copy. A read that
// missed stores what it read only when no write transaction began while it
// read. So an entry is never older than the database, and a deleted or
// re-keyed host's old credential stops working as soon as the write that
// deleted or re-keyed it commits.
//
// PostgreSQL has no cache: other replicas write the same rows.
type hostCache struct {
	mu sync.Mutex
	// seq counts write transactions' commit steps (before and after
	// commit); a copy is stored only if seq is what it was when the copy
	// was read.
	seq    uint64
	byKey  map[string]*cachedHost // hostKey(pool, name)
	byCred map[string]*cachedHost // credential hash
}

type cachedHost struct {
	key, cred string
	host      *vdibroker.SessionHost
}

func newHostCache() *hostCache {
	return &hostCache{byKey: map[string]*cachedHost{}, byCred: map[string]*cachedHost{}}
}

// get returns a copy of the cached host of cred, or nil, and the sequence
// number a read that missed passes to fill.
func (c *hostCache) get(cred string) (*vdibroker.SessionHost, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.byCred[cred]; e != nil {
		return cloneHost(e.host), c.seq
	}
	return nil, c.seq
}

// fill stores h, read from the database under credential cred, unless a
// write transaction began since seq was returned by get.
func (c *hostCache) fill(cred string, h *vdibroker.SessionHost, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seq == seq {
		c.put(cred, h)
	}
}

func (c *hostCache) put(cred string, h *vdibroker.SessionHost) {
	key := hostKey(h.HostPool, h.Name)
	c.dropKey(key)
	if old := c.byCred[cred]; old != nil {
		c.dropKey(old.key)
	}
	e := &cachedHost{key: key, cred: cred, host: cloneHost(h)}
	c.byKey[key] = e
	c.byCred[cred] = e
}

func (c *hostCache) dropKey(key string) {
	if e := c.byKey[key]; e != nil {
		delete(c.byKey, key)
		delete(c.byCred, e.cred)
	}
}

// drop removes what w touched and returns the sequence number after it.
func (c *hostCache) drop(w *cacheWrites) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(w)
	c.seq++
	return c.seq
}

func (c *hostCache) dropLocked(w *cacheWrites) {
	if w.hostsWritten && len(w.keys) == 0 && len(w.pools) == 0 {
		clear(c.byKey)
		clear(c.byCred)
		return
	}
	for key := range w.keys {
		c.dropKey(key)
	}
	for pool := range w.pools {
		for key, e := range c.byKey {
			if e.host.HostPool == pool {
				c.dropKey(key)
			}
		}
	}
}

// committed is writeOnce's step after a successful commit: drop what w
// touched again (a read may have filled it from the snapshot before the
// commit) and store w's copies if no write transaction began since the one
// before the commit (whose drop returned seq).
func (c *hostCache) committed(w *cacheWrites, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(w)
	if c.seq == seq {
		for _, p := range w.puts {
			c.put(p.cred, p.host)
		}
	}
	c.seq++
}

// cacheWrites is what one write transaction changed of session_hosts.
type cacheWrites struct {
	keys  map[string]bool // hostKey
	pools map[string]bool // every host of the pool
	puts  []cachedHost    // copies as committed, stored after the commit
	// hostsWritten: a statement changed session_hosts or host_counts (set
	// by tx.exec). A transaction that did so without naming the hosts
	// empties the cache: a safety net for a write path that forgets
	// tx.touch.
	hostsWritten bool
}

func (w *cacheWrites) empty() bool {
	return len(w.keys) == 0 && len(w.pools) == 0 && len(w.puts) == 0 && !w.hostsWritten
}

// touch records that the transaction changes a host's row (or deletes it).
func (t *tx) touch(pool, name string) {
	if t.cw == nil {
		return
	}
	if t.cw.keys == nil {
		t.cw.keys = map[string]bool{}
	}
	t.cw.keys[hostKey(pool, name)] = true
}

// touchPool records that the transaction changes or deletes every host of
// a pool.
func (t *tx) touchPool(pool string) {
	if t.cw == nil {
		return
	}
	if t.cw.pools == nil {
		t.cw.pools = map[string]bool{}
	}
	t.cw.pools[pool] = true
}

// cacheHost records h, as this transaction leaves it, under its credential
// hash, to be cached once the transaction commits.
func (t *tx) cacheHost(cred string, h *vdibroker.SessionHost) {
	if t.cw == nil || cred == "" {
		return
	}
	t.touch(h.HostPool, h.Name)
	t.cw.puts = append(t.cw.puts, cachedHost{cred: cred, host: cloneHost(h)})
}

// uncache forgets the copies recorded since mark (the request that
// recorded them was rolled back to its savepoint); its touches stay, which
// only costs a cache miss.
func (t *tx) uncache(mark int) {
	if t.cw != nil && len(t.cw.puts) > mark {
		t.cw.puts = t.cw.puts[:mark]
	}
}

func (t *tx) cacheMark() int {
	if t.cw == nil {
		return 0
	}
	return len(t.cw.puts)
}

// cloneHost copies h deeply: callers may change what they get.
func cloneHost(h *vdibroker.SessionHost) *vdibroker.SessionHost {
	c := *h
	c.Protocols = slices.Clone(h.Protocols)
	c.AssignedUsers = slices.Clone(h.AssignedUsers)
	if h.LastHeartBeat != nil {
		t := *h.LastHeartBeat
		c.LastHeartBeat = &t
	}
	if h.Metrics != nil {
		m := *h.Metrics
		if m.CustomLoadValue != nil {
			v := *m.CustomLoadValue
			m.CustomLoadValue = &v
		}
		c.Metrics = &m
	}
	c.Policy = vdibroker.HostPolicy{
		HostLoadIndexThreshold:         clonePtr(h.Policy.HostLoadIndexThreshold),
		HostConnectingSessionThreshold: clonePtr(h.Policy.HostConnectingSessionThreshold),
	}
	return &c
}

func clonePtr(p *int) *int {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
