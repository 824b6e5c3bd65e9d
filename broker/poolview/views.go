package poolview

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/placement"
)

// Store is what the views read of the broker's store.
type Store interface {
	GetHostPool(ctx context.Context, name string) (*vdibroker.HostPool, error)
	ListSessionHosts(ctx context.Context, pool string) ([]*vdibroker.SessionHost, error)
	GetSessionHost(ctx context.Context, pool, name string) (*vdibroker.SessionHost, error)
	RoundRobinHost(ctx context.Context, pool string) (string, error)
	ListUserSessions(ctx context.Context, f vdibroker.SessionFilter) ([]*vdibroker.UserSession, error)
}

// Config is what Views need. Store is required; the rest has defaults.
type Config struct {
	Store  Store
	Logger *slog.Logger // nil discards logs
	// Now and Rand are the placement engine's (placement.Options).
	Now  func() time.Time
	Rand func(n int) int
	// Observe, when set, is called with the pool's load balancer type and
	// the engine's decision time of every Decide.
	Observe func(algorithm string, d time.Duration)
	// Credit moves a host's heartbeat time that fell in the last store
	// outage forward by the outage's length (R-H1, R-OUT5); nil: as is.
	Credit func(at *time.Time) *time.Time
	// HeldByOthers returns, per host of pool, the slots other replicas
	// hold in escrow for an outage (R-OUT2); nil: none.
	HeldByOthers func(ctx context.Context, pool string) (map[string]int, error)
	// Unwritten counts this replica's outage placements on a host that
	// are not written yet (R-OUT3); nil: none.
	Unwritten func(pool, host string) int
	// Turned, when set, is called when a host of pool turns from taking
	// no new session to taking them (placement.TakesNewSession): its
	// first heartbeat after a start, a resumed drain, seen in a
	// heartbeat, a host's refresh or a reload; also when a host recorded
	// Starting first says, since its start, that it shuts down
	// (vdibroker.ShuttingDownAfterStart: no longer capacity to come, R-A4).
	// Connects held for a starting host wait for it (R-U4). It runs under the view's lock:
	// it must be quick and must not call the views.
	Turned func(pool string)
	// HostsRead, when set, is told of each read of a pool's hosts from
	// the store (reload) begun at begun: hosts are all the pool's hosts
	// then, none when the pool is gone. A host this server holds
	// something of that is not among them, or was made again after (a
	// delete and a registration of its name through another replica),
	// is gone (outage.Mode.HostsRead). It runs outside the view's lock.
	HostsRead func(pool string, hosts []*vdibroker.SessionHost, begun time.Time)
	// Waiting, when set, reports whether connects wait for a host of
	// pool to turn placeable: its view is read again by every
	// maintenance tick (RefreshAll) as if a connect had used it, so a
	// host that heartbeats to another replica is seen here too.
	Waiting func(pool string) bool
}

// Views holds one placement view per host pool: an in-memory
// placement.Placer built from the store and kept current by this server's
// own changes (connects, host edits, heartbeats), refreshed from the store
// when it may be stale (maintenance tick, NoCapacity, a lost commit race).
// The database stays the authority (R-D3): the view only proposes.
type Views struct {
	cfg Config
	log *slog.Logger
	mu  sync.Mutex
	m   map[string]*View
	// background counts the reads of idle views under way (revalidate).
	background sync.WaitGroup
}

