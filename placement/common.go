package placement

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/loadindex"
)

// ExplainLimit is how many candidates and how many excluded hosts an Explain
// lists; CandidateCount and ExcludedCounts give the full numbers. 50 lists
// every host of the pools most farms have (an admin asking "why not
// rds-06?" finds it in the record), while a pool of thousands still writes
// a record of a few kilobytes per placement and decides in
// O(log n + ExplainLimit).
const ExplainLimit = 50

// DefaultHeartbeatTimeout applies when the pool's heartbeatTimeoutSeconds is
// not set (SPEC §2 default 90).
const DefaultHeartbeatTimeout = 90 * time.Second

// reasonOrder is the order in which a host's exclusion reason is decided:
// the first that applies is the one recorded.
// A host that cannot run RemoteApps is reported so first for an
// application connect: it is the one reason that no wait or drain lifts.
var reasonOrder = []string{
	ReasonNoRemoteApps, ReasonShutdown, ReasonUnavailable, ReasonAssignedToOthers,
	ReasonDrained, ReasonAutoscaleDrained, ReasonAtLimit, ReasonHostThreshold,
}

// algorithmOf returns the pool's algorithm, defaulting like SPEC §2: an
// unknown or empty loadBalancerType is BreadthFirst for a Pooled pool and
// Persistent for a Personal one.
func algorithmOf(p Pool) string {
	switch p.LoadBalancerType {
	case vdibroker.BreadthFirst, vdibroker.DepthFirst, vdibroker.LoadIndex:
		if p.HostPoolType != vdibroker.Personal {
			return p.LoadBalancerType
		}
	case vdibroker.Persistent, vdibroker.MultiplePersistent:
		if p.HostPoolType != vdibroker.Pooled {
			return p.LoadBalancerType
		}
	}
	if p.HostPoolType == vdibroker.Personal {
		return vdibroker.Persistent
	}
	return vdibroker.BreadthFirst
}

func personal(algo string) bool {
	return algo == vdibroker.Persistent || algo == vdibroker.MultiplePersistent
}

func limitOf(p Pool) int {
	if p.MaxSessionLimit <= 0 {
		return vdibroker.NoSessionLimit
	}
	return p.MaxSessionLimit
}

func timeoutOf(p Pool) time.Duration {
	if p.HeartbeatTimeoutSeconds <= 0 {
		return DefaultHeartbeatTimeout
	}
	return time.Duration(p.HeartbeatTimeoutSeconds) * time.Second
}

// Status is R-H1's status of h at now, timeout being the pool's heartbeat
// timeout: the one reading of a placement host's status, for placement
// and for whoever decides from a view of placement hosts (the broker's
// reconnect preference, outage placement).
func Status(h *Host, timeout time.Duration, now time.Time) string {
	sh := vdibroker.SessionHost{
		ShuttingDown:  h.ShuttingDown,
		LastHeartBeat: h.LastHeartBeat,
		HealthError:   h.HealthError,
	}
	if h.PowerStopped {
		sh.PowerState = vdibroker.PowerStopped
	}
	return vdibroker.HostStatus(&sh, timeout, now)
}

// TakesNewSession reports whether h may take a new session at now, before
// any count is looked at: its status takes sessions (R-H1: not Shutdown,
// which a stopped or stopping power state is, nor Unavailable) and
// neither an admin (R-C2) nor the autoscaler (R-A3) drains it. Every
// placement applies it first (classify); the limit (R-C4) and the host
// thresholds (R-LI2) come after, and outage placement counts its escrow
// in their place (R-OUT3).
func TakesNewSession(h *Host, timeout time.Duration, now time.Time) bool {
	return statusReason(Status(h, timeout, now)) == "" && drainReason(h) == ""
}

// AnswersAdopted reports whether a reconnect (R-C1) may answer user's
// session on h that the broker did not place but h reported (adopted,
// R-S2): only where placement would have put that user, h's own report
// of them aside. A host's report alone never routes a user:
//   - h takes sessions (R-H1: not Unavailable nor Shutdown);
//   - in a personal pool, h is assigned to user (R-PE1; drain does not
//     stop the assigned user, R-PE4);
//   - in a pooled pool, neither an admin (R-C2) nor the autoscaler
//     (R-A3) drains h;
//   - h's other sessions, placed and adopted alike, leave room under the
//     limit (R-C4): h.Sessions, which counts this one, is at most the
//     limit.
//
// Worked: a drained pooled host with limit 1 that adopted five users
// answers none of them (drained, and 4 others >= 1); an undrained one
// with limit 5 and five adopted answers each (4 others < 5), with six
// none (5 others).
func AnswersAdopted(p Pool, h *Host, user string, now time.Time) bool {
	s := newSettings(p)
	if statusReason(Status(h, s.timeout, now)) != "" || h.Sessions-1 >= s.limit {
		return false
	}
	if personal(s.algo) {
		return assignedTo(h, user)
	}
	return drainReason(h) == ""
}

