package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// R-G1: the session directory keeps, per user, the pods that registered
// them; a pod's whole list drops its entries it no longer has (but not
// one registered within DirectoryFullMargin of it) and records the pod
// complete at its generation; a lookup names the pods complete since a
// time.
func TestSessionDirectory_RG1(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		lookup := func(user string, since time.Time) ([]string, map[string]int64) {
			t.Helper()
			pods, complete, err := s.LookupDirectory(ctx, user, since)
			if err != nil {
				t.Fatal(err)
			}
			return pods, complete
		}
		if pods, complete := lookup("alice", time.Time{}); len(pods) != 0 || len(complete) != 0 {
			t.Fatalf("empty directory: %v %v", pods, complete)
		}
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(s.RegisterDirectory(ctx, "ams1", 7, []string{"alice", "bob"}, false, false, t0))
		must(s.RegisterDirectory(ctx, "fra1", 7, []string{"alice"}, false, false, t0))
		if pods, complete := lookup("alice", time.Time{}); !slices.Equal(pods, []string{"ams1", "fra1"}) || len(complete) != 0 {
			t.Fatalf("alice: pods %v complete %v; want ams1, fra1 and none complete (no whole list yet)", pods, complete)
		}

		// ams1's whole list, in two parts, two minutes on: bob's session
		// ended (dropped), carol's is new; dave registered 30s before the
		// last part (a session made while the list was read) stays.
		at := t0.Add(2 * time.Minute)
		must(s.RegisterDirectory(ctx, "ams1", 8, []string{"dave"}, false, false, at.Add(-30*time.Second)))
		must(s.RegisterDirectory(ctx, "ams1", 8, []string{"alice"}, true, false, at))
		must(s.RegisterDirectory(ctx, "ams1", 8, []string{"carol"}, true, true, at))
		for user, want := range map[string][]string{"alice": {"ams1", "fra1"}, "bob": nil, "carol": {"ams1"}, "dave": {"ams1"}} {
			if pods, _ := lookup(user, time.Time{}); !slices.Equal(pods, want) {
				t.Errorf("%s after ams1's whole list: %v, want %v", user, pods, want)
			}
		}
		if _, complete := lookup("alice", at); !cmp.Equal(complete, map[string]int64{"ams1": 8}) {
			t.Errorf("complete since the list: %v, want ams1 at generation 8", complete)
		}
		if _, complete := lookup("alice", at.Add(time.Nanosecond)); len(complete) != 0 {
			t.Errorf("complete since after the list: %v, want none (stale)", complete)
		}
	})
}

// R-G1: one pod keeps at most MaxDirectoryEntriesPerPod entries on
// another; a call past it is refused whole; a refreshed entry is not
// counted again, and a whole list frees what it drops.
func TestSessionDirectoryBound_RG1(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		defer store.SetMaxDirectoryEntries(3)()
		ctx := t.Context()
		if err := s.RegisterDirectory(ctx, "evil", 1, []string{"u1", "u2"}, false, false, t0); err != nil {
			t.Fatal(err)
		}
		if err := s.RegisterDirectory(ctx, "evil", 1, []string{"u1", "u2", "u3"}, false, false, t0); err != nil {
			t.Fatalf("refreshing two and adding one, to the bound: %v", err)
		}
		err := s.RegisterDirectory(ctx, "evil", 1, []string{"u4", "u5"}, false, false, t0)
		wantCode(t, err, vdibroker.ETooManyRequests)
		if pods, _, _ := s.LookupDirectory(ctx, "u4", time.Time{}); len(pods) != 0 {
			t.Errorf("u4 of the refused call was recorded: %v", pods)
		}
		// Another pod has its own bound.
		if err := s.RegisterDirectory(ctx, "fra1", 1, []string{"u4"}, false, false, t0); err != nil {
			t.Fatalf("another pod: %v", err)
		}
		// A whole list of one user, later: the other two are dropped and
		// their room is free again.
		later := t0.Add(time.Hour)
		if err := s.RegisterDirectory(ctx, "evil", 2, []string{"u1"}, true, true, later); err != nil {
			t.Fatal(err)
		}
		if err := s.RegisterDirectory(ctx, "evil", 2, []string{"u6", "u7"}, false, false, later); err != nil {
			t.Fatalf("after the whole list dropped two: %v", err)
		}
		wantCode(t, s.RegisterDirectory(ctx, "evil", 2, []string{"u8"}, false, false, later), vdibroker.ETooManyRequests)
	})
}

