package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

func fedDoc(gen int64, pods ...string) *vdibroker.Federation {
	f := &vdibroker.Federation{Generation: gen, Sites: []vdibroker.Site{{Name: "emea"}}}
	for _, p := range pods {
		f.Pods = append(f.Pods, vdibroker.Pod{Name: p, Site: "emea", URL: "http://127.0.0.1:1"})
	}
	return f
}

// TestFederationGeneration: the document is stored per pod; an older
// generation is refused with Conflict (the stored one unchanged), the same
// generation applied again changes nothing, the same generation with other
// content is refused, a newer one replaces it.
func TestFederationGeneration(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		_, err := s.GetFederation(ctx)
		wantCode(t, err, vdibroker.ENotFound)

		created, err := s.PutFederation(ctx, fedDoc(3, "fra1"))
		if err != nil || !created {
			t.Fatalf("first put: created=%v err=%v", created, err)
		}
		if created, err := s.PutFederation(ctx, fedDoc(3, "fra1")); err != nil || created {
			t.Fatalf("same document again: created=%v err=%v, want nil, false", created, err)
		}
		_, err = s.PutFederation(ctx, fedDoc(2, "fra1", "old"))
		wantCode(t, err, vdibroker.EConflict)
		if f := vdibroker.ErrorField(err); f != "generation" {
			t.Errorf("older generation: field %q, want generation", f)
		}
		_, err = s.PutFederation(ctx, fedDoc(3, "fra1", "other"))
		wantCode(t, err, vdibroker.EConflict)
		got, err := s.GetFederation(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(fedDoc(3, "fra1"), got); diff != "" {
			t.Fatalf("stored document changed by refused puts (-want +got):\n%s", diff)
		}
		if _, err := s.PutFederation(ctx, fedDoc(4, "fra1", "ams1")); err != nil {
			t.Fatal(err)
		}
		got, _ = s.GetFederation(ctx)
		if diff := cmp.Diff(fedDoc(4, "fra1", "ams1"), got); diff != "" {
			t.Fatalf("newer generation not stored (-want +got):\n%s", diff)
		}
	})
}

// TestFederationGenerationStep: a pod takes a generation at most
// MaxGenerationStep above the one it holds, so one write (a peer's, R-G5)
// cannot take it near the bound and leave no higher generation for the
// next (R-SEC); a generation stored beyond the bound, before it was one,
// is replaced by any document.
func TestFederationGenerationStep(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		if _, err := s.PutFederation(ctx, fedDoc(5, "fra1")); err != nil {
			t.Fatal(err)
		}
		_, err := s.PutFederation(ctx, fedDoc(5+vdibroker.MaxGenerationStep+1, "fra1", "ams1"))
		wantCode(t, err, vdibroker.EInvalid)
		if f := vdibroker.ErrorField(err); f != "generation" {
			t.Errorf("generation too far ahead: field %q, want generation", f)
		}
		if got, _ := s.GetFederation(ctx); got.Generation != 5 {
			t.Fatalf("refused put stored generation %d, want 5", got.Generation)
		}
		if _, err := s.PutFederation(ctx, fedDoc(5+vdibroker.MaxGenerationStep, "fra1", "ams1")); err != nil {
			t.Fatalf("generation exactly the step above: %v", err)
		}
	})
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		if _, err := s.PutFederation(ctx, fedDoc(1<<63-1, "fra1")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.PutFederation(ctx, fedDoc(7, "fra1", "ams1")); err != nil {
			t.Fatalf("a document after a generation stored beyond the bound: %v", err)
		}
		if got, _ := s.GetFederation(ctx); got.Generation != 7 {
			t.Fatalf("stored generation %d, want 7", got.Generation)
		}
	})
}

