package outage

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker/poolview"
	"github.com/vdibroker/vdibroker/placement"
)

// Config is what a Mode needs. Health, Store, Views and Answer are
// required.
type Config struct {
	// Health is the store's health the guarded store keeps.
	Health *Health
	// Store is the broker's store, guarded (Guard).
	Store vdibroker.Store
	// Views are the broker's pool views.
	Views *poolview.Views
	// Answer is a connect's answer for host at addr (its .rdp file).
	Answer func(pool *vdibroker.HostPool, req vdibroker.ConnectRequest, host, addr string) vdibroker.ConnectResponse
	Logger *slog.Logger // nil discards logs
	// Clock is the mode's time and the ticker of the escrow's renewals
	// (nil = the real clock).
	Clock clock.WithTicker
	// Placement configures outage placement (off unless Enabled).
	Placement Placement
	// MaintenanceInterval is the broker's: the escrow is renewed at least
	// every two of them (0 = 5s).
	MaintenanceInterval time.Duration
}

// Mode is what the broker does while its store is down: reconnects of
// users it knows are answered from memory, new users are placed within
// this replica's escrow (outage placement) or refused with
// StoreUnavailable and Retry-After, and heartbeats are accepted and kept
// (the latest per host, with every command result) to be written when the
// store is back.
type Mode struct {
	health  *Health
	store   vdibroker.Store
	views   *poolview.Views
	answer  func(pool *vdibroker.HostPool, req vdibroker.ConnectRequest, host, addr string) vdibroker.ConnectResponse
	log     *slog.Logger
	clock   clock.WithTicker
	now     func() time.Time // clock.Now
	held    heldHeartbeats
	reports reports
	escrow  *escrowKeeper // nil: outage placement off
}

// New returns the outage mode of a broker; Run starts its escrow.
func New(cfg Config) *Mode {
	m := &Mode{health: cfg.Health, store: cfg.Store, views: cfg.Views, answer: cfg.Answer, log: cfg.Logger, clock: cfg.Clock}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.clock == nil {
		m.clock = clock.RealClock{}
	}
	m.now = m.clock.Now
	if cfg.Placement.Enabled {
		m.escrow = newEscrowKeeper(m, cfg.Placement, cmp.Or(cfg.MaintenanceInterval, 5*time.Second))
	}
	return m
}

// Run renews this replica's escrow until stop, then gives it back (Wait
// waits for that); nothing without outage placement.
func (m *Mode) Run(stop <-chan struct{}) {
	if m.escrow != nil {
		m.escrow.run(stop)
	}
}

// Wait waits for Run to end, after stop.
func (m *Mode) Wait() {
	if m.escrow != nil {
		m.escrow.wg.Wait()
	}
}

// IsStoreDown reports whether err is the store's outage (StoreUnavailable).
func IsStoreDown(err error) bool {
	return vdibroker.ErrorCode(err) == vdibroker.EStoreUnavailable
}

// Connect is the connect path's one fallback while the store is down
// (cause is the StoreUnavailable that said so, or nil): the user's known
// session answered from memory, else a new one placed within this
// replica's escrow, else cause. A pod-to-pod connect whose placement was
// to record its nonce (vdibroker.WithCallNonce, R-G5) gets cause: the
// nonce cannot be recorded now, so the call is refused whatever this
// answers, and a session placed for it in escrow would be written when
// the store is back for a call its caller was told failed (a replay of
// it to each replica placing one more).
func (m *Mode) Connect(ctx context.Context, v *poolview.View, req vdibroker.ConnectRequest, cause error) (*vdibroker.ConnectAnswer, error) {
	if !IsStoreDown(cause) {
		cause = unavailable(errors.New("store down"))
	}
	if vdibroker.CallNonceFrom(ctx) != nil {
		return nil, cause
	}
	return m.reconnectFromMemory(v, req, cause)
}