// R-G1, R-G5: a verified call's nonce is recorded in its registration's
// transaction; the same nonce again is refused with nothing written.
func TestSessionDirectoryNonce_RG1(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		n := &vdibroker.CallNonce{Nonce: "reg-1", Expires: t0.Add(2 * time.Minute), At: t0}
		if err := s.RegisterDirectory(vdibroker.WithCallNonce(t.Context(), n), "ams1", 1, []string{"alice"}, false, false, t0); err != nil {
			t.Fatal(err)
		}
		if !n.Recorded() {
			t.Error("the nonce is not marked recorded")
		}
		again := &vdibroker.CallNonce{Nonce: "reg-1", Expires: t0.Add(2 * time.Minute), At: t0}
		err := s.RegisterDirectory(vdibroker.WithCallNonce(t.Context(), again), "ams1", 1, []string{"bob"}, true, true, t0.Add(time.Hour))
		wantCode(t, err, vdibroker.EUnauthenticated)
		if again.Recorded() {
			t.Error("a refused replay marked its nonce recorded")
		}
		for _, u := range []string{"alice", "bob"} {
			pods, complete, err := s.LookupDirectory(t.Context(), u, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string][]string{"alice": {"ams1"}}[u]; !slices.Equal(pods, want) || len(complete) != 0 {
				t.Errorf("%s after the replayed whole list: pods %v complete %v; want %v and nothing complete", u, pods, complete, want)
			}
		}
	})
}

// TestSessionDirectoryNonceBudget_RG1_RG5: a registration's nonce spends
// its calling pod's budget of pod-to-pod calls (CallNonce.Pod), as the
// other calls' do: a pod past its budget has its registration refused
// (TooManyRequests, nothing written), another pod's is taken.
func TestSessionDirectoryNonceBudget_RG1_RG5(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		defer store.SetNoncesPerMinute(1)()
		ctx := t.Context()
		if refused, err := s.UseNonces(ctx, []vdibroker.NonceUse{{Pod: "ams1", Nonce: "load-1"}}, t0.Add(2*time.Minute), t0); err != nil || refused[0] != nil {
			t.Fatalf("ams1's call: %v %v", refused, err)
		}
		register := func(pod, nonce, user string) error {
			n := &vdibroker.CallNonce{Pod: pod, Nonce: nonce, Expires: t0.Add(2 * time.Minute), At: t0.Add(time.Second)}
			return s.RegisterDirectory(vdibroker.WithCallNonce(ctx, n), pod, 1, []string{user}, false, false, t0.Add(time.Second))
		}
		wantCode(t, register("ams1", "reg-1", "alice"), vdibroker.ETooManyRequests)
		if err := register("fra1", "reg-2", "bob"); err != nil {
			t.Errorf("fra1's registration while ams1's budget is spent: %v", err)
		}
		for u, want := range map[string][]string{"alice": nil, "bob": {"fra1"}} {
			if pods, _, err := s.LookupDirectory(ctx, u, time.Time{}); err != nil || !slices.Equal(pods, want) {
				t.Errorf("%s: %v, %v; want %v", u, pods, err, want)
			}
		}
	})
}