// TestOpenSessionsOfUsers: users' open sessions, pooled (placed) and
// adopted (reported by the agent, R-S2) alike, user by user and pool by
// pool; ended ones and other users' are not.
func TestOpenSessionsOfUsers(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		for _, p := range []string{"pool-a", "pool-b"} {
			mustPool(t, s, pool(p, vdibroker.Pooled))
			mustHost(t, s, p, "h1")
		}
		a := mustCommit(t, s, placement("pool-a", "h1", "alice", 10))
		mustCommit(t, s, placement("pool-a", "h1", "bob", 10))
		ended := mustCommit(t, s, placement("pool-b", "h1", "alice", 10))
		if err := s.EndSession(ctx, "pool-b", ended, vdibroker.EndLoggedOffByAdmin, t0); err != nil {
			t.Fatal(err)
		}
		// The agent on pool-b's host reports alice, whom the broker did
		// not place there (any more): she is adopted, not pooled.
		if _, err := s.ApplyHeartbeat(ctx, "pool-b", "h1", &vdibroker.HeartbeatRequest{
			Sessions: []vdibroker.AgentSession{{ID: "s1", User: "alice", State: vdibroker.StateActive}}}, t0); err != nil {
			t.Fatal(err)
		}
		got, err := s.OpenSessionsOfUsers(ctx, []string{"alice"}, []string{"pool-a", "pool-b", "pool-c"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].ID != a || got[1].HostPool != "pool-b" || got[1].ID == ended || !got[1].Open() {
			t.Fatalf("alice's open sessions: %+v; want %s in pool-a and the adopted one in pool-b", got, a)
		}
		// Several users in one read: user by user, in the order asked
		// (bob's before alice's), each spelled as a client may (R-E5).
		got, err = s.OpenSessionsOfUsers(ctx, []string{"BOB", "nobody", "Alice"}, []string{"pool-a", "pool-b"})
		if err != nil {
			t.Fatal(err)
		}
		var who []string
		for _, u := range got {
			who = append(who, u.User+"@"+u.HostPool)
		}
		if want := []string{"bob@pool-a", "alice@pool-a", "alice@pool-b"}; !slices.Equal(who, want) {
			t.Errorf("sessions of BOB, nobody and Alice: %v, want %v", who, want)
		}
	})
}

// uses is the nonces of budget pod (vdibroker.NonceUse).
func uses(pod string, nonces ...string) []vdibroker.NonceUse {
	out := make([]vdibroker.NonceUse, len(nonces))
	for i, n := range nonces {
		out[i] = vdibroker.NonceUse{Pod: pod, Nonce: n}
	}
	return out
}

// codes is the error code of each of errs ("" for nil).
func codes(errs []error) []string {
	out := make([]string, len(errs))
	for i, err := range errs {
		out[i] = vdibroker.ErrorCode(err)
	}
	return out
}