// reconnectFromMemory answers a connect while the store is down: the
// user's open session as the view remembers it, on its host, when the view
// sees that host taking sessions (R-C1, R-H1). Anything else would need
// the store (a new session, ending a lost one, R-S3) and is refused with
// cause, a StoreUnavailable error.
func (m *Mode) reconnectFromMemory(v *poolview.View, req vdibroker.ConnectRequest, cause error) (*vdibroker.ConnectAnswer, error) {
	pool, loaded := v.Pool()
	if !loaded {
		return nil, cause
	}
	k, ok := v.KnownSession(req.User)
	if !ok || k.ID == "" {
		return m.placeInOutage(v, req, cause) // escrow.go; cause when off
	}
	if pool.LoadBalancerType == vdibroker.MultiplePersistent && req.SessionHost != "" && req.SessionHost != k.Host {
		return nil, cause
	}
	now := m.now()
	h, addr, known := v.Host(k.Host)
	if !known || !vdibroker.Placeable(placement.Status(&h, pool.HeartbeatTimeout(), m.outageTime(&h, now))) {
		return nil, cause // R-C1 would end it and place anew
	}
	if req.RemoteApp != nil && h.NoRemoteApps {
		return nil, cause // placement refuses an application there (R-E12)
	}
	if k.Adopted && !placement.AnswersAdopted(placement.PoolFrom(pool), &h, req.User, m.outageTime(&h, now)) {
		// A host's report alone never routes a user (R-S2); placing them
		// elsewhere needs the store, which would see the adopted session.
		return nil, cause
	}
	// Is the session still there? The host's last report says so for a
	// logged-on user; a Pending session the host has not reported is
	// answered while its user may still be logging on (R-S3).
	reported, known, goneAt := m.reports.has(hostKey{pool.Name, k.Host}, req.User)
	switch {
	case reported:
	case !goneAt.IsZero() && !goneAt.Before(k.CreateTime):
		return nil, cause // the host reported the user, then no more: logged off
	case k.State == vdibroker.StatePending && (pool.PendingTimeoutSeconds == 0 || now.Sub(k.CreateTime) <= pool.PendingTimeout()):
	case !known && k.State != vdibroker.StatePending:
		// No report from the host since this server started: nothing says
		// the session ended.
	default:
		return nil, cause // ended since (logged off), or expired (R-S3)
	}
	a := &vdibroker.ConnectAnswer{ConnectResponse: m.answer(pool, req, k.Host, addr)}
	a.Reconnect, a.DryRun, a.State = true, req.DryRun, k.State
	if !req.DryRun {
		a.SessionID = k.ID
	}
	m.log.Info("reconnect answered from memory during a store outage", "pool", pool.Name, "user", req.User, "host", k.Host)
	return a, nil
}

// outageTime is the time host h's R-H1 status is judged at while the
// store is down (R-OUT5). A host's heartbeats may all go to another
// replica (the agents' load balancer decides), which writes them to the
// store this one cannot read now: their silence here says nothing. So a
// host this replica has not heard from since the outage began is judged
// as it was then; one it has heard from (holdHeartbeat puts the heartbeat
// in the view) is judged now, its shutdown or failed health check
// included. A host that was silent already when the outage began stays so.
func (m *Mode) outageTime(h *placement.Host, now time.Time) time.Time {
	if st := m.health.Status(); !st.Up && !st.Since.IsZero() && st.Since.Before(now) &&
		(h.LastHeartBeat == nil || !h.LastHeartBeat.After(st.Since)) {
		return st.Since
	}
	return now
}

// heldHeartbeats keeps the heartbeats that arrived during an outage, to be
// applied when the store is back. Per host: the latest sessions, metrics,
// policy and flags (what reconciliation needs), and every command result
// (each was reported once, and the agent does not send it again).
//
// All hosts' held heartbeats together hold at most maxHeldBytes (R-SEC):
// a registration token with maxHosts 0 registers any number of hosts, and
// each could make this server hold some 2 MB (2,000 sessions and 1,000
// results) for as long as the outage lasts. A heartbeat that
// would take them past it is not held (hold's kept is false), and the
// host's earlier one, if any, stays as it was.
type heldHeartbeats struct {
	mu    sync.Mutex
	m     map[hostKey]*heldHeartbeat
	bytes int // what the heartbeats of m hold, as heldBytes counts
	max   int // the bound; 0 = maxHeldBytes
	// warned is when a heartbeat not held was last logged: once a
	// sweepEvery.
	warned time.Time
}