// View is one pool's placement state. mu serialises Place and Apply
// (a Placer is not safe for concurrent use); commits run outside it.
type View struct {
	name string

	// loadMu lets one reload run at a time; the others wait for it and
	// use its result instead of reading the store again.
	loadMu sync.Mutex

	mu     sync.Mutex
	pool   *vdibroker.HostPool
	placer placement.Placer // nil until loaded
	stale  bool
	// used says a connect or dry run needed the view since the last
	// maintenance tick (refreshAll).
	used bool
	// idle says a maintenance tick found the view unused since the tick
	// before and did not read it: the next connect decides on it as it is
	// (Ensure clears idle and sets recheck) and has it read in the
	// background once it has decided (Decide, revalidate).
	idle, recheck bool
	// views is the Views the view belongs to (revalidate).
	views *Views
	// gen counts markStale calls, so a reload that read the store before
	// the latest one does not clear it.
	gen uint64
	// addrs is what the view knows of each host beyond the placer's Host:
	// the address the connect answer carries.
	addrs map[string]string
	// users maps a user (their folded name: Alice is alice, R-E5) to
	// their open session as far as this server knows (it placed or
	// answered it). A user not in it is looked up in
	// the store only if the commit says they have a session (R-C6 is
	// enforced by the database in Pooled pools), which saves a read per
	// new connect; a user in it is always checked against the store, so a
	// session that ended elsewhere is never answered.
	users map[string]KnownSession
	// rrRead is the R-LI4 cursor as last read from the store.
	rrRead string
	// usersAfter is the id of the newest session catchUpUsers read.
	usersAfter string
	// inflight counts reservations applied to the placer whose commit has
	// not finished: a refresh from the store adds them back so a reload
	// does not forget placements that are about to land.
	inflight map[string]int
	// landed holds, per host, the commit seqs of this server's placements
	// committed after the newest heartbeat count applied (seen): a
	// heartbeat result with a lower Seq was counted before them, so they
	// are added to its counts (see upsertHeartbeat).
	landed map[string][]int64
	// seen is, per host, the Seq of the newest heartbeat result applied;
	// an older one arriving late is not applied over it.
	seen map[string]int64
	// lastLanded is the highest seq landed in this view: a read that
	// begins after it includes every placement up to it (landedMark).
	lastLanded int64
	// held is, per host, the slots other replicas hold in escrow for an
	// outage (R-OUT2), as of the last reload: the placer counts
	// them as sessions, and a commit's limit is lowered by them, so no
	// replica places into another's share.
	held map[string]int
	// cfg is the Views' (Credit, Unwritten, Observe).
	cfg *Config

	// landMu guards landings: placements committed (land, called by the
	// store's OnCommitted hook on a committer) and not yet applied. A
	// committer only appends under landMu and never waits
	// for mu, which a reload of a large pool holds for milliseconds: every
	// write of every pool would wait meanwhile. Whoever takes mu next
	// applies them first (lock), so everything mu guards is as current as
	// if land had taken mu itself.
	landMu   sync.Mutex
	landings []landing
	spare    []landing // the previous landings slice, reused (under mu)
}

// landing is one committed placement waiting for the view (see landMu).
type landing struct {
	host string
	seq  int64
}

// lock takes the view's lock and applies the placements landed meanwhile.
// Every use of the state mu guards goes through it.
func (v *View) lock() {
	v.mu.Lock()
	v.landMu.Lock()
	q := v.landings
	v.landings = v.spare[:0]
	v.landMu.Unlock()
	for _, l := range q {
		v.landLocked(l.host, l.seq)
	}
	clear(q) // the host names
	v.spare = q[:0]
	if cap(q) > maxSpareLandings {
		v.spare = nil // a burst during a long reload: give its memory back
	}
}

// maxSpareLandings bounds the landings slice a view keeps for reuse.
const maxSpareLandings = 4096

// New returns views with none loaded: a pool's view is read from the
// store on its first use.
func New(cfg Config) *Views {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Credit == nil {
		cfg.Credit = func(at *time.Time) *time.Time { return at }
	}
	if cfg.HeldByOthers == nil {
		cfg.HeldByOthers = func(context.Context, string) (map[string]int, error) { return nil, nil }
	}
	if cfg.Unwritten == nil {
		cfg.Unwritten = func(string, string) int { return 0 }
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Views{cfg: cfg, log: cfg.Logger, m: make(map[string]*View)}
}

// Get returns the pool's view, creating an unloaded one.
func (vs *Views) Get(name string) *View {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	v, ok := vs.m[name]
	if !ok {
		v = &View{name: name, addrs: map[string]string{}, inflight: map[string]int{}, users: map[string]KnownSession{},
			landed: map[string][]int64{}, seen: map[string]int64{}, cfg: &vs.cfg, views: vs}
		vs.m[name] = v
	}
	return v
}

func (vs *Views) Peek(name string) *View {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	return vs.m[name]
}

func (vs *Views) Drop(name string) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	delete(vs.m, name)
}

// all returns the views there are now.
func (vs *Views) all() []*View {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	all := make([]*View, 0, len(vs.m))
	for _, v := range vs.m {
		all = append(all, v)
	}
	return all
}

