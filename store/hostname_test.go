package store_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// Session host names are unique in their pool ignoring case and one
// trailing dot, as Windows and DNS compare host names (R-SEC, R-D3).

// registrationToken creates a registration token of pool with hash, good
// for an hour from t0.
func registrationToken(t testing.TB, s *store.DB, pool, hash string) {
	t.Helper()
	if err := s.CreateRegistrationToken(t.Context(), &vdibroker.RegistrationToken{HostPool: pool, Hash: hash,
		CreateTime: t0, ExpireTime: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
}

// wantSameNameConflict checks that err is the 409 of a name that is
// other's ignoring case and a trailing dot, naming field and other.
func wantSameNameConflict(t testing.TB, err error, field, other string) {
	t.Helper()
	wantCode(t, err, vdibroker.EConflict)
	if got := vdibroker.ErrorField(err); got != field {
		t.Errorf("error %v: field %q, want %q", err, got, field)
	}
	if msg := vdibroker.ErrorMessage(err); !strings.Contains(msg, fmt.Sprintf("%q", other)) {
		t.Errorf("message %q does not name %q", msg, other)
	}
}

// hostNames lists the names of pool's hosts in query order.
func hostNames(t testing.TB, s *store.DB, pool string) string {
	t.Helper()
	hosts, err := s.ListSessionHosts(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range hosts {
		names = append(names, h.Name)
	}
	return strings.Join(names, " ")
}

func TestHostNamesUniqueIgnoringCase_RSEC(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("p", vdibroker.Pooled))
		mustPool(t, s, pool("q", vdibroker.Pooled))
		registrationToken(t, s, "p", "rt-p")
		registrationToken(t, s, "q", "rt-q")
		register := func(hash, name, cred string) error {
			_, err := s.RegisterHost(ctx, hash, &vdibroker.RegisterRequest{HostName: name, Address: "10.0.0.1:3389"}, cred, t0)
			return err
		}
		if err := register("rt-p", "office-01", "c1"); err != nil {
			t.Fatal(err)
		}
		// Re-using the name itself without its credential: the answer
		// the twins below get too.
		err := register("rt-p", "office-01", "c2")
		wantCode(t, err, vdibroker.EConflict)
		if f := vdibroker.ErrorField(err); f != "hostName" {
			t.Errorf("re-using office-01: field %q, want hostName", f)
		}
		for _, name := range []string{"OFFICE-01", "Office-01", "office-01.", "OFFICE-01."} {
			wantSameNameConflict(t, register("rt-p", name, "c-"+name), "hostName", "office-01")
		}
		// Its agent re-keying under another case is refused too: the
		// host has one name.
		_, err = s.RegisterHost(ctx, "rt-p", &vdibroker.RegisterRequest{HostName: "OFFICE-01", CurrentCredentialHash: "c1"}, "c3", t0)
		wantSameNameConflict(t, err, "hostName", "office-01")
		// One trailing dot only: office-01.. is another DNS name (and
		// office-01x another host).
		for _, name := range []string{"office-01..", "office-01x"} {
			if err := register("rt-p", name, "c-"+name); err != nil {
				t.Errorf("register %s: %v", name, err)
			}
		}
		// The scope is the pool, as for the name itself.
		if err := register("rt-q", "OFFICE-01", "c-q"); err != nil {
			t.Errorf("OFFICE-01 in another pool: %v", err)
		}

		// A host an admin made (PUT) and no agent registered is claimed
		// by its name, never by a twin.
		mustHost(t, s, "p", "desk-01.")
		wantSameNameConflict(t, register("rt-p", "DESK-01", "c-desk"), "hostName", "desk-01.")
		// PUT of a twin is refused alike, naming its field; PUT of the
		// name itself replaces the host.
		put := func(name string) error {
			_, err := s.PutSessionHost(ctx, &vdibroker.SessionHost{HostPool: "p", Name: name, Protocols: []string{"RDP"},
				AllowNewSession: true, CreateTime: t0})
			return err
		}
		wantSameNameConflict(t, put("Office-01"), "name", "office-01")
		wantSameNameConflict(t, put("desk-01"), "name", "desk-01.")
		if err := put("office-01"); err != nil {
			t.Errorf("PUT office-01 over itself: %v", err)
		}
		if got, want := hostNames(t, s, "p"), "desk-01. office-01 office-01.. office-01x"; got != want {
			t.Errorf("hosts of p: %q, want %q", got, want)
		}

		// A look-up takes the name as written, and one that misses says
		// which host has it ignoring case.
		_, err = s.GetSessionHost(ctx, "p", "OFFICE-01")
		wantCode(t, err, vdibroker.ENotFound)
		if msg := vdibroker.ErrorMessage(err); !strings.Contains(msg, `"office-01"`) {
			t.Errorf("not found: %q does not name office-01", msg)
		}
		if h, err := s.GetSessionHost(ctx, "p", "office-01"); err != nil || h.Name != "office-01" {
			t.Errorf("get office-01: %+v, %v", h, err)
		}

		// Once office-01 is deleted, a token issued before the delete
		// does not bring the machine back under any case of its name, as
		// it does not as office-01 (R-SEC); one issued after it does.
		if err := s.DeleteSessionHost(ctx, "p", "office-01", false); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"office-01", "OFFICE-01", "office-01."} {
			err := register("rt-p", name, "c-again-"+name)
			wantCode(t, err, vdibroker.EConflict)
			if msg := vdibroker.ErrorMessage(err); !strings.Contains(msg, "was deleted") {
				t.Errorf("%s after office-01's delete, with a token issued before it: %q, want the delete's refusal", name, msg)
			}
		}
		// (A delete is stamped with the store's clock, the real one here.)
		if err := s.CreateRegistrationToken(ctx, &vdibroker.RegistrationToken{HostPool: "p", Hash: "rt-later",
			CreateTime: time.Now().Add(time.Second), ExpireTime: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RegisterHost(ctx, "rt-later", &vdibroker.RegisterRequest{HostName: "OFFICE-01"}, "c4", time.Now().Add(2*time.Second)); err != nil {
			t.Errorf("OFFICE-01 after office-01's delete, with a token issued after it: %v", err)
		}
	})
}

// TestHostNameKeyAgrees_RSEC: the key vdibroker.HostNameKey computes is
// the one each engine's index holds (hostNameKeySQL), for every character
// a host name may hold (ValidateName), first, inside and last, with and
// without trailing dots. A look-up of twins by the Go key (sameNameHost)
// finds what the index refuses only while the two agree.
func TestHostNameKeyAgrees_RSEC(t *testing.T) {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@._- "
	var names []string
	for _, c := range alphabet {
		names = append(names, "Hq"+string(c)+"zZ", "hQ"+string(c)+"Zz.")
		if c != ' ' {
			names = append(names, string(c)+"Hq", "hQ"+string(c), "Qh"+string(c)+".", "qH"+string(c)+"..")
		}
	}
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("p", vdibroker.Pooled))
		// One insert of them all (a PUT each is a synced commit each);
		// one name of each key, as the index takes no twin.
		var values []string
		seen := map[string]bool{}
		for _, name := range names {
			if err := vdibroker.ValidateName("name", name, vdibroker.MinHostNameLen, vdibroker.MaxHostNameLen); err != nil {
				t.Fatalf("%q: %v", name, err)
			}
			if key := vdibroker.HostNameKey(name); !seen[key] {
				seen[key] = true
				values = append(values, fmt.Sprintf(`('p', '%s', '', '["RDP"]', TRUE, TRUE, '[]', '{}', 0)`, name))
			}
		}
		if err := s.ExecRaw(ctx, `INSERT INTO session_hosts (host_pool, name, address, protocols, standard_features,
			allow_new_session, assigned_users, policy, create_time) VALUES `+strings.Join(values, ", ")); err != nil {
			t.Fatal(err)
		}
		keys, err := s.StoredNameKeys(ctx, "p")
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != len(values) {
			t.Fatalf("%d hosts stored, want %d", len(keys), len(values))
		}
		for name, got := range keys {
			if want := vdibroker.HostNameKey(name); got != want {
				t.Errorf("%q: the store's key %q, HostNameKey %q", name, got, want)
			}
		}
	})
}

