package http

import (
	"time"

	"context"
	"sync"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/placement"
)

// views holds one placement view per host pool: an in-memory
// placement.Placer built from the store and kept current by this server's
// own changes (connects, host edits, heartbeats), refreshed from the store
// when it may be stale (maintenance tick, NoCapacity, a lost commit race).
// The database stays the authority (R-D3): the view only proposes.
type views struct {
	s  *Server
	mu sync.Mutex
	m  map[string]*poolView
}

// poolView is one pool's placement state. mu serialises Place and Apply
// (a Placer is not safe for concurrent use); commits run outside it.
type poolView struct {
	name string

	// loadMu lets one reload run at a time; the others wait for it and
	// use its result instead of reading the store again.
	loadMu sync.Mutex

	mu     sync.Mutex
	pool   *vdibroker.HostPool
	placer placement.Placer // nil until loaded
	stale  bool
	// gen counts markStale calls, so a reload that read the store before
	// the latest one does not clear it.
	gen uint64
	// hosts is what the view knows of each host beyond the placer's Host:
	// the address the connect answer carries.
	addrs map[string]string
	// users maps a user to their open session as far as this server
	// knows (it placed or answered it). A user not in it is looked up in
	// the store only if the commit says they have a session (R-C6 is
	// enforced by the database in Pooled pools), which saves a read per
	// new connect; a user in it is always checked against the store, so a
	// session that ended elsewhere is never answered.
	users map[string]string
	// inflight counts reservations applied to the placer whose commit has
	// not finished: a refresh from the store adds them back so a reload
	// does not forget placements that are about to land.
	inflight map[string]int
}

func newViews(s *Server) *views {
	return &views{s: s, m: make(map[string]*poolView)}
}

// get returns the pool's view, creating an unloaded one.
func (vs *views) get(name string) *poolView {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	v, ok := vs.m[name]
	if !ok {
		v = &poolView{name: name, addrs: map[string]string{}, inflight: map[string]int{}, users: map[string]string{}}
		vs.m[name] = v
	}
	return v
}

func (vs *views) peek(name string) *poolView {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	return vs.m[name]
}

func (vs *views) drop(name string) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	delete(vs.m, name)
}

func (vs *views) markAllStale() {
	vs.mu.Lock()
	all := make([]*poolView, 0, len(vs.m))
	for _, v := range vs.m {
		all = append(all, v)
	}
	vs.mu.Unlock()
	for _, v := range all {
		v.markStale()
	}
}

// setPool applies new pool settings to a loaded view (R-P1: the next
// placement uses them).
func (vs *views) setPool(p *vdibroker.HostPool) {
	v := vs.peek(p.Name)
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.pool != nil && samePool(v.pool, p) {
		return // heartbeats carry the pool: skip the no-op
	}
	v.pool = p
	if v.placer != nil {
		v.placer.SetPool(placement.PoolFrom(p))
	}
}

// upsertHost applies a host as the store returned it (counts from the
// store, plus this server's in-flight reservations).
func (vs *views) upsertHost(h *vdibroker.SessionHost) {
	v := vs.peek(h.HostPool)
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.upsertLocked(h)
}

func (vs *views) removeHost(pool, name string) {
	v := vs.peek(pool)
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.placer != nil {
		v.placer.Remove(name)
	}
	delete(v.addrs, name)
}

func (v *poolView) upsertLocked(h *vdibroker.SessionHost) {
	if v.placer == nil {
		return // loaded from the store on first use
	}
	ph := placement.HostFrom(h)
	n := v.inflight[h.Name]
	ph.Sessions += n
	ph.Connecting += n
	v.placer.Upsert(ph)
	v.addrs[h.Name] = h.Address
}

// ensure loads the view from the store when it is not loaded or stale.
func (vs *views) ensure(ctx context.Context, v *poolView) error {
	fresh := func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		return v.placer != nil && !v.stale
	}
	if fresh() {
		return nil
	}
	v.loadMu.Lock()
	defer v.loadMu.Unlock()
	if fresh() {
		return nil // reloaded while we waited
	}
	return vs.reload(ctx, v)
}

// reload reads the pool and its hosts from the store and replaces the
// view's hosts with them. The store is read outside the view's lock so
// connects keep flowing; a commit finishing in between can leave a count
// off by one, which the database catches (ErrHostFull → refresh) or the
// next refresh corrects.
func (vs *views) reload(ctx context.Context, v *poolView) error {
	v.mu.Lock()
	gen := v.gen
	v.mu.Unlock()
	pool, err := vs.s.store.GetHostPool(ctx, v.name)
	if err != nil {
		return err
	}
	hosts, err := vs.s.store.ListSessionHosts(ctx, v.name)
	if err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.pool = pool
	v.stale = v.gen != gen // marked again while we read: read again next time
	if v.placer == nil {
		phs := make([]placement.Host, len(hosts))
		for i, h := range hosts {
			phs[i] = placement.HostFrom(h)
			n := v.inflight[h.Name]
			phs[i].Sessions += n
			phs[i].Connecting += n
			v.addrs[h.Name] = h.Address
		}
		v.placer = placement.New(placement.PoolFrom(pool), phs, placement.Options{Rand: vs.s.rand, Now: vs.s.now})
		return nil
	}
	v.placer.SetPool(placement.PoolFrom(pool))
	seen := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		seen[h.Name] = true
		v.upsertLocked(h)
	}
	for name := range v.addrs {
		if !seen[name] {
			v.placer.Remove(name)
			delete(v.addrs, name)
		}
	}
	return nil
}

// refreshHost re-reads one host from the store into the view (after a lost
// commit race or a session change).
func (vs *views) refreshHost(ctx context.Context, pool, name string) {
	h, err := vs.s.store.GetSessionHost(ctx, pool, name)
	if err != nil {
		if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
			vs.removeHost(pool, name)
			return
		}
		if v := vs.peek(pool); v != nil {
			v.markStale()
		}
		return
	}
	vs.upsertHost(h)
}

// samePool reports whether two reads of a pool have the same settings.
func samePool(a, b *vdibroker.HostPool) bool {
	x, y := *a, *b
	x.CreateTime, x.UpdateTime = y.CreateTime, y.UpdateTime
	return x == y
}

// maxKnownUsers bounds poolView.users; past it the map starts over, which
// only costs store reads.
const maxKnownUsers = 1 << 20

// knowsUser reports whether the view remembers an open session of user.
// placeable reports whether the view sees host as taking sessions now
// (R-H1); false for a host it does not know.
func (v *poolView) placeable(host string, timeout time.Duration, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.placer == nil {
		return false
	}
	h, ok := v.placer.Host(host)
	if !ok {
		return false
	}
	sh := vdibroker.SessionHost{LastHeartBeat: h.LastHeartBeat, ShuttingDown: h.ShuttingDown, HealthError: h.HealthError}
	return vdibroker.Placeable(vdibroker.HostStatus(&sh, timeout, now))
}

func (v *poolView) knowsUser(user string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.users[user]
	return ok
}

// rememberUser records (id != "") or forgets (id == "") user's open session.
func (v *poolView) rememberUser(user, id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if id == "" {
		delete(v.users, user)
		return
	}
	if len(v.users) >= maxKnownUsers {
		v.users = map[string]string{}
	}
	v.users[user] = id
}

// markStale makes the next connect re-read the pool from the store.
func (v *poolView) markStale() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.stale = true
	v.gen++
}
