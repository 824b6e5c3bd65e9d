package placement

import (
	"cmp"
	"container/heap"
	"slices"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/loadindex"
)

// entry is one host in the index with the derived figures its position
// depends on. The fields a decision and a re-filing touch come first, so
// they share the entry's first cache lines.
type entry struct {
	// tree is the one tree the entry is filed in (nil while detached) and
	// key its key there.
	tree *btree
	key  uint64
	// label is the name's place in query order (order.go).
	label uint32
	// li is the load index placement uses (LoadIndex pools; −1..100), as
	// filed in the trees and the histogram.
	li int8
	// class is 0 for a candidate, else 1 + the exclusion reason's place in
	// reasonOrder.
	class uint8
	// meanDep says the entry is in meanDependent.
	meanDep bool
	// nf is how many sampled factors of h.Metrics are enabled, fv holds
	// them (in loadindex.Factors order; nf > len(fv) when more are enabled
	// than fit): the load index is then computed without reading the
	// sample (see entryLoadIndex). nfStale: not taken from the sample yet.
	nf uint8
	// heapAt is the entry's index in the deadline heap, -1 when absent;
	// hb the heartbeat (Unix ns) it is filed under there, read without
	// touching the heap.
	heapAt int32
	// slot is the entry's place in the name table (hostTable.ents), which
	// the trees' leaves hold instead of a pointer.
	slot int32
	hb   int64
	fv   [3]float64
	// h is the host as last told. The fields above fill the entry's first
	// 64 bytes and h the next 128: an entry is three cache lines.
	h Host
}

// nfStale marks entry.nf as not yet taken from the sample.
const nfStale = 255

// indexed is the engine New returns. It keeps every host in exactly one
// tree: one per exclusion reason (ordered by name, for Explain and the
// NoCapacity counts) or one of the candidate trees of the pool's algorithm.
// A deadline heap turns hosts Unavailable when their heartbeat expires, so a
// decision never has to look at every host to learn who fell silent.
type indexed struct {
	s    settings
	opts Options
	// clock is the time statuses were last evaluated at.
	clock   time.Time
	entries hostTable
	names   labels
	lastRR  string
	// rrLabel is names.atOrBefore(lastRR), recomputed when rrStale.
	rrLabel uint64
	rrStale bool

	excluded []*btree // class -> hosts by name (excluded[0] unused)
	// cands holds the candidates: BF, DF by rank; personal: unassigned by
	// name; LoadIndex: those in neither s1 nor s2 (connecting ≥ C), by load.
	cands *btree
	// LoadIndex only: s1 is bucket-1 material (standard, connecting < C, or
	// every candidate with load balancing off) by name with subtree-minimum
	// load index, for round robin; s1Hist counts it per load index (index
	// li+1), for R-LI3's count below T and M-th lowest. s2 is bucket-2
	// material (non-standard, connecting < C) by load.
	s1        *btree
	s1Hist    [102]int
	s2        *btree
	deadlines deadlineHeap
	users     map[string][]*entry // personal: user (folded, R-E5) -> assigned hosts
	// scratch holds a decision's list of hosts (see firsts).
	scratch []*entry

	// R-LI6 pool mean and R-IDX3 custom-value count.
	mean       loadindex.Mean
	perSession loadindex.Factors
	customs    int
	// meanDependent are the hosts whose load index uses the pool mean;
	// meanDirty says the mean moved since their index was computed.
	meanDependent map[*entry]struct{}
	meanDirty     bool
	// noApps are the hosts that cannot run RemoteApps (Host.NoRemoteApps),
	// filed as excluded only during an application connect's decision
	// (R-E12).
	noApps map[*entry]struct{}
}

