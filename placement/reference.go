package placement

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/loadindex"
)

// reference is the plain implementation: every decision evaluates and sorts
// every host, then applies the rule as SPEC §4 words it. It is the yardstick
// the indexed engine is checked against, and the "naive" benchmark.
type reference struct {
	s     settings
	opts  Options
	hosts map[string]*Host
	// lastRR is the host last chosen in LoadIndex bucket 1 (R-LI4).
	lastRR string
}

// NewReference returns the plain reference implementation: each Place sorts
// all hosts and applies the rule. Use New in production.
func NewReference(pool Pool, hosts []Host, opts Options) Placer {
	r := &reference{s: newSettings(pool), opts: defaultOptions(opts), hosts: map[string]*Host{}}
	for _, h := range hosts {
		r.Upsert(h)
	}
	return r
}

func (r *reference) Upsert(h Host) {
	c := cloneHost(h)
	r.hosts[h.Name] = &c
}

func (r *reference) Remove(name string) { delete(r.hosts, name) }

func (r *reference) SetPool(p Pool) { r.s = newSettings(p) }

// SetRoundRobin implements Placer.
func (r *reference) SetRoundRobin(host string) { r.lastRR = host }

// RoundRobin implements Placer.
func (r *reference) RoundRobin() string { return r.lastRR }

func (r *reference) Host(name string) (Host, bool) {
	h, ok := r.hosts[name]
	if !ok {
		return Host{}, false
	}
	return cloneHost(*h), true
}

func (r *reference) Apply(d Decision) {
	h, ok := r.hosts[d.Host]
	if !ok || d.Reconnect || d.Host == "" {
		return
	}
	h.Sessions++
	h.Connecting++
	if d.Assign && !assignedTo(h, d.Explain.User) {
		h.AssignedUsers = append(h.AssignedUsers, d.Explain.User)
	}
	if d.Explain.Algorithm == vdibroker.LoadIndex && d.Explain.Bucket == 1 {
		r.lastRR = d.Host
	}
}

// sorted returns all hosts in query order.
func (r *reference) sorted() []*Host {
	all := make([]*Host, 0, len(r.hosts))
	for _, h := range r.hosts {
		all = append(all, h)
	}
	slices.SortFunc(all, func(a, b *Host) int { return cmp.Compare(a.Name, b.Name) })
	return all
}

// stats computes the pool-wide load index inputs (R-IDX3, R-LI6).
func (r *reference) stats() loadindex.Pool {
	var mean loadindex.Mean
	var st loadindex.Pool
	for _, h := range r.hosts {
		mean.Add(h.Metrics, h.MetricsSessions)
		if loadindex.ValidCustom(h.Metrics) {
			st.AnyCustom = true
		}
	}
	st.PerSession = mean.PerSession()
	return st
}

func (r *reference) Place(req Request) (Decision, error) {
	now := r.opts.Now()
	s := &r.s
	s.remoteApp = req.RemoteApp
	defer func() { s.remoteApp = false }()
	ex := newExplain(s, req, now)
	var d Decision
	if e := req.Existing; e != nil {
		h, ok := r.hosts[e.Host]
		st := vdibroker.StatusUnavailable
		if ok {
			st = Status(h, s.timeout, now)
		}
		if st != vdibroker.StatusUnavailable && st != vdibroker.StatusShutdown {
			if req.RemoteApp && h.NoRemoteApps {
				err := existingRunsNoApps(s, &ex, e)
				return Decision{Explain: ex}, err
			}
			return reconnect(ex, e), nil
		}
		d.EndExisting = true
		ex.Note = endNote(e, st)
	}
	stats := r.stats()
	hosts := r.sorted()
	var err error
	if personal(s.algo) {
		err = r.placePersonal(&d, &ex, req, hosts, stats, now)
	} else {
		err = r.placePooled(&d, &ex, hosts, stats, now)
	}
	d.Explain = ex
	return d, err
}

// reconnect is R-C1's answer: the user's existing session, whatever the
// host's drain, limit or thresholds.
func reconnect(ex Explain, e *Existing) Decision {
	ex.Reconnect = true
	ex.Chosen = e.Host
	ex.Note = fmt.Sprintf("existing %s session %s", e.State, e.SessionID)
	return Decision{Host: e.Host, Reconnect: true, Explain: ex}
}

func endNote(e *Existing, status string) string {
	return fmt.Sprintf("existing session %s on %s ended: host is %s", e.SessionID, e.Host, status)
}

// ranked is a candidate with its load index.
type ranked struct {
	h  *Host
	li int
}

// classifyAll splits hosts, in query order, into candidates and excluded
// hosts: it counts exclusions by reason and records the first ExplainLimit
// of them in ex.
func (r *reference) classifyAll(ex *Explain, hosts []*Host, stats loadindex.Pool, now time.Time) ([]ranked, map[string]int) {
	s := &r.s
	var cands []ranked
	counts := map[string]int{}
	for _, h := range hosts {
		li := s.loadIndex(h, stats)
		reason := s.classify(h, Status(h, s.timeout, now), li)
		if reason == "" {
			cands = append(cands, ranked{h, li})
			continue
		}
		counts[reason]++
		if len(ex.Excluded) < ExplainLimit {
			ex.Excluded = append(ex.Excluded, Exclusion{Host: h.Name, Reason: reason, Detail: s.detail(h, reason, li, now)})
		}
	}
	return cands, counts
}

