package store_test

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/store"
)

// The entitlement part of the contract (R-E1, R-E2, R-E5), on both engines.

func appGroup(name, pool, typ string, a vdibroker.Assignments) *vdibroker.ApplicationGroup {
	g := &vdibroker.ApplicationGroup{Name: name, HostPool: pool, ApplicationGroupType: typ, Assignments: a,
		CreateTime: t0, UpdateTime: t0}
	g.FillDefaults()
	return g
}

func mustAppGroup(t testing.TB, s *store.DB, g *vdibroker.ApplicationGroup) {
	t.Helper()
	if _, err := s.PutApplicationGroup(t.Context(), g, vdibroker.Precondition{}); err != nil {
		t.Fatalf("put application group %s: %v", g.Name, err)
	}
}

var ignoreTimes = cmpopts.IgnoreFields(vdibroker.ApplicationGroup{}, "CreateTime", "UpdateTime")

// TestApplicationGroups: a group and its assignments are stored as given
// (order and spelling kept), replaced whole, and deleted with its
// applications; its pool and type never change; a pool has one Desktop
// group (R-E1).
func TestApplicationGroups(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("p1", vdibroker.Pooled))
		mustPool(t, s, pool("p2", vdibroker.Pooled))
		desk := appGroup("p1-desktops", "p1", vdibroker.AppGroupDesktop,
			vdibroker.Assignments{Users: []string{"Zoe@Contoso.com", "alice@contoso.com"}, Groups: []string{"Sales", "HR"}})
		created, err := s.PutApplicationGroup(ctx, desk, vdibroker.Precondition{})
		if err != nil || !created {
			t.Fatalf("create: created %v, %v", created, err)
		}
		got, err := s.GetApplicationGroup(ctx, "p1-desktops")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(desk, got); diff != "" {
			t.Errorf("stored group (-put +got):\n%s", diff)
		}

		// Replaced whole: new assignments, the creation time kept.
		later := *desk
		later.Assignments = vdibroker.Assignments{Users: []string{"bob"}, Groups: []string{}, AllUsers: true}
		later.FriendlyName, later.CreateTime, later.UpdateTime = "Desktops", t0.Add(time.Hour), t0.Add(time.Hour)
		if created, err := s.PutApplicationGroup(ctx, &later, vdibroker.Precondition{}); err != nil || created {
			t.Fatalf("replace: created %v, %v", created, err)
		}
		got, _ = s.GetApplicationGroup(ctx, "p1-desktops")
		// (Created at t0 after the pools, also written at t0: each write
		// takes a time past the last one issued, R-E13.)
		if !got.CreateTime.Equal(desk.CreateTime) || !got.UpdateTime.Equal(t0.Add(time.Hour)) || got.FriendlyName != "Desktops" ||
			!cmp.Equal(got.Assignments, later.Assignments) {
			t.Errorf("replaced group %+v, want %+v created at %v", got, later, desk.CreateTime)
		}

		for _, c := range []struct {
			name      string
			g         *vdibroker.ApplicationGroup
			code, fld string
		}{
			{"no such pool", appGroup("nopool", "gone", vdibroker.AppGroupRemoteApp, vdibroker.Assignments{}), vdibroker.EInvalid, "hostPool"},
			{"second desktop", appGroup("p1-more", "p1", vdibroker.AppGroupDesktop, vdibroker.Assignments{}), vdibroker.EConflict, "applicationGroupType"},
			{"other pool", appGroup("p1-desktops", "p2", vdibroker.AppGroupDesktop, vdibroker.Assignments{}), vdibroker.EInvalid, "hostPool"},
			{"other type", appGroup("p1-desktops", "p1", vdibroker.AppGroupRemoteApp, vdibroker.Assignments{}), vdibroker.EInvalid, "applicationGroupType"},
		} {
			if _, err := s.PutApplicationGroup(ctx, c.g, vdibroker.Precondition{}); vdibroker.ErrorCode(err) != c.code || vdibroker.ErrorField(err) != c.fld {
				t.Errorf("%s: %v, want %s on %s", c.name, err, c.code, c.fld)
			}
		}
		list, err := s.ListApplicationGroups(ctx, "")
		if err != nil || len(list) != 1 || list[0].Name != "p1-desktops" || list[0].HostPool != "p1" {
			t.Fatalf("after the refusals: %v, %v; want p1-desktops alone, unchanged", list, err)
		}

		// A RemoteApp group of p2 with an application; a Desktop group
		// of p2 beside it.
		apps := appGroup("p2-apps", "p2", vdibroker.AppGroupRemoteApp, vdibroker.Assignments{Groups: []string{"Sales"}})
		mustAppGroup(t, s, apps)
		mustAppGroup(t, s, appGroup("p2-desktops", "p2", vdibroker.AppGroupDesktop, vdibroker.Assignments{AllUsers: true}))
		list, _ = s.ListApplicationGroups(ctx, "p2")
		if len(list) != 2 || list[0].Name != "p2-apps" || list[1].Name != "p2-desktops" || !cmp.Equal(list[0].Assignments.Groups, []string{"Sales"}) {
			t.Errorf("groups of p2: %+v", list)
		}
		paint := &vdibroker.Application{Name: "paint", ApplicationGroup: "p2-apps", FilePath: `C:\Windows\system32\mspaint.exe`,
			CommandLineSetting: vdibroker.CommandLineDoNotAllow, FriendlyName: "Paint", ShowInPortal: true, CreateTime: t0, UpdateTime: t0}
		if created, err := s.PutApplication(ctx, paint, vdibroker.Precondition{}); err != nil || !created {
			t.Fatalf("put application: %v, %v", created, err)
		}
		if got, err := s.GetApplication(ctx, "p2-apps", "paint"); err != nil || !cmp.Equal(got, paint) {
			t.Errorf("stored application %+v, %v; want %+v", got, err, paint)
		}
		if _, err := s.PutApplication(ctx, &vdibroker.Application{Name: "x", ApplicationGroup: "p2-desktops", FilePath: "x",
			CommandLineSetting: vdibroker.CommandLineDoNotAllow}, vdibroker.Precondition{}); vdibroker.ErrorCode(err) != vdibroker.EInvalid {
			t.Errorf("an application in a Desktop group: %v, want InvalidArgument", err)
		}
		if _, err := s.PutApplication(ctx, &vdibroker.Application{Name: "x", ApplicationGroup: "none", FilePath: "x",
			CommandLineSetting: vdibroker.CommandLineDoNotAllow}, vdibroker.Precondition{}); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			t.Errorf("an application in no group: %v, want NotFound", err)
		}
		if l, err := s.ListApplications(ctx, "p2-apps"); err != nil || len(l) != 1 {
			t.Errorf("applications of p2-apps: %v, %v", l, err)
		}

		// Deleting the group deletes its application; deleting the pool
		// its groups.
		if err := s.DeleteApplicationGroup(ctx, "p2-apps", vdibroker.Precondition{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetApplication(ctx, "p2-apps", "paint"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			t.Errorf("application of a deleted group: %v", err)
		}
		mustAppGroup(t, s, apps)
		if _, err := s.GetApplication(ctx, "p2-apps", "paint"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			t.Errorf("a group made again under the name has the old one's application: %v", err)
		}
		if _, err := s.DeleteHostPool(ctx, "p2", true, vdibroker.Precondition{}); err != nil {
			t.Fatal(err)
		}
		if list, _ := s.ListApplicationGroups(ctx, ""); len(list) != 1 {
			t.Errorf("groups after deleting p2: %+v, want p1's alone", list)
		}
		if g, err := s.AssignedApplicationGroups(ctx, vdibroker.AssignmentQuery{User: "x", Groups: []string{"sales"}}); err != nil || len(g) != 1 || g[0].Name != "p1-desktops" {
			t.Errorf("assignments of deleted p2's groups remain: %+v, %v", g, err)
		}
		if err := s.DeleteApplicationGroup(ctx, "nothing", vdibroker.Precondition{}); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			t.Errorf("delete of no group: %v", err)
		}
	})
}