// New returns the indexed placement engine for one pool. It keeps the pool's
// hosts ordered as sessions come and go, so a pooled decision costs
// O(log n + ExplainLimit) and a pool of 10,000 hosts decides about as fast
// as one of 100. Its decisions are the reference's, draw for draw.
func New(pool Pool, hosts []Host, opts Options) Placer {
	x := &indexed{s: newSettings(pool), opts: defaultOptions(opts), scratch: make([]*entry, 0, ExplainLimit)}
	x.entries.reserve(len(hosts))
	var list []*entry
	for _, h := range hosts {
		if e := x.entries.get(h.Name); e != nil {
			e.h = cloneHost(h) // the last of a name wins, as with Upsert
			continue
		}
		e, _ := x.entries.add(h) // reserved: nothing moves
		list = append(list, e)
	}
	x.names.build(list)
	for _, e := range list {
		x.account(&e.h, +1)
	}
	x.customFlipped(false)
	x.rebuild()
	return x
}

// reset empties the structures (entries stay, detached).
func (x *indexed) reset() {
	ents := &x.entries.ents
	x.excluded = make([]*btree, 1+len(reasonOrder))
	for i := range x.excluded {
		x.excluded[i] = newTree(byName, false, ents)
	}
	switch x.s.algo {
	case vdibroker.BreadthFirst:
		x.cands = newTree(bySessionsAsc, false, ents)
	case vdibroker.DepthFirst:
		x.cands = newTree(bySessionsDesc, false, ents)
	case vdibroker.LoadIndex:
		x.cands = newTree(byLoad, false, ents)
	default:
		x.cands = newTree(byName, false, ents)
	}
	x.s1, x.s2 = newTree(byName, true, ents), newTree(byLoad, false, ents)
	x.s1Hist = [102]int{}
	x.deadlines = x.deadlines[:0]
	x.users = map[string][]*entry{}
	x.meanDependent = map[*entry]struct{}{}
	x.noApps = map[*entry]struct{}{}
	x.meanDirty = false
	x.rrStale = true
	for _, e := range x.names.sorted {
		e.tree, e.heapAt, e.meanDep, e.nf = nil, -1, false, nfStale
	}
}

// rebuild re-derives every entry: after a pool change, a clock that went
// back, a relabelling, or a change of R-IDX3's "any host reports a custom
// value".
func (x *indexed) rebuild() {
	x.reset()
	for _, e := range x.names.sorted {
		x.addUsers(e)
		x.noteApps(e)
		x.derive(e)
	}
}

// noteApps files e in noApps while its host cannot run RemoteApps
// (R-E12). Called where e.h.NoRemoteApps is set or may have changed, not
// by derive: a desktop connect's Apply re-derives its host, and in a pool
// of hosts that cannot run RemoteApps (xrdp) a map write each time would
// make it slower.
func (x *indexed) noteApps(e *entry) {
	if e.h.NoRemoteApps {
		x.noApps[e] = struct{}{}
	} else {
		delete(x.noApps, e)
	}
}

func (x *indexed) stats() loadindex.Pool {
	return loadindex.Pool{AnyCustom: x.customs > 0, PerSession: x.perSession}
}

// derive computes e's load index and class from e.h at x.clock and files e
// in the tree they call for: where it was when nothing it is ordered by
// changed (a load index that moved in the round robin tree is one
// descent), else out of the old tree and into the new.
func (x *indexed) derive(e *entry) {
	s := &x.s
	old := e.li
	e.li = int8(x.entryLoadIndex(e))
	st := Status(&e.h, s.timeout, x.clock)
	e.class = classOf(s.classify(&e.h, st, int(e.li)))
	// Only a host whose status its heartbeat's expiry changes waits in
	// the expiry heap: not one Unavailable already, nor one Shutdown
	// (stopping, or stopped by its power driver), which stays Shutdown
	// when the heartbeat expires and would stay on top of the heap.
	x.syncDeadline(e, e.h.LastHeartBeat != nil && vdibroker.Placeable(st))
	if dep := x.dependsOnMean(e); dep != e.meanDep {
		e.meanDep = dep
		if dep {
			x.meanDependent[e] = struct{}{}
		} else {
			delete(x.meanDependent, e)
		}
	}
	t := x.treeFor(e)
	k := t.order.key(e)
	if e.tree == x.s1 {
		x.s1Hist[int(old)+1]--
	}
	switch {
	case e.tree != t || e.key != k:
		if e.tree != nil {
			e.tree.Delete(e.key, e)
		}
		t.Insert(k, e)
	case t.withLI && old != e.li:
		t.SetLI(k, e)
	}
	e.tree, e.key = t, k
	if t == x.s1 {
		x.s1Hist[int(e.li)+1]++
	}
}