func (vs *Views) MarkAllStale() {
	for _, v := range vs.all() {
		v.MarkStale()
	}
}

// RefreshAll reads every loaded view used since the last tick again from
// the store, one at a time, beside the connects (see reload). A view not
// used since is only marked idle: an idle pool costs no reads, and its
// next connect decides on the view as it is, while the view is read again
// in the background (Ensure). A view whose read fails is marked stale; one
// whose pool is gone is dropped.
//
// An idle view is not wrong, only unchecked: this replica's own writes
// and every heartbeat it takes keep it current (UpsertHeartbeat applies
// them to every loaded view, used or not); what it may lack are other
// replicas' writes since the last read, which the database checks at
// every commit (R-D3) and the retry rule answers (a lost race or a
// refusal reads the view again before the connect's next round).
func (vs *Views) RefreshAll(ctx context.Context) {
	for _, v := range vs.all() {
		v.lock()
		loaded, used := v.placer != nil, v.used
		v.used = false
		v.mu.Unlock()
		if vs.cfg.Waiting != nil && vs.cfg.Waiting(v.name) {
			used = true
		}
		if !loaded {
			continue
		}
		if !used {
			v.markIdle()
			continue
		}
		v.loadMu.Lock()
		err := vs.reload(ctx, v)
		v.loadMu.Unlock()
		if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
			vs.Drop(v.name) // deleted on another replica
			continue
		}
		if err != nil {
			v.MarkStale()
			if ctx.Err() == nil && vdibroker.ErrorCode(err) != vdibroker.EStoreUnavailable {
				vs.log.Warn("refresh a pool's view", "pool", v.name, "err", err)
			}
		}
	}
}

// SetPool applies new pool settings to a loaded view (R-P1: the next
// placement uses them).
func (vs *Views) SetPool(p *vdibroker.HostPool) {
	v := vs.Peek(p.Name)
	if v == nil {
		return
	}
	v.lock()
	defer v.mu.Unlock()
	if v.pool != nil && samePool(v.pool, p) {
		// Heartbeats carry the pool: skip the no-op, but keep its
		// updateTime, which a commit checks (ErrPoolChanged).
		v.pool = p
		return
	}
	v.pool = p
	if v.placer != nil {
		v.placer.SetPool(placement.PoolFrom(p))
	}
}

// LandedMark is taken before reading a host of pool from the store and
// passed to upsertHost with what was read: the read includes this server's
// placements landed up to the mark.
func (vs *Views) LandedMark(pool string) int64 {
	v := vs.Peek(pool)
	if v == nil {
		return 0
	}
	v.lock()
	defer v.mu.Unlock()
	return v.lastLanded
}

// UpsertHost applies a host as the store returned it from a read or a
// write other than a heartbeat, begun after landedMark returned mark
// (counts from the store, plus this server's in-flight reservations).
func (vs *Views) UpsertHost(h *vdibroker.SessionHost, mark int64) {
	v := vs.Peek(h.HostPool)
	if v == nil {
		return
	}
	v.lock()
	defer v.mu.Unlock()
	v.upsertLocked(h, mark)
}

// UpsertHeartbeat applies a heartbeat's result (R-S1). Its counts are the
// database's as of res.Seq: they include this server's placements
// committed before it, not those committed after it, whose answers may
// have been given before this one (the store calls OnCommitted first).
// A result older than one already applied is dropped.
func (vs *Views) UpsertHeartbeat(res *vdibroker.HeartbeatResult) {
	h := res.Host
	v := vs.Peek(h.HostPool)
	if v == nil {
		return
	}
	v.lock()
	defer v.mu.Unlock()
	if res.Seq < v.seen[h.Name] {
		return
	}
	v.seen[h.Name] = res.Seq
	later := v.landed[h.Name][:0]
	for _, seq := range v.landed[h.Name] {
		if seq > res.Seq {
			later = append(later, seq)
		}
	}
	v.landed[h.Name] = later
	v.apply(h, v.inflight[h.Name]+len(later))
}

// Land records that a placement reserved on host is committed (seq): no
// longer in flight, and counted by heartbeat results from seq on. It does
// not wait for the view's lock: the next lock applies it (landLocked).
func (v *View) Land(host string, seq int64) {
	v.landMu.Lock()
	v.landings = append(v.landings, landing{host, seq})
	v.landMu.Unlock()
}