// TestAssignedApplicationGroups: the groups an identity is assigned to,
// by its user name or one of its groups in any case (R-E5), or as all
// users, each with only the matching assignments; narrowed by pool, group
// and type (R-E2).
func TestAssignedApplicationGroups(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("p1", vdibroker.Pooled))
		mustPool(t, s, pool("p2", vdibroker.Pooled))
		mustAppGroup(t, s, appGroup("a-desk", "p1", vdibroker.AppGroupDesktop,
			vdibroker.Assignments{Users: []string{"Alice@Contoso.com", "bob"}, Groups: []string{"Finance"}}))
		mustAppGroup(t, s, appGroup("b-apps", "p1", vdibroker.AppGroupRemoteApp,
			vdibroker.Assignments{Groups: []string{"Sales", "ÉQUIPE"}}))
		mustAppGroup(t, s, appGroup("c-desk", "p2", vdibroker.AppGroupDesktop, vdibroker.Assignments{AllUsers: true, Users: []string{"alice@contoso.com"}}))
		mustAppGroup(t, s, appGroup("d-apps", "p2", vdibroker.AppGroupRemoteApp, vdibroker.Assignments{Users: []string{"carol"}}))

		type match struct {
			Name string
			A    vdibroker.Assignments
		}
		as := func(users, groups []string, all bool) vdibroker.Assignments {
			if users == nil {
				users = []string{}
			}
			if groups == nil {
				groups = []string{}
			}
			return vdibroker.Assignments{Users: users, Groups: groups, AllUsers: all}
		}
		for _, c := range []struct {
			name string
			q    vdibroker.AssignmentQuery
			want []match
		}{
			{"user in another case, groups in another case", vdibroker.AssignmentQuery{User: "ALICE@contoso.COM", Groups: []string{"sales", "équipe", "finance"}},
				[]match{{"a-desk", as([]string{"Alice@Contoso.com"}, []string{"Finance"}, false)},
					{"b-apps", as(nil, []string{"Sales", "ÉQUIPE"}, false)},
					{"c-desk", as([]string{"alice@contoso.com"}, nil, true)}}},
			{"nobody's user: all users only", vdibroker.AssignmentQuery{User: "dave"}, []match{{"c-desk", as(nil, nil, true)}}},
			{"narrowed to a pool", vdibroker.AssignmentQuery{User: "bob", HostPool: "p1"}, []match{{"a-desk", as([]string{"bob"}, nil, false)}}},
			{"narrowed to a type", vdibroker.AssignmentQuery{User: "carol", Type: vdibroker.AppGroupRemoteApp}, []match{{"d-apps", as([]string{"carol"}, nil, false)}}},
			{"narrowed to a group", vdibroker.AssignmentQuery{User: "carol", Groups: []string{"Sales"}, ApplicationGroup: "b-apps"}, []match{{"b-apps", as(nil, []string{"Sales"}, false)}}},
			{"nothing", vdibroker.AssignmentQuery{User: "carol", ApplicationGroup: "a-desk"}, nil},
		} {
			got, err := s.AssignedApplicationGroups(ctx, c.q)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			var gm []match
			for _, g := range got {
				gm = append(gm, match{g.Name, g.Assignments})
			}
			if diff := cmp.Diff(c.want, gm); diff != "" {
				t.Errorf("%s (-want +got):\n%s", c.name, diff)
			}
		}
	})
}