// treeFor is the tree e belongs in, from its class and figures.
func (x *indexed) treeFor(e *entry) *btree {
	s := &x.s
	if e.class != 0 {
		return x.excluded[e.class]
	}
	if s.algo == vdibroker.LoadIndex {
		off := s.lbOff(x.stats())
		switch {
		case off || (e.h.StandardFeatures && e.h.Connecting < s.c):
			return x.s1
		case !e.h.StandardFeatures && e.h.Connecting < s.c:
			return x.s2
		}
	}
	return x.cands
}

// detach takes e out of every structure.
func (x *indexed) detach(e *entry) {
	if e.tree == x.s1 {
		x.s1Hist[int(e.li)+1]--
	}
	if e.tree != nil {
		e.tree.Delete(e.key, e)
		e.tree = nil
	}
	x.dropUsers(e)
	delete(x.noApps, e)
	if e.meanDep {
		delete(x.meanDependent, e)
		e.meanDep = false
	}
	x.syncDeadline(e, false)
}

// addUsers files e under its assigned users; dropUsers takes it out.
func (x *indexed) addUsers(e *entry) {
	for _, u := range e.h.AssignedUsers {
		k := vdibroker.FoldUser(u)
		x.users[k] = append(x.users[k], e)
	}
}

func (x *indexed) dropUsers(e *entry) {
	for _, u := range e.h.AssignedUsers {
		k := vdibroker.FoldUser(u)
		list := x.users[k]
		if i := slices.Index(list, e); i >= 0 {
			list = slices.Delete(list, i, i+1)
		}
		if len(list) == 0 {
			delete(x.users, k)
		} else {
			x.users[k] = list
		}
	}
}

func (x *indexed) Upsert(h Host) {
	anyCustom := x.customs > 0
	e := x.entries.get(h.Name)
	if e == nil {
		var moved bool
		e, moved = x.entries.add(h)
		if moved {
			// The table moved every entry: the trees are rebuilt below.
			x.names.moved(&x.entries, e)
		}
		relabelled := x.names.add(e)
		x.rrStale = true
		x.account(&e.h, +1)
		if x.customFlipped(anyCustom) || relabelled || moved {
			x.rebuild()
			return
		}
		x.addUsers(e)
		x.noteApps(e)
		x.derive(e)
		return
	}
	nh := cloneHost(h)
	wasNoApps := e.h.NoRemoteApps
	// The pool-wide inputs change only with the sample (most updates are a
	// session count): skip reading the old sample when it is the same.
	if nh.Metrics != e.h.Metrics || nh.MetricsSessions != e.h.MetricsSessions {
		e.nf = nfStale
		x.account(&e.h, -1)
		x.account(&nh, +1)
		if x.customFlipped(anyCustom) {
			e.h = nh
			x.rebuild()
			return
		}
	}
	if slices.Equal(nh.AssignedUsers, e.h.AssignedUsers) {
		nh.AssignedUsers = e.h.AssignedUsers
		e.h = nh
	} else {
		x.dropUsers(e)
		e.h = nh
		x.addUsers(e)
	}
	if e.h.NoRemoteApps != wasNoApps {
		x.noteApps(e)
	}
	x.derive(e)
}

// loadIndex is h's load index as the trees and filters use it: LoadIndex
// pools only (the other algorithms compute it fresh for the few hosts an
// Explain lists, and skipping it spares a cache miss on the metrics).
func (x *indexed) loadIndex(h *Host) int {
	if x.s.algo != vdibroker.LoadIndex {
		return 0
	}
	return x.s.loadIndex(h, x.stats())
}