// landLocked is land applied under the view's lock.
func (v *View) landLocked(host string, seq int64) {
	v.release(host)
	v.lastLanded = max(v.lastLanded, seq)
	if _, known := v.addrs[host]; !known && v.placer != nil {
		return // removed meanwhile: nothing will read its counts
	}
	l := append(v.landed[host], seq)
	if len(l) > maxLanded {
		// A host whose heartbeats go to another replica: only a result
		// older than all of these could still need them.
		l = l[len(l)-maxLanded:]
	}
	v.landed[host] = l
}

// release ends a reservation on host.
func (v *View) release(host string) {
	if v.inflight[host]--; v.inflight[host] <= 0 {
		delete(v.inflight, host)
	}
}

// maxLanded bounds View.landed per host.
const maxLanded = 1024

func (vs *Views) RemoveHost(pool, name string) {
	v := vs.Peek(pool)
	if v == nil {
		return
	}
	v.lock()
	defer v.mu.Unlock()
	if v.placer != nil {
		v.placer.Remove(name)
	}
	delete(v.addrs, name)
	delete(v.landed, name)
	delete(v.seen, name)
}

// upsertLocked applies h as read from the store (or written other than
// by a heartbeat) by a read begun after mark (see landedMark): it counts
// this server's placements on h landed up to mark, so those are forgotten,
// and a heartbeat result older than them is now stale. Placements landed
// since may or may not be in the read; they stay in landed, so a later
// heartbeat result counts them right, and the read counts them as stored
// (one off at most, until that heartbeat; the database enforces R-C4).
func (v *View) upsertLocked(h *vdibroker.SessionHost, mark int64) {
	v.forgetLanded(h.Name, mark)
	v.apply(h, v.inflight[h.Name])
}

// forgetLanded drops host's landed placements up to mark.
func (v *View) forgetLanded(host string, mark int64) {
	l := v.landed[host]
	keep := l[:0]
	for _, seq := range l {
		if seq <= mark {
			v.seen[host] = max(v.seen[host], seq)
		} else {
			keep = append(keep, seq)
		}
	}
	if len(keep) == 0 {
		delete(v.landed, host)
	} else {
		v.landed[host] = keep
	}
}

// apply puts h in the placer with n more sessions (and connecting ones)
// than the store counted.
func (v *View) apply(h *vdibroker.SessionHost, n int) {
	if v.placer == nil {
		return // loaded from the store on first use
	}
	ph := placement.HostFrom(h)
	ph.LastHeartBeat = v.cfg.Credit(ph.LastHeartBeat)
	ph.Sessions += n + v.held[h.Name]
	ph.Connecting += n
	v.addrs[h.Name] = h.Address
	cur, ok := v.placer.Host(h.Name)
	if ok && sameHost(&cur, &ph) {
		// A reload re-reads every host: most are as the view has them
		// (this server applied their heartbeats), and re-filing 10,000 of
		// them under the view's lock would stall the pool's connects.
		return
	}
	turned := false
	if v.cfg.Turned != nil && v.pool != nil {
		timeout, now := v.pool.HeartbeatTimeout(), v.cfg.Now()
		turned = placement.TakesNewSession(&ph, timeout, now) && (!ok || !placement.TakesNewSession(&cur, timeout, now))
		// A host recorded Starting whose agent says, for the first time
		// since the start, that it shuts down: it is no longer capacity
		// to come (vdibroker.ShuttingDownAfterStart), so the connects
		// held for it are decided again, and start another host or say
		// that her desktop shuts down (R-A4, R-U4). Once per start: a
		// heartbeat that does not say so makes it Running.
		turned = turned || vdibroker.ShuttingDownAfterStart(h, timeout, now) && ok &&
			(cur.LastHeartBeat == nil || !cur.LastHeartBeat.After(*h.PowerStateTime))
	}
	v.placer.Upsert(ph)
	if turned {
		v.cfg.Turned(v.name)
	}
}

