package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/vdibroker/vdibroker/internal/pgtest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// The contract suite: every test runs against SQLite, and against
// PostgreSQL when VDIBROKER_TEST_POSTGRES_DSN is set, each test in a fresh
// schema.

const pgEnv = "VDIBROKER_TEST_POSTGRES_DSN"

// target opens stores on one fresh database; several opens share it, like
// broker replicas.
type target struct {
	name string
	open func(t testing.TB, opts store.Options) *store.DB
}

func sqliteOpener(t testing.TB) func(testing.TB, store.Options) *store.DB {
	dir := t.TempDir()
	return func(tb testing.TB, opts store.Options) *store.DB {
		tb.Helper()
		s, err := store.OpenWith(tb.Context(), "", dir, nil, opts)
		if err != nil {
			tb.Errorf("open sqlite: %v", err)
			tb.FailNow()
		}
		tb.Cleanup(func() { s.Close() })
		return s
	}
}

// postgresOpener creates a uniquely named schema and points search_path at
// it; the schema is dropped when the test ends.
func postgresOpener(t testing.TB) func(testing.TB, store.Options) *store.DB {
	t.Helper()
	dsn := postgresSchemaDSN(t)
	return func(tb testing.TB, opts store.Options) *store.DB {
		tb.Helper()
		s, err := store.OpenWith(tb.Context(), dsn, "", nil, opts)
		if err != nil {
			tb.Errorf("open postgres: %v", err)
			tb.FailNow()
		}
		tb.Cleanup(func() { s.Close() })
		return s
	}
}

// waitForLockWaiter waits (up to 60 s) until one of s's connections waits
// for a lock (PostgreSQL; s on a DSN of postgresSchemaDSN, whose
// application_name tells its connections from other tests'): who is the
// write that should be waiting, for the failure message.
func waitForLockWaiter(t *testing.T, s *store.DB, who string) {
	t.Helper()
	waitForLockWaiters(t, s, 1, who)
}

