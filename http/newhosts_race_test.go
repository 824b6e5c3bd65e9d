package http_test

import (
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestNewHostLostToConcurrentWriterSpendsNone_RSEC (R-SEC, PostgreSQL):
// a registration that loses its host's name to another transaction
// writing it at once spends none of its token's new hosts, neither while
// it waits for that transaction (its insert of the name waits for the
// other's commit) nor after: it makes no host, or claims one it did not
// make. The other is held open by the test, as a clone of the same
// image registering the name (its host registered: the loser is 409) or
// an admin's PUT of the name (a pooled host never registered: the loser
// claims it, 201). Before, the loser spent one of the burst before its
// insert, held it while it waited, and kept it after a claim: two clones
// racing spent two for one host, and a third token's new host meanwhile
// was refused 429.
func TestNewHostLostToConcurrentWriterSpendsNone_RSEC(t *testing.T) {
	st := openRawStore(t, postgresDSN(t))
	now := time.Now().Truncate(time.Second)             // frozen: the bucket does not refill
	srv, admin := newHostsServer(t, st, now, 1, "race") // one new host: a spend shows
	ctx := t.Context()
	for _, c := range []struct {
		name, credential string // the other writer's host: registered or not
		wantCode         string // the loser's answer
	}{
		{"clone", "the-other-clone", vdibroker.EConflict},
		{"put", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok, err := admin.CreateRegistrationToken(ctx, "race", vdibroker.RegistrationTokenRequest{})
			if err != nil {
				t.Fatal(err)
			}
			// The other writer: the host's row and its counts row, as
			// RegisterHost and PutSessionHost insert them, not committed.
			other, err := st.raw.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Rollback()
			var otherPID int
			if err := other.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&otherPID); err != nil {
				t.Fatal(err)
			}
			var cred any
			if c.credential != "" {
				cred = c.credential
			}
			host := "race-" + c.name
			if _, err := other.ExecContext(ctx, `INSERT INTO session_hosts (host_pool, name, address, protocols, standard_features,
				allow_new_session, assigned_users, policy, create_time, credential_hash) VALUES ('race', $1, '', '["RDP"]', TRUE, TRUE, '[]', '{}', $2, $3)`,
				host, now.UnixNano(), cred); err != nil {
				t.Fatal(err)
			}
			if _, err := other.ExecContext(ctx, `INSERT INTO host_counts (host_pool, name) VALUES ('race', $1)`, host); err != nil {
				t.Fatal(err)
			}

			done := make(chan error, 1)
			go func() {
				_, err := admin.Register(ctx, &vdibroker.RegisterRequest{Token: tok.Token, HostName: host, Address: host + ".example.test:3389"})
				done <- err
			}()
			// The registration waits for the other writer (a condition
			// of the database, not a time).
			for waiting := 0; waiting == 0; {
				select {
				case err := <-done:
					t.Fatalf("the registration ended before it waited for the other writer: %v", err)
				default:
				}
				if err := st.raw.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`,
					otherPID).Scan(&waiting); err != nil {
					t.Fatal(err)
				}
			}
			if vhttp.NewHostsSpent(srv.Server, tok.ID) {
				t.Errorf("the token's new host spent while its registration waits for another writer of the name")
			}
			if err := other.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := <-done; vdibroker.ErrorCode(err) != c.wantCode {
				t.Fatalf("the registration that lost the name: %v, want %q", err, c.wantCode)
			}
			if vhttp.NewHostsSpent(srv.Server, tok.ID) {
				t.Errorf("the token's new host spent by a registration that made no host")
			}
			// The token's one new host is still there, and one only.
			if _, err := admin.Register(ctx, &vdibroker.RegisterRequest{Token: tok.Token, HostName: host + "-next"}); err != nil {
				t.Errorf("the token's new host after the race: %v", err)
			}
			if _, err := admin.Register(ctx, &vdibroker.RegisterRequest{Token: tok.Token, HostName: host + "-over"}); vdibroker.ErrorCode(err) != vdibroker.ETooManyRequests {
				t.Errorf("a second new host: %v, want TooManyRequests", err)
			}
		})
	}
}