// sameHost reports whether a and b hold the same values (pointers compared
// by what they point at: a read from the store makes new ones).
func sameHost(a, b *placement.Host) bool {
	return a.Name == b.Name && a.AllowNewSession == b.AllowNewSession && a.StandardFeatures == b.StandardFeatures &&
		a.ShuttingDown == b.ShuttingDown && a.HealthError == b.HealthError &&
		a.PowerStopped == b.PowerStopped && a.AutoscaleDrain == b.AutoscaleDrain && a.NoRemoteApps == b.NoRemoteApps &&
		a.Sessions == b.Sessions && a.Connecting == b.Connecting && a.MetricsSessions == b.MetricsSessions &&
		sameTime(a.LastHeartBeat, b.LastHeartBeat) && sameMetrics(a.Metrics, b.Metrics) &&
		sameInt(a.Policy.HostLoadIndexThreshold, b.Policy.HostLoadIndexThreshold) &&
		sameInt(a.Policy.HostConnectingSessionThreshold, b.Policy.HostConnectingSessionThreshold) &&
		slices.Equal(a.AssignedUsers, b.AssignedUsers)
}

func sameTime(a, b *time.Time) bool { return a == b || a != nil && b != nil && a.Equal(*b) }
func sameInt(a, b *int) bool        { return a == b || a != nil && b != nil && *a == *b }

func sameMetrics(a, b *vdibroker.Metrics) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	x, y := *a, *b
	if !sameInt(x.CustomLoadValue, y.CustomLoadValue) || !x.SampledAt.Equal(y.SampledAt) {
		return false
	}
	x.CustomLoadValue, y.CustomLoadValue = nil, nil
	x.SampledAt, y.SampledAt = time.Time{}, time.Time{}
	return x == y
}

// Ensure loads the view from the store when it is not loaded or stale. A
// view the maintenance tick found idle is used as it is, and read again in
// the background after its next decision (Decide, revalidate): a
// 10,000-host pool's read took 85-99 ms, which its first connect after an
// idle tick, and every connect beside it, waited for.
//
// R-LI4: an idle view of a LoadIndex pool takes the pool's round-robin
// cursor before that decision, one row read, so the replicas still share
// it at the first connect after idle, as at every tick's read.
func (vs *Views) Ensure(ctx context.Context, v *View) error {
	wasIdle, cursor := false, false
	fresh := func() bool {
		v.lock()
		defer v.mu.Unlock()
		v.used = true
		ok := v.placer != nil && !v.stale
		if ok && v.idle {
			v.idle, v.recheck = false, true
			wasIdle, cursor = true, v.pool != nil && v.pool.LoadBalancerType == vdibroker.LoadIndex
		}
		return ok
	}
	if fresh() {
		if wasIdle && cursor {
			vs.takeCursor(ctx, v)
		}
		return nil
	}
	v.loadMu.Lock()
	defer v.loadMu.Unlock()
	if fresh() {
		return nil // reloaded while we waited
	}
	return vs.reload(ctx, v)
}

// takeCursor sets v's round-robin cursor to the pool's (R-LI4) when it
// moved since v last read it. A failed read leaves v's own: the decision
// goes on, as between two ticks.
func (vs *Views) takeCursor(ctx context.Context, v *View) {
	rr, err := vs.cfg.Store.RoundRobinHost(ctx, v.name)
	if err != nil {
		return
	}
	v.lock()
	defer v.mu.Unlock()
	if v.placer != nil && rr != v.rrRead {
		v.placer.SetRoundRobin(rr)
		v.rrRead = rr
	}
}

// markIdle records that a tick found v unused since the tick before.
func (v *View) markIdle() {
	v.lock()
	defer v.mu.Unlock()
	v.idle = true
}

// revalidate reads an idle view again in the background, beside the
// connects that go on deciding on it (as a maintenance tick's read does).
// A failed read marks the view stale: the next connect reads it itself.
func (vs *Views) revalidate(v *View) {
	vs.background.Add(1)
	go func() {
		defer vs.background.Done()
		ctx, cancel := context.WithTimeout(context.Background(), revalidateTimeout)
		defer cancel()
		v.loadMu.Lock()
		err := vs.reload(ctx, v)
		v.loadMu.Unlock()
		if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
			vs.Drop(v.name)
			return
		}
		if err != nil {
			v.MarkStale()
			if vdibroker.ErrorCode(err) != vdibroker.EStoreUnavailable {
				vs.log.Warn("read an idle pool's view again", "pool", v.name, "err", err)
			}
		}
	}()
}

// revalidateTimeout bounds a background read of an idle view (the store's
// own timeout, --store-timeout, is usually shorter).
const revalidateTimeout = 30 * time.Second