// R-G1: the users of the open sessions of some pools, each once, and
// after an id only the newer sessions; ended sessions are not read.
func TestOpenSessionUsers_RG1(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		for _, p := range []string{"a", "b", "c"} {
			mustPool(t, s, pool(p, vdibroker.Pooled))
			mustHost(t, s, p, "h1")
		}
		var ids []string
		place := func(p, user string) {
			t.Helper()
			c := placement(p, "h1", user, 100)
			if err := s.CommitPlacement(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, c.Session.ID)
		}
		place("a", "Alice@Example.COM")
		place("b", "alice@example.com")
		place("a", "bob")
		place("c", "carol") // not a member pool
		place("b", "dave")
		if err := s.EndSession(ctx, "b", ids[4], "UserLogoff", t0); err != nil {
			t.Fatal(err)
		}
		users, last, err := s.OpenSessionUsers(ctx, []string{"a", "b"}, "")
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"alice@example.com", "bob"}; !slices.Equal(users, want) || last != ids[2] {
			t.Errorf("all: %v last %s; want %v last %s (the newest open session of the pools)", users, last, want, ids[2])
		}
		users, last, err = s.OpenSessionUsers(ctx, []string{"a", "b"}, ids[1])
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"bob"}; !slices.Equal(users, want) || last != ids[2] {
			t.Errorf("after the second: %v last %s; want %v", users, last, want)
		}
		if users, last, _ := s.OpenSessionUsers(ctx, []string{"a", "b"}, ids[4]); len(users) != 0 || last != ids[4] {
			t.Errorf("after the newest: %v last %s; want none, last unchanged", users, last)
		}
	})
}