// statusReason is the exclusion reason of R-H1 status st ("" when a host
// in it takes sessions).
func statusReason(st string) string {
	switch st {
	case vdibroker.StatusShutdown:
		return ReasonShutdown
	case vdibroker.StatusUnavailable:
		return ReasonUnavailable
	}
	return ""
}

// drainReason is the exclusion reason of h's drains ("" when none is on).
func drainReason(h *Host) string {
	switch {
	case !h.AllowNewSession:
		return ReasonDrained
	case h.AutoscaleDrain:
		return ReasonAutoscaleDrained
	}
	return ""
}

// settings are the pool figures a decision uses, derived once per SetPool.
type settings struct {
	pool    Pool
	algo    string
	limit   int
	timeout time.Duration
	lb      vdibroker.LoadBalancing
	// remoteApp is set for the decision of an application connect
	// (Request.RemoteApp): classify then leaves out the hosts that
	// cannot run RemoteApps (R-E12).
	remoteApp bool
	// t, c, m are R-LI3's T, C and M; t and c are "no threshold" (101 and
	// maxInt) when the pool's value is 0 (SPEC §6: 0 means not used).
	t, c, m int
}

func newSettings(p Pool) settings {
	s := settings{
		pool: p, algo: algorithmOf(p), limit: limitOf(p), timeout: timeoutOf(p),
		lb: p.LoadBalancing,
		t:  p.LoadBalancing.LoadIndexThreshold,
		c:  p.LoadBalancing.ConnectingSessionThreshold,
		m:  max(p.LoadBalancing.MinServersInQueue, 1),
	}
	if s.t <= 0 {
		s.t = 101
	}
	if s.c <= 0 {
		s.c = int(^uint(0) >> 1)
	}
	return s
}

// hostThresholds returns the host-side thresholds of R-LI2 with R-LI5's
// precedence: the host's own policy wins over the pool's.
func (s *settings) hostThresholds(h *Host) (loadIdx, connecting int) {
	loadIdx, connecting = s.lb.HostLoadIndexThreshold, s.lb.HostConnectingSessionThreshold
	if v := h.Policy.HostLoadIndexThreshold; v != nil {
		loadIdx = *v
	}
	if v := h.Policy.HostConnectingSessionThreshold; v != nil {
		connecting = *v
	}
	return loadIdx, connecting
}

// overHostThreshold is R-LI2's host-side rejection.
func (s *settings) overHostThreshold(h *Host, li int) bool {
	ti, tc := s.hostThresholds(h)
	return (ti > 0 && li >= ti) || (tc > 0 && h.Connecting >= tc)
}

// lbOff reports R-IDX3's "load balancing is off": custom script configured
// and no host reports a value. Placement is then round robin.
func (s *settings) lbOff(stats loadindex.Pool) bool {
	return s.lb.UseCustomScript && !stats.AnyCustom
}

// loadIndex is the index placement uses for h.
func (s *settings) loadIndex(h *Host, stats loadindex.Pool) int {
	return loadindex.Compute(s.lb, s.limit, loadindex.Host{
		Sessions: h.Sessions, Metrics: h.Metrics, MetricsSessions: h.MetricsSessions,
	}, stats)
}

// classify returns why h cannot take a new session ("" when it can), in
// reasonOrder. st is h's R-H1 status; li its load index (LoadIndex only).
// Personal pools exclude hosts assigned to anyone (for a user without an
// assignment) and never apply host-side thresholds.
func (s *settings) classify(h *Host, st string, li int) string {
	if s.remoteApp && h.NoRemoteApps {
		return ReasonNoRemoteApps
	}
	if r := statusReason(st); r != "" {
		return r
	}
	switch {
	case personal(s.algo) && len(h.AssignedUsers) > 0:
		return ReasonAssignedToOthers
	case drainReason(h) != "":
		return drainReason(h)
	case h.Sessions >= s.limit:
		return ReasonAtLimit
	case s.algo == vdibroker.LoadIndex && s.overHostThreshold(h, li):
		return ReasonHostThreshold
	}
	return ""
}