// maxHeldBytes bounds the bytes all hosts' held heartbeats hold
// (heldBytes, R-SEC). A full pod's, 10,000 hosts of 50 sessions, counts
// some 105 MB (about 190 bytes a session, a kilobyte a host); 256 MiB is
// two and a half times that, and some 125 hosts of the largest
// heartbeats an agent can send (TestMaxHeldBytesBoundsTheLargestHeartbeats).
const maxHeldBytes = 256 << 20

// MaxHeldBytes is maxHeldBytes as the documentation states it
// (docs/limits_test.go).
const MaxHeldBytes = maxHeldBytes

// Per-entry sizes for heldBytes, measured (TestHeldBytesMeasured): a
// session takes its struct (56 bytes), its logon time (24) and its three
// strings' rounding, a result its struct (40) and its two strings'
// rounding, a host the heartbeat, its metrics, policy and map slot.
const (
	heldSessionOverhead = 128
	heldResultOverhead  = 64
	heldHostOverhead    = 1024
)

// heldBytes is what hb, held for k, holds in memory, about. The sessions
// are counted by their slice's capacity: the JSON decoder grows it by
// doubling, and the held heartbeat keeps the array it decoded.
func heldBytes(k hostKey, hb *vdibroker.HeartbeatRequest) int {
	n := heldHostOverhead + len(k.pool) + len(k.host) + len(hb.HealthError) + len(hb.CredentialHash)
	n += (cap(hb.Sessions) - len(hb.Sessions)) * heldSessionOverhead
	for _, s := range hb.Sessions {
		n += heldSessionOverhead + len(s.ID) + len(s.User) + len(s.State)
	}
	n += (cap(hb.Results) - len(hb.Results)) * heldResultOverhead
	for _, r := range hb.Results {
		n += heldResultOverhead + len(r.ID) + len(r.Message)
	}
	return n
}

func (hh *heldHeartbeats) bound() int { return cmp.Or(hh.max, maxHeldBytes) }

type hostKey struct{ pool, host string }

// maxHeldResults bounds the command results held for one host during an
// outage (R-SEC): every heartbeat is answered then and its results kept,
// so one host's credential could otherwise grow them by 200 a heartbeat
// for as long as the outage lasts. No command is delivered during an
// outage: a real agent holds only the results of those delivered before,
// reported within its first heartbeats.
const maxHeldResults = 5 * vdibroker.MaxHeartbeatResults

type heldHeartbeat struct {
	hb    *vdibroker.HeartbeatRequest
	at    time.Time
	bytes int // heldBytes of hb
}

// hold keeps hb, received at at, for k, with the results of the one it
// replaces. Past the bound (maxHeldBytes) it is not held, unless force (a
// heartbeat held already, given back by a write that failed: it was
// counted within the bound a moment ago, and its results are nowhere
// else); kept says whether it was, warn whether one not held should be
// logged (once a sweepEvery).
func (hh *heldHeartbeats) hold(k hostKey, hb *vdibroker.HeartbeatRequest, at time.Time, force bool) (kept, warn bool) {
	hh.mu.Lock()
	defer hh.mu.Unlock()
	if hh.m == nil {
		hh.m = map[hostKey]*heldHeartbeat{}
	}
	c := *hb
	c.Results = heldResults(nil, hb.Results)
	if old := hh.m[k]; old != nil {
		if old.at.After(at) {
			// A write that failed gives back an older heartbeat than
			// one held meanwhile: keep the newer, add the older's results.
			c = *old.hb
			at = old.at
			c.Results = heldResults(hb.Results, old.hb.Results)
		} else {
			c.Results = heldResults(old.hb.Results, hb.Results)
		}
	}
	h := &heldHeartbeat{hb: &c, at: at, bytes: heldBytes(k, &c)}
	was := 0
	if old := hh.m[k]; old != nil {
		was = old.bytes
	}
	if !force && hh.bytes-was+h.bytes > hh.bound() {
		warn = hh.warned.IsZero() || at.Sub(hh.warned) >= sweepEvery || at.Before(hh.warned)
		if warn {
			hh.warned = at
		}
		return false, warn
	}
	hh.m[k] = h
	hh.bytes += h.bytes - was
	return true, false
}