// entryLoadIndex is loadIndex(&e.h) computed from the enabled sampled
// factors kept in e, so that a host whose session count changed gets its
// index without reading its sample (at 100,000 hosts, a cache miss per
// session placed or ended). The figures are loadindex.Compute's: Compensate
// and FactorIndex look only at enabled factors. Samples are immutable (a new
// sample is a new *Metrics), so the copy lives until the Metrics pointer or
// the pool settings change.
func (x *indexed) entryLoadIndex(e *entry) int {
	h, s := &e.h, &x.s
	if s.algo != vdibroker.LoadIndex || s.lb.UseCustomScript || h.Metrics == nil {
		return x.loadIndex(h)
	}
	lb := &s.lb
	thresholds := [5]float64{lb.CPUThreshold, lb.MemoryThreshold, lb.DiskQueueLengthThreshold, lb.DiskReadLatencyThreshold, lb.DiskWriteLatencyThreshold}
	if e.nf == nfStale {
		m := h.Metrics
		values := [5]float64{m.CPUPercent, m.MemoryPercent, m.DiskQueueLength, m.DiskReadLatencyMs, m.DiskWriteLatencyMs}
		e.nf = 0
		for i, t := range thresholds {
			if t > 0 {
				if int(e.nf) < len(e.fv) {
					e.fv[e.nf] = values[i]
				}
				e.nf++
			}
		}
	}
	if int(e.nf) > len(e.fv) {
		return x.loadIndex(h)
	}
	var values [5]float64
	j := 0
	for i, t := range thresholds {
		if t > 0 {
			values[i] = e.fv[j]
			j++
		}
	}
	f := loadindex.Factors{CPU: values[0], Memory: values[1], DiskQueue: values[2], DiskRead: values[3], DiskWrite: values[4]}
	f = loadindex.Compensate(f, h.MetricsSessions, h.Sessions, x.perSession)
	idx, enabled := loadindex.FactorIndex(*lb, f)
	return loadindex.WithSessions(*lb, s.limit, h.Sessions, idx, enabled)
}

// classOf is a reason's class (see entry.class); 0 for "".
func classOf(reason string) uint8 {
	for i, r := range reasonOrder {
		if r == reason {
			return uint8(i + 1)
		}
	}
	return 0
}

// dependsOnMean reports whether e's load index uses the pool's mean
// per-session values (R-LI6: sampled with no session, sessions since).
func (x *indexed) dependsOnMean(e *entry) bool {
	return e.h.Metrics != nil && e.h.MetricsSessions <= 0 && e.h.Sessions > e.h.MetricsSessions && !x.s.lb.UseCustomScript
}

func (x *indexed) Remove(name string) {
	e := x.entries.get(name)
	if e == nil {
		return
	}
	anyCustom := x.customs > 0
	x.detach(e)
	x.names.remove(e)
	x.account(&e.h, -1)
	x.entries.del(e)
	if x.customFlipped(anyCustom) {
		x.rebuild()
	}
}

// customFlipped settles the pool-wide inputs after account calls. It notes
// a moved R-LI6 mean (the hosts that use it are re-derived at the next
// Place) and reports whether every host must be re-derived because R-IDX3's
// "some host reports a custom value" changed under useCustomScript (hosts
// without a value go from -1 to 25 or back, and round robin on or off).
func (x *indexed) customFlipped(before bool) bool {
	if ps := x.mean.PerSession(); ps != x.perSession {
		x.perSession, x.meanDirty = ps, true
	}
	return x.s.lb.UseCustomScript && before != (x.customs > 0)
}

// account adds (sign +1) or removes (-1) h's part of the pool-wide load
// index inputs: the R-LI6 mean and the R-IDX3 custom-value count.
func (x *indexed) account(h *Host, sign int) {
	if sign > 0 {
		x.mean.Add(h.Metrics, h.MetricsSessions)
	} else {
		x.mean.Remove(h.Metrics, h.MetricsSessions)
	}
	if loadindex.ValidCustom(h.Metrics) {
		x.customs += sign
	}
}

