package outage

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker/poolview"
	"github.com/vdibroker/vdibroker/placement"
)

// Outage placement (serve --outage-placement, R-OUT2, R-OUT3).
//
// While the store is up, each replica holds in escrow a share of each
// host's free slots: a row per host in the store (replica, pool, host,
// slots, expiry), renewed every Renew and expiring after three of them.
// Every replica's placement counts the other replicas' escrows as taken
// (the view adds them to the host's sessions, and the commit's limit is
// lowered by them), so while the store is up nobody places into another's
// share. During an outage a replica places a new user only within its own
// share, so no host can go over its limit even when several replicas are
// cut off from the store and from each other. Those sessions are kept in
// memory and written, with decision records marked outageMode, when the
// store is back.
//
// A replica uses, during an outage, the smaller of its last two grants per
// host: a grant is honoured by another replica only once that replica has
// re-read the escrows, which it does at least every maintenance interval,
// and Renew is at least two of them. It stops at the grant's expiry, after
// which other replicas may hand its slots out again. Its own placements
// since the last renewal count against its share (it cannot tell which
// free slot they took).

// Placement configures outage placement (serve --outage-placement).
type Placement struct {
	// Enabled turns it on; the rest has defaults.
	Enabled bool
	// Share is the percentage of a host's free slots each replica asks
	// for (rounded up, so a host with one free slot is held by one
	// replica), 1 to 100; 0 = 25.
	Share int
	// MaxPerHost caps a replica's share of one host; 0 = 2.
	MaxPerHost int
	// Renew is how often the escrows are renewed (at least twice the
	// maintenance interval); 0 = 10s. They expire after 3 × Renew.
	Renew time.Duration
	// Replica names this replica in the escrow table; "" = the host name
	// and a random suffix (a restarted replica is a new one: the old
	// one's escrows expire).
	Replica string
}

// escrowKeeper holds this replica's escrows and its outage placements.
type escrowKeeper struct {
	m       *Mode
	replica string
	share   int
	max     int
	renew   time.Duration

	mu      sync.Mutex
	prev    map[hostKey]int // the grants of the renewal before the last
	cur     map[hostKey]int // the grants of the last renewal
	expire  time.Time       // when cur expires
	own     map[hostKey]int // this replica's placements since the last renewal
	used    map[hostKey]int // placed in outage mode, not yet written
	pending []*outagePlacement
	// writing counts WriteOutagePlacements' runs writing now (a store
	// that flaps starts one per recovery, beside the last). That they
	// wrote some is the store's to tell every replica
	// (PlacementCommit.OutagePlacement).
	writing int
	wg      sync.WaitGroup
}

// outagePlacement is a session placed during an outage, to be written.
type outagePlacement struct {
	sess   *vdibroker.UserSession
	record []byte
}

func newEscrowKeeper(m *Mode, o Placement, maintenance time.Duration) *escrowKeeper {
	k := &escrowKeeper{m: m, replica: o.Replica, share: cmp.Or(o.Share, 25), max: cmp.Or(o.MaxPerHost, 2),
		renew: max(cmp.Or(o.Renew, 10*time.Second), 2*maintenance),
		own:   map[hostKey]int{}, used: map[hostKey]int{}}
	if k.replica == "" {
		name, _ := os.Hostname()
		b := make([]byte, 4)
		rand.Read(b)
		k.replica = cmp.Or(name, "replica") + "-" + hex.EncodeToString(b)
	}
	return k
}

// ttl is how long a grant lasts.
func (k *escrowKeeper) ttl() time.Duration { return 3 * k.renew }

// run renews the escrows every renew until stop, then gives them back.
func (k *escrowKeeper) run(stop <-chan struct{}) {
	k.wg.Add(1)
	t := k.m.clock.NewTicker(k.renew)
	go func() {
		defer k.wg.Done()
		defer t.Stop()
		k.renewOnce()
		for {
			select {
			case <-stop:
				k.release()
				return
			case <-t.C():
			}
			k.renewOnce()
		}
	}()
}