// TestCaseInsensitiveUsers (R-E5, R-C6): Alice@Contoso.com and
// alice@contoso.com are one user: one open session per pooled pool, also
// when they commit at the same moment from two replicas; listings and a
// global connect's lookup find the session in any case.
func TestCaseInsensitiveUsers(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		a, b := tg.open(t, store.Options{}), tg.open(t, store.Options{})
		mustPool(t, a, pool("p1", vdibroker.Pooled))
		for _, h := range []string{"h1", "h2"} {
			mustHost(t, a, "p1", h)
		}
		first := mustCommit(t, a, placement("p1", "h1", "Alice@Contoso.com", 10))
		if err := a.CommitPlacement(ctx, placement("p1", "h2", "alice@contoso.com", 10)); !errors.Is(err, vdibroker.ErrUserHasSession) {
			t.Fatalf("a second session in another case: %v, want ErrUserHasSession", err)
		}
		for _, u := range []string{"ALICE@CONTOSO.COM", "alice@contoso.com", "Alice@Contoso.com"} {
			l, err := a.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "p1", User: u})
			if err != nil || len(l) != 1 || l[0].ID != first || l[0].User != "Alice@Contoso.com" {
				t.Errorf("sessions of %s: %v, %v; want %s, stored as first given", u, l, err, first)
			}
			o, err := a.OpenSessionsOfUsers(ctx, []string{u}, []string{"p1"})
			if err != nil || len(o) != 1 || o[0].ID != first {
				t.Errorf("open sessions of %s: %v, %v", u, o, err)
			}
		}

		// Concurrently, from two stores on one database (two replicas),
		// many users in two spellings each: one session per user.
		const users = 20
		var wg sync.WaitGroup
		errs := make([]error, 2*users)
		for i := range users {
			for j, s := range []*store.DB{a, b} {
				name := fmt.Sprintf("User%02d@Contoso.com", i)
				if j == 1 {
					name = fmt.Sprintf("user%02d@contoso.COM", i)
				}
				wg.Go(func() { errs[2*i+j] = s.CommitPlacement(ctx, placement("p1", []string{"h1", "h2"}[j], name, 1000)) })
			}
		}
		wg.Wait()
		for i := range users {
			ok := 0
			for j := range 2 {
				switch err := errs[2*i+j]; {
				case err == nil:
					ok++
				case !errors.Is(err, vdibroker.ErrUserHasSession):
					t.Errorf("user %d, spelling %d: %v", i, j, err)
				}
			}
			l, _ := a.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "p1", User: fmt.Sprintf("USER%02d@CONTOSO.COM", i)})
			if ok != 1 || len(l) != 1 {
				t.Errorf("user %d: %d commits succeeded, %d open sessions; want 1 and 1", i, ok, len(l))
			}
		}
		if bad, err := a.CheckCounts(ctx); err != nil || len(bad) > 0 {
			t.Errorf("counts: %v %v", bad, err)
		}
	})
}