// size returns how many hosts have a held heartbeat and the bytes they
// hold.
func (hh *heldHeartbeats) size() (hosts, bytes int) {
	hh.mu.Lock()
	defer hh.mu.Unlock()
	return len(hh.m), hh.bytes
}

// heldResults returns a's results then b's, each id once, at most
// maxHeldResults.
func heldResults(a, b []vdibroker.CommandResult) []vdibroker.CommandResult {
	out := make([]vdibroker.CommandResult, 0, min(len(a)+len(b), maxHeldResults))
	seen := make(map[string]bool, cap(out))
	for _, r := range slices.Concat(a, b) {
		if len(out) == maxHeldResults {
			break
		}
		if !seen[r.ID] {
			seen[r.ID] = true
			out = append(out, r)
		}
	}
	return out
}

// take returns and forgets k's held heartbeat (nil when none).
func (hh *heldHeartbeats) take(k hostKey) *heldHeartbeat {
	hh.mu.Lock()
	defer hh.mu.Unlock()
	h := hh.m[k]
	if h != nil {
		hh.bytes -= h.bytes
		delete(hh.m, k)
	}
	return h
}

// forget drops the held heartbeats of the hosts match says.
func (hh *heldHeartbeats) forget(match func(hostKey) bool) {
	hh.mu.Lock()
	defer hh.mu.Unlock()
	for k, h := range hh.m {
		if match(k) {
			hh.bytes -= h.bytes
			delete(hh.m, k)
		}
	}
}

// keys returns the hosts with a held heartbeat.
func (hh *heldHeartbeats) keys() []hostKey {
	hh.mu.Lock()
	defer hh.mu.Unlock()
	ks := make([]hostKey, 0, len(hh.m))
	for k := range hh.m {
		ks = append(ks, k)
	}
	return ks
}

// HoldHeartbeat accepts a heartbeat while the store is down: it is kept
// for later, the view sees the host alive (so it stays placeable for
// reconnects, and does not turn Unavailable when the store returns), and
// the answer carries no commands (they are in the store).
//
// Past the bound of all hosts' held heartbeats (maxHeldBytes) it is not
// kept. One without command results is answered all the same: the host
// is alive, and its next heartbeat once the store is back reports its
// sessions again (the host's earlier held heartbeat, if any, is written
// then as it was). One with results is refused with cause, a
// StoreUnavailable error (503 with Retry-After): its results were
// reported once, and an agent keeps those of a heartbeat refused and sends
// them again, so they are held when there is room again or written when
// the store is back.
func (m *Mode) HoldHeartbeat(host *vdibroker.SessionHost, hb *vdibroker.HeartbeatRequest, now time.Time, cause error) (*vdibroker.HeartbeatResult, error) {
	kept, warn := m.held.hold(hostKey{host.HostPool, host.Name}, hb, now, false)
	switch {
	case !kept && warn:
		hosts, bytes := m.held.size()
		m.log.Warn("a heartbeat is not held for the end of the store outage: the held heartbeats of all hosts hold their bound already (R-SEC); "+
			"one with command results is refused (the agent sends them again), one without is answered and its host reports again once the store is back",
			"pool", host.HostPool, "host", host.Name, "hosts", hosts, "bytes", bytes, "bound", m.held.bound())
	case kept:
		m.log.Debug("heartbeat held during a store outage", "pool", host.HostPool, "host", host.Name)
	}
	if !kept && len(hb.Results) > 0 {
		if !IsStoreDown(cause) {
			cause = unavailable(errors.New("store down"))
		}
		return nil, cause
	}
	res := &vdibroker.HeartbeatResult{}
	v := m.views.Peek(host.HostPool)
	if v == nil {
		return res, nil
	}
	res.Pool, _ = v.Pool()
	v.SeeHeartbeat(host.Name, now, hb.ShuttingDown, hb.HealthError)
	return res, nil
}

// Hold keeps hb, received at at, for host, to be written once the store
// is back: a held heartbeat a write that failed gives back, kept past the
// bound (it was within it when taken).
func (m *Mode) Hold(pool, host string, hb *vdibroker.HeartbeatRequest, at time.Time) {
	m.held.hold(hostKey{pool, host}, hb, at, true)
}