// TestUseNonces_RG5: a nonce is fresh once, on every connection of the
// store (replicas share it), until it expires; one call records several
// (a pod's calls verified at once share a commit), a nonce twice in it
// being a replay the second time; the nonces of a minute are bounded for
// each calling pod (TooManyRequests past the bound for that pod's nonces
// of the call, which records none of them, and a new minute has room).
func TestUseNonces_RG5(t *testing.T) {
	const ok, replay, tooMany = "", vdibroker.EUnauthenticated, vdibroker.ETooManyRequests
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		use := func(u []vdibroker.NonceUse, exp, now time.Time) []string {
			t.Helper()
			refused, err := s.UseNonces(ctx, u, exp, now)
			if err != nil {
				t.Fatalf("UseNonces(%v): %v", u, err)
			}
			return codes(refused)
		}
		exp := t0.Add(2 * time.Minute)
		if got := use(uses("ams1", "n1"), exp, t0); !slices.Equal(got, []string{ok}) {
			t.Fatalf("first use: %q", got)
		}
		// n1 is a replay whichever pod sends it again.
		if got := use(uses("fra1", "n2", "n1", "n3", "n2"), exp, t0.Add(time.Second)); !slices.Equal(got, []string{ok, replay, ok, replay}) {
			t.Errorf("a batch with n1 used before and n2 twice: %q, want [ok replay ok replay]", got)
		}
		// Past its expiry it is forgotten (the signature's timestamp
		// refuses such a call by then).
		if got := use(uses("ams1", "n1"), exp.Add(3*time.Minute), exp.Add(time.Second)); !slices.Equal(got, []string{ok}) {
			t.Errorf("after expiry: %q, want fresh", got)
		}
		defer store.SetNoncesPerMinute(3)()
		at := t0.Add(time.Hour).Truncate(time.Minute)
		use(uses("ams1", "b0"), at.Add(2*time.Minute), at)
		use(uses("ams1", "b1", "b2"), at.Add(2*time.Minute), at)
		if got := use(uses("ams1", "b3"), at.Add(2*time.Minute), at.Add(30*time.Second)); !slices.Equal(got, []string{tooMany}) {
			t.Errorf("ams1's fourth call of the minute: %q, want TooManyRequests", got)
		}
		// Another pod's budget is its own: ams1 spent its, fra1 is
		// taken, in a call of its own and beside ams1's.
		if got := use(uses("fra1", "f0", "f1"), at.Add(2*time.Minute), at.Add(30*time.Second)); !slices.Equal(got, []string{ok, ok}) {
			t.Errorf("fra1's calls while ams1's budget is spent: %q, want both taken", got)
		}
		mixed := append(uses("ams1", "b4"), append(uses("fra1", "f2"), uses("ams1", "b5")...)...)
		if got := use(mixed, at.Add(2*time.Minute), at.Add(40*time.Second)); !slices.Equal(got, []string{tooMany, ok, tooMany}) {
			t.Errorf("ams1's and fra1's calls in one commit: %q, want [TooManyRequests ok TooManyRequests]", got)
		}
		if got := use(uses("ams1", "b3", "b4"), at.Add(3*time.Minute), at.Add(time.Minute)); !slices.Equal(got, []string{ok, ok}) {
			t.Errorf("the next minute: %q; want room", got)
		}
		// 2 of the minute's 3 are taken: a batch of 2 is refused whole,
		// so its nonces are still fresh after.
		if got := use(uses("ams1", "c1", "c2"), at.Add(3*time.Minute), at.Add(time.Minute)); !slices.Equal(got, []string{tooMany, tooMany}) {
			t.Errorf("2 more of ams1 with 1 left: %q, want both refused", got)
		}
		if got := use(uses("ams1", "c1"), at.Add(3*time.Minute), at.Add(time.Minute)); !slices.Equal(got, []string{ok}) {
			t.Errorf("a nonce of the refused batch: %q, want fresh (the refusal recorded none)", got)
		}
		// A count is kept five minutes: a row per budget and minute.
		use(uses("ams1", "late"), at.Add(20*time.Minute), at.Add(10*time.Minute))
		if n, err := s.QueryInt(ctx, `SELECT count(*) FROM federation_nonce_budgets`); err != nil || n != 1 {
			t.Errorf("budget rows ten minutes on: %d, %v; want 1 (the older swept)", n, err)
		}
	})
}

