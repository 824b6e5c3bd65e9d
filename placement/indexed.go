package placement

import (
	"container/heap"
	"slices"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/loadindex"
)

// entry is one host in the index with the derived figures its position
// depends on. Its key fields (h, li) change only while it is detached.
type entry struct {
	h Host
	// words is nameWords(h.Name), the inline part of every tree key.
	words [2]uint64
	// li is the load index placement uses (LoadIndex pools).
	li int
	// class is "" for a candidate, else the exclusion reason.
	class string
	// in the LoadIndex sets of R-LI3: s1 bucket-1 material (standard,
	// connecting < C, or every candidate with load balancing off), s2
	// bucket-2 material (non-standard, connecting < C).
	s1, s2 bool
	// heapAt is the entry's index in the deadline heap, -1 when absent;
	// hb the heartbeat it is filed under there (read without touching the
	// heap).
	heapAt int
	hb     time.Time
	// attached is true while the entry is in the structures.
	attached bool
}

// indexed is the engine New returns. It keeps every host in exactly one
// place: a tree per exclusion reason (ordered by name, for Explain and the
// NoCapacity counts) or the candidate trees of the pool's algorithm. A
// deadline heap turns hosts Unavailable when their heartbeat expires, so a
// decision never has to look at every host to learn who fell silent.
type indexed struct {
	s    settings
	opts Options
	// clock is the time statuses were last evaluated at.
	clock   time.Time
	entries map[string]*entry
	lastRR  string

	excluded  map[string]*btree // reason -> hosts by name
	cands     *btree            // BF, DF: by rank; personal: unassigned by name; LI: all by load
	s1ByName  *btree            // LoadIndex bucket-1 material by name, for round robin
	s1ByIndex *btree            // ... by load index, for the raised threshold
	s2        *btree            // LoadIndex bucket-2 material by load
	deadlines deadlineHeap
	users     map[string][]*entry // personal: user -> assigned hosts

	// R-LI6 pool mean and R-IDX3 custom-value count.
	mean       loadindex.Mean
	perSession loadindex.Factors
	customs    int
	// meanDependent are the hosts whose load index uses the pool mean;
	// meanDirty says the mean moved since their index was computed.
	meanDependent map[*entry]struct{}
	meanDirty     bool
}

// New returns the indexed placement engine for one pool. It keeps the pool's
// hosts ordered as sessions come and go, so a pooled decision costs
// O(log n + ExplainLimit) and a pool of 10,000 hosts decides about as fast
// as one of 100. Its decisions are the reference's, draw for draw.
func New(pool Pool, hosts []Host, opts Options) Placer {
	x := &indexed{s: newSettings(pool), opts: defaultOptions(opts), entries: map[string]*entry{}}
	x.reset()
	for _, h := range hosts {
		x.Upsert(h)
	}
	return x
}

// reset empties the structures (entries stay, detached).
func (x *indexed) reset() {
	x.excluded = map[string]*btree{}
	for _, r := range reasonOrder {
		x.excluded[r] = newTree(byName)
	}
	switch x.s.algo {
	case vdibroker.BreadthFirst:
		x.cands = newTree(bySessionsAsc)
	case vdibroker.DepthFirst:
		x.cands = newTree(bySessionsDesc)
	case vdibroker.LoadIndex:
		x.cands = newTree(byLoad)
	default:
		x.cands = newTree(byName)
	}
	x.s1ByName, x.s1ByIndex, x.s2 = newTree(byName), newTree(byIndexName), newTree(byLoad)
	x.deadlines = x.deadlines[:0]
	x.users = map[string][]*entry{}
	x.meanDependent = map[*entry]struct{}{}
	x.meanDirty = false
	for _, e := range x.entries {
		e.attached, e.heapAt = false, -1
	}
}

// rebuild re-derives every entry: after a pool change, a clock that went
// back, or a change of R-IDX3's "any host reports a custom value".
func (x *indexed) rebuild() {
	x.reset()
	for _, e := range x.entries {
		x.attach(e)
	}
}