// TakeHeld returns and forgets host's held heartbeat and when it came
// (nil when none).
func (m *Mode) TakeHeld(pool, host string) (*vdibroker.HeartbeatRequest, time.Time) {
	if h := m.held.take(hostKey{pool, host}); h != nil {
		return h.hb, h.at
	}
	return nil, time.Time{}
}

// HeldHosts returns the hosts with a held heartbeat, as pool and host.
func (m *Mode) HeldHosts() [][2]string {
	var out [][2]string
	for _, k := range m.held.keys() {
		out = append(out, [2]string{k.pool, k.host})
	}
	return out
}

// Report records the users of host's heartbeat at now, so a reconnect
// answered from memory is one to a session the host still has. A report
// past the bound of all hosts' reports (maxReportBytes) is not kept: the
// host is then one this server has no report of, which the reconnect
// takes as before any report came (nothing says the session ended).
func (m *Mode) Report(pool, host string, sessions []vdibroker.AgentSession, now time.Time) {
	if kept, warn := m.reports.set(hostKey{pool, host}, sessions, now); !kept && warn {
		hosts, bytes := m.reports.size()
		m.log.Warn("a host's report of its users is not kept for outages: the reports of all hosts hold their bound already (R-SEC); "+
			"reconnects to its sessions during a store outage are answered as if it had not reported",
			"pool", pool, "host", host, "hosts", hosts, "bytes", bytes, "bound", m.reports.bound())
	}
}

// Forget drops what this server holds of host for an outage: its last
// report and its held heartbeat. A host deleted, or whose registration an
// admin reset (a new machine takes its name), takes them with it (R-SEC):
// they are the old machine's word.
func (m *Mode) Forget(pool, host string) {
	m.reports.forget(hostKey{pool, host})
	m.held.forget(func(k hostKey) bool { return k == hostKey{pool, host} })
}

// ForgetPool is Forget for every host of a deleted pool.
func (m *Mode) ForgetPool(pool string) {
	m.reports.forgetOfPool(pool, func(string, time.Time) bool { return true })
	m.held.forget(func(k hostKey) bool { return k.pool == pool })
}

// HostsRead forgets the reports of pool's hosts that a read of the store
// begun at begun found gone: hosts are all the pool's hosts then (none:
// the pool is gone). A report taken before begun of a host not among
// them (deleted through another replica), or made again after the
// report (deleted and registered again under its name: a new machine),
// is the old machine's word (R-SEC), which this server otherwise kept
// until the host's next heartbeat here or a day. A report taken since
// the read began is kept: the read may have missed its host's
// registration. The poolview calls it at each read of a pool's hosts
// (poolview.Config.HostsRead): it walks that pool's reports only, so a
// read of a 100-host pool costs the same beside 10,000 hosts of others.
// It returns the hosts whose reports it forgot, whose credentials the
// caller forgets too (the old machine's heartbeat is not to be taken
// from memory during a later outage).
func (m *Mode) HostsRead(pool string, hosts []*vdibroker.SessionHost, begun time.Time) (forgot []string) {
	created := make(map[string]time.Time, len(hosts))
	for _, h := range hosts {
		created[h.Name] = h.CreateTime
	}
	m.reports.forgetOfPool(pool, func(host string, at time.Time) bool {
		if !at.Before(begun) {
			return false
		}
		c, ok := created[host]
		if ok && !at.Before(c) {
			return false
		}
		forgot = append(forgot, host)
		return true
	})
	return forgot
}

// State is the size of what a Mode holds of its hosts' reports.
type State struct {
	// ReportedHosts is how many hosts' last reports are kept, and
	// ReportBytes what they hold (as counted against maxReportBytes).
	ReportedHosts, ReportBytes int
	// HeldHosts is how many hosts have a heartbeat held, and HeldBytes
	// what they hold (as counted against maxHeldBytes).
	HeldHosts, HeldBytes int
}

// State returns the size of what m holds of its hosts' reports and held
// heartbeats.
func (m *Mode) State() State {
	hosts, bytes := m.reports.size()
	held, heldBytes := m.held.size()
	return State{ReportedHosts: hosts, ReportBytes: bytes, HeldHosts: held, HeldBytes: heldBytes}
}

