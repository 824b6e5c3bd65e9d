package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vdibroker/vdibroker"
)

// commitReq is one write waiting for the group committer: a placement or a
// heartbeat. fn runs inside the batch's transaction, in its own savepoint;
// it may run more than once (the batch is run again after a deadlock), so
// it must only set its results, never accumulate them.
type commitReq struct {
	// key orders the batch: requests lock their host rows in key order, so
	// concurrent batches on PostgreSQL rarely deadlock.
	key string
	fn  func(ctx context.Context, t *tx) error
	// assignUser, when set, is the user this request assigns a personal
	// host to (R-PE1): on PostgreSQL the batch takes that user's advisory
	// lock before any row lock (see lockAssignees).
	assignUser, assignPool string
	// committed, when set, is called with the request's number (its
	// batch's, then its place in the batch) after a successful commit of
	// fn's work, before any request of the batch is answered.
	committed func(seq int64)
	// nonce, when set, is the call nonce fn records after its placement
	// (vdibroker.WithCallNonce); the batch counts it first
	// (lockCallNonces), nonceErr saying when that refused it.
	nonce    *vdibroker.CallNonce
	nonceErr error
	// outage says the request writes a session placed during a store
	// outage (PlacementCommit.OutagePlacement): the batch counts it as a
	// late write if it succeeds (countLateWrites).
	outage bool
	// made is when the id of the session the request writes was made (a
	// placement's, or the first a heartbeat adopts, R-S2; vdibroker.IDTime;
	// zero for other writes): written LateCommit or more after it, the
	// session counts as a late write too.
	made time.Time
	// counted says the batch's run that committed counted it as late.
	counted bool
	// cursorPool and cursorHost, when set, are the pool's R-LI4 cursor to
	// record if fn succeeds (PlacementCommit.RoundRobinHost).
	cursorPool, cursorHost string
	// order is the request's place in its batch as queued (the batch runs
	// in key order): of a batch's cursors of one pool, the last queued wins.
	order int
	// atomic says fn changes nothing when it returns a *vdibroker.Error,
	// so it needs no savepoint of its own: the common connect runs two
	// statements instead of four, a heartbeat one fewer. Any
	// other error runs the batch again with this request in a savepoint
	// (errRunApart).
	atomic bool
	// beat says the request is a heartbeat: it waits behind the other
	// writes (committer.beats).
	beat bool
	// resync says everything the request writes, its host writes again
	// with its next heartbeat (R-S2 reconciles the sessions, R-S5 asks
	// for the logoff again, R-A4 derives the power state again), so a
	// batch of nothing else needs no sync of its own (unsynced).
	resync bool
	// pool and host, when set, are the host whose lock the request takes
	// (heartbeats and placements): a batch with heartbeats takes all of
	// them at once (readAhead).
	pool, host string
	// ownHost says fn writes no host but its own (a heartbeat, a
	// simpleCommit): the heartbeats after it may use the batch's reads
	// (readsAhead).
	ownHost bool
	// deliver, set for heartbeats, is given the host's commands once the
	// batch marked them Delivered (deliverBatch).
	deliver func(cmds []vdibroker.Command)
	// state: 0 queued, 1 taken into a batch, 2 abandoned by its caller.
	// The caller may abandon only before the committer takes it, so a call
	// that returns an error never committed (Store: a failed call changed
	// nothing).
	state atomic.Int32
	done  chan error
}

const (
	reqQueued int32 = iota
	reqTaken
	reqAbandoned
)

// CommitStats counts group-commit work since Open.
type CommitStats struct {
	// Batches is the number of group-commit transactions run.
	Batches int64
	// Writes is the number of placements and heartbeats they carried.
	Writes int64
}

// CommitStats reports how well writes were batched.
func (s *DB) CommitStats() CommitStats {
	return CommitStats{Batches: s.batches.Load(), Writes: s.batched.Load()}
}

var errClosed = errors.New("store is closed")

// errRunApart runs a batch again after an atomic request failed other than
// with a *vdibroker.Error: it is no longer atomic, so it fails alone in its
// savepoint instead of failing every write of the batch.
var errRunApart = errors.New("run the batch again, one request in a savepoint")

// seqIndexBits is how many low bits of a write's number (runBatch) number it
// within its batch; the batch number is above them. MaxBatch stays below
// 1<<seqIndexBits.
const seqIndexBits = 16

// batchTimeout bounds one group-commit transaction; callers' contexts cannot
// cancel a transaction shared with others.
const batchTimeout = 30 * time.Second