// detail says in words why h was excluded for reason.
func (s *settings) detail(h *Host, reason string, li int, now time.Time) string {
	switch reason {
	case ReasonUnavailable:
		if h.LastHeartBeat == nil {
			return "no heartbeat yet"
		}
		return fmt.Sprintf("last heartbeat %s ago, timeout %s", now.Sub(*h.LastHeartBeat).Round(time.Second), s.timeout)
	case ReasonShutdown:
		if h.PowerStopped && !h.ShuttingDown {
			return "its power driver stopped it"
		}
		return "the agent reported it is shutting down"
	case ReasonDrained:
		return "allowNewSession is false"
	case ReasonAutoscaleDrained:
		return "the autoscaler drains it to stop it"
	case ReasonAtLimit:
		if h.Sessions == 1 {
			return fmt.Sprintf("1 session, maxSessionLimit %d", s.limit)
		}
		return fmt.Sprintf("%d sessions, maxSessionLimit %d", h.Sessions, s.limit)
	case ReasonHostThreshold:
		ti, tc := s.hostThresholds(h)
		if ti > 0 && li >= ti {
			return fmt.Sprintf("loadIndex %d >= hostLoadIndexThreshold %d", li, ti)
		}
		return fmt.Sprintf("%d connecting sessions >= hostConnectingSessionThreshold %d", h.Connecting, tc)
	case ReasonAssignedToOthers:
		return "assigned to another user"
	case ReasonNoRemoteApps:
		return "its agent reports it cannot run RemoteApps (remoteApps No)"
	}
	return ""
}

// candidateOf is h as an Explain candidate.
func candidateOf(h *Host, li, bucket int) Candidate {
	return Candidate{Host: h.Name, Sessions: h.Sessions, Connecting: h.Connecting, LoadIndex: li, Bucket: bucket}
}

// assignedTo reports whether user is one of h's assigned users.
func assignedTo(h *Host, user string) bool {
	return vdibroker.ContainsUser(h.AssignedUsers, user) // in any case (R-E5)
}

// noCapacity builds R-C5's error: why no host can take the session, from
// the exclusion counts, and what to do about that cause.
func noCapacity(s *settings, total int, counts map[string]int) *vdibroker.Error {
	if noneRunsApps(total, counts) {
		return remoteAppUnsupported(s, total)
	}
	why := noCapacityReason(s, total, counts)
	return vdibroker.Errorf(vdibroker.ENoCapacity,
		"host pool %q has no capacity: %s; %s", s.pool.Name, why, noCapacityAdvice(total, counts, "add session hosts"))
}

// noneRunsApps reports whether every one of the total hosts a decision
// looked at was left out because it cannot run RemoteApps (R-E12).
func noneRunsApps(total int, counts map[string]int) bool {
	return total > 0 && counts[ReasonNoRemoteApps] == total
}

// remoteAppUnsupported is R-E12's refusal of an application connect when
// none of the total hosts can run RemoteApps: no wait helps, only a host
// that can.
func remoteAppUnsupported(s *settings, total int) *vdibroker.Error {
	hosts := fmt.Sprintf("none of its %d session hosts can run RemoteApps, as their agents report", total)
	if total == 1 {
		hosts = "its only session host cannot run RemoteApps, as its agent reports"
	}
	return vdibroker.Errorf(vdibroker.ERemoteAppUnsupported,
		"host pool %q cannot open applications: %s (an xrdp host gives whole desktops only); add a session host that can (a Windows session host) or publish the application in a pool of such hosts", s.pool.Name, hosts)
}

// existingRunsNoApps is R-E12 at R-C1: the user's open session in the
// pool (one per user and pool, R-C6) is on h, which cannot run RemoteApps,
// so an application connect is refused rather than answered with a
// session that shows no window. It is not ended: it may be her desktop.
func existingRunsNoApps(s *settings, ex *Explain, e *Existing) *vdibroker.Error {
	ex.Excluded = append(ex.Excluded, Exclusion{Host: e.Host, Reason: ReasonNoRemoteApps, Detail: "the user's open session is there; " + s.detail(nil, ReasonNoRemoteApps, 0, time.Time{})})
	ex.ExcludedCounts = map[string]int{ReasonNoRemoteApps: 1}
	ex.Note = fmt.Sprintf("existing %s session %s on %s, which cannot run RemoteApps", e.State, e.SessionID, e.Host)
	return vdibroker.Errorf(vdibroker.ERemoteAppUnsupported,
		"user %q has a session in host pool %q on session host %q, which cannot run RemoteApps (as its agent reports); the application can be opened once that session has ended",
		ex.User, s.pool.Name, e.Host)
}