// TestPlacementRecordsCallNonce_RG5: a pod-to-pod connect's nonce
// (vdibroker.WithCallNonce) is recorded by its placement's commit, so a
// replay is refused after it; a placement whose nonce was recorded before
// (a replayed connect that would make a session) is refused with nothing
// written; a refused placement records no nonce, so the connect's next
// try (another host) or its own record still finds it fresh. On both
// engines, with several placements in one group commit.
func TestPlacementRecordsCallNonce_RG5(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		mustPool(t, s, pool("fed", vdibroker.Pooled))
		mustHost(t, s, "fed", "h1")
		mustHost(t, s, "fed", "h2")
		exp := t0.Add(2 * time.Minute)
		withNonce := func(nonce string) (context.Context, *vdibroker.CallNonce) {
			n := &vdibroker.CallNonce{Nonce: nonce, Expires: exp, At: t0}
			return vdibroker.WithCallNonce(t.Context(), n), n
		}

		ctx, n1 := withNonce("n1")
		c := placement("fed", "h1", "alice", 5)
		if err := s.CommitPlacement(ctx, c); err != nil {
			t.Fatalf("placement with a fresh nonce: %v", err)
		}
		if !n1.Recorded() || vdibroker.CallNonceFrom(ctx) != nil {
			t.Errorf("the nonce is not marked recorded after its placement committed")
		}
		if refused, err := s.UseNonces(t.Context(), uses("pod2", "n1"), exp, t0); err != nil || vdibroker.ErrorCode(refused[0]) != vdibroker.EUnauthenticated {
			t.Errorf("n1 after its placement: %v, %v; want a replay (the placement recorded it)", refused, err)
		}
		session(t, s, "fed", c.Session.ID)

		// The same nonce again, for a connect that would make a session.
		ctx, n1again := withNonce("n1")
		replay := placement("fed", "h1", "bob", 5)
		err := s.CommitPlacement(ctx, replay)
		wantCode(t, err, vdibroker.EUnauthenticated)
		if n1again.Recorded() {
			t.Errorf("a refused placement marked its nonce recorded")
		}
		if _, err := s.GetUserSession(t.Context(), "fed", replay.Session.ID); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			t.Errorf("the replayed placement's session: %v; want NotFound (nothing written)", err)
		}
		wantCounts(t, s, "fed", "h1", 1, 1)

		// A host at its limit refuses; the nonce stays fresh for the
		// next host, which records it.
		ctx, n2 := withNonce("n2")
		full := placement("fed", "h1", "carol", 1)
		if err := s.CommitPlacement(ctx, full); !errors.Is(err, vdibroker.ErrHostFull) {
			t.Fatalf("placement on a full host: %v, want ErrHostFull", err)
		}
		if n2.Recorded() {
			t.Errorf("a placement refused for capacity marked its nonce recorded")
		}
		next := placement("fed", "h2", "carol", 1)
		if err := s.CommitPlacement(ctx, next); err != nil || !n2.Recorded() {
			t.Fatalf("the next host with the same nonce: %v, recorded %v; want it placed and recorded", err, n2.Recorded())
		}

		// Placements at once (sharing group commits): each records its
		// own nonce, and the second with b0 alone is refused.
		var wg sync.WaitGroup
		errs := make([]error, 6)
		for i := range errs {
			wg.Go(func() {
				ctx, _ := withNonce(fmt.Sprintf("b%d", i%5)) // b0 twice
				errs[i] = s.CommitPlacement(ctx, placement("fed", "h2", fmt.Sprintf("user%d", i), 100))
			})
		}
		wg.Wait()
		refused := 0
		for _, err := range errs {
			switch vdibroker.ErrorCode(err) {
			case "":
			case vdibroker.EUnauthenticated:
				refused++
			default:
				t.Errorf("a batched placement: %v", err)
			}
		}
		if refused != 1 {
			t.Errorf("%d of 6 placements refused as replays; want 1 (b0 twice)", refused)
		}
		wantCounts(t, s, "fed", "h2", 6, 6)
	})
}

// TestCallNoncesLockedFirst_RG5 (PostgreSQL): two replicas' batches that
// record call nonces (vdibroker.WithCallNonce) on each other's hosts must
// not deadlock. Counted in each placement, after its host's row, batch A
// held the nonces' minute row while it went on to lock h2, which batch B
// held while it waited for the minute row: PostgreSQL broke the cycle
// after its deadlock_timeout (a second) and a batch ran again. A batch now
// counts its nonces before it locks any host's row.
func TestCallNoncesLockedFirst_RG5(t *testing.T) {
	now := time.Now()
	nonce := func(s string) *vdibroker.CallNonce {
		return &vdibroker.CallNonce{Nonce: s, Expires: now.Add(2 * time.Minute), At: now}
	}
	// Batches run in host key order: A records its nonce on h1, then
	// places carol on h2; B places dave on h0, then records its nonce on
	// h2 (by when A holds the minute's row).
	batchesAtOnce(t, "nl", vdibroker.Pooled, []string{"h0", "h1", "h2"},
		func(a *store.DB, p string) []error {
			return a.CommitBatchWithNonces([]*vdibroker.PlacementCommit{placement(p, "h1", "alice", 10), placement(p, "h2", "carol", 10)},
				[]*vdibroker.CallNonce{nonce(p + "-a"), nil})
		},
		func(b *store.DB, p string) []error {
			return b.CommitBatchWithNonces([]*vdibroker.PlacementCommit{placement(p, "h0", "dave", 10), placement(p, "h2", "bob", 10)},
				[]*vdibroker.CallNonce{nil, nonce(p + "-b")})
		},
		func(_ *store.DB, round int, _ string, errs []error) {
			for _, err := range errs {
				if err != nil {
					t.Errorf("round %d: %v", round, err)
				}
			}
		})
}

