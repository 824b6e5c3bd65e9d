package global

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
)

// The session directory (R-G1). A global connect must find the user's
// open session in any pod in scope; asking every pod costs a call to each
// (28.6 calls per global connect at 50 pods). Instead each user has a
// directory pod (federation.DirectoryPod), and every pod registers there
// the users with open sessions in its member pools:
//
//   - a session a global connect makes, before the connect is answered
//     (startRegister);
//   - any other (a pool connect, the portal, an adopted session), within
//     a directory pass (DirectoryEvery), which reads the sessions made
//     since the one before;
//   - all of them, as a whole list to every pod, at each new generation of
//     the document, every DirectoryFullEvery, and when the store's count
//     of late session writes changed, whichever replica wrote them
//     (outage placements, R-OUT3, and commits LateCommit or more after
//     their id was made: ids older than a pass looks back): the
//     directory pod drops the entries the list no longer has (ended
//     sessions) and records the pod complete at that generation.
//
// What a replica knows of its last whole list is in its memory, but a
// replica says its pod is behind while the store's count differs from the
// one its last whole list was read after, so no replica vouches for
// sessions another wrote. At a new generation, a pod drops the entries of
// the pods no longer in the document (DropDirectoryPods).
//
// A global connect asks the directory pod, then only the pods it names,
// and the pods it cannot vouch for: a pod without a fresh whole list at
// the connect's generation, or whose load summary says a registration of
// its failed (PodLoads.DirectoryBehind). Without an answer from the
// directory pod, every pod in scope is asked, as before.

const (
	// DirectoryEvery is how often a pod registers its new sessions.
	DirectoryEvery = time.Second
	// DirectoryFullEvery is how often a pod sends its whole list.
	DirectoryFullEvery = 5 * time.Minute
	// directoryFresh is how old a pod's whole list may be and still
	// vouch for it: a pod that stopped sending is asked itself.
	directoryFresh = 3 * DirectoryFullEvery
	// directoryLookback is how far before the last pass a pass reads
	// again: a session's id is made before its commit. The first pass to
	// read after a commit started after the last pass that did not see
	// it; a session committed within LateCommit of its id has an id made
	// less than LateCommit before that start, and one committed later
	// bumps the store's count of late writes. Twice that: the other
	// LateCommit is for the clocks of the pod's replicas (a pass reads
	// the ids another made, and that one judged the commit prompt by its
	// own clock), which must be within it of each other.
	directoryLookback = 2 * vdibroker.LateCommit
	// directorySentFor is how long a registered user is not sent again.
	directorySentFor = directoryLookback + 2*DirectoryEvery
	// directoryRetry is how long a pod behind (a registration failed, or
	// late writes) waits before it sends its whole list again: connects
	// ask it itself meanwhile. Late writes that keep coming wait longer
	// each time (directory.lateWait).
	directoryRetry = 10 * time.Second
)

// directory is this pod's side of registering (one per Service, under
// its own lock).
type directory struct {
	mu     sync.Mutex
	gen    int64     // the generation of the last whole list every pod took
	fullAt time.Time // when it was sent
	passAt time.Time // the last pass's start
	behind bool      // a registration failed since that whole list
	fails  int       // registrations failed, ever
	failAt time.Time // the last one
	late   int64     // the store's LateSessionWrites read before that whole list
	// lateWait is how long after a whole list late writes wait for the
	// next: directoryRetry, doubled (up to DirectoryFullEvery) at each
	// whole list they caused while they keep coming; back to
	// directoryRetry once the count has not moved for as long as the wait.
	lateWait time.Duration
	seen     int64     // the count at the last pass that read it
	seenAt   time.Time // the last pass that saw it move (zero: none)
	dropped  int64     // the generation whose removed pods' entries were dropped
	sent     map[string]time.Time
	took     map[string]time.Time // when each peer last took a registration
	running  sync.Mutex           // one pass at a time
}

// directoryBehind reports whether some session of this pod may be missing
// from its directory pod at doc's generation (PodLoads.DirectoryBehind):
// this replica holds outage placements not yet written, its last whole
// list is not through at doc's generation, or late sessions were
// written (by any replica) since it was read. It reads one row of the
// store; behind when that fails.
func (g *Service) directoryBehind(ctx context.Context, doc *vdibroker.Federation) bool {
	if !federation.UsesDirectory(doc) {
		return false
	}
	if g.outagePlacementsWaiting() {
		return true
	}
	writes, err := g.cfg.Store.LateSessionWrites(ctx)
	if err != nil {
		return true
	}
	d := &g.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.behind || d.gen != doc.Generation || d.late != writes
}