func (x *indexed) stats() loadindex.Pool {
	return loadindex.Pool{AnyCustom: x.customs > 0, PerSession: x.perSession}
}

// attach derives e's load index and class at x.clock and files it.
func (x *indexed) attach(e *entry) {
	s := &x.s
	e.li = x.loadIndex(&e.h)
	st := statusOf(&e.h, s.timeout, x.clock)
	e.class = s.classify(&e.h, st, e.li)
	x.syncDeadline(e, e.h.LastHeartBeat != nil && !e.h.ShuttingDown && st != vdibroker.StatusUnavailable)
	for _, u := range e.h.AssignedUsers {
		x.users[u] = append(x.users[u], e)
	}
	if x.dependsOnMean(e) {
		x.meanDependent[e] = struct{}{}
	}
	e.s1, e.s2 = false, false
	switch {
	case e.class != "":
		x.excluded[e.class].Insert(e)
	default:
		x.cands.Insert(e)
		if s.algo == vdibroker.LoadIndex {
			off := s.lbOff(x.stats())
			e.s1 = off || (e.h.StandardFeatures && e.h.Connecting < s.c)
			e.s2 = !off && !e.h.StandardFeatures && e.h.Connecting < s.c
			if e.s1 {
				x.s1ByName.Insert(e)
				x.s1ByIndex.Insert(e)
			}
			if e.s2 {
				x.s2.Insert(e)
			}
		}
	}
	e.attached = true
}

// detach takes e out of every structure, under the key it was filed with.
func (x *indexed) detach(e *entry) {
	if !e.attached {
		return
	}
	for _, u := range e.h.AssignedUsers {
		list := x.users[u]
		if i := slices.Index(list, e); i >= 0 {
			list = slices.Delete(list, i, i+1)
		}
		if len(list) == 0 {
			delete(x.users, u)
		} else {
			x.users[u] = list
		}
	}
	delete(x.meanDependent, e)
	if e.class != "" {
		x.excluded[e.class].Delete(e)
	} else {
		x.cands.Delete(e)
		if e.s1 {
			x.s1ByName.Delete(e)
			x.s1ByIndex.Delete(e)
		}
		if e.s2 {
			x.s2.Delete(e)
		}
	}
	e.attached = false
}

func (x *indexed) Upsert(h Host) {
	anyCustom := x.customs > 0
	e, ok := x.entries[h.Name]
	if !ok {
		e = &entry{heapAt: -1, h: cloneHost(h), words: nameWords(h.Name)}
		x.entries[h.Name] = e
		x.account(&e.h, +1)
		if x.customFlipped(anyCustom) {
			x.rebuild()
			return
		}
		x.attach(e)
		return
	}
	nh := cloneHost(h)
	x.account(&e.h, -1)
	x.account(&nh, +1)
	if x.customFlipped(anyCustom) {
		e.h = nh
		x.rebuild()
		return
	}
	if x.refileless(e, &nh) {
		return
	}
	x.detach(e) // under the old key
	e.h = nh
	x.attach(e)
}