// renewOnce asks for this replica's share of every loaded pooled pool's
// hosts. Nothing is renewed while the store is down or outage placements
// wait to be written (the grant they were placed in must stay).
func (k *escrowKeeper) renewOnce() {
	m := k.m
	k.mu.Lock()
	waiting := len(k.pending) > 0
	k.mu.Unlock()
	if m.health.Down() || waiting {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(k.renew, 30*time.Second))
	defer cancel()
	pools, err := m.store.ListHostPools(ctx)
	if err != nil {
		m.log.Warn("outage escrow: list pools", "err", err)
		return
	}
	now := m.now()
	exp := now.Add(k.ttl())
	var want []vdibroker.Escrow
	for _, p := range pools {
		if p.HostPoolType != vdibroker.Pooled {
			continue
		}
		v := m.views.Get(p.Name)
		if err := m.views.Ensure(ctx, v); err != nil {
			m.log.Warn("outage escrow: load pool", "pool", p.Name, "err", err)
			continue
		}
		want = append(want, k.wants(v, now, exp)...)
	}
	// Placements from here on count against the next grant, which the
	// store computes from counts that may or may not include them.
	k.mu.Lock()
	own := k.own
	k.own = map[hostKey]int{}
	k.mu.Unlock()
	granted, err := m.store.PutEscrows(ctx, k.replica, want, now)
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		for h, n := range own { // not renewed: they still count
			k.own[h] += n
		}
		m.log.Warn("outage escrow: renew", "err", err)
		return
	}
	cur := make(map[hostKey]int, len(granted))
	for _, e := range granted {
		cur[hostKey{e.HostPool, e.Host}] = e.Slots
	}
	k.prev, k.cur, k.expire = k.cur, cur, exp
}

// wants is this replica's ask for v's hosts: Share % of each placeable
// host's free slots (as the view sees them: its sessions, in-flight
// placements and the other replicas' escrows), rounded up, at most
// MaxPerHost.
func (k *escrowKeeper) wants(v *poolview.View, now, exp time.Time) []vdibroker.Escrow {
	pool, loaded := v.Pool()
	if !loaded || pool.HostPoolType != vdibroker.Pooled {
		return nil
	}
	limit := pool.MaxSessionLimit
	timeout := pool.HeartbeatTimeout()
	var out []vdibroker.Escrow
	for _, h := range v.Hosts() {
		if !placement.TakesNewSession(&h, timeout, now) {
			continue
		}
		free := limit - h.Sessions
		if free <= 0 {
			continue
		}
		n := min(k.max, (free*k.share+99)/100)
		out = append(out, vdibroker.Escrow{HostPool: pool.Name, Host: h.Name, Slots: n, Expire: exp})
	}
	return out
}