// TestTokenGroups: a User token's groups are stored with it (R-E6).
func TestTokenGroups(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		tk := &vdibroker.Token{Role: vdibroker.RoleUser, Subject: "alice", Hash: "h1", CreateTime: t0, Groups: []string{"Sales", "HR"}}
		if err := s.CreateToken(t.Context(), tk); err != nil {
			t.Fatal(err)
		}
		got, err := s.TokenByHash(t.Context(), "h1")
		if err != nil || !cmp.Equal(got.Groups, []string{"Sales", "HR"}) {
			t.Errorf("token groups %v, %v", got, err)
		}
	})
}

// entitlementsMigration is the version of the migration that brought
// entitlements (00030 as written; the number may change when branches
// land), read from its file name.
func entitlementsMigration(t *testing.T) int64 {
	t.Helper()
	files, err := fs.Glob(store.Migrations, "migrations/sqlite/*_entitlements.sql")
	if err != nil || len(files) != 1 {
		t.Fatalf("the entitlements migration: %v %v", files, err)
	}
	var v int64
	if _, err := fmt.Sscanf(path.Base(files[0]), "%05d_", &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestUpgradeKeepsPoolsUsable (R-E4, R-E5): a database of the schema
// before entitlements, with a pool and sessions in it, among them the
// twins the old case-sensitive broker let in (Alice and alice, Éric and
// éric, each with an open session in one pool), migrates: every existing
// pool gets a Desktop group for all users, the user keys are folded (non-
// ASCII ones by the Go step), the twins stay open, and from then on a
// user has one session per pool in any case.
func TestUpgradeKeepsPoolsUsable(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		s := tg.open(t, store.Options{})
		mustPool(t, s, pool("p1", vdibroker.Pooled))
		mustPool(t, s, pool("p2", vdibroker.Personal))
		mustHost(t, s, "p1", "h1")
		if err := s.MigrateDownTo(ctx, entitlementsMigration(t)-1); err != nil {
			t.Fatalf("migrate down: %v", err)
		}
		// The old schema: no user_key.
		for i, u := range []string{"Alice@Contoso.com", "alice@contoso.com", "Éric", "éric", "Kim"} {
			if err := s.ExecRaw(ctx, fmt.Sprintf(`INSERT INTO user_sessions (id, host_pool, session_host, user_name, state,
				create_time, state_time, agent_session_id, end_reason, pooled, logoff_queued)
				VALUES ('0000old%d', 'p1', 'h1', '%s', 'Active', %d, %d, 'a%d', '', TRUE, FALSE)`, i, u, t0.UnixNano(), t0.UnixNano(), i)); err != nil {
				t.Fatalf("old session of %s: %v", u, err)
			}
		}
		s.Close()

		s = tg.open(t, store.Options{})
		groups, err := s.ListApplicationGroups(ctx, "")
		if err != nil || len(groups) != 2 {
			t.Fatalf("groups after the upgrade: %+v, %v; want one per pool", groups, err)
		}
		for i, p := range []string{"p1", "p2"} {
			g := groups[i]
			if g.Name != p+"-DAG" || g.HostPool != p || g.ApplicationGroupType != vdibroker.AppGroupDesktop || !g.Assignments.AllUsers {
				t.Errorf("group of %s: %+v, want %s-DAG, Desktop, for all users", p, g, p)
			}
		}
		for _, c := range []struct {
			user string
			open int
		}{{"ALICE@contoso.com", 2}, {"ÉRIC", 2}, {"éric", 2}, {"kim", 1}, {"\u212aim", 1}} { // U+212A, the Kelvin sign, folds with K
			l, err := s.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "p1", User: c.user})
			if err != nil || len(l) != c.open {
				t.Errorf("sessions of %s: %d, %v; want %d", c.user, len(l), err, c.open)
			}
			if err := s.CommitPlacement(ctx, placement("p1", "h1", c.user, 100)); !errors.Is(err, vdibroker.ErrUserHasSession) {
				t.Errorf("a new session of %s: %v, want ErrUserHasSession (R-C6 in any case)", c.user, err)
			}
		}
		// The fold is done once: opening again changes nothing.
		s.Close()
		s = tg.open(t, store.Options{})
		if l, _ := s.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "p1", User: "ÉRIC"}); len(l) != 2 {
			t.Errorf("after a second open: %d sessions of Éric", len(l))
		}

		// Through the API, an end user still connects to the old pool;
		// a pool made after the upgrade has no group (R-E4).
		srv := testserver.New(testserver.Config{Store: s, AdminToken: "admin"})
		ts := httptest.NewServer(srv.Handler())
		t.Cleanup(func() { ts.Close(); srv.Close() })
		admin := vhttp.NewClient(ts.URL, "admin")
		tok, err := admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: "zoe"})
		if err != nil {
			t.Fatal(err)
		}
		zoe := vhttp.NewClient(ts.URL, tok.Secret)
		// h1 has had no heartbeat: past the entitlement, placement finds
		// no capacity.
		if _, err := zoe.Connect(ctx, "p1", vhttp.ConnectRequest{User: "zoe", DryRun: true}); vdibroker.ErrorCode(err) != vdibroker.ENoCapacity {
			t.Errorf("an end user's connect to a pool of before the upgrade: %v, want it placed (NoCapacity: h1 has no heartbeat)", err)
		}
		if _, err := admin.PutHostPool(ctx, "p3-new", map[string]any{}); err != nil {
			t.Fatal(err)
		}
		if _, err := zoe.Connect(ctx, "p3-new", vhttp.ConnectRequest{User: "zoe", DryRun: true}); vdibroker.ErrorCode(err) != vdibroker.ENotEntitled {
			t.Errorf("an end user's connect to a new pool: %v, want NotEntitled", err)
		}
	})
}