// CommitPlacement makes one placement durable (R-D2), enforcing R-C4 and
// R-C6 in the database (R-D3). Concurrent calls share transactions: see
// batcher.
func (s *DB) CommitPlacement(ctx context.Context, c *vdibroker.PlacementCommit) error {
	if c == nil || c.Session == nil || c.Session.ID == "" {
		return vdibroker.Errorf(vdibroker.EInvalid, "placement commit needs a session with an id")
	}
	if c.RoundRobinHost != "" && c.RoundRobinHost != c.Session.SessionHost {
		return vdibroker.FieldError("roundRobinHost", "must be the session's host %q, got %q", c.Session.SessionHost, c.RoundRobinHost)
	}
	nonce := vdibroker.CallNonceFrom(ctx)
	err := s.groupedReq(ctx, placementReq(c, nonce, s.now))
	if err == nil && nonce != nil {
		nonce.MarkRecorded()
	}
	return wrap(err, "commit placement %s", c.Session.ID)
}

// placementReq is the group-commit request that writes c and, when nonce
// is set, records it after the session (vdibroker.WithCallNonce, R-G5) at
// now's time: then it runs in a savepoint, so that a replay, or a nonce
// recorded too late, undoes the placement.
func placementReq(c *vdibroker.PlacementCommit, nonce *vdibroker.CallNonce, now func() time.Time) *commitReq {
	r := &commitReq{key: hostKey(c.Session.HostPool, c.Session.SessionHost), atomic: simpleCommit(c) && nonce == nil,
		pool: c.Session.HostPool, host: c.Session.SessionHost, ownHost: simpleCommit(c),
		fn:        func(ctx context.Context, t *tx) error { return commitOne(ctx, t, c) },
		committed: c.OnCommitted, nonce: nonce, outage: c.OutagePlacement}
	r.made, _ = vdibroker.IDTime(c.Session.ID)
	if nonce != nil {
		r.fn = func(ctx context.Context, t *tx) error {
			if r.nonceErr != nil {
				return r.nonceErr // past the minute's bound (lockCallNonces)
			}
			if err := commitOne(ctx, t, c); err != nil {
				return err
			}
			return t.useCallNonce(ctx, nonce, now())
		}
	}
	if c.RoundRobinHost != "" {
		r.cursorPool, r.cursorHost = c.Session.HostPool, c.RoundRobinHost
	}
	if c.Assign {
		r.assignPool, r.assignUser = c.Session.HostPool, c.Session.User
	}
	return r
}

// simpleCommit reports whether c is the common connect: a new session that
// replaces none and assigns nothing, which commitOne writes with one
// conditional UPDATE and one INSERT that cannot fail (see commitOne).
func simpleCommit(c *vdibroker.PlacementCommit) bool {
	return c.EndSessionID == "" && !c.Assign
}

func hostKey(pool, host string) string { return pool + "\x00" + host }

// queue is the committer queue r waits in.
func (s *DB) queue(r *commitReq) chan *commitReq {
	if r.beat && len(s.beatCommits) > 0 {
		return s.beatCommits[shard(r.key, len(s.beatCommits))].beats
	}
	c := s.commits[shard(r.key, len(s.commits))]
	if r.beat {
		return c.beats
	}
	return c.first
}

// grouped runs fn in the next group-commit transaction and returns its
// outcome.
func (s *DB) grouped(ctx context.Context, key string, fn func(ctx context.Context, t *tx) error) error {
	return s.groupedReq(ctx, &commitReq{key: key, fn: fn})
}

// groupedReq is grouped for a request built by the caller.
func (s *DB) groupedReq(ctx context.Context, r *commitReq) error {
	r.done = make(chan error, 1)
	select {
	case <-s.closing:
		return errClosed
	default:
	}
	select {
	case s.queue(r) <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closing:
		return errClosed
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		if r.state.CompareAndSwap(reqQueued, reqAbandoned) {
			return ctx.Err()
		}
		// Already in a transaction: its outcome is the answer.
		return <-r.done
	case <-s.stopped:
		// The committer has stopped; a request it never took is refused.
		if r.state.CompareAndSwap(reqQueued, reqAbandoned) {
			return errClosed
		}
		return <-r.done
	}
}

// postgresCommitters is how many group committers a PostgreSQL store runs
// for connects and the other writes, and as many again for heartbeats. A
// batch's statements go one after another on its connection, each a
// round trip: one committer spent most of its time waiting for the
// network, and connects queued behind a full pod's 1,000 heartbeats a
// second. Several committers, each on its own connection, wait
// in parallel; and a connect never waits for a batch of heartbeats, whose
// reads and writes (a host's sessions each) made a batch with a connect
// in it up to a hundred milliseconds long under a pod's load. A host's
// connect and its heartbeat may then commit in either order, as they may
// from two replicas: both take the host's lock (R-D3), and their batches
// are numbered in the order they held it (numbering).
const postgresCommitters = 4