// SetRoundRobin implements Placer.
func (x *indexed) SetRoundRobin(host string) { x.lastRR, x.rrStale = host, true }

// RoundRobin implements Placer.
func (x *indexed) RoundRobin() string { return x.lastRR }

func (x *indexed) SetPool(p Pool) {
	x.s = newSettings(p)
	x.rebuild()
}

func (x *indexed) Host(name string) (Host, bool) {
	e := x.entries.get(name)
	if e == nil {
		return Host{}, false
	}
	return cloneHost(e.h), true
}

func (x *indexed) Apply(d Decision) {
	if d.Reconnect || d.Host == "" {
		return
	}
	// The decision carries its entry: no name lookup unless the entry is no
	// longer one of this engine's candidates (removed or excluded since, or
	// the decision came from another engine).
	e := d.e
	if e == nil || (e.tree != x.cands && e.tree != x.s1 && e.tree != x.s2) || e.h.Name != d.Host {
		if e = x.entries.get(d.Host); e == nil {
			return
		}
	}
	e.h.Sessions++
	e.h.Connecting++
	if d.Assign && !assignedTo(&e.h, d.Explain.User) {
		x.dropUsers(e)
		e.h.AssignedUsers = append(slices.Clip(e.h.AssignedUsers), d.Explain.User)
		x.addUsers(e)
	}
	x.derive(e)
	if d.Explain.Algorithm == vdibroker.LoadIndex && d.Explain.Bucket == 1 {
		x.lastRR, x.rrLabel, x.rrStale = d.Host, uint64(e.label), false
	}
}

// advance brings every status to now: hosts whose heartbeat expired leave
// the candidates (R-H1, R-C3). A clock that went back re-derives all.
func (x *indexed) advance(now time.Time) {
	if now.Before(x.clock) {
		x.clock = now
		x.rebuild()
		return
	}
	x.clock = now
	for len(x.deadlines) > 0 {
		top := x.deadlines[0]
		if now.Sub(top.hb) <= x.s.timeout {
			break
		}
		x.derive(top.e) // now Unavailable: leaves the heap
	}
	if x.meanDirty && x.s.algo == vdibroker.LoadIndex {
		stats := x.stats()
		var stale []*entry
		for e := range x.meanDependent {
			if x.s.loadIndex(&e.h, stats) != int(e.li) {
				stale = append(stale, e)
			}
		}
		for _, e := range stale {
			x.derive(e)
		}
	}
	x.meanDirty = false
}

func (x *indexed) Place(req Request) (Decision, error) {
	now := x.opts.Now()
	x.advance(now)
	s := &x.s
	ex := newExplain(s, req, now)
	var d Decision
	if e := req.Existing; e != nil {
		h := x.entries.get(e.Host)
		st := vdibroker.StatusUnavailable
		if h != nil {
			st = Status(&h.h, s.timeout, now)
		}
		if st != vdibroker.StatusUnavailable && st != vdibroker.StatusShutdown {
			if req.RemoteApp && h.h.NoRemoteApps {
				err := existingRunsNoApps(s, &ex, e)
				return Decision{Explain: ex}, err
			}
			return reconnect(ex, e), nil
		}
		d.EndExisting = true
		ex.Note = endNote(e, st)
	}
	if req.RemoteApp && x.entries.n > 0 && len(x.noApps) == x.entries.n && !personal(s.algo) {
		// R-E12 in a pool of hosts that all cannot run RemoteApps (a
		// pool of xrdp hosts): refused without filing every host twice.
		err := x.noneRunsApps(&ex, now)
		d.Explain = ex
		return d, err
	}
	if req.RemoteApp && len(x.noApps) > 0 {
		// R-E12: the hosts that cannot run RemoteApps are excluded for
		// this decision only, filed back as they were after it.
		x.fileNoApps(true)
		defer x.fileNoApps(false)
	}
	var err error
	if personal(s.algo) {
		err = x.placePersonal(&d, &ex, req, now)
	} else {
		err = x.placePooled(&d, &ex, now)
	}
	d.Explain = ex
	return d, err
}