// waitForLockWaiters is waitForLockWaiter for n connections waiting at
// once, a lock's queue: who are the writes that should be in it.
func waitForLockWaiters(t *testing.T, s *store.DB, n int, who string) {
	t.Helper()
	// A bound on a broken test's wait, not a timing: on a machine busy
	// with the rest of the package, opening a store and migrating up to
	// the step that waits took more than 10 s.
	for deadline := time.Now().Add(60 * time.Second); ; {
		waiting, err := s.QueryInt(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = current_setting('application_name') AND wait_event_type = 'Lock'`)
		if err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never waited for the other transaction's lock (%d of %d waiting)", who, waiting, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// postgresSchemaDSN creates a uniquely named schema, dropped when the test
// ends, and returns a DSN whose search_path is it.
func postgresSchemaDSN(t testing.TB) string {
	t.Helper()
	return pgtest.SchemaDSN(t, "vdibroker_test_", "PostgreSQL contract tests")
}

// postgresStore opens a store on a schema of its own (postgresSchemaDSN),
// closed when the test ends, and returns it with the schema's DSN.
func postgresStore(t testing.TB) (*store.DB, string) {
	t.Helper()
	dsn := postgresSchemaDSN(t)
	s, err := store.OpenWith(t.Context(), dsn, "", nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dsn
}

// run runs fn as a subtest per engine, each with a fresh database.
func run(t *testing.T, fn func(t *testing.T, tg target)) {
	t.Helper()
	for name, opener := range map[string]func(testing.TB) func(testing.TB, store.Options) *store.DB{
		"sqlite": sqliteOpener, "postgres": postgresOpener,
	} {
		t.Run(name, func(t *testing.T) { fn(t, target{name: name, open: opener(t)}) })
	}
}

// each runs fn per engine with one open store.
func each(t *testing.T, fn func(t *testing.T, s *store.DB)) {
	t.Helper()
	run(t, func(t *testing.T, tg target) { fn(t, tg.open(t, store.Options{})) })
}

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func pool(name string, typ string) *vdibroker.HostPool {
	lb := vdibroker.BreadthFirst
	if typ == vdibroker.Personal {
		lb = vdibroker.Persistent
	}
	return &vdibroker.HostPool{
		Name: name, HostPoolType: typ, LoadBalancerType: lb, MaxSessionLimit: vdibroker.NoSessionLimit,
		PersonalDesktopAssignmentType: vdibroker.Automatic, LoadBalancing: vdibroker.DefaultLoadBalancing(),
		HeartbeatTimeoutSeconds: 90, PendingTimeoutSeconds: 300, CreateTime: t0, UpdateTime: t0,
	}
}

func mustPool(t testing.TB, s *store.DB, p *vdibroker.HostPool) {
	t.Helper()
	if _, err := s.PutHostPool(t.Context(), p, vdibroker.Precondition{}); err != nil {
		t.Fatalf("put pool %s: %v", p.Name, err)
	}
}

// mustHost puts hosts names in pool.
func mustHost(t testing.TB, s *store.DB, pool string, names ...string) {
	t.Helper()
	for _, name := range names {
		h := &vdibroker.SessionHost{HostPool: pool, Name: name, Address: name + ":3389", Protocols: []string{"RDP"},
			StandardFeatures: true, AllowNewSession: true, CreateTime: t0}
		if _, err := s.PutSessionHost(t.Context(), h); err != nil {
			t.Fatalf("put host %s/%s: %v", pool, name, err)
		}
	}
}

func placement(pool, host, user string, limit int) *vdibroker.PlacementCommit {
	return &vdibroker.PlacementCommit{
		Session: &vdibroker.UserSession{ID: vdibroker.NewID(), User: user, HostPool: pool, SessionHost: host,
			State: vdibroker.StatePending, CreateTime: t0, StateTime: t0},
		MaxSessionLimit: limit, Pooled: true, Record: []byte(`{"chosen":"` + host + `"}`),
	}
}

func mustCommit(t testing.TB, s *store.DB, c *vdibroker.PlacementCommit) string {
	t.Helper()
	if err := s.CommitPlacement(t.Context(), c); err != nil {
		t.Fatalf("commit %s on %s: %v", c.Session.User, c.Session.SessionHost, err)
	}
	return c.Session.ID
}

func counts(t testing.TB, s *store.DB, pool, host string) (sessions, connecting int) {
	t.Helper()
	h, err := s.GetSessionHost(t.Context(), pool, host)
	if err != nil {
		t.Fatalf("get host: %v", err)
	}
	return h.Sessions, h.ConnectingSessions
}

func wantCounts(t testing.TB, s *store.DB, pool, host string, sessions, connecting int) {
	t.Helper()
	gs, gc := counts(t, s, pool, host)
	if gs != sessions || gc != connecting {
		t.Errorf("host %s/%s counts: got sessions=%d connecting=%d, want %d and %d", pool, host, gs, gc, sessions, connecting)
	}
}

func wantCode(t testing.TB, err error, code string) {
	t.Helper()
	if got := vdibroker.ErrorCode(err); got != code {
		t.Fatalf("error %v: got code %q, want %q", err, got, code)
	}
}

func session(t testing.TB, s *store.DB, pool, id string) *vdibroker.UserSession {
	t.Helper()
	u, err := s.GetUserSession(t.Context(), pool, id)
	if err != nil {
		t.Fatalf("get session %s: %v", id, err)
	}
	return u
}

func TestHostPoolCRUD(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		p := pool("pool-b", vdibroker.Pooled)
		p.LoadBalancing.CPUThreshold = 80
		created, err := s.PutHostPool(ctx, p, vdibroker.Precondition{})
		if err != nil || !created {
			t.Fatalf("create: created=%v err=%v", created, err)
		}
		got, err := s.GetHostPool(ctx, "pool-b")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(p, got); diff != "" {
			t.Errorf("get after create (-want +got):\n%s", diff)
		}

		// R-P1: the load balancer type may change, CreateTime is kept.
		p2 := pool("pool-b", vdibroker.Pooled)
		p2.LoadBalancerType = vdibroker.DepthFirst
		p2.MaxSessionLimit = 10
		p2.CreateTime = t0.Add(time.Hour)
		p2.UpdateTime = t0.Add(time.Hour)
		created, err = s.PutHostPool(ctx, p2, vdibroker.Precondition{})
		if err != nil || created {
			t.Fatalf("replace: created=%v err=%v", created, err)
		}
		got, _ = s.GetHostPool(ctx, "pool-b")
		if got.LoadBalancerType != vdibroker.DepthFirst || got.MaxSessionLimit != 10 || !got.CreateTime.Equal(t0) || !got.UpdateTime.Equal(t0.Add(time.Hour)) {
			t.Errorf("after replace: %+v", got)
		}

		// R-P1: the pool type may not change; nothing changes.
		p3 := pool("pool-b", vdibroker.Personal)
		_, err = s.PutHostPool(ctx, p3, vdibroker.Precondition{})
		wantCode(t, err, vdibroker.EInvalid)
		if f := vdibroker.ErrorField(err); f != "hostPoolType" {
			t.Errorf("field: got %q, want hostPoolType", f)
		}
		got, _ = s.GetHostPool(ctx, "pool-b")
		if got.HostPoolType != vdibroker.Pooled || got.LoadBalancerType != vdibroker.DepthFirst {
			t.Errorf("refused replace changed the pool: %+v", got)
		}

		mustPool(t, s, pool("Pool-a", vdibroker.Pooled))
		mustPool(t, s, pool("pool-a", vdibroker.Personal))
		l, err := s.ListHostPools(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range l {
			names = append(names, p.Name)
		}
		// Byte-wise: upper case sorts before lower case.
		if diff := cmp.Diff([]string{"Pool-a", "pool-a", "pool-b"}, names); diff != "" {
			t.Errorf("list order (-want +got):\n%s", diff)
		}

		if _, err := s.DeleteHostPool(ctx, "pool-b", false, vdibroker.Precondition{}); err != nil {
			t.Fatal(err)
		}
		_, err = s.GetHostPool(ctx, "pool-b")
		wantCode(t, err, vdibroker.ENotFound)
		_, err = s.DeleteHostPool(ctx, "pool-b", false, vdibroker.Precondition{})
		wantCode(t, err, vdibroker.ENotFound)
	})
}

func TestDeleteHostPoolWithSessions(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		mustHost(t, s, "pool1", "host1")
		mustCommit(t, s, placement("pool1", "host1", "alice", 10))
		if err := s.CreateRegistrationToken(ctx, &vdibroker.RegistrationToken{HostPool: "pool1", Hash: "rt1", CreateTime: t0, ExpireTime: t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}

		_, err := s.DeleteHostPool(ctx, "pool1", false, vdibroker.Precondition{})
		wantCode(t, err, vdibroker.EConflict)
		if _, err := s.GetSessionHost(ctx, "pool1", "host1"); err != nil {
			t.Fatalf("refused delete removed the host: %v", err)
		}
		del, err := s.DeleteHostPool(ctx, "pool1", true, vdibroker.Precondition{})
		if err != nil {
			t.Fatal(err)
		}
		if del.SessionHosts != 1 || del.OpenSessions != 1 {
			t.Errorf("forced delete says %+v, want 1 host and 1 session gone", del)
		}
		l, err := s.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "pool1"})
		if err != nil || len(l) != 0 {
			t.Errorf("sessions after forced delete: %v %v", l, err)
		}
		// The registration token went with the pool.
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		_, err = s.RegisterHost(ctx, "rt1", &vdibroker.RegisterRequest{HostName: "host1"}, "cred", t0)
		wantCode(t, err, vdibroker.EUnauthenticated)
	})
}

// TestDeleteHostPoolWithHosts (SPEC §9): a pool with a registered host and
// no session is refused too, naming its hosts, its usable registration
// token and its scaling plan; forced, the answer says what went, and the
// plan's loss of the pool is an audit entry of its own beside the pool's.
func TestDeleteHostPoolWithHosts(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		mustPool(t, s, pool("other", vdibroker.Pooled))
		for i := range vdibroker.MaxDeletionNames + 2 {
			mustHost(t, s, "pool1", fmt.Sprintf("host%02d", i))
		}
		mustPlan(t, s, plan("office", "other", "pool1"))
		now := time.Now()
		for i, tok := range []vdibroker.RegistrationToken{
			{HostPool: "pool1", Hash: "usable", CreateTime: now, ExpireTime: now.Add(time.Hour)},
			{HostPool: "pool1", Hash: "expired", CreateTime: now.Add(-2 * time.Hour), ExpireTime: now.Add(-time.Hour)},
		} {
			tok.ID = fmt.Sprintf("rt%d", i)
			if err := s.CreateRegistrationToken(ctx, &tok); err != nil {
				t.Fatal(err)
			}
		}

		_, err := s.DeleteHostPool(ctx, "pool1", false, vdibroker.Precondition{})
		wantCode(t, err, vdibroker.EConflict)
		// 22 hosts: the first 20 by name, and how many more.
		for _, want := range []string{`host pool "pool1" has 22 session hosts (host00, host01,`, "host19 and 2 more)",
			"1 registration token", `scaling plan "office"`, "revoke their agents' credentials", "--force"} {
			if !strings.Contains(vdibroker.ErrorMessage(err), want) {
				t.Errorf("refusal %q does not say %q", vdibroker.ErrorMessage(err), want)
			}
		}
		if got := getPlan(t, s, "office").HostPools; len(got) != 2 {
			t.Errorf("a refused delete took the pool out of its plan: %v", got)
		}

		entry := &vdibroker.AuditEntry{Time: t0, Principal: vdibroker.AuditPrincipal{Kind: vdibroker.PrincipalAdmin, ID: "admin"},
			Action: "hostpool.delete", Target: "hostpools/pool1", HostPool: "pool1", RequestID: "req-1"}
		del, err := s.DeleteHostPool(vdibroker.WithAudit(ctx, entry), "pool1", true, vdibroker.Precondition{})
		if err != nil {
			t.Fatal(err)
		}
		want := &vdibroker.PoolDeletion{HostPool: "pool1", SessionHosts: 22, RegistrationTokens: 1, ScalingPlan: "office"}
		for i := range vdibroker.MaxDeletionNames {
			want.HostNames = append(want.HostNames, fmt.Sprintf("host%02d", i))
		}
		if diff := cmp.Diff(want, del); diff != "" {
			t.Errorf("what went (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"other"}, getPlan(t, s, "office").HostPools); diff != "" {
			t.Errorf("plan after the delete (-want +got):\n%s", diff)
		}
		entries, err := s.ListAudit(ctx, vdibroker.AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var actions []string
		for _, e := range entries {
			actions = append(actions, e.Action+" "+e.Target+" "+e.RequestID)
			if e.Action == "scalingplan.update" {
				var before, after vdibroker.ScalingPlan
				if err := json.Unmarshal(e.Before, &before); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(e.After, &after); err != nil {
					t.Fatal(err)
				}
				if strings.Join(before.HostPools, ",") != "other,pool1" || strings.Join(after.HostPools, ",") != "other" {
					t.Errorf("the plan's entry: before %v, after %v", before.HostPools, after.HostPools)
				}
			}
		}
		if diff := cmp.Diff([]string{"scalingplan.update scalingplans/office req-1", "hostpool.delete hostpools/pool1 req-1"}, actions); diff != "" {
			t.Errorf("audit entries (-want +got):\n%s", diff)
		}

		// A pool with nothing in it goes without force.
		mustPool(t, s, pool("empty", vdibroker.Pooled))
		del, err = s.DeleteHostPool(ctx, "empty", false, vdibroker.Precondition{})
		if err != nil || del.Blocks() {
			t.Errorf("empty pool: %+v, %v", del, err)
		}
	})
}

func TestSessionHostCRUD(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Personal))
		h := &vdibroker.SessionHost{HostPool: "pool1", Name: "host-b", Address: "10.0.0.2:3389", Protocols: []string{"RDP", "Blast"},
			StandardFeatures: false, AllowNewSession: true, AssignedUsers: []string{"bob"}, CreateTime: t0}
		created, err := s.PutSessionHost(ctx, h)
		if err != nil || !created {
			t.Fatalf("create: %v %v", created, err)
		}
		_, err = s.PutSessionHost(ctx, &vdibroker.SessionHost{HostPool: "nope", Name: "host-b"})
		wantCode(t, err, vdibroker.ENotFound)

		got, err := s.GetSessionHost(ctx, "pool1", "host-b")
		if err != nil {
			t.Fatal(err)
		}
		want := *h
		want.RemoteApps = vdibroker.RemoteAppsUnknown // no agent said (R-E12)
		if diff := cmp.Diff(&want, got); diff != "" {
			t.Errorf("get (-want +got):\n%s", diff)
		}

		// A replace keeps runtime fields: counts and heartbeat.
		if _, err := s.ApplyHeartbeat(ctx, "pool1", "host-b", &vdibroker.HeartbeatRequest{
			Sessions: []vdibroker.AgentSession{{ID: "7", User: "bob", State: vdibroker.StateActive}}}, t0); err != nil {
			t.Fatal(err)
		}
		h2 := &vdibroker.SessionHost{HostPool: "pool1", Name: "host-b", Address: "10.0.0.3:3389", AllowNewSession: false, CreateTime: t0.Add(time.Hour)}
		created, err = s.PutSessionHost(ctx, h2)
		if err != nil || created {
			t.Fatalf("replace: %v %v", created, err)
		}
		got, _ = s.GetSessionHost(ctx, "pool1", "host-b")
		if got.Address != "10.0.0.3:3389" || got.AllowNewSession || len(got.AssignedUsers) != 0 || got.Sessions != 1 ||
			got.LastHeartBeat == nil || !got.CreateTime.Equal(t0) {
			t.Errorf("after replace: %+v", got)
		}

		// UpdateSessionHost: fn's change is written; fn's error changes nothing.
		got, err = s.UpdateSessionHost(ctx, "pool1", "host-b", func(h *vdibroker.SessionHost) error {
			h.AllowNewSession = true
			h.AssignedUsers = []string{"carol"}
			return nil
		})
		if err != nil || !got.AllowNewSession || !cmp.Equal(got.AssignedUsers, []string{"carol"}) {
			t.Fatalf("update: %+v %v", got, err)
		}
		boom := errors.New("boom")
		_, err = s.UpdateSessionHost(ctx, "pool1", "host-b", func(h *vdibroker.SessionHost) error {
			h.AllowNewSession = false
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("update error: got %v, want boom", err)
		}
		got, _ = s.GetSessionHost(ctx, "pool1", "host-b")
		if !got.AllowNewSession {
			t.Errorf("failed update changed the host")
		}
		_, err = s.UpdateSessionHost(ctx, "pool1", "nope", func(*vdibroker.SessionHost) error { return nil })
		wantCode(t, err, vdibroker.ENotFound)

		// Query order is byte-wise by name (SPEC §1).
		for _, n := range []string{"host-a", "Host-z", "host_c"} {
			mustHost(t, s, "pool1", n)
		}
		l, err := s.ListSessionHosts(ctx, "pool1")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, h := range l {
			names = append(names, h.Name)
		}
		if diff := cmp.Diff([]string{"Host-z", "host-a", "host-b", "host_c"}, names); diff != "" {
			t.Errorf("list order (-want +got):\n%s", diff)
		}
		_, err = s.ListSessionHosts(ctx, "nope")
		wantCode(t, err, vdibroker.ENotFound)
	})
}

func TestDeleteSessionHost(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		if err := s.CreateRegistrationToken(ctx, &vdibroker.RegistrationToken{HostPool: "pool1", Hash: "rt", CreateTime: t0, ExpireTime: t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RegisterHost(ctx, "rt", &vdibroker.RegisterRequest{HostName: "host1"}, "cred1", t0); err != nil {
			t.Fatal(err)
		}
		id := mustCommit(t, s, placement("pool1", "host1", "alice", 10))
		if err := s.QueueCommand(ctx, &vdibroker.Command{HostPool: "pool1", SessionHost: "host1", Type: vdibroker.CommandSendMessage, SessionID: id, Message: "hi"}); err != nil {
			t.Fatal(err)
		}

		err := s.DeleteSessionHost(ctx, "pool1", "host1", false)
		wantCode(t, err, vdibroker.EConflict)
		// The refusal says how to go on, in the CLI's words and the API's.
		if want := `session host "host1" has 1 open session; deleting it would end it. Delete with force (?force=true, vdibroker sessionhost delete --force) to do so`; vdibroker.ErrorMessage(err) != want {
			t.Errorf("refusal %q, want %q", vdibroker.ErrorMessage(err), want)
		}
		if _, err := s.HostByCredential(ctx, "cred1"); err != nil {
			t.Fatalf("refused delete revoked the credential: %v", err)
		}
		if err := s.DeleteSessionHost(ctx, "pool1", "host1", true); err != nil {
			t.Fatal(err)
		}
		_, err = s.HostByCredential(ctx, "cred1")
		wantCode(t, err, vdibroker.EUnauthenticated)
		u := session(t, s, "pool1", id)
		if u.State != vdibroker.StateLoggedOff || u.EndReason != vdibroker.EndHostDeleted {
			t.Errorf("session after forced delete: %+v", u)
		}
		wantCode(t, s.DeleteSessionHost(ctx, "pool1", "host1", false), vdibroker.ENotFound)

		// A host without sessions is deleted without force.
		mustHost(t, s, "pool1", "host2")
		if err := s.DeleteSessionHost(ctx, "pool1", "host2", false); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCommitHostLimitConcurrent is R-C4 and R-D3: 200 connects of distinct
// users race for a host with maxSessionLimit 10 through three store
// instances on one database (replicas): exactly 10 succeed, 190 get
// ErrHostFull, and the host counts 10.
func TestCommitHostLimitConcurrent(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		replicas := []*store.DB{tg.open(t, store.Options{}), tg.open(t, store.Options{}), tg.open(t, store.Options{})}
		s := replicas[0]
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		mustHost(t, s, "pool1", "host1")
		const n, limit = 200, 10
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				errs[i] = replicas[i%len(replicas)].CommitPlacement(t.Context(), placement("pool1", "host1", fmt.Sprintf("user%03d", i), limit))
			})
		}
		wg.Wait()
		ok, full := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, vdibroker.ErrHostFull):
				full++
			default:
				t.Errorf("unexpected error: %v", err)
			}
		}
		if ok != limit || full != n-limit {
			t.Errorf("got %d committed and %d ErrHostFull, want %d and %d", ok, full, limit, n-limit)
		}
		wantCounts(t, s, "pool1", "host1", limit, limit)
		l, _ := s.ListUserSessions(t.Context(), vdibroker.SessionFilter{HostPool: "pool1"})
		if len(l) != limit {
			t.Errorf("got %d open sessions, want %d", len(l), limit)
		}
	})
}

// TestCommitOneSessionPerUserConcurrent is R-C6 and R-D3: 20 concurrent
// connects of one user to a pooled pool, spread over two hosts and two
// replicas, give one session.
func TestCommitOneSessionPerUserConcurrent(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		replicas := []*store.DB{tg.open(t, store.Options{}), tg.open(t, store.Options{})}
		s := replicas[0]
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		mustHost(t, s, "pool1", "host1")
		mustHost(t, s, "pool1", "host2")
		const n = 20
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				host := []string{"host1", "host2"}[i%2]
				errs[i] = replicas[i%2].CommitPlacement(t.Context(), placement("pool1", host, "alice", 100))
			})
		}
		wg.Wait()
		ok, has := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, vdibroker.ErrUserHasSession):
				has++
			default:
				t.Errorf("unexpected error: %v", err)
			}
		}
		if ok != 1 || has != n-1 {
			t.Errorf("got %d committed and %d ErrUserHasSession, want 1 and %d", ok, has, n-1)
		}
		s1, _ := counts(t, s, "pool1", "host1")
		s2, _ := counts(t, s, "pool1", "host2")
		if s1+s2 != 1 {
			t.Errorf("host counts %d+%d, want 1 session in all", s1, s2)
		}
	})
}

// TestGroupCommitMixedBatch commits one batch whose items succeed and fail
// for every reason; each failure is undone alone (by its savepoint, or, for
// a simple connect, by changing nothing) and the successes are durable.
func TestGroupCommitMixedBatch(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pooled", vdibroker.Pooled))
		mustPool(t, s, pool("personal", vdibroker.Personal))
		mustHost(t, s, "pooled", "h1")
		mustHost(t, s, "pooled", "h2")
		mustHost(t, s, "personal", "d1")
		mustHost(t, s, "personal", "d2")

		assign := func(host, user string) *vdibroker.PlacementCommit {
			c := placement("personal", host, user, vdibroker.NoSessionLimit)
			c.Pooled, c.Assign = false, true
			return c
		}
		batch := []*vdibroker.PlacementCommit{
			placement("pooled", "h1", "u1", 2),   // ok: h1 1/2
			placement("pooled", "h1", "u2", 2),   // ok: h1 2/2
			placement("pooled", "h1", "u3", 2),   // ErrHostFull
			placement("pooled", "h2", "u1", 2),   // ErrUserHasSession (u1 on h1 above)
			placement("pooled", "nope", "u4", 2), // NotFound
			placement("pooled", "h2", "u3", 2),   // ok: h2 1/2
			assign("d1", "carol"),                // ok: d1 assigned to carol
			assign("d1", "dave"),                 // ErrHostTaken: slot taken then undone
			assign("d2", "dave"),                 // ok
		}
		errs := s.CommitBatch(batch)
		want := []error{nil, nil, vdibroker.ErrHostFull, vdibroker.ErrUserHasSession, nil, nil, nil, vdibroker.ErrHostTaken, nil}
		for i, err := range errs {
			switch {
			case i == 4:
				wantCode(t, err, vdibroker.ENotFound)
			case want[i] == nil && err != nil:
				t.Errorf("item %d: unexpected error %v", i, err)
			case want[i] != nil && !errors.Is(err, want[i]):
				t.Errorf("item %d: got %v, want %v", i, err, want[i])
			}
		}
		// h1: u1, u2 (u3 refused); h2: u3 (u1 refused, its increment undone).
		wantCounts(t, s, "pooled", "h1", 2, 2)
		wantCounts(t, s, "pooled", "h2", 1, 1)
		// d1: carol only (dave's increment undone with his savepoint).
		wantCounts(t, s, "personal", "d1", 1, 1)
		wantCounts(t, s, "personal", "d2", 1, 1)
		for host, user := range map[string]string{"d1": "carol", "d2": "dave"} {
			h, _ := s.GetSessionHost(ctx, "personal", host)
			if !cmp.Equal(h.AssignedUsers, []string{user}) {
				t.Errorf("%s assigned to %v, want %s", host, h.AssignedUsers, user)
			}
		}
		for i, c := range batch {
			_, err := s.GetUserSession(ctx, c.Session.HostPool, c.Session.ID)
			if (errs[i] == nil) != (err == nil) {
				t.Errorf("item %d: commit error %v but get session error %v", i, errs[i], err)
			}
		}
		// The record of a committed placement is readable (R-C7).
		rec, err := s.GetPlacement(ctx, "pooled", batch[0].Session.ID)
		if err != nil || string(rec) != `{"chosen":"h1"}` {
			t.Errorf("placement record: %q %v", rec, err)
		}
		_, err = s.GetPlacement(ctx, "pooled", batch[2].Session.ID)
		wantCode(t, err, vdibroker.ENotFound)
	})
}

// TestCommitEndsReplacedSession is R-C1: the old session on an unavailable
// host ends in the same transaction as the new one is made.
func TestCommitEndsReplacedSession(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		mustHost(t, s, "pool1", "h1")
		mustHost(t, s, "pool1", "h2")
		old := mustCommit(t, s, placement("pool1", "h1", "alice", 10))
		c := placement("pool1", "h2", "alice", 10)
		c.EndSessionID = old
		mustCommit(t, s, c)
		u := session(t, s, "pool1", old)
		if u.State != vdibroker.StateLoggedOff || u.EndReason != vdibroker.EndHostUnavailable {
			t.Errorf("old session: %+v", u)
		}
		wantCounts(t, s, "pool1", "h1", 0, 0)
		wantCounts(t, s, "pool1", "h2", 1, 1)
	})
}

func TestEndSessionAndExpirePending(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		p := pool("pool1", vdibroker.Pooled)
		p.PendingTimeoutSeconds = 60
		mustPool(t, s, p)
		mustHost(t, s, "pool1", "h1")
		a := mustCommit(t, s, placement("pool1", "h1", "alice", 10))
		b := mustCommit(t, s, placement("pool1", "h1", "bob", 10))
		late := placement("pool1", "h1", "carol", 10)
		late.Session.CreateTime, late.Session.StateTime = t0.Add(30*time.Second), t0.Add(30*time.Second)
		c := mustCommit(t, s, late)
		wantCounts(t, s, "pool1", "h1", 3, 3)

		if err := s.EndSession(ctx, "pool1", a, "AdminLogoff", t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if err := s.EndSession(ctx, "pool1", a, "Again", t0.Add(2*time.Second)); err != nil {
			t.Fatalf("ending an ended session: %v", err)
		}
		if u := session(t, s, "pool1", a); u.State != vdibroker.StateLoggedOff || u.EndReason != "AdminLogoff" || !u.StateTime.Equal(t0.Add(time.Second)) {
			t.Errorf("ended session: %+v", u)
		}
		wantCode(t, s.EndSession(ctx, "pool1", "nope", "x", t0), vdibroker.ENotFound)
		wantCounts(t, s, "pool1", "h1", 2, 2)

		// R-S3: at t0+60s nothing is older than 60 s; at t0+61s bob is,
		// carol (placed at t0+30s) is not.
		n, err := s.ExpirePending(ctx, t0.Add(60*time.Second))
		if err != nil || n != 0 {
			t.Fatalf("expire at 60s: %d %v", n, err)
		}
		n, err = s.ExpirePending(ctx, t0.Add(61*time.Second))
		if err != nil || n != 1 {
			t.Fatalf("expire at 61s: got %d %v, want 1", n, err)
		}
		if u := session(t, s, "pool1", b); u.State != vdibroker.StateLoggedOff || u.EndReason != vdibroker.EndPendingTimeout {
			t.Errorf("bob: %+v", u)
		}
		if u := session(t, s, "pool1", c); u.State != vdibroker.StatePending {
			t.Errorf("carol: %+v", u)
		}
		wantCounts(t, s, "pool1", "h1", 1, 1)
	})
}

// TestHeartbeatReconciliation covers R-S2, R-S3 and R-S5, one heartbeat
// sequence per case.
func TestHeartbeatReconciliation(t *testing.T) {
	type beat struct {
		at       time.Duration // after t0
		sessions []vdibroker.AgentSession
		// want: broker sessions by user after the beat: "State" or
		// "LoggedOff/Reason"; counts of the host.
		want        map[string]string
		sessions_   int
		connecting  int
		wantLogoffs []string // users whose Logoff command is delivered
	}
	active := func(id, user string) vdibroker.AgentSession {
		return vdibroker.AgentSession{ID: id, User: user, State: vdibroker.StateActive}
	}
	disc := func(id, user string) vdibroker.AgentSession {
		return vdibroker.AgentSession{ID: id, User: user, State: vdibroker.StateDisconnected}
	}
	cases := []struct {
		name    string
		placed  []string // users placed (Pending) at t0
		timeout int      // disconnectedSessionTimeoutMinutes
		beats   []beat
	}{
		{
			name:   "pending user appears becomes active",
			placed: []string{"alice", "bob"},
			beats: []beat{{at: time.Second, sessions: []vdibroker.AgentSession{active("s1", "alice")},
				want: map[string]string{"alice": "Active", "bob": "Pending"}, sessions_: 2, connecting: 1}},
		},
		{
			name:   "pending user appears disconnected",
			placed: []string{"alice"},
			beats: []beat{{at: time.Second, sessions: []vdibroker.AgentSession{disc("s1", "alice")},
				want: map[string]string{"alice": "Disconnected"}, sessions_: 1, connecting: 0}},
		},
		{
			name:   "active then disconnected then active again then gone",
			placed: []string{"alice"},
			beats: []beat{
				{at: 1 * time.Second, sessions: []vdibroker.AgentSession{active("s1", "alice")}, want: map[string]string{"alice": "Active"}, sessions_: 1},
				{at: 2 * time.Second, sessions: []vdibroker.AgentSession{disc("s1", "alice")}, want: map[string]string{"alice": "Disconnected"}, sessions_: 1},
				{at: 3 * time.Second, sessions: []vdibroker.AgentSession{active("s1", "alice")}, want: map[string]string{"alice": "Active"}, sessions_: 1},
				{at: 4 * time.Second, want: map[string]string{"alice": "LoggedOff/NotReported"}, sessions_: 0},
			},
		},
		{
			// R-S3: pendingTimeoutSeconds is 300.
			name:   "pending never seen stays pending until the timeout",
			placed: []string{"alice"},
			beats: []beat{
				{at: 300 * time.Second, want: map[string]string{"alice": "Pending"}, sessions_: 1, connecting: 1},
				{at: 301 * time.Second, want: map[string]string{"alice": "LoggedOff/PendingTimeout"}, sessions_: 0, connecting: 0},
			},
		},
		{
			name: "unknown sessions are adopted",
			beats: []beat{
				{at: time.Second, sessions: []vdibroker.AgentSession{active("s1", "walkin"), disc("s2", "other")},
					want: map[string]string{"walkin": "Active", "other": "Disconnected"}, sessions_: 2},
				// The same agent ids next time: no second adoption.
				{at: 2 * time.Second, sessions: []vdibroker.AgentSession{active("s1", "walkin"), active("s2", "other")},
					want: map[string]string{"walkin": "Active", "other": "Active"}, sessions_: 2},
			},
		},
		{
			// The host reused alice's agent session id for bob between
			// two heartbeats: alice's session ended, bob's is adopted.
			name:   "reused agent session id is another session",
			placed: []string{"alice"},
			beats: []beat{
				{at: 1 * time.Second, sessions: []vdibroker.AgentSession{active("2", "alice")}, want: map[string]string{"alice": "Active"}, sessions_: 1},
				{at: 2 * time.Second, sessions: []vdibroker.AgentSession{active("2", "bob")},
					want: map[string]string{"alice": "LoggedOff/NotReported", "bob": "Active"}, sessions_: 1},
			},
		},
		{
			name:   "two pending sessions of one user match two agent sessions",
			placed: []string{"alice", "alice"},
			beats: []beat{{at: time.Second, sessions: []vdibroker.AgentSession{active("s1", "alice"), active("s2", "alice")},
				want: map[string]string{"alice": "Active"}, sessions_: 2}},
		},
		{
			// R-S5 with a 10 minute timeout: disconnected at t0+1m, the
			// logoff is queued once at t0+11m and delivered in that answer;
			// not again at t0+12m; after a reconnect and a new
			// disconnection it is queued again.
			name:    "disconnected too long gets one logoff command",
			placed:  []string{"alice"},
			timeout: 10,
			beats: []beat{
				{at: 1 * time.Minute, sessions: []vdibroker.AgentSession{disc("s1", "alice")}, want: map[string]string{"alice": "Disconnected"}, sessions_: 1},
				{at: 10*time.Minute + 59*time.Second, sessions: []vdibroker.AgentSession{disc("s1", "alice")}, want: map[string]string{"alice": "Disconnected"}, sessions_: 1},
				{at: 11 * time.Minute, sessions: []vdibroker.AgentSession{disc("s1", "alice")}, want: map[string]string{"alice": "Disconnected"}, sessions_: 1, wantLogoffs: []string{"alice"}},
				{at: 12 * time.Minute, sessions: []vdibroker.AgentSession{disc("s1", "alice")}, want: map[string]string{"alice": "Disconnected"}, sessions_: 1},
				{at: 13 * time.Minute, sessions: []vdibroker.AgentSession{active("s1", "alice")}, want: map[string]string{"alice": "Active"}, sessions_: 1},
				{at: 14 * time.Minute, sessions: []vdibroker.AgentSession{disc("s1", "alice")}, want: map[string]string{"alice": "Disconnected"}, sessions_: 1},
				{at: 24 * time.Minute, sessions: []vdibroker.AgentSession{disc("s1", "alice")}, want: map[string]string{"alice": "Disconnected"}, sessions_: 1, wantLogoffs: []string{"alice"}},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			each(t, func(t *testing.T, s *store.DB) {
				ctx := t.Context()
				p := pool("pool1", vdibroker.Personal) // Personal: a user may hold several sessions
				p.DisconnectedSessionTimeoutMinutes = tc.timeout
				mustPool(t, s, p)
				mustHost(t, s, "pool1", "h1")
				for _, u := range tc.placed {
					c := placement("pool1", "h1", u, vdibroker.NoSessionLimit)
					c.Pooled = false
					mustCommit(t, s, c)
				}
				for i, b := range tc.beats {
					res, err := s.ApplyHeartbeat(ctx, "pool1", "h1", &vdibroker.HeartbeatRequest{Sessions: b.sessions}, t0.Add(b.at))
					if err != nil {
						t.Fatalf("beat %d: %v", i, err)
					}
					all, err := s.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "pool1"})
					if err != nil {
						t.Fatal(err)
					}
					ended, _ := s.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "pool1", State: vdibroker.StateLoggedOff})
					got := map[string]string{}
					for _, u := range all {
						got[u.User] = u.State
						if u.State != vdibroker.StatePending && u.AgentSessionID == "" {
							t.Errorf("beat %d: %s is %s without agent session id", i, u.User, u.State)
						}
					}
					for _, u := range ended {
						got[u.User] = u.State + "/" + u.EndReason
					}
					if diff := cmp.Diff(b.want, got); diff != "" {
						t.Errorf("beat %d sessions (-want +got):\n%s", i, diff)
					}
					if res.Host.Sessions != b.sessions_ || res.Host.ConnectingSessions != b.connecting {
						t.Errorf("beat %d: host counts %d/%d, want %d/%d", i, res.Host.Sessions, res.Host.ConnectingSessions, b.sessions_, b.connecting)
					}
					var logoffs []string
					for _, c := range res.Commands {
						if c.Type == vdibroker.CommandLogoff {
							logoffs = append(logoffs, c.User)
							if c.AgentSessionID == "" || c.State != vdibroker.CommandDelivered {
								t.Errorf("beat %d: logoff command %+v", i, c)
							}
						}
					}
					if diff := cmp.Diff(b.wantLogoffs, logoffs); diff != "" {
						t.Errorf("beat %d logoff commands (-want +got):\n%s", i, diff)
					}
				}
			})
		})
	}
}

// TestHeartbeatHostFields checks what a heartbeat records on the host.
func TestHeartbeatHostFields(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		mustHost(t, s, "pool1", "h1")
		mustCommit(t, s, placement("pool1", "h1", "alice", 10))
		mustCommit(t, s, placement("pool1", "h1", "bob", 10))
		custom := 42
		ten := 10
		m := &vdibroker.Metrics{CPUPercent: 55.5, MemoryPercent: 20, DiskQueueLength: 1.5, CustomLoadValue: &custom, SampledAt: t0.Add(time.Second)}
		res, err := s.ApplyHeartbeat(ctx, "pool1", "h1", &vdibroker.HeartbeatRequest{
			Metrics: m, Policy: &vdibroker.HostPolicy{HostLoadIndexThreshold: &ten},
			Sessions:     []vdibroker.AgentSession{{ID: "1", User: "alice", State: vdibroker.StateActive}},
			ShuttingDown: true, HealthError: "disk full",
		}, t0.Add(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		h := res.Host
		if diff := cmp.Diff(m, h.Metrics); diff != "" {
			t.Errorf("metrics (-want +got):\n%s", diff)
		}
		// alice only: bob is still Pending (not timed out), so his load
		// cannot be in the sample (R-LI6).
		if h.MetricsSessions != 1 || !h.ShuttingDown || h.HealthError != "disk full" ||
			h.LastHeartBeat == nil || !h.LastHeartBeat.Equal(t0.Add(2*time.Second)) ||
			h.Policy.HostLoadIndexThreshold == nil || *h.Policy.HostLoadIndexThreshold != 10 {
			t.Errorf("host after heartbeat: %+v", h)
		}
		if res.Pool == nil || res.Pool.Name != "pool1" {
			t.Errorf("pool: %+v", res.Pool)
		}
		// A normal heartbeat clears the shutdown and health flags; without
		// metrics and policy the last ones stay.
		res, err = s.ApplyHeartbeat(ctx, "pool1", "h1", &vdibroker.HeartbeatRequest{
			Sessions: []vdibroker.AgentSession{{ID: "1", User: "alice", State: vdibroker.StateActive}},
		}, t0.Add(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		h = res.Host
		if h.ShuttingDown || h.HealthError != "" || h.Metrics == nil || h.Policy.HostLoadIndexThreshold == nil || !h.LastHeartBeat.Equal(t0.Add(3*time.Second)) {
			t.Errorf("host after normal heartbeat: %+v", h)
		}
		_, err = s.ApplyHeartbeat(ctx, "pool1", "nope", &vdibroker.HeartbeatRequest{}, t0)
		wantCode(t, err, vdibroker.ENotFound)
	})
}

// TestCommands is R-S4: a queued command is delivered once, on the next
// heartbeat, and its result is recorded.
func TestCommands(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		mustHost(t, s, "pool1", "h1")
		mustHost(t, s, "pool1", "h2")
		id := mustCommit(t, s, placement("pool1", "h1", "alice", 10))
		c1 := &vdibroker.Command{HostPool: "pool1", SessionHost: "h1", Type: vdibroker.CommandSendMessage, SessionID: id, Message: "hello", CreateTime: t0}
		c2 := &vdibroker.Command{HostPool: "pool1", SessionHost: "h1", Type: vdibroker.CommandLogoff, SessionID: id, CreateTime: t0}
		for _, c := range []*vdibroker.Command{c1, c2} {
			if err := s.QueueCommand(ctx, c); err != nil {
				t.Fatal(err)
			}
			if c.ID == "" || c.State != vdibroker.CommandQueued || c.User != "alice" {
				t.Errorf("queued command: %+v", c)
			}
		}
		wantCode(t, s.QueueCommand(ctx, &vdibroker.Command{HostPool: "pool1", SessionHost: "nope", Type: vdibroker.CommandLogoff}), vdibroker.ENotFound)
		wantCode(t, s.QueueCommand(ctx, &vdibroker.Command{HostPool: "pool1", SessionHost: "h2", Type: vdibroker.CommandLogoff, SessionID: id}), vdibroker.EInvalid)

		// The session became Active (agent id s9) after the commands were
		// queued: the delivered commands carry the agent's id.
		alice := []vdibroker.AgentSession{{ID: "s9", User: "alice", State: vdibroker.StateActive}}
		res, err := s.ApplyHeartbeat(ctx, "pool1", "h1", &vdibroker.HeartbeatRequest{Sessions: alice}, t0.Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range res.Commands {
			got = append(got, c.ID)
			if c.State != vdibroker.CommandDelivered || c.AgentSessionID != "s9" || c.SessionHost != "h1" {
				t.Errorf("delivered command: %+v", c)
			}
		}
		if diff := cmp.Diff([]string{c1.ID, c2.ID}, got); diff != "" {
			t.Errorf("delivered in queue order (-want +got):\n%s", diff)
		}
		// Not again; other hosts get nothing.
		res, err = s.ApplyHeartbeat(ctx, "pool1", "h1", &vdibroker.HeartbeatRequest{Sessions: alice,
			Results: []vdibroker.CommandResult{{ID: c1.ID, Success: true, Message: "shown"}, {ID: c2.ID, Success: false, Message: "no such session"}}},
			t0.Add(2*time.Second))
		if err != nil || len(res.Commands) != 0 {
			t.Fatalf("second heartbeat: %v %+v", err, res)
		}
		for _, tc := range []struct{ id, state, result string }{
			{c1.ID, vdibroker.CommandSucceeded, "shown"},
			{c2.ID, vdibroker.CommandFailed, "no such session"},
		} {
			state, result, err := s.Command(ctx, tc.id)
			if err != nil || state != tc.state || result != tc.result {
				t.Errorf("command %s: got %s %q %v, want %s %q", tc.id, state, result, err, tc.state, tc.result)
			}
		}
		// A command runs once (R-S4): a result reported again, in the
		// same heartbeat or a later one, neither rewrites the one recorded
		// nor is returned as recorded (the broker logs what is returned,
		// so a host's credential repeating its own commands' ids would
		// write lines of its choosing).
		res, err = s.ApplyHeartbeat(ctx, "pool1", "h1", &vdibroker.HeartbeatRequest{Sessions: alice,
			Results: []vdibroker.CommandResult{{ID: c1.ID, Success: false, Message: "pay 555-0100"}, {ID: c2.ID, Success: true, Message: "pay 555-0101"},
				{ID: c2.ID, Success: true, Message: "pay 555-0102"}}},
			t0.Add(2500*time.Millisecond))
		if err != nil || len(res.Results) != 0 {
			t.Fatalf("heartbeat repeating results: %v, recorded %+v; want none recorded", err, res.Results)
		}
		for _, tc := range []struct{ id, state, result string }{
			{c1.ID, vdibroker.CommandSucceeded, "shown"},
			{c2.ID, vdibroker.CommandFailed, "no such session"},
		} {
			state, result, err := s.Command(ctx, tc.id)
			if err != nil || state != tc.state || result != tc.result {
				t.Errorf("command %s after its result was repeated: got %s %q %v, want %s %q", tc.id, state, result, err, tc.state, tc.result)
			}
		}
		// A result for another host's command is ignored.
		c3 := &vdibroker.Command{HostPool: "pool1", SessionHost: "h1", Type: vdibroker.CommandDisconnect, SessionID: id}
		if err := s.QueueCommand(ctx, c3); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ApplyHeartbeat(ctx, "pool1", "h2", &vdibroker.HeartbeatRequest{
			Results: []vdibroker.CommandResult{{ID: c3.ID, Success: true}}}, t0.Add(3*time.Second)); err != nil {
			t.Fatal(err)
		}
		if state, _, _ := s.Command(ctx, c3.ID); state != vdibroker.CommandQueued {
			t.Errorf("another host's result changed the command: %s", state)
		}
	})
}

// TestQueueHostMessage (R-S4): a message for a host is one SendMessage
// for each of its Active and Disconnected sessions (not a Pending one, not
// another host's), queued in one transaction and delivered on the host's
// next heartbeat; an unknown host is NotFound and queues nothing.
func TestQueueHostMessage(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		mustHost(t, s, "pool1", "h1", "h2")
		for _, u := range []string{"alice", "bob", "carol"} {
			mustCommit(t, s, placement("pool1", "h1", u, 10))
		}
		mustCommit(t, s, placement("pool1", "h2", "dave", 10))
		// carol is still Pending: not reported.
		if _, err := s.ApplyHeartbeat(ctx, "pool1", "h1", &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{
			{ID: "1", User: "alice", State: vdibroker.StateActive}, {ID: "2", User: "bob", State: vdibroker.StateDisconnected}}}, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		n, already, err := s.QueueHostMessage(ctx, "pool1", "h1", "restart at 18:00", t0.Add(2*time.Second))
		if err != nil || n != 2 || already != 0 {
			t.Fatalf("QueueHostMessage: %d (%d already), %v; want 2 (alice Active, bob Disconnected), none already", n, already, err)
		}
		_, _, err = s.QueueHostMessage(ctx, "pool1", "nope", "x", t0)
		wantCode(t, err, vdibroker.ENotFound)
		res, err := s.ApplyHeartbeat(ctx, "pool1", "h1", &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{
			{ID: "1", User: "alice", State: vdibroker.StateActive}, {ID: "2", User: "bob", State: vdibroker.StateDisconnected}}}, t0.Add(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range res.Commands {
			got = append(got, c.Type+" "+c.User+" "+c.AgentSessionID+" "+c.Message)
		}
		slices.Sort(got)
		want := []string{"SendMessage alice 1 restart at 18:00", "SendMessage bob 2 restart at 18:00"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("delivered to h1 (-want +got):\n%s", diff)
		}
		if res, err := s.ApplyHeartbeat(ctx, "pool1", "h2", &vdibroker.HeartbeatRequest{}, t0.Add(3*time.Second)); err != nil || len(res.Commands) != 0 {
			t.Errorf("h2 got %+v, %v; want nothing", res, err)
		}
	})
}

// TestHeartbeatAnswerBounded_RS4: one heartbeat answer carries a host's
// queued commands up to 4 MiB of JSON (the agent reads at most 8 MiB of
// an answer and fails one longer whole); the rest stay queued, in order,
// for the next. 200 messages of 4,096 '<' (six bytes each in JSON,
// \u003c) are about 4.9 MB: the first answer carries 170 or so (4 MiB /
// ~24.8 KB), the second the rest, each command once.
func TestHeartbeatAnswerBounded_RS4(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		mustHost(t, s, "pool1", "h1")
		var ids []string
		for range 200 {
			c := &vdibroker.Command{HostPool: "pool1", SessionHost: "h1", Type: vdibroker.CommandSendMessage, Message: strings.Repeat("<", vdibroker.MaxMessageLen)}
			if err := s.QueueCommand(ctx, c); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, c.ID)
		}
		var got []string
		var answers []int
		for i := range 3 {
			res, err := s.ApplyHeartbeat(ctx, "pool1", "h1", &vdibroker.HeartbeatRequest{}, t0.Add(time.Duration(i+1)*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			answers = append(answers, len(res.Commands))
			for _, c := range res.Commands {
				got = append(got, c.ID)
			}
		}
		if answers[0] == 0 || answers[0] >= 200 || answers[0]+answers[1] != 200 || answers[2] != 0 {
			t.Errorf("answers of %v commands; want the 200 over two answers", answers)
		}
		if diff := cmp.Diff(ids, got); diff != "" {
			t.Errorf("delivered (-queued +got):\n%s", diff)
		}
	})
}

// TestRegisterHost covers registration tokens (expiry), host creation with
// defaults, re-keying and HostByCredential.
func TestRegisterHost(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		wantCode(t, s.CreateRegistrationToken(ctx, &vdibroker.RegistrationToken{HostPool: "nope", Hash: "x", ExpireTime: t0}), vdibroker.ENotFound)
		rt := &vdibroker.RegistrationToken{HostPool: "pool1", Hash: "rthash", CreateTime: t0, ExpireTime: t0.Add(time.Hour)}
		if err := s.CreateRegistrationToken(ctx, rt); err != nil || rt.ID == "" {
			t.Fatalf("create registration token: %v %+v", err, rt)
		}
		req := &vdibroker.RegisterRequest{HostName: "host1", Address: "10.0.0.1:3389", Protocols: []string{"RDP"}}

		_, err := s.RegisterHost(ctx, "wrong", req, "cred1", t0)
		wantCode(t, err, vdibroker.EUnauthenticated)
		_, err = s.RegisterHost(ctx, "rthash", req, "cred1", t0.Add(time.Hour))
		wantCode(t, err, vdibroker.EUnauthenticated) // expired at exactly t0+1h

		h, err := s.RegisterHost(ctx, "rthash", req, "cred1", t0.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if h.HostPool != "pool1" || h.Name != "host1" || !h.AllowNewSession || !h.StandardFeatures || h.Address != "10.0.0.1:3389" ||
			!cmp.Equal(h.Protocols, []string{"RDP"}) || h.LastHeartBeat != nil {
			t.Errorf("registered host: %+v", h)
		}
		got, err := s.HostByCredential(ctx, "cred1")
		if err != nil || got.Name != "host1" || got.HostPool != "pool1" {
			t.Fatalf("by credential: %+v %v", got, err)
		}
		_, err = s.HostByCredential(ctx, "")
		wantCode(t, err, vdibroker.EUnauthenticated)

		// Re-registering the name with its current credential re-keys the
		// host and keeps its sessions.
		mustCommit(t, s, placement("pool1", "host1", "alice", 10))
		no := false
		five := 5
		h, err = s.RegisterHost(ctx, "rthash", &vdibroker.RegisterRequest{HostName: "host1", Address: "10.0.0.9:3389",
			StandardFeatures: &no, Policy: &vdibroker.HostPolicy{HostConnectingSessionThreshold: &five},
			CurrentCredentialHash: "cred1"}, "cred2", t0.Add(2*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if h.Sessions != 1 || h.StandardFeatures || h.Address != "10.0.0.9:3389" || *h.Policy.HostConnectingSessionThreshold != 5 {
			t.Errorf("re-keyed host: %+v", h)
		}
		_, err = s.HostByCredential(ctx, "cred1")
		wantCode(t, err, vdibroker.EUnauthenticated)
		if _, err := s.HostByCredential(ctx, "cred2"); err != nil {
			t.Errorf("new credential: %v", err)
		}
		// A host made by PUT is taken over by its agent's registration.
		mustHost(t, s, "pool1", "host2")
		if _, err := s.RegisterHost(ctx, "rthash", &vdibroker.RegisterRequest{HostName: "host2"}, "cred3", t0.Add(3*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if got, err := s.HostByCredential(ctx, "cred3"); err != nil || got.Name != "host2" || got.Address != "" {
			t.Errorf("host2 by credential: %+v %v", got, err)
		}
		// A personal desktop made by PUT is claimed only with a token
		// issued for it (R-SEC): not with a token of the pool, nor with
		// one for another host; and a token for one host registers no
		// other name.
		mustPool(t, s, pool("desks", vdibroker.Personal))
		mustHost(t, s, "desks", "desk1")
		tokens := map[string]string{"": "rt-desks", "desk1": "rt-desk1", "desk2": "rt-desk2"}
		for h, hash := range tokens {
			if err := s.CreateRegistrationToken(ctx, &vdibroker.RegistrationToken{HostPool: "desks", Hash: hash, CreateTime: t0, ExpireTime: t0.Add(time.Hour), SessionHost: h}); err != nil {
				t.Fatal(err)
			}
		}
		for _, hash := range []string{"rt-desks", "rt-desk2"} {
			_, err = s.RegisterHost(ctx, hash, &vdibroker.RegisterRequest{HostName: "desk1"}, "cred4", t0.Add(3*time.Minute))
			wantCode(t, err, vdibroker.EPermission)
		}
		_, err = s.RegisterHost(ctx, "rt-desk1", &vdibroker.RegisterRequest{HostName: "desk3"}, "cred4", t0.Add(3*time.Minute))
		wantCode(t, err, vdibroker.EPermission)
		if _, err := s.RegisterHost(ctx, "rt-desk1", &vdibroker.RegisterRequest{HostName: "desk1"}, "cred4", t0.Add(3*time.Minute)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestTokens(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		exp := t0.Add(24 * time.Hour)
		a := &vdibroker.Token{Role: vdibroker.RoleReader, Subject: "ann", Hash: "h-a", CreateTime: t0}
		b := &vdibroker.Token{ID: "tok-b", Role: vdibroker.RoleUser, Subject: "bob", Hash: "h-b", CreateTime: t0.Add(time.Second), ExpireTime: &exp}
		for _, tk := range []*vdibroker.Token{a, b} {
			if err := s.CreateToken(ctx, tk); err != nil {
				t.Fatal(err)
			}
		}
		wantCode(t, s.CreateToken(ctx, &vdibroker.Token{Role: vdibroker.RoleReader, Hash: "h-a"}), vdibroker.EConflict)
		got, err := s.TokenByHash(ctx, "h-b")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(b, got); diff != "" {
			t.Errorf("by hash (-want +got):\n%s", diff)
		}
		_, err = s.TokenByHash(ctx, "nope")
		wantCode(t, err, vdibroker.EUnauthenticated)
		l, err := s.ListTokens(ctx)
		if err != nil || len(l) != 2 || l[0].ID != a.ID || l[1].ID != "tok-b" {
			t.Fatalf("list: %+v %v", l, err)
		}
		before := time.Now()
		if err := s.DeleteToken(ctx, a.ID); err != nil {
			t.Fatal(err)
		}
		// Revoked: out of the list, found by its hash as revoked (R-SEC),
		// deleted once.
		got, err = s.TokenByHash(ctx, "h-a")
		if err != nil || got.ID != a.ID || got.RevokeTime == nil || got.RevokeTime.Before(before.Truncate(time.Microsecond)) || got.Role != "" {
			t.Fatalf("a revoked token by hash: %+v, %v; want its id and revocation time, nothing else", got, err)
		}
		if l, err := s.ListTokens(ctx); err != nil || len(l) != 1 || l[0].ID != "tok-b" {
			t.Errorf("list after the revocation: %+v %v", l, err)
		}
		wantCode(t, s.DeleteToken(ctx, a.ID), vdibroker.ENotFound)
		// The history's prune forgets it.
		if _, err := s.PruneHistory(ctx, got.RevokeTime.Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		if got, err := s.TokenByHash(ctx, "h-a"); err != nil || got.RevokeTime == nil {
			t.Errorf("a token revoked after the prune's time, by hash: %+v, %v; want it revoked still", got, err)
		}
		if _, err := s.PruneHistory(ctx, got.RevokeTime.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		_, err = s.TokenByHash(ctx, "h-a")
		wantCode(t, err, vdibroker.EUnauthenticated)
	})
}

// TestListUserSessionsPaging pages by ID ascending with After and Limit, and
// filters by user, state and host.
func TestListUserSessionsPaging(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		mustPool(t, s, pool("pool2", vdibroker.Pooled))
		mustHost(t, s, "pool1", "h1")
		mustHost(t, s, "pool1", "h2")
		mustHost(t, s, "pool2", "h1")
		var ids []string
		for i := range 25 {
			ids = append(ids, mustCommit(t, s, placement("pool1", []string{"h1", "h2"}[i%2], fmt.Sprintf("u%02d", i), 100)))
		}
		mustCommit(t, s, placement("pool2", "h1", "u00", 100))
		if err := s.EndSession(ctx, "pool1", ids[3], "x", t0); err != nil {
			t.Fatal(err)
		}
		var open []string
		for i, id := range ids {
			if i != 3 {
				open = append(open, id)
			}
		}
		slices.Sort(open)

		var got []string
		after := ""
		pages := 0
		for {
			page, err := s.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "pool1", After: after, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, u := range page {
				got = append(got, u.ID)
			}
			if len(page) < 10 {
				break
			}
			after = page[len(page)-1].ID
		}
		// 24 open sessions: pages of 10, 10, 4.
		if pages != 3 {
			t.Errorf("got %d pages, want 3", pages)
		}
		if diff := cmp.Diff(open, got); diff != "" {
			t.Errorf("paged ids (-want +got):\n%s", diff)
		}

		for _, tc := range []struct {
			name string
			f    vdibroker.SessionFilter
			want int
		}{
			{"by user", vdibroker.SessionFilter{HostPool: "pool1", User: "u05"}, 1},
			{"user across pools", vdibroker.SessionFilter{User: "u00"}, 2},
			{"by host", vdibroker.SessionFilter{HostPool: "pool1", SessionHost: "h2"}, 11}, // odd i: 12, less ended u03
			{"logged off", vdibroker.SessionFilter{HostPool: "pool1", State: vdibroker.StateLoggedOff}, 1},
			{"pending", vdibroker.SessionFilter{HostPool: "pool1", State: vdibroker.StatePending}, 24},
			{"other pool", vdibroker.SessionFilter{HostPool: "pool2"}, 1},
		} {
			l, err := s.ListUserSessions(ctx, tc.f)
			if err != nil || len(l) != tc.want {
				t.Errorf("%s: got %d sessions (%v), want %d", tc.name, len(l), err, tc.want)
			}
		}
	})
}

// TestReopen checks that committed state survives closing and reopening the
// store, and that migrations run once.
func TestReopen(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		s := tg.open(t, store.Options{})
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		mustHost(t, s, "pool1", "h1")
		id := mustCommit(t, s, placement("pool1", "h1", "alice", 10))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.CommitPlacement(t.Context(), placement("pool1", "h1", "bob", 10)); err == nil {
			t.Errorf("commit on a closed store succeeded")
		}
		s2 := tg.open(t, store.Options{})
		if err := s2.Ping(t.Context()); err != nil {
			t.Fatal(err)
		}
		if u := session(t, s2, "pool1", id); u.User != "alice" {
			t.Errorf("session after reopen: %+v", u)
		}
		wantCounts(t, s2, "pool1", "h1", 1, 1)
	})
}

func TestOpenRejectsUnknownDSN(t *testing.T) {
	_, err := store.Open(t.Context(), "mysql://x", t.TempDir(), nil)
	wantCode(t, err, vdibroker.EInvalid)
	if !strings.Contains(err.Error(), "postgres://") {
		t.Errorf("error should say what is accepted: %v", err)
	}
}

// TestOpenDataDirWithURLCharacters: the data dir is a path, not a URL; a
// space, '#', '?' or '%' in it must not change where the database goes.
func TestOpenDataDirWithURLCharacters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data dir#1?x%20y")
	s, err := store.Open(t.Context(), "", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(filepath.Join(dir, "vdibroker.db")); err != nil {
		t.Errorf("database not in the data dir: %v", err)
	}
}

// TestConcurrentOpenMigratesOnce: replicas starting together on an empty
// database all open it (the migrations run once: under an advisory lock on
// PostgreSQL, serialised by the write lock on SQLite).
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		var wg sync.WaitGroup
		dbs := make([]*store.DB, 4)
		for i := range dbs {
			wg.Go(func() { dbs[i] = tg.open(t, store.Options{}) })
		}
		wg.Wait()
		for _, s := range dbs {
			if s == nil {
				t.FailNow()
			}
			if err := s.Ping(t.Context()); err != nil {
				t.Error(err)
			}
		}
	})
}

func TestPruneHistory(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		mustHost(t, s, "pool1", "h1")
		old := mustCommit(t, s, placement("pool1", "h1", "old", 10))
		recent := mustCommit(t, s, placement("pool1", "h1", "recent", 10))
		open := mustCommit(t, s, placement("pool1", "h1", "open", 10))
		if err := s.EndSession(ctx, "pool1", old, "x", t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := s.EndSession(ctx, "pool1", recent, "x", t0.Add(3*time.Hour)); err != nil {
			t.Fatal(err)
		}
		expired, kept := t0.Add(time.Hour), t0.Add(5*time.Hour)
		for _, tk := range []*vdibroker.Token{
			{Role: vdibroker.RoleReader, Subject: "gone", Hash: "h-expired", CreateTime: t0, ExpireTime: &expired},
			{Role: vdibroker.RoleReader, Subject: "kept", Hash: "h-kept", CreateTime: t0, ExpireTime: &kept},
			{Role: vdibroker.RoleReader, Subject: "forever", Hash: "h-forever", CreateTime: t0},
		} {
			if err := s.CreateToken(ctx, tk); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.CreateRegistrationToken(ctx, &vdibroker.RegistrationToken{HostPool: "pool1", Hash: "rt-old", CreateTime: t0, ExpireTime: expired}); err != nil {
			t.Fatal(err)
		}
		n, err := s.PruneHistory(ctx, t0.Add(2*time.Hour))
		if err != nil || n != 1 {
			t.Fatalf("prune: got %d %v, want 1", n, err)
		}
		_, err = s.TokenByHash(ctx, "h-expired")
		wantCode(t, err, vdibroker.EUnauthenticated)
		for _, h := range []string{"h-kept", "h-forever"} {
			if _, err := s.TokenByHash(ctx, h); err != nil {
				t.Errorf("token %s after the prune: %v", h, err)
			}
		}
		if rts, err := s.ListRegistrationTokens(ctx, "pool1"); err != nil || len(rts) != 0 {
			t.Errorf("registration tokens after the prune: %+v %v, want none", rts, err)
		}
		_, err = s.GetUserSession(ctx, "pool1", old)
		wantCode(t, err, vdibroker.ENotFound)
		for _, id := range []string{recent, open} {
			session(t, s, "pool1", id)
		}
		wantCounts(t, s, "pool1", "h1", 1, 1)
	})
}

// TestFailedLogoffIsAskedAgain_RS5: a logoff the agent reports as failed is
// queued again for a session still disconnected too long, but only a full
// timeout after the last request (10 minutes here), not on every heartbeat.
func TestFailedLogoffIsAskedAgain_RS5(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		p := pool("pool1", vdibroker.Pooled)
		p.DisconnectedSessionTimeoutMinutes = 10
		mustPool(t, s, p)
		mustHost(t, s, "pool1", "h1")
		mustCommit(t, s, placement("pool1", "h1", "alice", vdibroker.NoSessionLimit))
		beat := func(at time.Duration, results ...vdibroker.CommandResult) []vdibroker.Command {
			t.Helper()
			res, err := s.ApplyHeartbeat(ctx, "pool1", "h1", &vdibroker.HeartbeatRequest{
				Sessions: []vdibroker.AgentSession{{ID: "s1", User: "alice", State: vdibroker.StateDisconnected}}, Results: results}, t0.Add(at))
			if err != nil {
				t.Fatalf("heartbeat at %v: %v", at, err)
			}
			var logoffs []vdibroker.Command
			for _, c := range res.Commands {
				if c.Type == vdibroker.CommandLogoff {
					logoffs = append(logoffs, c)
				}
			}
			return logoffs
		}
		beat(time.Minute) // disconnected at t0+1m
		first := beat(11 * time.Minute)
		if len(first) != 1 {
			t.Fatalf("at 11m: %d logoff commands, want 1", len(first))
		}
		failed := vdibroker.CommandResult{ID: first[0].ID, Success: false, Message: "session is locked"}
		if got := beat(12*time.Minute, failed); len(got) != 0 {
			t.Errorf("at 12m, right after the failure: %d logoff commands, want 0 (wait a full timeout)", len(got))
		}
		if got := beat(20 * time.Minute); len(got) != 0 {
			t.Errorf("at 20m: %d logoff commands, want 0 (last request at 11m)", len(got))
		}
		if got := beat(21 * time.Minute); len(got) != 1 {
			t.Errorf("at 21m: %d logoff commands, want 1 (a full timeout after the failed one)", len(got))
		}
		if got := beat(22 * time.Minute); len(got) != 0 {
			t.Errorf("at 22m: %d logoff commands, want 0 (the new one is pending)", len(got))
		}
	})
}

// TestLoneConnectDoesNotLinger: the group committer waits for more writes
// (Options.Linger) only while loaded; one connect after another on an
// idle broker is committed at once. With an hour of linger, waiting would
// hang this test.
func TestLoneConnectDoesNotLinger(t *testing.T) {
	s := sqliteOpener(t)(t, store.Options{Linger: time.Hour})
	mustPool(t, s, pool("p", vdibroker.Pooled))
	mustHost(t, s, "p", "h1")
	for i := range 3 {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		err := s.CommitPlacement(ctx, placement("p", "h1", fmt.Sprintf("u%d", i), vdibroker.NoSessionLimit))
		cancel()
		if err != nil {
			t.Fatalf("lone connect %d: %v (it waited for the hour of linger)", i, err)
		}
	}
	wantCounts(t, s, "p", "h1", 3, 3)
}

// TestSkippedInsertGivesSlotBack: a simple connect whose INSERT is skipped
// (here a duplicate session id; on PostgreSQL also a concurrent replica's
// session for the same user, R-C6) gives back the slot its UPDATE took, so
// the refused connect changes nothing (R-C4 counts), while the rest of its
// batch commits.
func TestSkippedInsertGivesSlotBack(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		mustPool(t, s, pool("p", vdibroker.Pooled))
		mustHost(t, s, "p", "h1")
		first := placement("p", "h1", "alice", vdibroker.NoSessionLimit)
		mustCommit(t, s, first)
		dup := placement("p", "h1", "bob", vdibroker.NoSessionLimit)
		dup.Session.ID = first.Session.ID
		errs := s.CommitBatch([]*vdibroker.PlacementCommit{dup, placement("p", "h1", "carol", vdibroker.NoSessionLimit)})
		if vdibroker.ErrorCode(errs[0]) != vdibroker.EConflict || errors.Is(errs[0], vdibroker.ErrUserHasSession) {
			t.Errorf("duplicate id: err = %v, want a Conflict naming the session", errs[0])
		}
		if errs[1] != nil {
			t.Errorf("carol, in the same batch: %v", errs[1])
		}
		wantCounts(t, s, "p", "h1", 2, 2) // alice and carol; bob's slot given back
		bad, err := s.CheckCounts(t.Context())
		if err != nil || len(bad) > 0 {
			t.Errorf("counts disagree with sessions (R-S1): %v %v", bad, err)
		}
	})
}