// reports keeps, per host, the users its agent's last heartbeat reported
// and those a report dropped since (logged off), so that a reconnect
// answered from memory during an outage is one to a session the host still
// has: the view remembers sessions, not their end.
//
// Every host's credential writes here at every heartbeat, and a
// registration token with maxHosts 0 registers any number of hosts, each
// of which could hold some 4.5 MB (2,000 users of up to 1,024 bytes gone
// and a megabyte reported). So all hosts' reports together hold at most
// maxReportBytes (R-SEC): a report that would take them past it keeps
// none of its host's gone users, and is not kept at all when its users
// alone do not fit. A host not heard from for goneFor is dropped (a host
// deleted through another replica, a machine switched off for good), at
// most every sweepEvery.
//
// The reports of one pool are linked (hostReport.prev, next) from pools,
// so a pool's are walked without the others' (HostsRead at every read of
// a pool, ForgetPool): add and drop keep m and pools in step, and the
// links' bytes are counted in reportHostOverhead.
type reports struct {
	mu    sync.Mutex
	m     map[hostKey]*hostReport
	pools map[string]*hostReport // pool -> the first of its reports
	bytes int                    // what the reports of m hold, as reportBytes counts
	max   int                    // the bound; 0 = maxReportBytes
	swept time.Time              // the last sweep of silent hosts
	// warned is when a report not kept was last logged: once a sweep.
	warned time.Time
}

type hostReport struct {
	users map[string]struct{}
	gone  map[string]time.Time // user -> when a report first lacked them
	at    time.Time            // the last report
	bytes int                  // reportBytes of this report
	// host is its host's name, and prev and next the pool's other
	// reports (reports.pools).
	host       string
	prev, next *hostReport
}

// goneFor is how long a logged-off user is remembered as gone.
const goneFor = 24 * time.Hour

// maxGone bounds the users remembered as gone for one host (R-SEC): a
// host's credential reporting new users in every heartbeat would
// otherwise grow them by 2,000 a heartbeat, each kept a day.
const maxGone = vdibroker.MaxHeartbeatSessions

// maxReportBytes bounds the bytes all hosts' reports hold (reportBytes,
// R-SEC). A full pod's, 10,000 hosts with 250,000 users who log on in a
// day, holds some 80 MB (each user reported, then gone for a day: twice
// 160 bytes); 256 MiB is three times that, and some 60 hosts of the
// largest reports an agent can send (TestReportsBound).
const maxReportBytes = 256 << 20

// MaxReportBytes is maxReportBytes as the documentation states it
// (docs/limits_test.go).
const MaxReportBytes = maxReportBytes

// Per-entry sizes for reportBytes, measured (TestReportBytesMeasured):
// a user in either map takes about 100 bytes beside its name's (the
// map's slot and its share of the buckets, the time of a gone one), and a
// host's report some 500 beside its users (its key, the struct, two maps,
// its pool's link: TestReportBytesMeasuredPoolPerHost).
const (
	reportUserOverhead = 128
	reportHostOverhead = 512
)

// sweepEvery is how often at most the reports of silent hosts are
// dropped, and a report not kept logged.
const sweepEvery = 10 * time.Minute

// reportBytes is what a report of users and gone holds in memory, about.
func reportBytes(k hostKey, users map[string]struct{}, gone map[string]time.Time) int {
	n := reportHostOverhead + len(k.pool) + len(k.host)
	for u := range users {
		n += len(u) + reportUserOverhead
	}
	for u := range gone {
		n += len(u) + reportUserOverhead
	}
	return n
}

func (r *reports) bound() int { return cmp.Or(r.max, maxReportBytes) }