// outagePlacementsWaiting is Config.OutagePlacementsWaiting, or false.
func (g *Service) outagePlacementsWaiting() bool {
	return g.cfg.OutagePlacementsWaiting != nil && g.cfg.OutagePlacementsWaiting()
}

// directoryStatus is FederationStatus.Directory.
func (g *Service) directoryStatus(ctx context.Context, doc *vdibroker.Federation) vdibroker.DirectoryStatus {
	st := vdibroker.DirectoryStatus{Behind: g.directoryBehind(ctx, doc)}
	d := &g.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.fullAt.IsZero() {
		at := d.fullAt
		st.LastFull = &at
	}
	return st
}

// RunDirectory runs a directory pass every DirectoryEvery until ctx ends.
func (g *Service) RunDirectory(ctx context.Context) {
	t := time.NewTicker(DirectoryEvery)
	defer t.Stop()
	for {
		if err := g.DirectoryPass(ctx); err != nil && ctx.Err() == nil {
			g.log.WarnContext(ctx, "session directory: registering this pod's sessions failed; global connects ask this pod itself until it succeeds", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// DirectoryPass registers this pod's sessions: its whole list when the
// document's generation changed, DirectoryFullEvery passed, a
// registration failed (at most every directoryRetry) or late sessions
// were written (at most every lateWait); else the sessions made since
// the last pass. At a new generation it first drops the entries of pods
// removed from the document (dropRemovedPods).
func (g *Service) DirectoryPass(ctx context.Context) error {
	d := &g.dir
	d.running.Lock()
	defer d.running.Unlock()
	now := g.clock.Now()
	d.mu.Lock()
	if d.behind && now.Sub(d.failAt) < directoryRetry {
		d.mu.Unlock()
		return nil
	}
	d.mu.Unlock()
	doc, err := g.Document(ctx)
	if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
		return nil
	}
	if err != nil {
		// The store is down, say: tried again (and logged) every
		// directoryRetry, not every pass.
		return g.directoryFailed(err)
	}
	g.dropRemovedPods(ctx, doc)
	if !federation.UsesDirectory(doc) {
		return nil
	}
	// Outage placements (R-OUT3) are written with ids made during the
	// outage, older than any pass looks back: while some wait in this
	// replica's memory, this pod is behind; once written (by this
	// replica or another), the store's count of late writes changed,
	// and the whole list is sent again, as after a commit LateCommit
	// late. The count is read before the sessions: those it counts are
	// committed, so the list has them; one written after is counted
	// after, and this replica says it is behind until its next whole
	// list (directoryBehind).
	if g.outagePlacementsWaiting() {
		return g.directoryFailed(errors.New("sessions placed during a store outage are not all written yet"))
	}
	writes, err := g.cfg.Store.LateSessionWrites(ctx)
	if err != nil {
		return g.directoryFailed(err)
	}
	d.mu.Lock()
	fails := d.fails
	// Late writes send the whole list at most every lateWait: a store
	// slow enough that every batch commits late would otherwise have
	// every replica read and send it every second (a full pod's is
	// 250,000 users), slowing the store further. Until it is sent, this
	// pod says it is behind, and its peers ask it itself.
	// A replica's first whole list (its fullAt zero, its late 0) is for
	// its start, not caused by late writes: a count that moved before it
	// started does not double its wait.
	lateWrites := writes != d.late && !d.fullAt.IsZero()
	if writes != d.seen {
		d.seen, d.seenAt = writes, now
	}
	// The wait goes back only after a quiet time as long as itself: late
	// writes every few seconds, each pass between them quiet, must not
	// send the whole list every directoryRetry.
	if d.lateWait == 0 || now.Sub(d.seenAt) >= d.lateWait {
		d.lateWait = directoryRetry
	}
	lateWait := d.lateWait
	full := d.behind || d.gen != doc.Generation || now.Sub(d.fullAt) >= DirectoryFullEvery ||
		(lateWrites && now.Sub(d.fullAt) >= lateWait)
	after := ""
	if !full {
		after = idAt(d.passAt.Add(-directoryLookback))
	}
	d.mu.Unlock()
	users, _, err := g.cfg.Store.OpenSessionUsers(ctx, g.memberPools(doc), after)
	if err != nil {
		return g.directoryFailed(err)
	}
	if !full {
		users = g.unsent(users, now)
	}
	byPod := map[string][]string{}
	for _, u := range users {
		p := federation.DirectoryPod(doc, u)
		byPod[p] = append(byPod[p], u)
	}
	var errs []error
	if full {
		for _, p := range doc.Pods { // every pod: an empty list says "none"
			errs = append(errs, g.sendFull(ctx, doc, p.Name, byPod[p.Name], now))
		}
	} else {
		for p, list := range byPod {
			// In parts like a whole list: after a long gap (a replica
			// paused, say) one pass may carry more than one call takes.
			for _, part := range directoryParts(list) {
				errs = append(errs, g.register(ctx, doc, p, vdibroker.PodDirectoryRequest{Generation: doc.Generation, Users: part}, now))
			}
		}
	}
	for _, err := range errs {
		if err != nil {
			return g.directoryFailed(err)
		}
	}
	d.mu.Lock()
	d.passAt = now
	if full {
		if lateWrites {
			d.lateWait = min(2*lateWait, DirectoryFullEvery)
		}
		d.gen, d.fullAt, d.late = doc.Generation, now, writes
		// A registration that failed while the list was read and sent
		// may be missing from it: still behind.
		d.behind = d.fails != fails
	}
	if !full {
		for _, u := range users {
			d.sent[u] = now
		}
	}
	d.mu.Unlock()
	return nil
}

// dropRemovedPods drops, once per generation of the document, the
// session directory entries this pod keeps for pods no longer in it:
// they register no more (PodRegister refuses them) and no look-up asks
// them, but their entries would stay. A failure is logged and tried
// again at the next pass; it leaves this pod's own registrations as they
// are.
func (g *Service) dropRemovedPods(ctx context.Context, doc *vdibroker.Federation) {
	d := &g.dir
	d.mu.Lock()
	done := d.dropped == doc.Generation
	d.mu.Unlock()
	if done {
		return
	}
	pods := make([]string, len(doc.Pods))
	for i, p := range doc.Pods {
		pods[i] = p.Name
	}
	dropped, err := g.cfg.Store.DropDirectoryPods(ctx, pods)
	if err != nil {
		g.log.WarnContext(ctx, "session directory: dropping the entries of pods removed from the document failed; tried again at the next pass", "err", err)
		return
	}
	if len(dropped) > 0 {
		g.log.InfoContext(ctx, "session directory: dropped the entries of pods removed from the document", "pods", dropped, "generation", doc.Generation)
	}
	d.mu.Lock()
	d.dropped = doc.Generation
	d.mu.Unlock()
}

// sendFull sends pod the whole list of this pod's users it is the
// directory pod of, read at now, in parts of at most MaxDirectoryUsers
// and MaxDirectoryBytes.
// The last part drops the entries pod did not refresh in the minute
// before it (DirectoryFullMargin), so it must arrive well within a
// minute of the read: a session registered after the read, and before
// its pod sent the list, stays.
func (g *Service) sendFull(ctx context.Context, doc *vdibroker.Federation, pod string, users []string, now time.Time) error {
	parts := directoryParts(users)
	if len(parts) == 0 {
		parts = [][]string{nil} // an empty list says "none"
	}
	for i, part := range parts {
		req := vdibroker.PodDirectoryRequest{Generation: doc.Generation, Users: part, Full: true, Last: i == len(parts)-1}
		if took := g.clock.Since(now); req.Last && took > vdibroker.DirectoryFullMargin/2 {
			return fmt.Errorf("the whole list for pod %s took %s since it was read, more than %s: not sent", pod, took, vdibroker.DirectoryFullMargin/2)
		}
		if err := g.register(ctx, doc, pod, req, now); err != nil {
			return err
		}
	}
	return nil
}

// directoryParts cuts users into the parts of registrations, in order:
// at most MaxDirectoryUsers users and MaxDirectoryBytes of their JSON
// each (a user longer than that alone), so each part fits a pod-to-pod
// call. None for no users.
func directoryParts(users []string) [][]string {
	var parts [][]string
	for len(users) > 0 {
		n, size := 0, 0
		for n < min(len(users), vdibroker.MaxDirectoryUsers) {
			b, _ := json.Marshal(users[n])
			if size += len(b) + 1; n > 0 && size > vdibroker.MaxDirectoryBytes {
				break
			}
			n++
		}
		parts = append(parts, users[:n])
		users = users[n:]
	}
	return parts
}

// register sends req to directory pod pod (this pod's own store when it
// is this pod).
func (g *Service) register(ctx context.Context, doc *vdibroker.Federation, pod string, req vdibroker.PodDirectoryRequest, now time.Time) error {
	if pod == g.cfg.Pod {
		// Not the nonce of the call this runs in (a pod connect's is
		// its placement's to record).
		ctx = vdibroker.WithCallNonce(ctx, nil)
		return g.cfg.Store.RegisterDirectory(ctx, pod, req.Generation, req.Users, req.Full, req.Last, now)
	}
	p := doc.Pod(pod)
	if p == nil {
		return fmt.Errorf("pod %s is not in the document", pod)
	}
	if err := g.cachedFailure(pod); err != nil {
		return fmt.Errorf("register at pod %s: %w", pod, err)
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.PodTimeout)
	defer cancel()
	start := g.clock.Now()
	err := g.cfg.Peers.Register(ctx, *p, req)
	g.observe(*p, "register", start, err, nil)
	d := &g.dir
	d.mu.Lock()
	took, ok := d.took[pod]
	if err == nil {
		if d.took == nil {
			d.took = map[string]time.Time{}
		}
		d.took[pod] = g.clock.Now()
	}
	d.mu.Unlock()
	// A pod that keeps no directory (an older version) answers no look-up
	// either: a connect whose directory pod it is asks every pod, and
	// nothing relies on what it would have held. Unless it took one of
	// this pod's registrations in the time its look-ups trust a whole
	// list (directoryFresh, and a minute for the clocks): then another
	// of its replicas (a rolling upgrade) may vouch for this pod.
	if vdibroker.ErrorCode(err) == vdibroker.ENotFound && (!ok || g.clock.Since(took) > directoryFresh+time.Minute) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("register %d users at pod %s: %w", len(req.Users), pod, err)
	}
	return nil
}

// registerUser registers user at their directory pod, so a connect
// through any pod finds the session a global connect makes in this pod.
// It runs beside that connect's placement (startRegister) and is waited
// for before the connect is answered; done says whether a session was
// made. A failure for a session made marks this pod behind: connects ask
// it itself until its whole list is through. An entry for a session not
// made (a refusal) is dropped with the next whole list; until then it
// costs a connect of that user one call to this pod.
func (g *Service) startRegister(ctx context.Context, doc *vdibroker.Federation, user string) (done func(created bool)) {
	key := vdibroker.FoldUser(user)
	now := g.clock.Now()
	errc := make(chan error, 1)
	go func() {
		errc <- g.register(ctx, doc, federation.DirectoryPod(doc, key), vdibroker.PodDirectoryRequest{Generation: doc.Generation, Users: []string{key}}, now)
	}()
	return func(created bool) {
		err := <-errc
		if !created {
			return
		}
		d := &g.dir
		d.mu.Lock()
		defer d.mu.Unlock()
		if err != nil {
			d.behind, d.fails, d.failAt = true, d.fails+1, g.clock.Now()
			g.log.WarnContext(ctx, "session directory: registering a new session failed; global connects ask this pod itself until its whole list is through", "err", err)
			return
		}
		d.sent[key] = now
	}
}

// forgetRemoved drops when the pods doc does not list last took a
// registration (Service.forgetRemoved).
func (d *directory) forgetRemoved(doc *vdibroker.Federation) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for name := range d.took {
		if doc.Pod(name) == nil {
			delete(d.took, name)
		}
	}
}

// markSent records user (folded) registered at their directory pod at
// now, for a session made here (a look-up registered it): the passes
// within directorySentFor do not send it again (unsent).
func (g *Service) markSent(key string, now time.Time) {
	d := &g.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sent[key] = now
}

// unsent drops the users registered within directorySentFor, and forgets
// the older.
func (g *Service) unsent(users []string, now time.Time) []string {
	d := &g.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	maps := d.sent
	for u, at := range maps {
		if now.Sub(at) >= directorySentFor {
			delete(maps, u)
		}
	}
	return slices.DeleteFunc(users, func(u string) bool { _, ok := maps[u]; return ok })
}

func (g *Service) directoryFailed(err error) error {
	d := &g.dir
	d.mu.Lock()
	d.behind, d.fails, d.failAt = true, d.fails+1, g.clock.Now()
	d.mu.Unlock()
	return err
}

// idAt is the smallest session id made at t or later (NewID: its first
// 12 hex digits are the Unix milliseconds).
func idAt(t time.Time) string {
	return fmt.Sprintf("%012x", max(t.UnixMilli(), 0))
}

// PodRegister is the pod side of federation.DirectoryPath.
//
// A caller on this pod's generation of the document registers only the
// users this pod is the directory pod of (federation.DirectoryPod, by
// which the caller picked this pod): a call naming another user is
// refused whole (InvalidArgument naming users[i], nothing written), as a
// holder of the secret signing as a listed pod could otherwise fill
// this pod with entries no look-up asks for. The caller counts it a
// failed registration like any other: it is behind, and its peers ask
// it itself, until its whole list is through. A caller on another
// generation is taken as it is (its entries bounded by
// MaxDirectoryEntriesPerPod like any): its document has other pods, so
// other directory pods, and checking its users against this pod's
// document would refuse honest registrations while federation apply is
// on its way from one pod to the next.
func (g *Service) PodRegister(ctx context.Context, pod string, req vdibroker.PodDirectoryRequest) error {
	if len(req.Users) > vdibroker.MaxDirectoryUsers {
		return vdibroker.FieldError("users", "at most %d users, got %d", vdibroker.MaxDirectoryUsers, len(req.Users))
	}
	if req.Last && !req.Full {
		return vdibroker.FieldError("last", "only the last part of a whole list (full) is last")
	}
	if req.Generation < 0 {
		return vdibroker.FieldError("generation", "must be 0 or more, got %d", req.Generation)
	}
	// Only a pod of this pod's document registers: without one, any
	// holder of the secret could name itself anything.
	doc, err := g.Document(ctx)
	if err != nil {
		return err
	}
	if doc.Pod(pod) == nil {
		return vdibroker.Errorf(vdibroker.EPermission, "pod %q is not in the federation document pod %s holds", pod, g.cfg.Pod)
	}
	sameDoc := req.Generation == doc.Generation
	keys := make([]string, 0, len(req.Users))
	seen := make(map[string]bool, len(req.Users))
	for i, u := range req.Users {
		field := fmt.Sprintf("users[%d]", i)
		if err := vdibroker.ValidateUser(field, u); err != nil {
			return err
		}
		k := vdibroker.FoldUser(u)
		if seen[k] {
			continue
		}
		if sameDoc {
			if dp := federation.DirectoryPod(doc, k); dp != g.cfg.Pod {
				return vdibroker.FieldError(field, "the directory pod of user %q at generation %d is %s, not this pod %s; nothing of this call was recorded", u, doc.Generation, dp, g.cfg.Pod)
			}
		}
		seen[k] = true
		keys = append(keys, k)
	}
	return g.cfg.Store.RegisterDirectory(ctx, pod, req.Generation, keys, req.Full, req.Last, g.clock.Now())
}

// PodLookup is the pod side of federation.LookupPath.
//
// With req.Register, and no pod named in the answer, the user is
// registered for that pod before the answer (R-G1), as the pod would
// register the session it is asked to make next (PodLookup.Registered):
// only for a user this pod is the directory pod of in its document (as
// PodRegister), a pod of that document, and within the pod's bound of
// entries; otherwise, or when the write fails, the answer says nothing
// was registered, and the placing pod registers the session itself. An
// entry for a session then not made (the pod refused it) costs a connect
// of that user one call to the pod until its next whole list drops it,
// as one the pod registers for a connect it then refuses.
func (g *Service) PodLookup(ctx context.Context, req vdibroker.PodLookupRequest) (*vdibroker.PodLookup, error) {
	if err := vdibroker.ValidateUser("user", req.User); err != nil {
		return nil, err
	}
	var doc *vdibroker.Federation
	if req.Register != "" {
		var err error
		if doc, err = g.Document(ctx); err != nil {
			return nil, err
		}
		if doc.Pod(req.Register) == nil {
			return nil, vdibroker.FieldError("register", "pod %q is not in the federation document pod %s holds (generation %d)", req.Register, g.cfg.Pod, doc.Generation)
		}
	}
	key := vdibroker.FoldUser(req.User)
	now := g.clock.Now()
	pods, complete, err := g.cfg.Store.LookupDirectory(ctx, key, now.Add(-directoryFresh))
	if err != nil {
		return nil, err
	}
	if pods == nil {
		pods = []string{}
	}
	l := &vdibroker.PodLookup{Pods: pods, Complete: complete}
	if doc != nil && len(pods) == 0 && federation.DirectoryPod(doc, key) == g.cfg.Pod {
		// Not the nonce of a call this runs in: a look-up's is recorded
		// before it (federation.KindRead).
		err := g.cfg.Store.RegisterDirectory(vdibroker.WithCallNonce(ctx, nil), req.Register, doc.Generation, []string{key}, false, false, now)
		if err != nil {
			g.log.WarnContext(ctx, "session directory: a look-up's registration failed; the placing pod registers the session itself", "pod", req.Register, "err", err)
		}
		l.Registered = err == nil
	}
	return l, nil
}

// lookup asks user's directory pod which pods of doc to ask for the
// user's sessions: ask[pod] for the pods it names or cannot vouch for.
// ok is false when the directory pod did not answer: every pod is asked.
// register is the pod a new session would be placed in (or none): the
// directory pod registers the user there if it names no pod, and
// registeredAt names it when it did (PodLookupRequest.Register). named
// are the pods holding the user's entries.
func (g *Service) lookup(ctx context.Context, doc *vdibroker.Federation, user, register string) (ask map[string]bool, ok bool, registeredAt string, named []string) {
	if !federation.UsesDirectory(doc) {
		return nil, false, "", nil
	}
	pod := federation.DirectoryPod(doc, vdibroker.FoldUser(user))
	req := vdibroker.PodLookupRequest{User: user, Register: register}
	var l *vdibroker.PodLookup
	var err error
	switch p := doc.Pod(pod); {
	case pod == g.cfg.Pod:
		l, err = g.PodLookup(ctx, req)
		if refusedRegister(err, req) {
			// This pod's document changed since the connect read it
			// (federation apply): the pod planned is not in it now.
			// The directory still answers, without registering.
			req.Register = ""
			l, err = g.PodLookup(ctx, req)
		}
	case p == nil || g.cachedFailure(pod) != nil:
		return nil, false, "", nil
	default:
		l, err = g.callLookup(ctx, *p, req)
	}
	if err != nil {
		// A peer that did not answer is skipped by the connects of the
		// next seconds (markFailed); one that answered with an error (an
		// older version without the directory, say) is only not asked.
		if pod != g.cfg.Pod {
			g.markFailed(pod, err)
		}
		g.log.WarnContext(ctx, "session directory: the directory pod did not answer; asking every pod in scope", "pod", pod, "err", err)
		return nil, false, "", nil
	}
	ask = map[string]bool{}
	for _, p := range l.Pods {
		ask[p] = true
	}
	for _, p := range doc.Pods {
		if gen, ok := l.Complete[p.Name]; !ok || gen != doc.Generation {
			ask[p.Name] = true
		}
	}
	if l.Registered && register != "" {
		registeredAt = pod
	}
	return ask, true, registeredAt, l.Pods
}

// callLookup is one look-up at peer p, bounded by the pod timeout. A pod
// of an older version refuses register, a field it does not know (400
// naming it, before it does anything): it is asked again without it.
func (g *Service) callLookup(ctx context.Context, p vdibroker.Pod, req vdibroker.PodLookupRequest) (*vdibroker.PodLookup, error) {
	for {
		cctx, cancel := context.WithTimeout(ctx, g.cfg.PodTimeout)
		start := g.clock.Now()
		l, err := g.cfg.Peers.Lookup(cctx, p, req)
		cancel()
		if refusedRegister(err, req) {
			// The pod answered: not a failed call (its metrics, its
			// peer status), or every connect in a rolling upgrade
			// would count one.
			g.observe(p, "lookup", start, nil, nil)
			req.Register = ""
			continue
		}
		g.observe(p, "lookup", start, err, nil)
		return l, err
	}
}

// refusedRegister reports a look-up's refusal of req's register (a pod of
// an older version that does not know it, or one not in the answering
// pod's document): the look-up is made again without it.
func refusedRegister(err error, req vdibroker.PodLookupRequest) bool {
	return err != nil && req.Register != "" && vdibroker.ErrorCode(err) == vdibroker.EInvalid && vdibroker.ErrorField(err) == "register"
}