// Wait waits for the background reads of idle views under way.
func (vs *Views) Wait() { vs.background.Wait() }

// reload reads the pool and its hosts from the store and replaces the
// view's hosts with them. The store is read outside the view's lock so
// connects keep flowing; a commit finishing in between can leave a count
// off by one, which the database catches (ErrHostFull → refresh) or the
// next refresh corrects.
func (vs *Views) reload(ctx context.Context, v *View) error {
	v.lock()
	gen := v.gen
	mark := v.lastLanded
	v.mu.Unlock()
	begun := vs.cfg.Now()
	pool, err := vs.cfg.Store.GetHostPool(ctx, v.name)
	if err != nil {
		vs.goneIf(v.name, err, begun)
		return err
	}
	hosts, err := vs.cfg.Store.ListSessionHosts(ctx, v.name)
	if err != nil {
		vs.goneIf(v.name, err, begun)
		return err
	}
	if vs.cfg.HostsRead != nil {
		vs.cfg.HostsRead(v.name, hosts, begun)
	}
	rr := ""
	if pool.LoadBalancerType == vdibroker.LoadIndex {
		if rr, err = vs.cfg.Store.RoundRobinHost(ctx, v.name); err != nil {
			return err
		}
	}
	held, err := vs.cfg.HeldByOthers(ctx, v.name)
	if err != nil {
		return err
	}
	v.lock()
	defer v.mu.Unlock()
	v.pool = pool
	v.held = held
	v.stale = v.gen != gen // marked again while we read: read again next time
	v.idle, v.recheck = false, false
	if v.placer == nil {
		phs := make([]placement.Host, len(hosts))
		for i, h := range hosts {
			phs[i] = placement.HostFrom(h)
			phs[i].LastHeartBeat = v.cfg.Credit(phs[i].LastHeartBeat)
			v.forgetLanded(h.Name, mark)
			n := v.inflight[h.Name]
			phs[i].Sessions += n + held[h.Name]
			phs[i].Connecting += n
			v.addrs[h.Name] = h.Address
		}
		v.placer = placement.New(placement.PoolFrom(pool), phs, placement.Options{Rand: vs.cfg.Rand, Now: vs.cfg.Now})
		v.placer.SetRoundRobin(rr)
		v.rrRead = rr
		return nil
	}
	v.placer.SetPool(placement.PoolFrom(pool))
	// R-LI4: take the shared cursor when it moved since the last read. A
	// placement of this server committed after the read may be taken back
	// by it (one host gets a second turn); other replicas' moves between
	// reads are seen at the next one.
	if rr != v.rrRead {
		v.placer.SetRoundRobin(rr)
		v.rrRead = rr
	}
	seen := make(map[string]bool, len(hosts))
	for i, h := range hosts {
		seen[h.Name] = true
		v.upsertLocked(h, mark)
		if i%reloadChunk == reloadChunk-1 {
			// Let the pool's connects and heartbeats through: each host is
			// consistent on its own, the view's other state is untouched.
			// (A host registered meanwhile is not in this read and is
			// dropped below, as one registered while the store was read
			// already was; its next heartbeat brings it back.)
			v.mu.Unlock()
			v.lock()
		}
	}
	for name := range v.addrs {
		if !seen[name] {
			v.placer.Remove(name)
			delete(v.addrs, name)
			delete(v.landed, name)
			delete(v.seen, name)
		}
	}
	return nil
}

// goneIf tells HostsRead that pool is gone when a read of it begun at
// begun failed with NotFound.
func (vs *Views) goneIf(pool string, err error, begun time.Time) {
	if vdibroker.ErrorCode(err) == vdibroker.ENotFound && vs.cfg.HostsRead != nil {
		vs.cfg.HostsRead(pool, nil, begun)
	}
}