// set records the users of host k's report at now. kept says whether the
// report is kept (the bound, maxReportBytes); warn whether one not kept
// should be logged (once a sweepEvery).
func (r *reports) set(k hostKey, sessions []vdibroker.AgentSession, now time.Time) (kept, warn bool) {
	// No size hint: a map keeps the room it was made with, and 2,000
	// sessions of one user would hold a 2,000-user map that reportBytes
	// counts as one user.
	users := map[string]struct{}{}
	for _, s := range sessions {
		users[s.User] = struct{}{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[hostKey]*hostReport{}
		r.pools = map[string]*hostReport{}
	}
	if now.Sub(r.swept) >= sweepEvery || now.Before(r.swept) {
		r.sweep(now)
	}
	gone := map[string]time.Time{}
	if old := r.m[k]; old != nil {
		r.drop(k)
		gone = old.gone
		for u := range old.users {
			if _, ok := users[u]; !ok {
				gone[u] = now
			}
		}
		for u, at := range gone {
			if _, back := users[u]; back || now.Sub(at) > goneFor {
				delete(gone, u)
			}
		}
		if len(gone) > maxGone {
			// The newest are kept: a reconnect during an outage is most
			// likely one of a user who left lately.
			order := slices.SortedFunc(maps.Keys(gone), func(a, b string) int {
				return cmp.Or(gone[b].Compare(gone[a]), cmp.Compare(a, b))
			})
			for _, u := range order[maxGone:] {
				delete(gone, u)
			}
		}
		// Kept in a map of their own size: a Go map never gives back
		// the room of the most it held (up to 4,000 here), which
		// reportBytes does not count, so emptying a host's gone users
		// would otherwise keep their room, uncounted, for as long as the
		// host reports.
		kept := make(map[string]time.Time, len(gone))
		maps.Copy(kept, gone)
		gone = kept
	}
	hr := &hostReport{users: users, gone: gone, at: now, bytes: reportBytes(k, users, gone)}
	if r.bytes+hr.bytes > r.bound() && len(gone) > 0 {
		// The host's own history goes first: who left it lately.
		hr.gone = map[string]time.Time{}
		hr.bytes = reportBytes(k, users, hr.gone)
	}
	if r.bytes+hr.bytes > r.bound() {
		warn = r.warned.IsZero() || now.Sub(r.warned) >= sweepEvery || now.Before(r.warned)
		if warn {
			r.warned = now
		}
		return false, warn
	}
	r.add(k, hr)
	return true, false
}

// add keeps hr as k's report, none kept before; r.mu is held.
func (r *reports) add(k hostKey, hr *hostReport) {
	r.m[k] = hr
	r.bytes += hr.bytes
	hr.host, hr.prev, hr.next = k.host, nil, r.pools[k.pool]
	if hr.next != nil {
		hr.next.prev = hr
	}
	r.pools[k.pool] = hr
}

// sweep drops the reports of hosts not heard from for goneFor: their
// users are all gone or stale, and a host silent so long is not placeable
// (R-H1), so no reconnect asks about it.
func (r *reports) sweep(now time.Time) {
	r.swept = now
	for k, hr := range r.m {
		if now.Sub(hr.at) > goneFor {
			r.drop(k)
		}
	}
}

// drop forgets k's report; r.mu is held.
func (r *reports) drop(k hostKey) {
	hr := r.m[k]
	if hr == nil {
		return
	}
	r.bytes -= hr.bytes
	delete(r.m, k)
	switch {
	case hr.prev != nil:
		hr.prev.next = hr.next
	case hr.next != nil:
		r.pools[k.pool] = hr.next
	default:
		delete(r.pools, k.pool)
	}
	if hr.next != nil {
		hr.next.prev = hr.prev
	}
	hr.prev, hr.next = nil, nil
}

// forget drops host k's report.
func (r *reports) forget(k hostKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drop(k)
}

// forgetOfPool drops the reports of pool's hosts that match, by host
// name and when taken; it walks that pool's reports alone.
func (r *reports) forgetOfPool(pool string, match func(host string, at time.Time) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for hr := r.pools[pool]; hr != nil; {
		next := hr.next
		if match(hr.host, hr.at) {
			r.drop(hostKey{pool, hr.host})
		}
		hr = next
	}
}

// size returns how many hosts' reports r keeps and the bytes they hold.
func (r *reports) size() (hosts, bytes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m), r.bytes
}

// has says whether host k's last report had user, whether this server
// has a report of k at all, and when a report stopped having user (zero
// when none did).
func (r *reports) has(k hostKey, user string) (reported, known bool, goneAt time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hr := r.m[k]
	if hr == nil {
		return false, false, time.Time{}
	}
	_, reported = hr.users[user]
	return reported, true, hr.gone[user]
}