func (r *reference) placePooled(d *Decision, ex *Explain, hosts []*Host, stats loadindex.Pool, now time.Time) error {
	s := &r.s
	cands, counts := r.classifyAll(ex, hosts, stats, now)
	ex.CandidateCount = len(cands)
	if len(counts) > 0 {
		ex.ExcludedCounts = counts
	}
	if len(cands) == 0 {
		err := noCapacity(s, len(hosts), counts)
		ex.NoCapacityReason = noCapacityReason(s, len(hosts), counts)
		return err
	}
	var order []ranked // candidates in the order Explain lists them
	var pick, bucket int
	switch s.algo {
	case vdibroker.DepthFirst:
		// R-DF2: most sessions first, then query order.
		slices.SortStableFunc(cands, func(a, b ranked) int { return cmp.Compare(b.h.Sessions, a.h.Sessions) })
		order = cands
	case vdibroker.LoadIndex:
		order, bucket = r.loadIndexOrder(ex, cands, stats)
	default:
		// R-BF2: fewest sessions first, then query order; draw among the
		// first ceil(n/2).
		slices.SortStableFunc(cands, func(a, b ranked) int { return cmp.Compare(a.h.Sessions, b.h.Sessions) })
		k := (len(cands) + 1) / 2
		pick = r.opts.Rand(k)
		ex.Draw = &Draw{Of: k, Value: pick}
		order = cands
	}
	chosen := order[pick]
	d.Host = chosen.h.Name
	ex.Chosen = d.Host
	ex.Rank = pick + 1
	ex.Bucket = bucket
	for _, c := range order[:min(len(order), ExplainLimit)] {
		ex.Candidates = append(ex.Candidates, candidateOf(c.h, c.li, bucket))
	}
	if s.algo == vdibroker.LoadIndex && bucket < 3 && len(hosts) <= ExplainLimit && !s.lbOff(stats) {
		// A small pool's record lists every candidate: the later buckets'
		// after the winning one's.
		t := cmp.Or(ex.RaisedThreshold, s.t)
		listed := map[string]bool{}
		for _, c := range order {
			listed[c.h.Name] = true
		}
		var later []Candidate
		for _, c := range cands {
			if !listed[c.h.Name] {
				later = append(later, candidateOf(c.h, c.li, s.laterBucket(c.h, c.li, t)))
			}
		}
		slices.SortFunc(later, byBucketThenLoad)
		ex.Candidates = append(ex.Candidates, later...)
	}
	return nil
}

// loadIndexOrder applies R-LI3 and R-LI4 to the candidates (in query order)
// and returns the winning bucket's hosts in their order, winner first.
func (r *reference) loadIndexOrder(ex *Explain, cands []ranked, stats loadindex.Pool) ([]ranked, int) {
	s := &r.s
	off := s.lbOff(stats)
	// R-LI3 bucket 1 candidates before the threshold: standard hosts with
	// fewer than C connecting sessions (every candidate when load
	// balancing is off, R-IDX3).
	var s1 []ranked
	for _, c := range cands {
		if off || (c.h.StandardFeatures && c.h.Connecting < s.c) {
			s1 = append(s1, c)
		}
	}
	t := s.t
	if !off {
		byIndex := slices.Clone(s1)
		slices.SortStableFunc(byIndex, func(a, b ranked) int { return cmp.Compare(a.li, b.li) })
		below := 0
		for _, c := range byIndex {
			if c.li < t {
				below++
			}
		}
		if below < s.m && len(byIndex) > below {
			// Raise T to admit M hosts (or all there are).
			t = byIndex[min(s.m, len(byIndex))-1].li + 1
			ex.RaisedThreshold = t
		}
	}
	var b1 []ranked
	for _, c := range s1 {
		if off || c.li < t {
			b1 = append(b1, c)
		}
	}
	if len(b1) > 0 {
		// R-LI4 round robin in query order from the host after the one last
		// chosen: rotate b1 so that host comes first.
		start := 0
		for start < len(b1) && b1[start].h.Name <= r.lastRR {
			start++
		}
		if start == len(b1) {
			start = 0
		}
		ex.RoundRobinAfter = r.lastRR
		return append(b1[start:len(b1):len(b1)], b1[:start]...), 1
	}
	byLoad := func(a, b ranked) int {
		return cmp.Or(cmp.Compare(a.li, b.li), cmp.Compare(a.h.Connecting, b.h.Connecting))
	}
	var b2 []ranked
	for _, c := range cands {
		if !c.h.StandardFeatures && c.li < t && c.h.Connecting < s.c {
			b2 = append(b2, c)
		}
	}
	if len(b2) > 0 {
		slices.SortStableFunc(b2, byLoad)
		return b2, 2
	}
	b3 := slices.Clone(cands)
	slices.SortStableFunc(b3, byLoad)
	return b3, 3
}