// release gives this replica's escrows back (a clean shutdown).
func (k *escrowKeeper) release() {
	if k.m.health.Down() {
		return // they expire
	}
	k.mu.Lock()
	waiting := len(k.pending) > 0
	k.mu.Unlock()
	if waiting {
		return // the outage's sessions are still unwritten: keep their slots until expiry
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := k.m.store.PutEscrows(ctx, k.replica, nil, k.m.now()); err != nil {
		k.m.log.Warn("outage escrow: give back", "err", err)
	}
}

// placed counts a placement this replica committed while the store was up
// (nil-safe: outage placement off).
func (k *escrowKeeper) placed(pool, host string) {
	if k == nil {
		return
	}
	k.mu.Lock()
	k.own[hostKey{pool, host}]++
	k.mu.Unlock()
}

// left is what this replica may still place on host k during an outage:
// the smaller of its last two grants, less its placements since the last
// renewal and those of this outage; 0 once the grant has expired.
func (k *escrowKeeper) left(h hostKey, now time.Time) int {
	if !now.Before(k.expire.Add(-escrowMargin)) {
		return 0
	}
	return min(k.prev[h], k.cur[h]) - k.own[h] - k.used[h]
}

// escrowMargin is how long before its expiry a grant stops being used, for
// clocks a little apart.
const escrowMargin = time.Second

// HeldByOthers returns, per host of pool, the slots the other replicas
// hold in escrow (R-OUT2): the views count them as taken.
func (m *Mode) HeldByOthers(ctx context.Context, pool string) (map[string]int, error) {
	list, err := m.store.ListEscrows(ctx, pool, m.now())
	if err != nil {
		return nil, err
	}
	var held map[string]int
	for _, e := range list {
		if m.escrow != nil && e.Replica == m.escrow.replica {
			continue
		}
		if held == nil {
			held = map[string]int{}
		}
		held[e.Host] += e.Slots
	}
	return held, nil
}

// Unwritten counts this replica's outage placements on a host not yet
// written (R-OUT3): a commit's limit is lowered by them.
func (m *Mode) Unwritten(pool, host string) int {
	return m.escrow.unwritten(hostKey{pool, host})
}

// Placed counts a placement this replica committed while the store was
// up, against its escrow on host.
func (m *Mode) Placed(pool, host string) { m.escrow.placed(pool, host) }

// unwritten counts the outage placements on h not yet written (nil-safe).
func (k *escrowKeeper) unwritten(h hostKey) int {
	if k == nil {
		return 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.used[h]
}

// placeInOutage places a user the view does not know while the store is
// down, within this replica's escrow (R-OUT3): on a host that placement
// would give a new session (placement.TakesNewSession, judged as of
// outageTime) with slots left in it, fewest sessions first (most for DepthFirst), then by
// name. The session is answered Pending at once and written when the
// store is back. Without outage placement, or with no share left, the
// connect is refused with cause (StoreUnavailable).
func (m *Mode) placeInOutage(v *poolview.View, req vdibroker.ConnectRequest, cause error) (*vdibroker.ConnectAnswer, error) {
	k := m.escrow
	if k == nil || req.DryRun {
		return nil, cause
	}
	now := m.now()
	pool, loaded := v.Pool()
	if !loaded || pool.HostPoolType != vdibroker.Pooled {
		return nil, cause
	}
	timeout := pool.HeartbeatTimeout()
	hosts := v.Hosts()
	k.mu.Lock()
	var cands []placement.Host
	for _, h := range hosts {
		if placement.TakesNewSession(&h, timeout, m.outageTime(&h, now)) && k.left(hostKey{pool.Name, h.Name}, now) > 0 &&
			(req.RemoteApp == nil || !h.NoRemoteApps) { // an application only where it runs (R-E12)
			cands = append(cands, h)
		}
	}
	if len(cands) == 0 {
		k.mu.Unlock()
		return nil, cause
	}
	slices.SortFunc(cands, func(a, b placement.Host) int {
		c := cmp.Compare(a.Sessions, b.Sessions)
		if pool.LoadBalancerType == vdibroker.DepthFirst {
			c = -c
		}
		return cmp.Or(c, cmp.Compare(a.Name, b.Name))
	})
	chosen := cands[0]
	hk := hostKey{pool.Name, chosen.Name}
	k.used[hk]++
	left := k.left(hk, now)
	ex := placement.Explain{Pool: pool.Name, User: req.User, Algorithm: pool.LoadBalancerType, Time: now.UTC(),
		Chosen: chosen.Name, Rank: 1, CandidateCount: len(cands), OutageMode: true,
		Note: fmt.Sprintf("placed in outage mode by replica %s within its escrow on %s (%d slots left there)", k.replica, chosen.Name, left)}
	for i, h := range cands {
		if i == placement.ExplainLimit {
			break
		}
		ex.Candidates = append(ex.Candidates, placement.Candidate{Host: h.Name, Sessions: h.Sessions, Connecting: h.Connecting})
	}
	record := placement.AppendRecord(nil, &ex)
	sess := &vdibroker.UserSession{ID: vdibroker.NewID(), User: req.User, HostPool: pool.Name, SessionHost: chosen.Name,
		State: vdibroker.StatePending, CreateTime: now.UTC(), StateTime: now.UTC()}
	k.pending = append(k.pending, &outagePlacement{sess: sess, record: record})
	k.mu.Unlock()
	addr := v.AddSession(chosen.Name)
	v.RememberUser(req.User, sess)
	m.log.Info("placed during a store outage within this replica's escrow", "pool", pool.Name, "user", req.User, "host", chosen.Name, "left", left)
	a := &vdibroker.ConnectAnswer{ConnectResponse: m.answer(pool, req, chosen.Name, addr), Created: true}
	a.SessionID = sess.ID
	return a, nil
}

// WriteOutagePlacements writes the sessions placed during the outage, once
// the store is back, before the held heartbeats (which would otherwise
// adopt them). One the store refuses is left to the host's agent: its
// next report has the user, and the session is adopted (R-S2).
func (m *Mode) WriteOutagePlacements() {
	k := m.escrow
	if k == nil {
		return
	}
	k.mu.Lock()
	todo := k.pending
	k.pending = nil
	if len(todo) > 0 {
		k.writing++
	}
	k.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	defer func() {
		k.mu.Lock()
		k.writing--
		k.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	written := 0
	for i, p := range todo {
		err := m.writeOutagePlacement(ctx, p)
		switch {
		case err == nil:
			written++
		case IsStoreDown(err):
			k.mu.Lock()
			k.pending = append(todo[i:len(todo):len(todo)], k.pending...)
			k.mu.Unlock()
			return // down again: the rest waits for the next recovery
		case errors.Is(err, vdibroker.ErrUserHasSession):
			m.log.Warn("a session placed during the outage was not written: the user has another (placed elsewhere, or adopted from a report)",
				"pool", p.sess.HostPool, "user", p.sess.User, "host", p.sess.SessionHost)
		default:
			m.log.Error("a session placed during the outage was not written; the host's agent will report it and it is adopted (R-S2)",
				"pool", p.sess.HostPool, "user", p.sess.User, "host", p.sess.SessionHost, "err", err)
		}
	}
	k.mu.Lock()
	clear(k.used)
	k.mu.Unlock()
	m.log.Info("wrote the sessions placed during the outage", "written", written, "of", len(todo))
}

// OutagePlacementsWaiting tells a reader of sessions by id (the session
// directory's passes, R-G1) that this replica holds sessions placed
// during an outage, whose ids are old, not yet written, or is writing
// them: only its memory has them. Those written, by any replica, bump a
// count in the store (PlacementCommit.OutagePlacement), which every
// replica reads.
func (m *Mode) OutagePlacementsWaiting() bool {
	k := m.escrow
	if k == nil {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.pending) > 0 || k.writing > 0
}

// writeOutagePlacement writes one session placed during the outage. When
// the user has an open session already that the host reported and the
// broker adopted (R-S2) — another replica applied the host's heartbeats
// first — that is this very logon: the adopted record is ended (reason
// OutagePlacementWritten) and this one, with its decision record, written
// in its place. Should the write fail then, the host's next report adopts
// the user again.
func (m *Mode) writeOutagePlacement(ctx context.Context, p *outagePlacement) error {
	pool, err := m.store.GetHostPool(ctx, p.sess.HostPool)
	if err != nil {
		return err
	}
	commit := func() error {
		return m.store.CommitPlacement(ctx, &vdibroker.PlacementCommit{Session: p.sess, MaxSessionLimit: pool.MaxSessionLimit,
			Pooled: true, Record: p.record, OutagePlacement: true})
	}
	err = commit()
	if err != nil && !errors.Is(err, vdibroker.ErrUserHasSession) {
		return err
	}
	// Refused for an adopted record, or written while another replica's
	// heartbeat adopted the logon at the same moment: end the adopted one.
	list, lerr := m.store.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: pool.Name, User: p.sess.User})
	if lerr != nil {
		return errors.Join(err, lerr)
	}
	for _, us := range list {
		if us.Open() && us.Adopted && us.SessionHost == p.sess.SessionHost && us.ID != p.sess.ID {
			if eerr := m.store.EndSession(ctx, pool.Name, us.ID, vdibroker.EndOutagePlacementWritten, m.now()); eerr != nil {
				return errors.Join(err, eerr)
			}
			if err != nil {
				return commit()
			}
		}
	}
	return err
}