// catchUpUsers adds to v's users the pool's sessions opened since the
// last catch-up (session ids sort by creation time), so that during a store
// outage this server can answer the reconnects of users placed by other
// replicas or before a restart (R-OUT1). Users the view learnt otherwise
// keep what it learnt. It runs when a view is first loaded and on every
// maintenance tick, reading at most catchUpBatch sessions a time.
func (vs *Views) catchUpUsers(ctx context.Context, v *View) error {
	v.lock()
	after := v.usersAfter
	v.mu.Unlock()
	list, err := vs.cfg.Store.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: v.name, After: after, Limit: catchUpBatch})
	if err != nil || len(list) == 0 {
		return err
	}
	v.lock()
	defer v.mu.Unlock()
	for _, us := range list {
		if _, ok := v.users[vdibroker.FoldUser(us.User)]; !ok && len(v.users) < maxKnownUsers {
			v.users[vdibroker.FoldUser(us.User)] = KnownSession{ID: us.ID, Host: us.SessionHost, State: us.State, CreateTime: us.CreateTime, Adopted: us.Adopted}
		}
	}
	v.usersAfter = max(v.usersAfter, list[len(list)-1].ID)
	return nil
}

// catchUpBatch bounds one catch-up read.
const catchUpBatch = 20000

// CatchUpAll runs catchUpUsers on every loaded view.
func (vs *Views) CatchUpAll(ctx context.Context) {
	for _, v := range vs.all() {
		if err := vs.catchUpUsers(ctx, v); err != nil {
			if ctx.Err() == nil {
				vs.log.Warn("catch up with a pool's new sessions", "pool", v.name, "err", err)
			}
			return
		}
	}
}

// reloadChunk is how many hosts a reload applies per hold of the view's
// lock.
const reloadChunk = 512

// RefreshHost re-reads one host from the store into the view (after a lost
// commit race or a session change).
func (vs *Views) RefreshHost(ctx context.Context, pool, name string) {
	mark := vs.LandedMark(pool)
	h, err := vs.cfg.Store.GetSessionHost(ctx, pool, name)
	if err != nil {
		if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
			vs.RemoveHost(pool, name)
			return
		}
		if v := vs.Peek(pool); v != nil {
			v.MarkStale()
		}
		return
	}
	vs.UpsertHost(h, mark)
}

// samePool reports whether two reads of a pool have the same settings.
func samePool(a, b *vdibroker.HostPool) bool {
	x, y := *a, *b
	x.CreateTime, x.UpdateTime = y.CreateTime, y.UpdateTime
	x.WriteWarning = y.WriteWarning // an answer's, not a setting
	return x == y
}

// maxKnownUsers bounds View.users; past it the map starts over, which
// only costs store reads.
const maxKnownUsers = 1 << 20

// Placeable reports whether the view sees host as taking sessions now
// (R-H1); false for a host it does not know.
func (v *View) Placeable(host string, timeout time.Duration, now time.Time) bool {
	v.lock()
	defer v.mu.Unlock()
	if v.placer == nil {
		return false
	}
	h, ok := v.placer.Host(host)
	if !ok {
		return false
	}
	return vdibroker.Placeable(placement.Status(&h, timeout, now))
}

// KnowsUser reports whether the view remembers an open session of user.
func (v *View) KnowsUser(user string) bool {
	v.lock()
	defer v.mu.Unlock()
	_, ok := v.users[vdibroker.FoldUser(user)]
	return ok
}

// KnownSession is what a view remembers of a user's open session: enough
// to answer a reconnect from memory while the store is down (R-OUT1).
type KnownSession struct {
	ID, Host, State string
	CreateTime      time.Time
	// Adopted: a host reported it, the broker did not place it (R-S2).
	Adopted bool
}

// RememberUser records (us != nil) or forgets (us == nil) user's open
// session.
func (v *View) RememberUser(user string, us *vdibroker.UserSession) {
	v.lock()
	defer v.mu.Unlock()
	if us == nil {
		delete(v.users, vdibroker.FoldUser(user))
		return
	}
	if len(v.users) >= maxKnownUsers {
		v.users = map[string]KnownSession{}
	}
	v.users[vdibroker.FoldUser(user)] = KnownSession{ID: us.ID, Host: us.SessionHost, State: us.State, CreateTime: us.CreateTime, Adopted: us.Adopted}
}

// KnownSession returns the session the view remembers for user.
func (v *View) KnownSession(user string) (KnownSession, bool) {
	v.lock()
	defer v.mu.Unlock()
	k, ok := v.users[vdibroker.FoldUser(user)]
	return k, ok
}

// MarkStale makes the next connect re-read the pool from the store.
func (v *View) MarkStale() {
	v.lock()
	defer v.mu.Unlock()
	v.stale = true
	v.gen++
}