// TestPreconditionAtomic_RE13: writers that read one application group,
// application or scaling plan and write it back with that read's update
// time as their precondition (If-Match), at once from two stores on one
// database (two replicas): exactly one lands, every other is refused with
// PreconditionFailed and writes nothing. If-None-Match (Absent) over an
// existing object and If-Match: * (Exists) on a missing one are refused.
func TestPreconditionAtomic_RE13(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		a, b := tg.open(t, store.Options{}), tg.open(t, store.Options{})
		ctx := t.Context()
		mustPool(t, a, pool("pool1", vdibroker.Pooled))
		mustPool(t, a, pool("pool2", vdibroker.Pooled))
		mustAppGroup(t, a, appGroup("p1-apps", "pool1", vdibroker.AppGroupRemoteApp, vdibroker.Assignments{Users: []string{"alice"}}))
		app := &vdibroker.Application{Name: "paint", ApplicationGroup: "p1-apps", FilePath: "mspaint.exe",
			CommandLineSetting: vdibroker.CommandLineDoNotAllow, CreateTime: t0, UpdateTime: t0}
		if _, err := a.PutApplication(ctx, app, vdibroker.Precondition{}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.PutScalingPlan(ctx, plan("weekdays", "pool1"), vdibroker.Precondition{}); err != nil {
			t.Fatal(err)
		}
		const n = 6
		for _, c := range []struct {
			name string
			// read returns the object's update time and what the writes
			// change; write writes the i-th writer's change.
			read  func(s *store.DB) (time.Time, string)
			write func(s *store.DB, i int, pre vdibroker.Precondition) error
		}{
			{"application group", func(s *store.DB) (time.Time, string) {
				g, err := s.GetApplicationGroup(ctx, "p1-apps")
				if err != nil {
					t.Fatal(err)
				}
				return g.UpdateTime, fmt.Sprint(g.Assignments.Users)
			}, func(s *store.DB, i int, pre vdibroker.Precondition) error {
				g := appGroup("p1-apps", "pool1", vdibroker.AppGroupRemoteApp, vdibroker.Assignments{Users: []string{"alice", fmt.Sprintf("user%d", i)}})
				_, err := s.PutApplicationGroup(ctx, g, pre)
				return err
			}},
			{"application", func(s *store.DB) (time.Time, string) {
				a, err := s.GetApplication(ctx, "p1-apps", "paint")
				if err != nil {
					t.Fatal(err)
				}
				return a.UpdateTime, a.FriendlyName
			}, func(s *store.DB, i int, pre vdibroker.Precondition) error {
				w := *app
				w.FriendlyName = fmt.Sprintf("Paint %d", i)
				_, err := s.PutApplication(ctx, &w, pre)
				return err
			}},
			{"scaling plan", func(s *store.DB) (time.Time, string) {
				p, err := s.GetScalingPlan(ctx, "weekdays")
				if err != nil {
					t.Fatal(err)
				}
				return p.UpdateTime, p.Description
			}, func(s *store.DB, i int, pre vdibroker.Precondition) error {
				p := plan("weekdays", "pool1")
				p.Description = fmt.Sprintf("writer %d", i)
				_, err := s.PutScalingPlan(ctx, p, pre)
				return err
			}},
		} {
			read, before := c.read(a)
			pre := vdibroker.Precondition{Exists: true, Versions: []time.Time{read}}
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				s := a
				if i%2 == 1 {
					s = b
				}
				wg.Go(func() { errs[i] = c.write(s, i, pre) })
			}
			wg.Wait()
			won := -1
			for i, err := range errs {
				switch vdibroker.ErrorCode(err) {
				case "":
					if won >= 0 {
						t.Errorf("%s: writers %d and %d both landed over the same read", c.name, won, i)
					}
					won = i
				case vdibroker.EPreconditionFailed:
				default:
					t.Errorf("%s: writer %d: %v", c.name, i, err)
				}
			}
			if won < 0 {
				t.Fatalf("%s: no writer landed: %v", c.name, errs)
			}
			// What is stored is the one winner's, written after the read.
			ut, after := c.read(b)
			if !ut.After(read) || after == before || !strings.Contains(after, fmt.Sprint(won)) {
				t.Errorf("%s: stored %q at %v, want writer %d's after %v", c.name, after, ut, won, read)
			}
			// If-None-Match: * over it is refused and changes nothing.
			if err := c.write(a, 99, vdibroker.Precondition{Absent: true}); vdibroker.ErrorCode(err) != vdibroker.EPreconditionFailed {
				t.Errorf("%s: If-None-Match: * over an existing one: %v, want PreconditionFailed", c.name, err)
			}
			if _, now := c.read(a); now != after {
				t.Errorf("%s: the refused create changed it to %q", c.name, now)
			}
		}
		// If-Match: * on what does not exist creates nothing.
		g := appGroup("p2-apps", "pool2", vdibroker.AppGroupRemoteApp, vdibroker.Assignments{})
		if _, err := a.PutApplicationGroup(ctx, g, vdibroker.Precondition{Exists: true}); vdibroker.ErrorCode(err) != vdibroker.EPreconditionFailed {
			t.Errorf("If-Match: * on a missing group: %v, want PreconditionFailed", err)
		}
		if _, err := a.GetApplicationGroup(ctx, "p2-apps"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			t.Errorf("after If-Match: * on a missing group: %v, want NotFound", err)
		}
	})
}