func (r *reference) placePersonal(d *Decision, ex *Explain, req Request, hosts []*Host, stats loadindex.Pool, now time.Time) error {
	s := &r.s
	var mine []*Host
	for _, h := range hosts {
		if assignedTo(h, req.User) {
			mine = append(mine, h)
		}
	}
	if s.algo == vdibroker.MultiplePersistent && req.SessionHost != "" {
		h, ok := r.hosts[req.SessionHost]
		if !ok || !assignedTo(h, req.User) {
			ex.Excluded = append(ex.Excluded, Exclusion{Host: req.SessionHost, Reason: ReasonNotAssigned})
			ex.ExcludedCounts = map[string]int{ReasonNotAssigned: 1}
			return vdibroker.Errorf(vdibroker.ENotAssigned,
				"session host %q is not assigned to user %q in host pool %q", req.SessionHost, req.User, s.pool.Name)
		}
		mine = []*Host{h}
	}
	if len(mine) > 0 {
		return personalAssigned(s, d, ex, mine, stats, now)
	}
	if s.pool.AssignmentType == vdibroker.Direct {
		return notAssigned(s, req.User)
	}
	// R-PE1 Automatic: the first unassigned placeable host in query order.
	cands, counts := r.classifyAll(ex, hosts, stats, now)
	return personalAutomatic(s, d, ex, cands, len(hosts), counts)
}

// personalAutomatic finishes R-PE1 from the unassigned candidates in query
// order: the first is assigned.
func personalAutomatic(s *settings, d *Decision, ex *Explain, cands []ranked, total int, counts map[string]int) error {
	ex.CandidateCount = len(cands)
	if len(counts) > 0 {
		ex.ExcludedCounts = counts
	}
	if len(cands) == 0 {
		ex.NoCapacityReason = noCapacityReason(s, total, counts)
		if noneRunsApps(total, counts) {
			return remoteAppUnsupported(s, total)
		}
		return vdibroker.Errorf(vdibroker.ENoCapacity,
			"host pool %q has no unassigned session host for a new user: %s; %s",
			s.pool.Name, ex.NoCapacityReason, noCapacityAdvice(total, counts, "add session hosts"))
	}
	for _, c := range cands[:min(len(cands), ExplainLimit)] {
		ex.Candidates = append(ex.Candidates, candidateOf(c.h, c.li, 0))
	}
	d.Host, d.Assign = cands[0].h.Name, true
	ex.Chosen, ex.Rank = d.Host, 1
	ex.Note = "first unassigned host in query order, assigned to the user (R-PE1)"
	return nil
}

// personalAssigned places on the first of the user's assigned hosts (query
// order) that can take a session: drain does not stop the assigned user
// (R-PE4), status (R-C3) and the limit (R-C4) do.
func personalAssigned(s *settings, d *Decision, ex *Explain, mine []*Host, stats loadindex.Pool, now time.Time) error {
	counts := map[string]int{}
	for _, h := range mine {
		li := s.loadIndex(h, stats)
		reason := ""
		switch st := Status(h, s.timeout, now); {
		case s.remoteApp && h.NoRemoteApps:
			reason = ReasonNoRemoteApps
		case !vdibroker.Placeable(st):
			reason = map[string]string{vdibroker.StatusShutdown: ReasonShutdown}[st]
			if reason == "" {
				reason = ReasonUnavailable
			}
		case h.Sessions >= s.limit:
			reason = ReasonAtLimit
		}
		if reason != "" {
			counts[reason]++
			if len(ex.Excluded) < ExplainLimit {
				ex.Excluded = append(ex.Excluded, Exclusion{Host: h.Name, Reason: reason, Detail: s.detail(h, reason, li, now)})
			}
			continue
		}
		if len(ex.Candidates) < ExplainLimit {
			ex.Candidates = append(ex.Candidates, candidateOf(h, li, 0))
		}
		ex.CandidateCount++
	}
	if len(counts) > 0 {
		ex.ExcludedCounts = counts
	}
	if ex.CandidateCount == 0 {
		ex.NoCapacityReason = noCapacityReason(s, len(mine), counts)
		if noneRunsApps(len(mine), counts) {
			return remoteAppUnsupported(s, len(mine))
		}
		return vdibroker.Errorf(vdibroker.ENoCapacity,
			"host pool %q: the session host assigned to user %q cannot take a session: %s; %s",
			s.pool.Name, ex.User, ex.NoCapacityReason, noCapacityAdvice(len(mine), counts, "ask an administrator to assign another"))
	}
	d.Host = ex.Candidates[0].Host
	ex.Chosen, ex.Rank = d.Host, 1
	ex.Note = "assigned host (R-PE1, R-PE3)"
	return nil
}