// shard is the committer of a request's key. One host's writes of one
// kind (heartbeats, the others) always go to one committer, so they are
// committed in the order they were queued and their numbers
// (HeartbeatResult.Seq, OnCommitted) follow that order, and the broker's
// committers of one kind never wait for each other's host locks.
func shard(key string, n int) int {
	if n == 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// committer is one group committer's queues. Heartbeats wait in a queue
// of their own, so on SQLite's one committer a connect goes into the next
// batch whatever the number of heartbeats queued before it. (On
// PostgreSQL a committer uses one of them: s.commits the first,
// s.beatCommits the beats.)
type committer struct {
	first chan *commitReq // placements and every other write
	beats chan *commitReq // heartbeats (commitReq.beat)
	// late is the committer's row of late_session_writes, which only its
	// batches bump (countLateWrites): its open's key and its number.
	late string
}

func newCommitter(late string) *committer {
	return &committer{first: make(chan *commitReq, 4096), beats: make(chan *commitReq, 4096), late: late}
}

// How many writes one PostgreSQL batch carries at most: heartbeats (a
// heartbeats' committer's batch), and the others (connects). A batch's
// statements run one after another, so a batch of 256 connects would take
// a few hundred milliseconds, and a connect queued behind it would wait
// that long, then as long again for its own batch (the pod bench wants
// connect p99 under 100 ms). No connect waits for heartbeats (they have committers of
// their own), and a batch's heartbeats cost a few statements in all
// (readAhead, flushBeats, deliverBatch): 64 of them are one larger batch
// instead of four.
const (
	postgresBeatsPerBatch = 64
	postgresFirstPerBatch = 64
)

// batchCaps returns how many heartbeats and other writes one batch takes
// at most. SQLite's batches cost one fsync each, not round trips: they
// stay large, but a storm of connects leaves a quarter of each batch to
// heartbeats.
func (s *DB) batchCaps() (beats, first int) {
	if s.d == postgresDialect {
		return min(postgresBeatsPerBatch, s.opts.MaxBatch), min(postgresFirstPerBatch, s.opts.MaxBatch)
	}
	return s.opts.MaxBatch, max(1, s.opts.MaxBatch*3/4)
}

// batcher is a group committer: it takes every write queued on c while
// its previous transaction ran (up to MaxBatch, heartbeats after the other
// writes and each kind up to its cap, batchCaps; under load it waits up to
// Linger for more) and commits them in one transaction, a SAVEPOINT for
// each that needs one. On SQLite that is one fsync for the whole batch
// instead of one per connect or heartbeat.
func (s *DB) batcher(c *committer) {
	defer s.batcherWG.Done()
	batch := make([]*commitReq, 0, s.opts.MaxBatch)
	prev := 0 // the previous batch's size: above 1 means load
	for {
		batch = batch[:0]
		select {
		case r := <-c.first:
			batch = append(batch, r)
		case r := <-c.beats:
			batch = append(batch, r)
		case <-s.closing:
			// Commit what is still queued, then stop.
			for {
				select {
				case r := <-c.first:
					s.runBatch(c, []*commitReq{r})
				case r := <-c.beats:
					s.runBatch(c, []*commitReq{r})
				default:
					return
				}
			}
		}
		batch = s.fill(c, batch, prev > 1)
		prev = len(batch)
		s.runBatch(c, batch)
	}
}

// fill adds queued requests to batch up to MaxBatch, the other writes
// before heartbeats, each kind up to its cap (batchCaps), lingering (see
// Options.Linger) if loaded.
func (s *DB) fill(c *committer, batch []*commitReq, loaded bool) []*commitReq {
	var deadline <-chan time.Time
	if s.opts.Linger > 0 && loaded {
		t := time.NewTimer(s.opts.Linger)
		defer t.Stop()
		deadline = t.C
	}
	beats, first := 0, 0
	count := func(r *commitReq) {
		if r.beat {
			beats++
		} else {
			first++
		}
	}
	for _, r := range batch {
		count(r)
	}
	take := func(r *commitReq) {
		batch = append(batch, r)
		count(r)
	}
	for len(batch) < s.opts.MaxBatch {
		// A nil channel is never ready: a kind at its cap waits.
		firstQ, beatQ := c.first, c.beats
		if first >= s.firstPerBatch {
			firstQ = nil
		}
		if beats >= s.beatsPerBatch {
			beatQ = nil
		}
		if firstQ == nil && beatQ == nil {
			return batch
		}
		select {
		case r := <-firstQ:
			take(r)
			continue
		default:
		}
		select {
		case r := <-beatQ:
			take(r)
			continue
		default:
		}
		if deadline == nil {
			return batch
		}
		select {
		case r := <-firstQ:
			take(r)
		case r := <-beatQ:
			take(r)
		case <-deadline:
			return batch
		}
	}
	return batch
}

// runBatch commits the batch's live requests and answers each one, on
// committer c's goroutine (its batches run one after another).
func (s *DB) runBatch(c *committer, batch []*commitReq) {
	live := batch[:0:0]
	for _, r := range batch {
		if r.state.CompareAndSwap(reqQueued, reqTaken) {
			r.order = len(live)
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	slices.SortStableFunc(live, func(a, b *commitReq) int { return cmp.Compare(a.key, b.key) })
	s.batches.Add(1)
	s.batched.Add(int64(len(live)))
	results := make([]error, len(live))
	// On SQLite the statements run under a context that is never done:
	// the driver watches a cancellable context with a goroutine per
	// statement, a fifth of the writer's time, and a local transaction has
	// nothing to time out on but the busy timeout. PostgreSQL keeps the
	// bound, as its statements wait on the network and on other replicas.
	ctx := context.Background()
	if s.d != sqliteDialect {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmp.Or(s.opts.BatchTimeout, batchTimeout))
		defer cancel()
	}
	var num int64  // the number this batch took (0: none)
	var owed int64 // the lateOwed this batch made up for (0: none)
	err := s.writeSynced(ctx, !s.unsynced(live), func(t *tx) error {
		if num != 0 {
			// An earlier run of the batch took a number and did not
			// commit.
			s.numbers.skip(num)
			num = 0
		}
		if err := lockAssignees(ctx, t, live); err != nil {
			return err
		}
		if err := lockCallNonces(ctx, t, live); err != nil {
			return err
		}
		use := readsAhead(live)
		read, err := readAhead(ctx, t, live, use)
		if err != nil {
			return err
		}
		defer func() { t.beat = nil }()
		for i, r := range live {
			t.beat = nil
			if use[i] {
				t.beat = read[r.key] // nil when not found: fn reads and answers NotFound
			}
			if t.beat == nil && (r.beat || !r.ownHost) {
				// It may read a host's row: write the heartbeats' first.
				if err := t.flushBeats(ctx); err != nil {
					return err
				}
			}
			if r.atomic {
				err := r.fn(ctx, t)
				var verr *vdibroker.Error
				switch {
				case err == nil, errors.As(err, &verr):
					results[i] = err // changed nothing when it failed
				case errors.Is(err, errRaced) || t.d.isRetryable(err):
					return err // run the batch again
				default:
					// Unexpected: the transaction may be aborted
					// (PostgreSQL). Run the batch again with this request
					// in a savepoint, so it fails alone.
					r.atomic = false
					return errRunApart
				}
				continue
			}
			if _, err := t.exec(ctx, `SAVEPOINT batched`); err != nil {
				return err
			}
			mark := t.cacheMark()
			err := r.fn(ctx, t)
			switch {
			case err == nil:
				results[i] = nil
			case errors.Is(err, errRaced) || t.d.isRetryable(err):
				return err // deadlock or serialization failure: run the batch again
			default:
				// This request alone fails: undo its part, keep the others.
				results[i] = err
				t.uncache(mark)
				if _, err := t.exec(ctx, `ROLLBACK TO SAVEPOINT batched`); err != nil {
					return err
				}
			}
			if _, err := t.exec(ctx, `RELEASE SAVEPOINT batched`); err != nil {
				return err
			}
		}
		t.beat = nil
		if err := t.flushBeats(ctx); err != nil {
			return err
		}
		if err := deliverBatch(ctx, t, live, results); err != nil {
			return err
		}
		if err := writeCursors(ctx, t, live, results); err != nil {
			return err
		}
		// A late session whose count failed after its commit
		// (countLateAfterCommit) is counted with this batch.
		if owed = s.lateOwed.Load(); owed <= s.latePaid.Load() {
			owed = 0
		}
		if err := countLateWrites(ctx, t, c.late, live, results, s.now(), owed != 0); err != nil {
			return err
		}
		// The batch's number, taken after its last statement, while it
		// still holds its hosts' locks, just before it commits (see
		// numbering).
		num = s.numbers.take()
		return nil
	})
	if err != nil {
		s.log.Error("group commit failed", "writes", len(live), "err", err)
		err = fmt.Errorf("group commit: %w", err)
		if num != 0 {
			s.numbers.skip(num)
		}
	}
	if err == nil {
		// The hooks run in number order, every hook before any answer: a
		// heartbeat answered from this batch carries counts that include
		// these sessions.
		s.numbers.inTurn(num, func() {
			seq := func(i int) int64 { return num<<seqIndexBits | int64(i) }
			for i, r := range live {
				if r.committed != nil && results[i] == nil {
					r.committed(seq(i))
				}
			}
		})
		// This batch made up for the failures up to owed.
		for paid := s.latePaid.Load(); paid < owed; paid = s.latePaid.Load() {
			if s.latePaid.CompareAndSwap(paid, owed) {
				break
			}
		}
		// Before any is answered: a session acknowledged is counted.
		s.countLateAfterCommit(c, live, results)
	}
	for i, r := range live {
		if err != nil {
			r.done <- err
		} else {
			r.done <- results[i]
		}
	}
}

// unsynced reports whether the batch may commit without a sync of its
// own: a batch of heartbeats alone whose writes their hosts write again
// (commitReq.resync), on SQLite with synchronous=FULL or on PostgreSQL.
// Half of the SQLite writer's time in a pod of 2,000 hosts taking dry runs
// was such batches' fsyncs, one each, while the heartbeats queued behind
// them. Unsynced, the batch still survives a SIGKILL of the broker (on
// SQLite its WAL frames are in the OS page cache before it is answered; on
// PostgreSQL the server has it), and the next synced commit (a connect's,
// R-D2) syncs the log up to its own records, these before them; only a
// crash of the machine (or of PostgreSQL's server) before then can lose
// it, and the hosts' next heartbeats write it again.
func (s *DB) unsynced(live []*commitReq) bool {
	if s.d == sqliteDialect && !s.syncFull {
		return false // nothing is synced to begin with
	}
	for _, r := range live {
		if !r.beat || !r.resync {
			return false
		}
	}
	return true
}

// numbering numbers the committed batches (HeartbeatResult.Seq,
// OnCommitted) and runs their hooks in number order, whichever committer
// ran them. A batch takes its number after its last statement, while it
// still holds its hosts' locks, just before it commits: of two batches
// that write one host, the one that locked it first (and committed before
// the other could lock it) has the lower number, so a heartbeat's counts
// include exactly the placements of its host numbered below it (R-S1),
// though the two ran on different committers (heartbeats have their own
// on PostgreSQL). A number taken when a batch then fails to commit is
// skipped. Hooks run in turn: when a hook has seen a number, every batch
// numbered below it has committed and run its hooks, or failed (a read
// begun after then sees them all: the view's landedMark).
type numbering struct {
	mu   sync.Mutex
	cond *sync.Cond
	last int64          // the last number taken
	done int64          // every number up to this one has had its turn
	over map[int64]bool // numbers above done that have had theirs
}

func newNumbering() *numbering {
	n := &numbering{over: map[int64]bool{}}
	n.cond = sync.NewCond(&n.mu)
	return n
}

func (n *numbering) take() int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.last++
	return n.last
}

// inTurn runs fn once every number below num has had its turn, then gives
// num's turn up.
func (n *numbering) inTurn(num int64, fn func()) {
	n.mu.Lock()
	for n.done != num-1 {
		n.cond.Wait()
	}
	n.mu.Unlock()
	fn()
	n.skip(num)
}

// skip marks num's turn as had (without hooks, for a batch that did not
// commit; or after them, inTurn).
func (n *numbering) skip(num int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.over[num] = true
	for n.over[n.done+1] {
		delete(n.over, n.done+1)
		n.done++
	}
	n.cond.Broadcast()
}

// writeCursors records the R-LI4 cursors of the batch's successful
// placements, the last queued of each pool, after every other write of the
// batch: on PostgreSQL a batch then waits for another replica's cursor row
// only when it holds no other lock that replica could want next, and two
// batches take their pools' rows in one order (by pool).
func writeCursors(ctx context.Context, t *tx, live []*commitReq, results []error) error {
	last := map[string]*commitReq{}
	for i, r := range live {
		if r.cursorHost == "" || results[i] != nil {
			continue
		}
		if l := last[r.cursorPool]; l == nil || r.order > l.order {
			last[r.cursorPool] = r
		}
	}
	for _, pool := range slices.Sorted(maps.Keys(last)) {
		if _, err := t.exec(ctx, `INSERT INTO pool_cursors (host_pool, round_robin_host) VALUES (?, ?)
			ON CONFLICT (host_pool) DO UPDATE SET round_robin_host = excluded.round_robin_host`,
			pool, last[pool].cursorHost); err != nil {
			return err
		}
	}
	return nil
}

// countLateWrites bumps the count of late session writes on row, its
// committer's (FederationStore.LateSessionWrites), by the batch's that
// succeeded, in its transaction: outage placements (PlacementCommit.
// OutagePlacement) and sessions whose id was made LateCommit or more
// before now. A replica that reads the new count reads their sessions
// too (R-G1); the sessions and their count commit together, so no
// failure (a replica stopped, a commit whose outcome is unknown) leaves
// one committed and not counted.
// owed adds one for the late sessions whose count failed after their
// commit (countLateAfterCommit): the count need only change.
//
// Each committer bumps a row of its own (committer.late, migration
// 00063): its batches run one after another, so the row never makes one
// batch wait for another's commit, of this replica or another. (One
// shared row, held from its UPDATE to the commit, made every late batch
// of every committer and replica commit one after another, each holding
// its hosts' rows meanwhile, just when the store was slow enough to make
// sessions late.) It is still the batch's last statement, after every
// host's lock: the row is then held only while the batch commits, and a
// fold (foldLateWrites), which may wait for it, never waits for a batch
// that waits for something else.
func countLateWrites(ctx context.Context, t *tx, row string, live []*commitReq, results []error, now time.Time, owed bool) error {
	n := 0
	if owed {
		n++
	}
	for i, r := range live {
		r.counted = results[i] == nil && (r.outage || late(r, now))
		if r.counted {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	_, err := t.exec(ctx, bumpLateWritesQuery, row, n, ns(now))
	return err
}

// bumpLateWritesQuery adds to a committer's count of late session writes
// (countLateWrites, countLateAfterCommit). Args: committer, writes, now
// (ns).
const bumpLateWritesQuery = `INSERT INTO late_session_writes (committer, writes, bumped) VALUES (?, ?, ?)
	ON CONFLICT (committer) DO UPDATE SET writes = late_session_writes.writes + excluded.writes, bumped = excluded.bumped`

// late reports whether r writes a session whose id was made LateCommit or
// more before now.
func late(r *commitReq, now time.Time) bool {
	return !r.made.IsZero() && now.Sub(r.made) >= vdibroker.LateCommit
}

// countLateAfterCommit counts, on every engine, in a transaction of its
// own on c's row (no other committer's batch holds it), the sessions of
// a committed batch that its transaction did not count but that are
// late by now: prompt by the transaction's clock, their commit itself
// took long (a slow sync), so a directory pass may have read past their
// ids before they were visible. The transaction can't
// count them: it does not know how long its commit will take. Its commit
// is synced, as the session's was: an unsynced count that a restart of
// the store between two passes lost would leave the session missed until
// a whole list, and no pass would have failed to say so. A replica
// stopped between the session's commit and this one still leaves it
// missed until that replica's next start or another's whole list
// (docs/federation.md, the directory's limits). It is tried once (the
// store has just committed); when it fails, the next batch that commits
// counts them (DB.lateOwed), and a pass may miss them until then.
func (s *DB) countLateAfterCommit(c *committer, live []*commitReq, results []error) {
	now := s.now()
	n := 0
	for i, r := range live {
		if results[i] == nil && !r.counted && late(r, now) {
			n++
		}
	}
	if n == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(s.opts.BatchTimeout, batchTimeout))
	defer cancel()
	err := s.write(ctx, func(t *tx) error {
		_, err := t.exec(ctx, bumpLateWritesQuery, c.late, n, ns(now))
		return err
	})
	if err != nil {
		s.lateOwed.Add(1)
		s.log.Error("counting sessions whose commit was late failed; the session directory may miss them until the next write commits", "sessions", n, "err", err)
	}
}

// RoundRobinHost returns the pool's R-LI4 cursor ("" when none yet);
// NotFound when the pool does not exist.
func (s *DB) RoundRobinHost(ctx context.Context, pool string) (string, error) {
	var host sql.NullString
	err := s.read(ctx, func(t *tx) error {
		err := t.row(ctx, `SELECT c.round_robin_host FROM host_pools p LEFT JOIN pool_cursors c ON c.host_pool = p.name
			WHERE p.name = ?`, pool).Scan(&host)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("host pool %q not found", pool)
		}
		return err
	})
	if err != nil {
		return "", wrap(err, "round-robin cursor of %q", pool)
	}
	return host.String, nil
}

// openUserSessionsQuery asks whether a user has an open session in a pool,
// adopted ones included unless the last argument says to ignore them
// (PlacementCommit.IgnoreAdopted). Each half must stay a range of a partial
// index (user_sessions_one_per_pooled_user and
// user_sessions_open_unpooled_by_user, migrations 00001 and 00004),
// whatever the number of sessions in the pool: it is asked on every pooled
// connect, inside takeSlotQuery. Args: pool, user, pool, user, ignore
// adopted.
// The user is their key (vdibroker.FoldUser, R-E5): Alice and alice have
// one session.
const openUserSessionsQuery = `SELECT EXISTS (SELECT 1 FROM user_sessions
		WHERE host_pool = ? AND user_key = ? AND pooled AND ` + openSQL + `)
	OR EXISTS (SELECT 1 FROM user_sessions
		WHERE host_pool = ? AND user_key = ? AND NOT pooled AND ` + openSQL + ` AND NOT (adopted AND ?))`

// takeSlotQuery takes a session slot on a host only while it is under the
// lower of the caller's limit and the one stored now, is not drained now
// (unless personal, R-PE4), and, in a pooled pool, the user has no open
// session there (R-C6; the unique index is what enforces it against
// concurrent writers). A replica whose view is a few seconds old must not
// place over a lowered limit (R-C4, R-P2) or on a host drained on another
// replica (R-C2), or with pool settings changed on another replica since
// (R-P1; the caller's pool updateTime in ns, 0 not to check). Drain mode is
// checked on the counts row itself (new_sessions_allowed, a copy of the
// host's allow_new_session written with it): on PostgreSQL a connect that
// waited for a drain's lock on that row is checked again against the row
// the drain left. Args: ds, dc, pool, host, limit, pool update time, pool
// update time, pooled, pooled, pool, user, pool, user, ignore adopted.
const takeSlotQuery = `UPDATE host_counts SET sessions = sessions + ?, connecting_sessions = connecting_sessions + ?
	WHERE host_pool = ? AND name = ? AND sessions < ?
	AND (SELECT host_counts.sessions < max_session_limit AND (CAST(? AS BIGINT) = 0 OR update_time = ?)
		FROM host_pools WHERE host_pools.name = host_counts.host_pool)
	AND (new_sessions_allowed OR NOT ?)
	AND (NOT ? OR NOT (` + openUserSessionsQuery + `))`

// commitOne writes one placement: end the replaced session (R-C1), take a
// slot on the host (takeSlotQuery: R-C4, R-C2, R-C6), assign the host
// (R-PE1), insert the session. For a simpleCommit it changes nothing when
// it returns a *vdibroker.Error: the slot is the only write before the
// insert, and the insert skips rather than fails on the unique index, in
// which case the slot is given back.
func commitOne(ctx context.Context, t *tx, c *vdibroker.PlacementCommit) error {
	u := c.Session
	if u.State == "" {
		u.State = vdibroker.StatePending
	}
	if u.StateTime.IsZero() {
		u.StateTime = u.CreateTime
	}
	if c.EndSessionID != "" {
		if err := t.endSession(ctx, u.HostPool, c.EndSessionID, vdibroker.EndHostUnavailable, u.CreateTime); err != nil {
			return err
		}
	}
	ds, dc := countsOf(u.State, u.AgentSessionID)
	t.touch(u.HostPool, u.SessionHost)
	var poolTime int64
	if !c.PoolUpdateTime.IsZero() {
		poolTime = ns(c.PoolUpdateTime)
	}
	key := vdibroker.FoldUser(u.User)
	slotArgs := []any{ds, dc, u.HostPool, u.SessionHost, c.MaxSessionLimit, poolTime, poolTime,
		c.Pooled, c.Pooled, u.HostPool, key, u.HostPool, key, c.IgnoreAdopted}
	sessionArgs := []any{u.ID, u.HostPool, u.SessionHost, u.User, key, u.State, ns(u.CreateTime), ns(u.StateTime),
		u.AgentSessionID, "", c.Pooled, false, c.Record}
	if t.d == postgresDialect && simpleCommit(c) {
		// Both statements in one round trip (slotAndInsertQuery).
		var slot, inserted bool
		if err := t.row(ctx, slotAndInsertQuery, append(slotArgs, sessionArgs...)...).Scan(&slot, &inserted); err != nil {
			return err
		}
		switch {
		case inserted:
			return nil
		case !slot:
			return noSlot(ctx, t, c, poolTime)
		}
		return skipped(ctx, t, c, ds, dc)
	}
	n, err := t.exec(ctx, takeSlotQuery, slotArgs...)
	if err != nil {
		return err
	}
	if n == 0 {
		return noSlot(ctx, t, c, poolTime)
	}
	if c.Assign {
		if err := t.assign(ctx, u.HostPool, u.SessionHost, u.User); err != nil {
			return err
		}
	}
	n, err = t.exec(ctx, insertSessionQuery, sessionArgs...)
	if err != nil || n == 1 {
		return err
	}
	return skipped(ctx, t, c, ds, dc)
}

// insertSessionQuery inserts a placed session, or skips it (ON CONFLICT
// DO NOTHING) when its id exists or its user has an open pooled session
// (R-C6's unique index).
const insertSessionQuery = `INSERT INTO user_sessions (id, host_pool, session_host, user_name, user_key, state,
	create_time, state_time, agent_session_id, end_reason, pooled, logoff_queued, placement)
	VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING`

// slotAndInsertQuery is, on PostgreSQL, the common connect's two
// statements in one, a round trip less per connect: takeSlotQuery, then
// insertSessionQuery only if the slot was taken. Args: takeSlotQuery's,
// then insertSessionQuery's; it answers whether the slot was taken and
// whether the session was inserted. (Its values are cast: an INSERT ...
// SELECT does not type them by their columns.)
const slotAndInsertQuery = `WITH slot AS (` + takeSlotQuery + ` RETURNING 1),
	ins AS (INSERT INTO user_sessions (id, host_pool, session_host, user_name, user_key, state,
		create_time, state_time, agent_session_id, end_reason, pooled, logoff_queued, placement)
		SELECT CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT),
			CAST(? AS BIGINT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BOOLEAN), CAST(? AS BOOLEAN), CAST(? AS BYTEA)
		WHERE EXISTS (SELECT 1 FROM slot) ON CONFLICT DO NOTHING RETURNING 1)
	SELECT EXISTS (SELECT 1 FROM slot), EXISTS (SELECT 1 FROM ins)`

// noSlot answers why takeSlotQuery took no slot for c: R-C6 before R-C4,
// so the caller reconnects the user instead of retrying a full host.
func noSlot(ctx context.Context, t *tx, c *vdibroker.PlacementCommit, poolTime int64) error {
	u := c.Session
	if c.Pooled {
		var open bool
		key := vdibroker.FoldUser(u.User)
		if err := t.row(ctx, openUserSessionsQuery, u.HostPool, key, u.HostPool, key, c.IgnoreAdopted).Scan(&open); err != nil {
			return err
		}
		if open {
			return vdibroker.ErrUserHasSession
		}
	}
	if poolTime != 0 {
		var stored int64
		err := t.row(ctx, `SELECT update_time FROM host_pools WHERE name = ?`, u.HostPool).Scan(&stored)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err == nil && stored != poolTime {
			return vdibroker.ErrPoolChanged
		}
	}
	if _, err := t.getHost(ctx, u.HostPool, u.SessionHost, false); err != nil {
		return err
	}
	return vdibroker.ErrHostFull
}

// skipped answers a session insert that was skipped after its slot was
// taken: the id exists, or (another replica won the race past
// takeSlotQuery's check) the user has an open pooled session. The slot is
// given back.
func skipped(ctx context.Context, t *tx, c *vdibroker.PlacementCommit, ds, dc int) error {
	u := c.Session
	if _, err := t.exec(ctx, `UPDATE host_counts SET sessions = sessions - ?, connecting_sessions = connecting_sessions - ?
		WHERE host_pool = ? AND name = ?`, ds, dc, u.HostPool, u.SessionHost); err != nil {
		return err
	}
	var dup bool
	if err := t.row(ctx, `SELECT EXISTS (SELECT 1 FROM user_sessions WHERE id = ?)`, u.ID).Scan(&dup); err != nil {
		return err
	}
	if dup {
		return vdibroker.Errorf(vdibroker.EConflict, "user session %q already exists", u.ID)
	}
	return vdibroker.ErrUserHasSession
}

// lockAssignees takes, on PostgreSQL, the advisory lock of every user the
// batch assigns a personal host to, in one sorted order and before any row
// lock. Taken in the middle of the batch instead (in assign), it could
// close a cycle with another replica's batch: this one holding a host row
// and waiting for the user's lock, the other holding the user's lock and
// waiting for that row. Locks taken first, in one global order, then rows
// in key order, cannot.
func lockAssignees(ctx context.Context, t *tx, live []*commitReq) error {
	if t.d != postgresDialect {
		return nil
	}
	var keys [][2]string
	for _, r := range live {
		if r.assignUser != "" {
			keys = append(keys, [2]string{r.assignPool, vdibroker.FoldUser(r.assignUser)}) // Alice waits for alice (R-E5)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	keys = slices.Compact(keys)
	for _, k := range keys {
		if _, err := t.exec(ctx, `SELECT pg_advisory_xact_lock(hashtext(?), hashtext(?))`, k[0], k[1]); err != nil {
			return err
		}
	}
	return nil
}

// assignQuery is assign's conditional UPDATE. Args: the user's list, pool,
// host, pool, the user's list.
const assignQuery = `UPDATE session_hosts SET assigned_users = ?
	WHERE host_pool = ? AND name = ? AND assigned_users = '[]' AND allow_new_session AND NOT autoscale_drain
	AND NOT EXISTS (SELECT 1 FROM session_hosts AS mine
		WHERE mine.host_pool = ? AND mine.assigned_users = ? AND mine.assigned_users <> '[]')`

// assign makes host the user's personal host (R-PE1). It fails with
// ErrHostTaken, changing nothing, unless the host has no assigned user and
// is not drained (R-C2: a drained host is not placeable, so not "the first
// unassigned placeable host"), and the user has no host in the pool yet:
// a server whose view is stale or who raced another replica must not give
// the user a second host or a drained one (R-D3). On PostgreSQL an
// advisory lock per pool and user (lockAssignees) makes concurrent
// assignments of one user wait for each other, so the second sees the
// first (its transactions are READ COMMITTED: each statement sees what
// committed before it began); on SQLite the single writer does that.
//
// "Has a host" is an assigned_users list of just that user, as every
// automatic assignment and most administrators' writes leave it (index
// session_hosts_assigned; on PostgreSQL session_hosts_assigned_hash, as
// a B-tree's key could not hold a long list, migration 00076).
func (t *tx) assign(ctx context.Context, pool, host, user string) error {
	// The user's advisory lock is already held: every assignment comes
	// through placementReq, whose batch takes it first (lockAssignees).
	own := list([]string{user})
	n, err := t.exec(ctx, assignQuery, own, pool, host, pool, own)
	if err != nil {
		return err
	}
	if n == 0 {
		return vdibroker.ErrHostTaken
	}
	return nil
}