// TestSameNameRegistrationsAtOnce_RD3: two agents register OFFICE-nn and
// office-nn at the same instant through two replicas of one database:
// exactly one is registered, the other is refused as above. Each engine
// decides by its unique index (the second PostgreSQL insert waits for
// the first's commit, fails, and its registration runs again and finds
// the twin); a check by reading alone would let both through.
func TestSameNameRegistrationsAtOnce_RD3(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		a, b := tg.open(t, store.Options{}), tg.open(t, store.Options{})
		mustPool(t, a, pool("p", vdibroker.Pooled))
		registrationToken(t, a, "p", "rt")
		const rounds = 20
		for i := range rounds {
			upper, lower := fmt.Sprintf("OFFICE-%02d", i), fmt.Sprintf("office-%02d", i)
			start := make(chan struct{})
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for j, r := range []struct {
				s    *store.DB
				name string
			}{{a, upper}, {b, lower}} {
				wg.Go(func() {
					<-start
					_, errs[j] = r.s.RegisterHost(ctx, "rt", &vdibroker.RegisterRequest{HostName: r.name}, fmt.Sprintf("cred-%d-%d", i, j), t0)
				})
			}
			close(start)
			wg.Wait()
			switch {
			case errs[0] == nil && errs[1] == nil:
				t.Fatalf("round %d: %s and %s both registered", i, upper, lower)
			case errs[0] == nil:
				wantSameNameConflict(t, errs[1], "hostName", upper)
			case errs[1] == nil:
				wantSameNameConflict(t, errs[0], "hostName", lower)
			default:
				t.Fatalf("round %d: neither registered: %v; %v", i, errs[0], errs[1])
			}
		}
		hosts, err := a.ListSessionHosts(ctx, "p")
		if err != nil || len(hosts) != rounds {
			t.Fatalf("%d hosts (%v), want %d: one of each pair", len(hosts), err, rounds)
		}
	})
}