// refileless updates e to nh in place when nothing a tree orders or files
// by changes (a heartbeat, a metrics sample that leaves the load index as it
// was): most agent reports, and the cheapest. It reports whether it did.
func (x *indexed) refileless(e *entry, nh *Host) bool {
	s := &x.s
	li := x.loadIndex(nh)
	st := statusOf(nh, s.timeout, x.clock)
	if !e.attached || li != e.li || s.classify(nh, st, li) != e.class ||
		nh.Sessions != e.h.Sessions || nh.Connecting != e.h.Connecting ||
		nh.StandardFeatures != e.h.StandardFeatures || !slices.Equal(nh.AssignedUsers, e.h.AssignedUsers) {
		return false
	}
	e.h = *nh
	delete(x.meanDependent, e)
	if x.dependsOnMean(e) {
		x.meanDependent[e] = struct{}{}
	}
	x.syncDeadline(e, e.h.LastHeartBeat != nil && !e.h.ShuttingDown && st != vdibroker.StatusUnavailable)
	return true
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

// dependsOnMean reports whether e's load index uses the pool's mean
// per-session values (R-LI6: sampled with no session, sessions since).
func (x *indexed) dependsOnMean(e *entry) bool {
	return e.h.Metrics != nil && e.h.MetricsSessions <= 0 && e.h.Sessions > e.h.MetricsSessions && !x.s.lb.UseCustomScript
}

func (x *indexed) Remove(name string) {
	e, ok := x.entries[name]
	if !ok {
		return
	}
	anyCustom := x.customs > 0
	x.detach(e)
	x.syncDeadline(e, false)
	delete(x.entries, name)
	x.account(&e.h, -1)
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

func (x *indexed) SetPool(p Pool) {
	x.s = newSettings(p)
	x.rebuild()
}

func (x *indexed) Host(name string) (Host, bool) {
	e, ok := x.entries[name]
	if !ok {
		return Host{}, false
	}
	return cloneHost(e.h), true
}

func (x *indexed) Apply(d Decision) {
	e, ok := x.entries[d.Host]
	if !ok || d.Reconnect || d.Host == "" {
		return
	}
	x.detach(e)
	e.h.Sessions++
	e.h.Connecting++
	if d.Assign && !assignedTo(&e.h, d.Explain.User) {
		e.h.AssignedUsers = append(e.h.AssignedUsers, d.Explain.User)
	}
	x.attach(e)
	if d.Explain.Algorithm == vdibroker.LoadIndex && d.Explain.Bucket == 1 {
		x.lastRR = d.Host
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
		x.detach(top.e)
		x.attach(top.e) // now Unavailable: leaves the heap
	}
	if x.meanDirty && x.s.algo == vdibroker.LoadIndex {
		stats := x.stats()
		var stale []*entry
		for e := range x.meanDependent {
			if x.s.loadIndex(&e.h, stats) != e.li {
				stale = append(stale, e)
			}
		}
		for _, e := range stale {
			x.detach(e)
			x.attach(e)
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
		h, ok := x.entries[e.Host]
		st := vdibroker.StatusUnavailable
		if ok {
			st = statusOf(&h.h, s.timeout, now)
		}
		if st != vdibroker.StatusUnavailable && st != vdibroker.StatusShutdown {
			return reconnect(ex, e), nil
		}
		d.EndExisting = true
		ex.Note = endNote(e, st)
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

// explainExcluded fills the first ExplainLimit excluded hosts in query order
// (a merge of the per-reason trees' first ExplainLimit each) and the counts
// per reason. It returns the pool's host count and those counts.
func (x *indexed) explainExcluded(ex *Explain, now time.Time) (total int, counts map[string]int) {
	var first []*entry
	for _, r := range reasonOrder {
		if t := x.excluded[r]; t.Len() > 0 {
			if counts == nil {
				counts = map[string]int{}
			}
			counts[r] = t.Len()
			first = append(first, x.firsts(t, func(*entry) bool { return true })...)
		}
	}
	slices.SortFunc(first, func(a, b *entry) int { return byName.compare(a, b) })
	for _, e := range first[:min(len(first), ExplainLimit)] {
		ex.Excluded = append(ex.Excluded, Exclusion{Host: e.h.Name, Reason: e.class, Detail: x.s.detail(&e.h, e.class, e.li, now)})
	}
	if len(counts) > 0 {
		ex.ExcludedCounts = counts
	}
	return len(x.entries), counts
}

func (x *indexed) placePooled(d *Decision, ex *Explain, now time.Time) error {
	s := &x.s
	total, counts := x.explainExcluded(ex, now)
	n := x.cands.Len()
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
		d.Host = x.cands.Kth(r).h.Name
		ex.Chosen, ex.Rank = d.Host, r+1
		for _, e := range x.firsts(x.cands, func(*entry) bool { return true }) {
			ex.Candidates = append(ex.Candidates, candidateOf(&e.h, s.loadIndex(&e.h, stats), 0))
		}
		return nil
	case vdibroker.DepthFirst:
		list = x.firsts(x.cands, func(*entry) bool { return true })
	case vdibroker.LoadIndex:
		list, bucket = x.loadIndexOrder(ex)
	}
	d.Host = list[pick].h.Name
	ex.Chosen, ex.Rank, ex.Bucket = d.Host, pick+1, bucket
	for _, e := range list {
		li := e.li
		if s.algo != vdibroker.LoadIndex {
			li = s.loadIndex(&e.h, stats)
		}
		ex.Candidates = append(ex.Candidates, candidateOf(&e.h, li, bucket))
	}
	return nil
}

// firsts returns the first ExplainLimit entries of t while keep holds.
func (x *indexed) firsts(t *btree, keep func(*entry) bool) []*entry {
	out := make([]*entry, 0, ExplainLimit)
	t.Ascend(func(e *entry) bool {
		if !keep(e) {
			return false
		}
		out = append(out, e)
		return len(out) < ExplainLimit
	})
	return out
}

// loadIndexOrder is R-LI3 and R-LI4 on the index: the winning bucket's
// first ExplainLimit hosts in its order, winner first.
func (x *indexed) loadIndexOrder(ex *Explain) ([]*entry, int) {
	s := &x.s
	off := s.lbOff(x.stats())
	t := s.t
	if size := x.s1ByIndex.Len(); !off && size > 0 {
		below := x.s1ByIndex.CountBelow(t)
		if below < s.m && size > below {
			t = x.s1ByIndex.Kth(min(s.m, size)-1).li + 1
			ex.RaisedThreshold = t
		}
	}
	if x.s1ByName.Len() > 0 {
		// Round robin: from the host after the last chosen, wrapping.
		ex.RoundRobinAfter = x.lastRR
		var list []*entry
		after := x.lastRR
		for len(list) < ExplainLimit {
			e := x.s1ByName.NextBelow(after, t)
			if e == nil {
				if after == "" {
					break // nothing below t at all (cannot happen: see R-LI3)
				}
				e = x.s1ByName.NextBelow("", t)
			}
			if e == nil || (len(list) > 0 && e == list[0]) {
				break
			}
			list = append(list, e)
			after = e.h.Name
		}
		if len(list) > 0 {
			return list, 1
		}
	}
	if x.s2.Len() > 0 && x.s2.Kth(0).li < t {
		return x.firsts(x.s2, func(e *entry) bool { return e.li < t }), 2
	}
	return x.firsts(x.cands, func(*entry) bool { return true }), 3
}

func (x *indexed) placePersonal(d *Decision, ex *Explain, req Request, now time.Time) error {
	s := &x.s
	mine := slices.Clone(x.users[req.User])
	slices.SortFunc(mine, func(a, b *entry) int { return byName.compare(a, b) })
	if s.algo == vdibroker.MultiplePersistent && req.SessionHost != "" {
		e, ok := x.entries[req.SessionHost]
		if !ok || !assignedTo(&e.h, req.User) {
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
	for _, e := range x.firsts(x.cands, func(*entry) bool { return true }) {
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
		e.hb = *e.h.LastHeartBeat
		heap.Push(&x.deadlines, deadlineItem{e, e.hb})
	case alive && !e.hb.Equal(*e.h.LastHeartBeat):
		e.hb = *e.h.LastHeartBeat
		x.deadlines[e.heapAt].hb = e.hb
		heap.Fix(&x.deadlines, e.heapAt)
	case !alive && e.heapAt >= 0:
		heap.Remove(&x.deadlines, e.heapAt)
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
	h[i].e.heapAt, h[j].e.heapAt = i, j
}
func (h *deadlineHeap) Push(v any) {
	it := v.(deadlineItem)
	it.e.heapAt = len(*h)
	*h = append(*h, it)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	it.e.heapAt = -1
	*h = old[:len(old)-1]
	return it
}