// R-G1, R-G5 (PostgreSQL): a registration waiting for its pod's row (a
// call of the same pod under way on another replica) does not hold this
// minute's nonce count meanwhile: every other signed call the pod takes
// (connects placed for its peers) would wait behind a whole list.
func TestSessionDirectoryWaitDoesNotHoldNonceCount_RG1(t *testing.T) {
	s, other := holdDirectoryPod(t, "ams1", false)
	ctx := t.Context()
	registered := make(chan error, 1)
	go func() {
		n := &vdibroker.CallNonce{Pod: "ams1", Nonce: "reg-1", Expires: t0.Add(2 * time.Minute), At: t0}
		registered <- s.RegisterDirectory(vdibroker.WithCallNonce(context.WithoutCancel(ctx), n), "ams1", 1, []string{"bob"}, false, false, t0)
	}()
	waitForLockWaiter(t, s, "the registration")
	used := make(chan error, 1)
	go func() {
		_, err := s.UseNonces(context.WithoutCancel(ctx), []vdibroker.NonceUse{{Pod: "ams1", Nonce: "call-1"}}, t0.Add(2*time.Minute), t0)
		used <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; {
		select {
		case err := <-used:
			if err != nil {
				t.Fatal(err)
			}
		default:
			n, err := s.QueryInt(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE application_name = current_setting('application_name') AND wait_event_type = 'Lock'`)
			if err != nil {
				t.Fatal(err)
			}
			if n > 1 || time.Now().After(deadline) {
				other.Rollback()
				<-used
				t.Fatal("another call's nonce waits for the registration that waits for its pod's row")
			}
			time.Sleep(5 * time.Millisecond)
			continue
		}
		break
	}
	if err := other.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-registered; err != nil {
		t.Fatal(err)
	}
	if pods, _, _ := s.LookupDirectory(ctx, "bob", time.Time{}); !slices.Equal(pods, []string{"ams1"}) {
		t.Errorf("bob after the wait: %v, want ams1", pods)
	}
}

// R-OUT3, R-G1: a session placed during a store outage bumps the store's
// count of late writes in its own transaction, on every engine, so every replica's
// directory pass learns it was written; a connect's commit does not, and
// neither does a refused one (R-C6), nor one of several at once that
// fails, while each that succeeds counts.
func TestLateSessionWrites_ROUT3_RG1(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		count := func() int64 {
			t.Helper()
			n, err := s.LateSessionWrites(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := count(); n != 0 {
			t.Fatalf("a new store's count: %d, want 0", n)
		}
		mustPool(t, s, pool("p", vdibroker.Pooled))
		mustHost(t, s, "p", "h1", "h2")
		mustCommit(t, s, placement("p", "h1", "connect", 10))
		if n := count(); n != 0 {
			t.Fatalf("after a connect's commit: %d, want 0", n)
		}
		outage := func(host, user string) *vdibroker.PlacementCommit {
			c := placement("p", host, user, 10)
			c.OutagePlacement = true
			return c
		}
		mustCommit(t, s, outage("h1", "alice"))
		if n := count(); n != 1 {
			t.Fatalf("after an outage placement: %d, want 1", n)
		}
		wantCode(t, s.CommitPlacement(ctx, outage("h2", "alice")), vdibroker.EConflict)
		if n := count(); n != 1 {
			t.Fatalf("after a refused outage placement (alice has a session): %d, want 1", n)
		}
		// Three at once, likely in one group commit: bob's second fails.
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i, c := range []*vdibroker.PlacementCommit{outage("h1", "bob"), outage("h2", "carol"), outage("h2", "bob")} {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = s.CommitPlacement(ctx, c) }()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			}
		}
		if n := count(); ok != 2 || n != 3 {
			t.Errorf("three at once, one of them bob's second: %d committed (%v), count %d; want 2 committed and a count of 3", ok, errs, n)
		}
	})
}

// lateStore is a store whose clock stands still at base, ahead of it by
// what ahead holds, with pool p of hosts h1 and h2: a session whose id is
// made at base or before (madeAt) is exactly as late as the test says,
// however long its commit really took.
type lateStore struct {
	*store.DB
	t      *testing.T
	engine string // target.name
	base   time.Time
	ahead  atomic.Int64
}

func newLateStore(t *testing.T, tg target) *lateStore {
	t.Helper()
	s := &lateStore{t: t, engine: tg.name, base: time.Now()}
	s.DB = tg.open(t, store.Options{Now: func() time.Time { return s.base.Add(time.Duration(s.ahead.Load())) }})
	mustPool(t, s.DB, pool("p", vdibroker.Pooled))
	mustHost(t, s.DB, "p", "h1", "h2")
	return s
}

// count is the store's count of late session writes.
func (s *lateStore) count() int64 {
	s.t.Helper()
	n, err := s.LateSessionWrites(s.t.Context())
	if err != nil {
		s.t.Fatal(err)
	}
	return n
}

// failLateCount makes every bump of a committer's count of late writes
// fail, until unfailLateCount.
func (s *lateStore) failLateCount() {
	s.t.Helper()
	fail := []string{`CREATE TRIGGER count_fails BEFORE INSERT ON late_session_writes BEGIN SELECT RAISE(ABORT, 'count fails'); END`,
		`CREATE TRIGGER count_fails_update BEFORE UPDATE ON late_session_writes BEGIN SELECT RAISE(ABORT, 'count fails'); END`}
	if s.engine == "postgres" {
		fail = []string{`ALTER TABLE late_session_writes ADD CONSTRAINT count_fails CHECK (writes < 0) NOT VALID`}
	}
	for _, q := range fail {
		if err := s.ExecRaw(s.t.Context(), q); err != nil {
			s.t.Fatal(err)
		}
	}
}

func (s *lateStore) unfailLateCount() {
	s.t.Helper()
	unfail := []string{`DROP TRIGGER count_fails`, `DROP TRIGGER count_fails_update`}
	if s.engine == "postgres" {
		unfail = []string{`ALTER TABLE late_session_writes DROP CONSTRAINT count_fails`}
	}
	for _, q := range unfail {
		if err := s.ExecRaw(s.t.Context(), q); err != nil {
			s.t.Fatal(err)
		}
	}
}

// madeAt gives c's session an id made at made.
func madeAt(c *vdibroker.PlacementCommit, made time.Time) *vdibroker.PlacementCommit {
	c.Session.ID = fmt.Sprintf("%012x", made.UnixMilli()) + c.Session.ID[12:]
	return c
}

// R-G1: a session committed LateCommit or more after its id was made
// bumps the store's count of late writes before the commit returns, so
// every replica's directory pass, which reads only the ids made since
// shortly before the pass before, sends its whole list: late by the clock
// of its transaction, or by the clock after its commit (the commit itself
// was slow). Late by its transaction's clock, the transaction that
// writes the session bumps it, on every engine (countLateWrites): the
// count is there as the session is; late only after its commit, a
// transaction of its own right after (countLateAfterCommit). A prompt
// commit does not, nor a late one refused (R-C6); in one batch only the
// late ones count.
func TestLateCommitCounted_RG1(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		s := newLateStore(t, tg)
		base, ahead, count := s.base, &s.ahead, s.count
		late := int64(vdibroker.LateCommit + 500*time.Millisecond)
		mustCommit(t, s.DB, madeAt(placement("p", "h1", "prompt", 10), base))
		if n := count(); n != 0 {
			t.Fatalf("after a prompt commit: %d, want 0", n)
		}
		ahead.Store(late)
		c := madeAt(placement("p", "h1", "late", 10), base)
		var atCommit int64 // the count as the session is committed
		c.OnCommitted = func(int64) { atCommit = count() }
		mustCommit(t, s.DB, c)
		if n := count(); n != 1 || atCommit != 1 {
			t.Fatalf("after a commit %s after its id: %d (%d when committed), want 1 (1 when committed)", time.Duration(late), n, atCommit)
		}
		wantCode(t, s.CommitPlacement(t.Context(), madeAt(placement("p", "h2", "late", 10), base)), vdibroker.EConflict)
		if n := count(); n != 1 {
			t.Fatalf("after a late commit refused (the user has a session): %d, want 1", n)
		}
		// Prompt by its transaction's clock; the commit took long.
		ahead.Store(0)
		slow := madeAt(placement("p", "h2", "slow", 10), base)
		slow.OnCommitted = func(int64) { ahead.Store(late) }
		mustCommit(t, s.DB, slow)
		if n := count(); n != 2 {
			t.Fatalf("after a commit that was late only when it returned: %d, want 2", n)
		}
		// One batch: a prompt session, one whose id was made 2 s before,
		// and a late one refused.
		ahead.Store(0)
		fresh := madeAt(placement("p", "h1", "fresh", 10), base)
		old := madeAt(placement("p", "h1", "old", 10), base.Add(-2*time.Second))
		refused := madeAt(placement("p", "h2", "late", 10), base.Add(-2*time.Second))
		errs := s.CommitBatch([]*vdibroker.PlacementCommit{fresh, old, refused})
		if errs[0] != nil || errs[1] != nil || vdibroker.ErrorCode(errs[2]) != vdibroker.EConflict {
			t.Fatalf("the batch: %v; want fresh and old committed, late refused", errs)
		}
		if n := count(); n != 3 {
			t.Errorf("after a batch of one prompt and one late commit: %d, want 3", n)
		}
	})
}

// R-G1: when the count of a session late only after its commit fails
// (countLateAfterCommit: the store failed just after committing), the
// next batch that commits makes up for it, once, so the directory misses
// the session only until then, not until the next whole list.
func TestLateCountMadeUpAfterFailure_RG1(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		s := newLateStore(t, tg)
		count := s.count
		commit := func(user string) *vdibroker.PlacementCommit { return madeAt(placement("p", "h1", user, 10), s.base) }
		s.failLateCount()
		// Prompt by its transaction's clock, late when it returned: its
		// count, after the commit, fails.
		slow := commit("slow")
		slow.OnCommitted = func(int64) { s.ahead.Store(int64(vdibroker.LateCommit + 500*time.Millisecond)) }
		mustCommit(t, s.DB, slow)
		if n := count(); n != 0 {
			t.Fatalf("with every write of the count failing: %d, want 0", n)
		}
		s.unfailLateCount()
		s.ahead.Store(0)
		mustCommit(t, s.DB, commit("prompt1"))
		if n := count(); n != 1 {
			t.Fatalf("after the next commit, a prompt one: %d, want 1 (the failed count made up for)", n)
		}
		mustCommit(t, s.DB, commit("prompt2"))
		if n := count(); n != 1 {
			t.Errorf("after another prompt commit: %d, want 1 (made up for once)", n)
		}
	})
}

// R-G1, R-S2: a session a heartbeat adopts gets its id in the batch's
// transaction, and is written with the batch's other heartbeats: a batch
// that commits LateCommit or more after the id was made bumps the store's
// count of late writes, as for a placement. A heartbeat that adopts
// nothing does not, however late, nor a prompt adoption.
func TestLateAdoptionCounted_RG1(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		// The adopted sessions' ids are made after the store's clock
		// stopped, however long the heartbeats take: late only when the
		// clock is a minute ahead.
		s := newLateStore(t, tg)
		ctx, ahead, count := t.Context(), &s.ahead, s.count
		late := int64(time.Minute)
		walkin := func(id, user string) vdibroker.AgentSession {
			return vdibroker.AgentSession{ID: id, User: user, State: vdibroker.StateActive}
		}
		beat := func(at time.Duration, sessions ...vdibroker.AgentSession) {
			t.Helper()
			if _, err := s.ApplyHeartbeat(ctx, "p", "h1", &vdibroker.HeartbeatRequest{Sessions: sessions}, t0.Add(at)); err != nil {
				t.Fatal(err)
			}
		}
		ahead.Store(late)
		beat(time.Second)
		if n := count(); n != 0 {
			t.Fatalf("after a heartbeat that adopted nothing: %d, want 0", n)
		}
		ahead.Store(0)
		beat(2*time.Second, walkin("a1", "alice"))
		if n := count(); n != 0 {
			t.Fatalf("after a prompt adoption: %d, want 0", n)
		}
		ahead.Store(late)
		beat(3*time.Second, walkin("a1", "alice"), walkin("b1", "bob"))
		if n := count(); n != 1 {
			t.Fatalf("after an adoption committed a minute after its id: %d, want 1", n)
		}
		beat(4*time.Second, walkin("a1", "alice"), walkin("b1", "bob"))
		if n := count(); n != 1 {
			t.Errorf("after a heartbeat that adopted nothing more: %d, want 1", n)
		}
		list, err := s.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "p"})
		if err != nil || len(list) != 2 {
			t.Errorf("the adopted sessions: %d, %v; want alice's and bob's", len(list), err)
		}
	})
}

// R-G1: a directory pod drops the entries of the pods not in its
// document (removed from it), entries and counts alike, a few at a time
// (here two a transaction), and keeps those of the pods in it; a pod
// dropped that registers again starts afresh.
func TestDropDirectoryPods_RG1(t *testing.T) {
	defer store.SetDropChunk(2)()
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		for pod, users := range map[string][]string{"ams1": {"alice", "bob"}, "fra1": {"alice"},
			"old1": {"alice", "carol", "carl", "cathy", "cora"}, "old2": {"dave"}} {
			if err := s.RegisterDirectory(ctx, pod, 1, users, true, true, t0); err != nil {
				t.Fatal(err)
			}
		}
		dropped, err := s.DropDirectoryPods(ctx, []string{"ams1", "fra1", "lis1"})
		if err != nil || !slices.Equal(dropped, []string{"old1", "old2"}) {
			t.Fatalf("dropped %v, %v; want old1 and old2", dropped, err)
		}
		for user, want := range map[string][]string{"alice": {"ams1", "fra1"}, "bob": {"ams1"}, "carol": nil, "carl": nil,
			"cathy": nil, "cora": nil, "dave": nil} {
			pods, complete, err := s.LookupDirectory(ctx, user, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(pods, want) || !cmp.Equal(complete, map[string]int64{"ams1": 1, "fra1": 1}) {
				t.Errorf("%s: pods %v complete %v; want %v, ams1 and fra1 complete", user, pods, complete, want)
			}
		}
		if dropped, err := s.DropDirectoryPods(ctx, []string{"ams1", "fra1"}); err != nil || len(dropped) != 0 {
			t.Errorf("again: dropped %v, %v; want none", dropped, err)
		}
		// old1's count went with it: its bound is whole again.
		defer store.SetMaxDirectoryEntries(2)()
		if err := s.RegisterDirectory(ctx, "old1", 2, []string{"erin", "frank"}, false, false, t0); err != nil {
			t.Errorf("old1 registering its bound after being dropped: %v", err)
		}
	})
}

// R-G1 (PostgreSQL): a drop takes the removed pod's row first, as every
// registration of the pod does, then deletes its entries: a registration
// of the removed pod under way on another replica (one that still holds
// the older document) commits before the drop's DELETE of the entries
// begins, and its entries go too. Taken the other way round, the entries'
// DELETE, which saw none of them, would pass, the row would go after the
// registration committed, and its entries would stay with no row, which
// no later drop (it lists the rows) ever finds.
func TestDropDirectoryPodWaitsForRegistration_RG1(t *testing.T) {
	// The other replica's registration: the pod's row, then an entry.
	s, other := holdDirectoryPod(t, "old1", true)
	ctx := t.Context()
	if _, err := other.ExecContext(ctx, `INSERT INTO session_directory (user_key, pod, seen_time) VALUES ('bob', 'old1', 1)`); err != nil {
		t.Fatal(err)
	}
	dropped := make(chan error, 1)
	go func() {
		_, err := s.DropDirectoryPods(context.WithoutCancel(ctx), []string{"ams1"})
		dropped <- err
	}()
	waitForLockWaiter(t, s, "the drop")
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-dropped; err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"alice", "bob"} {
		if pods, _, err := s.LookupDirectory(ctx, user, time.Time{}); err != nil || len(pods) != 0 {
			t.Errorf("%s after the drop: %v, %v; want no pod", user, pods, err)
		}
	}
}

// holdDirectoryPod opens a PostgreSQL store on a schema of its own in
// which pod registered alice (a whole list when full), and begins another
// connection's transaction (another replica's registration of pod) that
// holds pod's row of session_directory_pods, as RegisterDirectory does
// first; rolled back when the test ends unless the test commits it.
func holdDirectoryPod(t *testing.T, pod string, full bool) (*store.DB, *sql.Tx) {
	t.Helper()
	s, dsn := postgresStore(t)
	if err := s.RegisterDirectory(t.Context(), pod, 1, []string{"alice"}, full, full, t0); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	other, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Rollback() })
	if _, err := other.ExecContext(t.Context(), `SELECT entries FROM session_directory_pods WHERE pod = $1 FOR UPDATE`, pod); err != nil {
		t.Fatal(err)
	}
	return s, other
}

// R-G1 (SQLite): a removed pod's entries go a chunk a transaction, so a
// drop the store cuts short keeps the chunks it committed (the one
// writer was free between them) and the pod's row, and the next drop
// finishes it. Here the third entry's DELETE fails: two of five are gone
// (one chunk of two), and counted gone; in one transaction none would be.
func TestDropDirectoryPodCutShort_RG1(t *testing.T) {
	defer store.SetDropChunk(2)()
	s := openSQLite(t, t.TempDir())
	defer s.Close()
	ctx := t.Context()
	if err := s.RegisterDirectory(ctx, "old1", 1, []string{"alice", "bob", "carol", "dave", "erin"}, true, true, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.ExecRaw(ctx, `CREATE TRIGGER drop_fails BEFORE DELETE ON session_directory
		WHEN (SELECT count(*) FROM session_directory WHERE pod = 'old1') <= 3
		BEGIN SELECT RAISE(ABORT, 'the store failed'); END`); err != nil {
		t.Fatal(err)
	}
	left := func() int {
		t.Helper()
		n, err := s.QueryInt(ctx, `SELECT count(*) FROM session_directory WHERE pod = 'old1'`)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if dropped, err := s.DropDirectoryPods(ctx, []string{"ams1"}); err == nil || len(dropped) != 0 {
		t.Fatalf("a drop the store cut short: dropped %v, %v; want an error, none dropped", dropped, err)
	}
	if n := left(); n != 3 {
		t.Fatalf("after a drop cut short at its second chunk: %d entries of old1 left, want 3 (the first chunk's two gone)", n)
	}
	// The pod's count of entries went down with the chunk: were old1
	// back in the document before the next drop, its bound would
	// otherwise count entries long gone (5 here, and the sixth refused).
	defer store.SetMaxDirectoryEntries(5)()
	if err := s.RegisterDirectory(ctx, "old1", 1, []string{"frank"}, false, false, t0); err != nil {
		t.Fatalf("a registration of old1 after the drop cut short (4 entries, bound 5): %v", err)
	}
	if err := s.ExecRaw(ctx, `DROP TRIGGER drop_fails`); err != nil {
		t.Fatal(err)
	}
	if dropped, err := s.DropDirectoryPods(ctx, []string{"ams1"}); err != nil || !slices.Equal(dropped, []string{"old1"}) {
		t.Fatalf("the next drop: dropped %v, %v; want old1 (its row was left)", dropped, err)
	}
	if n := left(); n != 0 {
		t.Errorf("after the next drop: %d entries of old1 left, want 0", n)
	}
}

// R-G1: RegisterDirectory writes a list of users as one JSON list (two
// statements for the whole call): users whose folded names carry JSON's
// and SQL's special characters, non-ASCII letters and characters beyond
// the BMP are stored as they are, found by their key, refreshed (not
// counted again) when registered again, and kept by a whole list that
// names them, on every engine.
func TestSessionDirectoryOddUsers_RG1(t *testing.T) {
	users := []string{`o"brien`, `o'neil`, `back\slash`, `a?b`, `$1`, `<tag>&amp;`, "line\u2028sep", "ǆemal",
		"straße", "ﬃ", "日本語", "😀 smile", "null", "123", `[]`, `{"a":1}`, "x,y", "'; drop table session_directory; --"}
	each(t, func(t *testing.T, s *store.DB) {
		defer store.SetMaxDirectoryEntries(int64(len(users)))()
		ctx := t.Context()
		keys := make([]string, len(users))
		for i, u := range users {
			keys[i] = vdibroker.FoldUser(u)
		}
		if err := s.RegisterDirectory(ctx, "ams1", 1, keys, false, false, t0); err != nil {
			t.Fatal(err)
		}
		// Again, at the bound: every one refreshed, none added.
		later := t0.Add(time.Hour)
		if err := s.RegisterDirectory(ctx, "ams1", 1, keys, true, true, later); err != nil {
			t.Fatalf("the same users again, at the bound: %v", err)
		}
		for i, k := range keys {
			pods, _, err := s.LookupDirectory(ctx, k, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(pods, []string{"ams1"}) {
				t.Errorf("%q (key %q): pods %v, want ams1", users[i], k, pods)
			}
		}
		wantCode(t, s.RegisterDirectory(ctx, "ams1", 1, []string{"one-more"}, false, false, later), vdibroker.ETooManyRequests)
	})
}

// R-OUT3, R-D3 (PostgreSQL): a batch bumps its committer's count of late
// writes after it took every host lock it needs, not in the middle: it
// holds its row only while it commits. A fold of old rows
// (foldLateWrites), which locks row 1 and then the rows it deletes, may
// wait for that row; it would otherwise wait for a batch that waits for
// a host, and an older replica's batch, holding that host and bumping
// row 1 last, would wait for the fold: a deadlock that PostgreSQL breaks
// after a second, every write of one batch run again.
func TestOutagePlacementCountTakenLast_ROUT3(t *testing.T) {
	dsn := postgresSchemaDSN(t)
	s, err := store.OpenWith(t.Context(), dsn, "", nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	mustPool(t, s, pool("p", vdibroker.Pooled))
	mustHost(t, s, "p", "a", "b")
	other := holdHostLock(t, dsn, "p", "b") // another replica's batch
	outage := placement("p", "a", "alice", 10)
	outage.OutagePlacement = true
	done := make(chan []error, 1)
	go func() { done <- s.CommitBatch([]*vdibroker.PlacementCommit{outage, placement("p", "b", "bob", 10)}) }()
	waitForLockWaiter(t, s, "the batch, for host b")
	// The batch waits for host b: it must not have touched the count.
	held, err := s.QueryInt(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE a.application_name = current_setting('application_name') AND l.granted
		AND l.relation IN ('late_session_writes'::regclass, 'outage_placement_writes'::regclass)`)
	if err != nil || held != 0 {
		t.Errorf("locks on the counts of late writes while the batch waits for a host's lock: %d, %v; want none (the count after every host)", held, err)
	}
	other.Rollback()
	errs := <-done
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("the batch: %v", errs)
	}
	if n, err := s.LateSessionWrites(ctx); err != nil || n != 1 {
		t.Errorf("the count after the batch: %d, %v; want 1", n, err)
	}
}