// fileNoApps turns the application connect's exclusion of the hosts
// that cannot run RemoteApps (R-E12) on or off and files them again:
// O(k log n) for k such hosts, paid only by application connects in
// pools that have some.
func (x *indexed) fileNoApps(on bool) {
	x.s.remoteApp = on
	for e := range x.noApps {
		x.derive(e)
	}
}

// noneRunsApps is a pooled decision's refusal of an application when
// every host of the pool cannot run RemoteApps (R-E12): each is excluded
// for that reason first (reasonOrder), so the record is the first
// ExplainLimit hosts in query order, as placePooled would make it.
func (x *indexed) noneRunsApps(ex *Explain, now time.Time) error {
	s := &x.s
	s.remoteApp = true
	defer func() { s.remoteApp = false }()
	for _, e := range x.names.sorted[:min(len(x.names.sorted), ExplainLimit)] {
		ex.Excluded = append(ex.Excluded, Exclusion{Host: e.h.Name, Reason: ReasonNoRemoteApps, Detail: s.detail(&e.h, ReasonNoRemoteApps, int(e.li), now)})
	}
	counts := map[string]int{ReasonNoRemoteApps: x.entries.n}
	ex.ExcludedCounts = counts
	ex.NoCapacityReason = noCapacityReason(s, x.entries.n, counts)
	return noCapacity(s, x.entries.n, counts)
}

// explainExcluded fills the first ExplainLimit excluded hosts in query order
// (a merge of the per-reason trees' first ExplainLimit each) and the counts
// per reason. It returns the pool's host count and those counts.
func (x *indexed) explainExcluded(ex *Explain, now time.Time) (total int, counts map[string]int) {
	var first []*entry
	for _, r := range reasonOrder {
		if t := x.excluded[classOf(r)]; t.Len() > 0 {
			if counts == nil {
				counts = map[string]int{}
			}
			counts[r] = t.Len()
			first = x.firsts(first, t, func(*entry) bool { return true })
		}
	}
	slices.SortFunc(first, byLabel)
	for _, e := range first[:min(len(first), ExplainLimit)] {
		r := reasonOrder[e.class-1]
		ex.Excluded = append(ex.Excluded, Exclusion{Host: e.h.Name, Reason: r, Detail: x.s.detail(&e.h, r, int(e.li), now)})
	}
	if len(counts) > 0 {
		ex.ExcludedCounts = counts
	}
	return x.entries.n, counts
}

func (x *indexed) placePooled(d *Decision, ex *Explain, now time.Time) error {
	s := &x.s
	total, counts := x.explainExcluded(ex, now)
	n := x.cands.Len() + x.s1.Len() + x.s2.Len()
	ex.CandidateCount = n
	if n == 0 {
		ex.NoCapacityReason = noCapacityReason(s, total, counts)
		return noCapacity(s, total, counts)
	}
	stats := x.stats()
	var list []*entry
	pick, bucket := 0, 0
	switch s.algo {
	case vdibroker.BreadthFirst:
		// R-BF2: draw among the first ceil(n/2) by rank; Explain lists the
		// ranked candidates from the top and Rank says where the winner is.
		k := (n + 1) / 2
		r := x.opts.Rand(k)
		ex.Draw = &Draw{Of: k, Value: r}
		d.e = x.cands.Kth(r)
		d.Host = d.e.h.Name
		ex.Chosen, ex.Rank = d.Host, r+1
		for _, e := range x.firsts(x.scratch[:0], x.cands, func(*entry) bool { return true }) {
			ex.Candidates = append(ex.Candidates, candidateOf(&e.h, s.loadIndex(&e.h, stats), 0))
		}
		return nil
	case vdibroker.DepthFirst:
		list = x.firsts(x.scratch[:0], x.cands, func(*entry) bool { return true })
	case vdibroker.LoadIndex:
		list, bucket = x.loadIndexOrder(ex)
	}
	d.e = list[pick]
	d.Host = d.e.h.Name
	ex.Chosen, ex.Rank, ex.Bucket = d.Host, pick+1, bucket
	for _, e := range list {
		li := int(e.li)
		if s.algo != vdibroker.LoadIndex {
			li = s.loadIndex(&e.h, stats)
		}
		ex.Candidates = append(ex.Candidates, candidateOf(&e.h, li, bucket))
	}
	if s.algo == vdibroker.LoadIndex && bucket < 3 && x.entries.n <= ExplainLimit && !s.lbOff(stats) {
		// A small pool's record lists every candidate: the later buckets'
		// after the winning one's (at most ExplainLimit hosts to visit).
		t := cmp.Or(ex.RaisedThreshold, s.t)
		first := len(ex.Candidates)
		for _, tree := range []*btree{x.s1, x.s2, x.cands} {
			tree.Ascend(func(e *entry) bool {
				if li := int(e.li); !(tree == x.s1 && li < t) && !(bucket == 2 && tree == x.s2 && li < t) {
					ex.Candidates = append(ex.Candidates, candidateOf(&e.h, li, s.laterBucket(&e.h, li, t)))
				}
				return true
			})
		}
		slices.SortFunc(ex.Candidates[first:], byBucketThenLoad)
	}
	return nil
}