// TestCallNoncesPastTheBound_RG5: a group commit whose call nonces would
// take their pod's minute past MaxNoncesPerMinute refuses their
// placements (TooManyRequests, nothing written, the nonces not recorded)
// and commits the rest of the batch, another pod's call nonce included:
// the budget is each calling pod's.
func TestCallNoncesPastTheBound_RG5(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		mustPool(t, s, pool("fed", vdibroker.Pooled))
		mustHost(t, s, "fed", "h1")
		restore := store.SetNoncesPerMinute(2)
		defer restore()
		if _, err := s.UseNonces(t.Context(), uses("ams1", "first", "second"), t0.Add(2*time.Minute), t0); err != nil {
			t.Fatal(err)
		}
		nonce := func(pod, s string) *vdibroker.CallNonce {
			return &vdibroker.CallNonce{Pod: pod, Nonce: s, Expires: t0.Add(2 * time.Minute), At: t0.Add(time.Second)}
		}
		// ams1: 2 this minute + 1 = 3 > 2: refused; bob's placement (no
		// nonce) is not, nor carol's and dave's (fra1's 2 of its 2).
		cs := []*vdibroker.PlacementCommit{placement("fed", "h1", "alice", 10), placement("fed", "h1", "bob", 10),
			placement("fed", "h1", "carol", 10), placement("fed", "h1", "dave", 10)}
		ns := []*vdibroker.CallNonce{nonce("ams1", "n1"), nil, nonce("fra1", "n2"), nonce("fra1", "n3")}
		errs := s.CommitBatchWithNonces(cs, ns)
		for i, want := range []string{vdibroker.ETooManyRequests, "", "", ""} {
			if got := vdibroker.ErrorCode(errs[i]); got != want {
				t.Errorf("placement %d: %v, want code %q", i, errs[i], want)
			}
		}
		wantCounts(t, s, "fed", "h1", 3, 3)
		if ns[0].Recorded() || !ns[2].Recorded() || !ns[3].Recorded() {
			t.Errorf("recorded: ams1's %v, fra1's %v %v; want ams1's not (refused), fra1's", ns[0].Recorded(), ns[2].Recorded(), ns[3].Recorded())
		}
		restore()
		refused, err := s.UseNonces(t.Context(), uses("ams1", "n1"), t0.Add(2*time.Minute), t0)
		if err != nil || refused[0] != nil {
			t.Errorf("the refused placement's nonce: %v, %v; want fresh (not recorded)", refused, err)
		}
	})
}

// TestNonceBudgetsMigration_RG5: migration 00065 adds the counts by
// calling pod beside the older count of the whole pod, which stays for
// the replicas of an older version during a rolling upgrade; its Down
// drops only the new table, and the next open adds it again. On both
// engines.
func TestNonceBudgetsMigration_RG5(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		s := tg.open(t, store.Options{})
		ctx := t.Context()
		if _, err := s.UseNonces(ctx, uses("ams1", "n1"), t0.Add(2*time.Minute), t0); err != nil {
			t.Fatal(err)
		}
		if n, err := s.QueryInt(ctx, `SELECT count(*) FROM federation_nonce_minutes`); err != nil || n != 0 {
			t.Errorf("the older count after 00065: %d rows, %v; want the table, unused", n, err)
		}
		if err := s.MigrateDownTo(context.WithoutCancel(ctx), 64); err != nil {
			t.Fatal(err)
		}
		if _, err := s.QueryInt(ctx, `SELECT count(*) FROM federation_nonce_budgets`); err == nil {
			t.Error("federation_nonce_budgets after migrating down to 64: still there")
		}
		if _, err := s.QueryInt(ctx, `SELECT count(*) FROM federation_nonce_minutes`); err != nil {
			t.Errorf("federation_nonce_minutes after migrating down to 64: %v", err)
		}
		reopened := tg.open(t, store.Options{})
		if refused, err := reopened.UseNonces(ctx, uses("ams1", "n1", "n2"), t0.Add(2*time.Minute), t0); err != nil || codes(refused)[0] != vdibroker.EUnauthenticated || refused[1] != nil {
			t.Errorf("after migrating up again: %v, %v; want n1 a replay, n2 fresh", refused, err)
		}
	})
}