// TestSameNameLookupUsesIndex_RD3: the look-up of a name's twins, made
// at every registration of a new host, probes the unique index of
// migration 00077 on each engine, not the pool's hosts one by one.
func TestSameNameLookupUsesIndex_RD3(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		plan, err := s.SameNamePlan(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(plan, "session_hosts_name_key") {
			t.Errorf("plan does not use session_hosts_name_key:\n%s", plan)
		}
	})
}

// TestDeletedNameLookupUsesIndex_RSEC: the look-up of a deleted host by
// its name's key, made at every registration of a new host, probes the
// index deleted_hosts_name_key of migration 00077 on each engine.
func TestDeletedNameLookupUsesIndex_RSEC(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		plan, err := s.DeletedNamePlan(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(plan, "deleted_hosts_name_key") {
			t.Errorf("plan does not use deleted_hosts_name_key:\n%s", plan)
		}
	})
}

// TestHostNameKeyMigration_RD3: a store at schema 76 that holds twins
// (written before names were compared ignoring case) migrates: nothing
// is renamed or lost, the oldest of each group keeps the name's key and
// the others are kept apart by their own name, the start logs each
// group, and a new twin of any of them is refused.
func TestHostNameKeyMigration_RD3(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			ctx := t.Context()
			var logs bytes.Buffer
			dsn, dir := "", t.TempDir()
			if engine == "postgres" {
				dsn = postgresSchemaDSN(t) // skips without PostgreSQL
			}
			open := func(log *slog.Logger) *store.DB {
				t.Helper()
				s, err := store.OpenWith(ctx, dsn, dir, log, store.Options{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			s := open(nil)
			mustPool(t, s, pool("p", vdibroker.Pooled))
			mustPool(t, s, pool("q", vdibroker.Pooled))
			registrationToken(t, s, "p", "rt")
			if err := s.MigrateDownTo(ctx, 76); err != nil {
				t.Fatal(err)
			}
			// p: office-01 (oldest), OFFICE-01 and office-01. (younger),
			// desk-02 and DESK-02 created at one instant (name breaks the
			// tie: DESK-02 sorts first); q: OFFICE-01 alone.
			for _, h := range []struct {
				pool, name string
				created    int
			}{
				{"p", "OFFICE-01", 2}, {"p", "office-01", 1}, {"p", "office-01.", 3},
				{"p", "desk-02", 5}, {"p", "DESK-02", 5}, {"p", "lone-03", 1}, {"q", "OFFICE-01", 9},
			} {
				if err := s.ExecRaw(ctx, fmt.Sprintf(`INSERT INTO session_hosts (host_pool, name, address, protocols, standard_features,
					allow_new_session, assigned_users, policy, create_time) VALUES ('%s', '%s', '', '["RDP"]', TRUE, TRUE, '[]', '{}', %d)`,
					h.pool, h.name, t0.Add(time.Duration(h.created)*time.Minute).UnixNano())); err != nil {
					t.Fatal(err)
				}
				if err := s.ExecRaw(ctx, fmt.Sprintf(`INSERT INTO host_counts (host_pool, name, sessions, connecting_sessions, new_sessions_allowed)
					VALUES ('%s', '%s', 0, 0, TRUE)`, h.pool, h.name)); err != nil {
					t.Fatal(err)
				}
			}
			s.Close()

			s = open(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
			if got, want := hostNames(t, s, "p"), "DESK-02 OFFICE-01 desk-02 lone-03 office-01 office-01."; got != want {
				t.Errorf("hosts of p after the migration: %q, want %q", got, want)
			}
			if got, want := hostNames(t, s, "q"), "OFFICE-01"; got != want {
				t.Errorf("hosts of q: %q, want %q", got, want)
			}
			for _, name := range []string{"OFFICE-01", "office-01", "office-01.", "desk-02", "DESK-02"} {
				if h, err := s.GetSessionHost(ctx, "p", name); err != nil || h.Name != name {
					t.Errorf("get %s: %+v, %v", name, h, err)
				}
			}
			groups, err := s.SameNameHosts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := fmt.Sprint(groups), "[[p DESK-02 desk-02] [p OFFICE-01 office-01 office-01.]]"; got != want {
				t.Errorf("same-name groups: %s, want %s", got, want)
			}
			for _, want := range []string{`hosts="DESK-02, desk-02"`, `hosts="OFFICE-01, office-01, office-01."`} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("the start's log does not name %s:\n%s", want, logs.String())
				}
			}
			// Which kept the key: office-01 and DESK-02, the only ones a
			// PostgreSQL or SQLite query finds without a tiebreak.
			if got, err := s.QueryInt(ctx, `SELECT count(*) FROM session_hosts WHERE name_key_tiebreak = '' AND name IN ('office-01', 'DESK-02')`); err != nil || got != 2 {
				t.Errorf("keepers with the name's key: %d, %v; want office-01 and DESK-02", got, err)
			}
			// A new twin of a group is refused, by the host that kept the
			// key; once that host is deleted, by one kept apart.
			register := func(name, cred string) error {
				_, err := s.RegisterHost(ctx, "rt", &vdibroker.RegisterRequest{HostName: name}, cred, t0)
				return err
			}
			wantSameNameConflict(t, register("Office-01", "c1"), "hostName", "office-01")
			if err := s.DeleteSessionHost(ctx, "p", "office-01", false); err != nil {
				t.Fatal(err)
			}
			wantSameNameConflict(t, register("office-01", "c2"), "hostName", "OFFICE-01")
			// With every twin gone, the group is no longer logged.
			for _, name := range []string{"OFFICE-01", "office-01.", "desk-02"} {
				if err := s.DeleteSessionHost(ctx, "p", name, false); err != nil {
					t.Fatal(err)
				}
			}
			if groups, err := s.SameNameHosts(ctx); err != nil || len(groups) != 0 {
				t.Errorf("same-name groups after the deletes: %v, %v", groups, err)
			}
			// The token was issued before the deletes: it does not bring
			// the machines back (R-SEC); one issued after them does.
			wantCode(t, register("Office-01", "c3"), vdibroker.EConflict)
			if err := s.CreateRegistrationToken(ctx, &vdibroker.RegistrationToken{HostPool: "p", Hash: "rt-later",
				CreateTime: time.Now().Add(time.Second), ExpireTime: time.Now().Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.RegisterHost(ctx, "rt-later", &vdibroker.RegisterRequest{HostName: "Office-01"}, "c3", time.Now().Add(2*time.Second)); err != nil {
				t.Errorf("Office-01 once its twins are gone: %v", err)
			}
		})
	}
}