// firsts appends to dst the first ExplainLimit entries of t while keep
// holds. A decision's lists go in x.scratch: no allocation per decision.
func (x *indexed) firsts(dst []*entry, t *btree, keep func(*entry) bool) []*entry {
	start := len(dst)
	t.Ascend(func(e *entry) bool {
		if !keep(e) {
			return false
		}
		dst = append(dst, e)
		return len(dst)-start < ExplainLimit
	})
	return dst
}

// loadIndexOrder is R-LI3 and R-LI4 on the index: the winning bucket's
// first ExplainLimit hosts in its order, winner first.
func (x *indexed) loadIndexOrder(ex *Explain) ([]*entry, int) {
	s := &x.s
	off := s.lbOff(x.stats())
	t := s.t
	if size := x.s1.Len(); !off && size > 0 {
		below := x.s1Below(t)
		if below < s.m && size > below {
			t = x.s1Rank(min(s.m, size)-1) + 1
			ex.RaisedThreshold = t
		}
	}
	if x.s1.Len() > 0 {
		// Round robin: from the host after the last chosen, wrapping.
		ex.RoundRobinAfter = x.lastRR
		if x.rrStale {
			x.rrLabel, x.rrStale = x.names.atOrBefore(x.lastRR), false
		}
		// From the host after the last chosen to the end, then from the
		// start until the list is full or comes round to its first host.
		list := x.scratch[:0]
		x.s1.AscendBelow(x.rrLabel, t, func(e *entry) bool {
			list = append(list, e)
			return len(list) < ExplainLimit
		})
		if len(list) < ExplainLimit && x.rrLabel != 0 {
			x.s1.AscendBelow(0, t, func(e *entry) bool {
				if len(list) > 0 && e == list[0] {
					return false
				}
				list = append(list, e)
				return len(list) < ExplainLimit
			})
		}
		if len(list) > 0 {
			return list, 1
		}
	}
	if x.s2.Len() > 0 && int(x.s2.Kth(0).li) < t {
		return x.firsts(x.scratch[:0], x.s2, func(e *entry) bool { return int(e.li) < t }), 2
	}
	// Bucket 3 is reached with no bucket-1 material (see above), so its
	// hosts are s2's and cands', merged in load order.
	all := func(*entry) bool { return true }
	a, b := x.firsts(nil, x.s2, all), x.firsts(nil, x.cands, all)
	list := make([]*entry, 0, ExplainLimit)
	for len(list) < ExplainLimit && (len(a) > 0 || len(b) > 0) {
		if len(b) == 0 || (len(a) > 0 && a[0].key < b[0].key) {
			list, a = append(list, a[0]), a[1:]
		} else {
			list, b = append(list, b[0]), b[1:]
		}
	}
	return list, 3
}