// remedies says what makes room again when hosts are excluded for a
// reason: only raising maxSessionLimit helps hosts at the limit, and it
// helps no drained host (R-C5). Hosts assigned to others have none but
// more hosts.
var remedies = map[string]string{
	ReasonNoRemoteApps:     "add session hosts that can run RemoteApps",
	ReasonShutdown:         "start the shut-down hosts",
	ReasonUnavailable:      "bring the unavailable hosts' agents back (start their machines, with sessionhost start where the pool has a power driver; a heartbeat within heartbeatTimeoutSeconds)",
	ReasonDrained:          "resume a drained host (allowNewSession true)",
	ReasonAutoscaleDrained: "wait for the autoscaler to lift its drain as demand grows (R-A2)",
	ReasonAtLimit:          "increase maxSessionLimit",
	ReasonHostThreshold:    "wait for the hosts' load to fall or raise their host thresholds",
}

// noCapacityAdvice is R-C5's "what to do": the remedy of each reason that
// kept hosts out, in reasonOrder, then last, which always helps ("add
// session hosts"): "resume a drained host (allowNewSession true) or add
// session hosts". A pool without hosts needs hosts registered.
func noCapacityAdvice(total int, counts map[string]int, last string) string {
	if total == 0 {
		return "register session hosts (vdibroker agent with a registration token of the pool)"
	}
	var do []string
	for _, r := range reasonOrder {
		if counts[r] > 0 && remedies[r] != "" {
			do = append(do, remedies[r])
		}
	}
	do = append(do, last)
	if len(do) == 1 {
		return do[0]
	}
	return strings.Join(do[:len(do)-1], ", ") + " or " + do[len(do)-1]
}

func noCapacityReason(s *settings, total int, counts map[string]int) string {
	if total == 0 {
		return "it has no session hosts"
	}
	phrase := map[string]string{
		ReasonNoRemoteApps:     "unable to run RemoteApps",
		ReasonShutdown:         "shut down",
		ReasonUnavailable:      fmt.Sprintf("unavailable (no heartbeat within %s)", s.timeout),
		ReasonAssignedToOthers: "assigned to other users",
		ReasonDrained:          "drained (allowNewSession false)",
		ReasonAutoscaleDrained: "drained by the autoscaler",
		ReasonAtLimit:          fmt.Sprintf("at maxSessionLimit %d", s.limit),
		ReasonHostThreshold:    "over their host load or connecting-session threshold",
	}
	var parts []string
	for _, r := range reasonOrder {
		n := counts[r]
		if n == 0 {
			continue
		}
		if n == total {
			if total == 1 {
				return "its only session host is " + phrase[r]
			}
			return fmt.Sprintf("all %d session hosts are %s", total, phrase[r])
		}
		parts = append(parts, fmt.Sprintf("%d %s", n, phrase[r]))
	}
	return "no session host can take a new session: " + strings.Join(parts, ", ")
}

// notAssigned is R-PE2's error for a user without an assigned host.
func notAssigned(s *settings, user string) *vdibroker.Error {
	return vdibroker.Errorf(vdibroker.ENotAssigned,
		"user %q has no session host assigned in host pool %q; an administrator must assign one (personalDesktopAssignmentType Direct)",
		user, s.pool.Name)
}

func defaultOptions(o Options) Options {
	if o.Rand == nil {
		o.Rand = rand.IntN
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// cloneHost copies h so the engine never shares slices with its caller.
func cloneHost(h Host) Host {
	if h.AssignedUsers != nil {
		h.AssignedUsers = append([]string(nil), h.AssignedUsers...)
	}
	return h
}

// newExplain starts the record of one decision.
func newExplain(s *settings, req Request, now time.Time) Explain {
	return Explain{
		Pool: s.pool.Name, User: req.User, Algorithm: s.algo, Time: now,
		Candidates: make([]Candidate, 0, ExplainLimit), Excluded: []Exclusion{},
	}
}

// laterBucket is the R-LI3 bucket of a LoadIndex candidate that the
// winning bucket did not list, for the record of a small pool (at most
// ExplainLimit hosts, where Explain lists every candidate): 2 for a
// non-standard host under the decision's threshold t with fewer than C
// connecting sessions, 3 for the others. It is never 1: bucket 1's hosts
// are listed when it wins, and it wins whenever it has any.
func (s *settings) laterBucket(h *Host, li, t int) int {
	if !h.StandardFeatures && li < t && h.Connecting < s.c {
		return 2
	}
	return 3
}

// byBucketThenLoad orders the later buckets' candidates of a record:
// bucket, then R-LI4's order within buckets 2 and 3 (lowest load index,
// fewest connecting sessions, query order).
func byBucketThenLoad(a, b Candidate) int {
	return cmp.Or(cmp.Compare(a.Bucket, b.Bucket), cmp.Compare(a.LoadIndex, b.LoadIndex),
		cmp.Compare(a.Connecting, b.Connecting), strings.Compare(a.Host, b.Host))
}