// s1Below counts the bucket-1 material with a load index below t.
func (x *indexed) s1Below(t int) int {
	n := 0
	for _, c := range x.s1Hist[:max(min(t+1, len(x.s1Hist)), 0)] {
		n += c
	}
	return n
}

// s1Rank returns the load index of 0-based rank k in the bucket-1
// material's load order (k < its size).
func (x *indexed) s1Rank(k int) int {
	for i, c := range x.s1Hist {
		if k < c {
			return i - 1
		}
		k -= c
	}
	return 100
}

// byLabel orders entries by name (query order).
func byLabel(a, b *entry) int { return cmp.Compare(a.label, b.label) }

func (x *indexed) placePersonal(d *Decision, ex *Explain, req Request, now time.Time) error {
	s := &x.s
	mine := slices.Clone(x.users[vdibroker.FoldUser(req.User)])
	slices.SortFunc(mine, byLabel)
	if s.algo == vdibroker.MultiplePersistent && req.SessionHost != "" {
		e := x.entries.get(req.SessionHost)
		if e == nil || !assignedTo(&e.h, req.User) {
			ex.Excluded = append(ex.Excluded, Exclusion{Host: req.SessionHost, Reason: ReasonNotAssigned})
			ex.ExcludedCounts = map[string]int{ReasonNotAssigned: 1}
			return vdibroker.Errorf(vdibroker.ENotAssigned,
				"session host %q is not assigned to user %q in host pool %q", req.SessionHost, req.User, s.pool.Name)
		}
		mine = []*entry{e}
	}
	stats := x.stats()
	if len(mine) > 0 {
		hosts := make([]*Host, len(mine))
		for i, e := range mine {
			hosts[i] = &e.h
		}
		return personalAssigned(s, d, ex, hosts, stats, now)
	}
	if s.pool.AssignmentType == vdibroker.Direct {
		return notAssigned(s, req.User)
	}
	total, counts := x.explainExcluded(ex, now)
	var cands []ranked
	for _, e := range x.firsts(nil, x.cands, func(*entry) bool { return true }) {
		cands = append(cands, ranked{&e.h, s.loadIndex(&e.h, stats)})
	}
	err := personalAutomatic(s, d, ex, cands, total, counts)
	ex.CandidateCount = x.cands.Len()
	return err
}

// syncDeadline puts e in the deadline heap (alive) or takes it out. An
// entry whose heartbeat did not change keeps its place: most updates (a
// session placed or ended) touch no heartbeat, and the heap is left alone.
func (x *indexed) syncDeadline(e *entry, alive bool) {
	switch {
	case alive && e.heapAt < 0:
		e.hb = e.h.LastHeartBeat.UnixNano()
		heap.Push(&x.deadlines, deadlineItem{e, *e.h.LastHeartBeat})
	case alive && e.hb != e.h.LastHeartBeat.UnixNano():
		e.hb = e.h.LastHeartBeat.UnixNano()
		x.deadlines[e.heapAt].hb = *e.h.LastHeartBeat
		heap.Fix(&x.deadlines, int(e.heapAt))
	case !alive && e.heapAt >= 0:
		heap.Remove(&x.deadlines, int(e.heapAt))
	}
}

// deadlineHeap orders the hosts that are alive by heartbeat by when they
// stop being (R-H1): the oldest heartbeat on top. The heartbeat is copied
// into the item so the heap never reaches into the entries.
type deadlineHeap []deadlineItem

type deadlineItem struct {
	e  *entry
	hb time.Time
}

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].hb.Before(h[j].hb) }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].e.heapAt, h[j].e.heapAt = int32(i), int32(j)
}
func (h *deadlineHeap) Push(v any) {
	it := v.(deadlineItem)
	it.e.heapAt = int32(len(*h))
	*h = append(*h, it)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	it.e.heapAt = -1
	*h = old[:len(old)-1]
	return it
}
