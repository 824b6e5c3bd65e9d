package store_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestUserSessionsAcrossPools (R-U3): a user's open sessions in every
// pool, in any spelling of the name (R-E5), are one range of
// user_sessions_open_by_user (00050), never a walk of the sessions'
// history; ended sessions and other users' are not in the answer.
func TestUserSessionsAcrossPools(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		for _, p := range []string{"p1", "p2", "p3"} {
			mustPool(t, s, pool(p, vdibroker.Pooled))
			mustHost(t, s, p, "host00")
		}
		// Other users' open sessions in every pool, so that a walk of a
		// pool's or a host's open sessions costs what it would in a pod.
		for i := range 300 {
			mustCommit(t, s, placement(fmt.Sprintf("p%d", 1+i%3), "host00", fmt.Sprintf("user%04d", i), vdibroker.NoSessionLimit))
		}
		mustCommit(t, s, placement("p1", "host00", "Alice@Contoso.com", vdibroker.NoSessionLimit))
		mustCommit(t, s, placement("p2", "host00", "alice@contoso.com", vdibroker.NoSessionLimit))
		mustCommit(t, s, placement("p2", "host00", "bob@contoso.com", vdibroker.NoSessionLimit))
		ended := mustCommit(t, s, placement("p3", "host00", "ALICE@contoso.com", vdibroker.NoSessionLimit))
		if err := s.EndSession(ctx, "p3", ended, vdibroker.EndLoggedOffByAdmin, t0); err != nil {
			t.Fatal(err)
		}
		// After the sessions, so that PostgreSQL's statistics count them.
		if err := s.AddHistory(ctx, "p1", 1, 500, 20000); err != nil {
			t.Fatal(err)
		}
		f := vdibroker.SessionFilter{User: "ALICE@CONTOSO.COM"}
		list, err := s.ListUserSessions(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, us := range list {
			got = append(got, us.HostPool+"/"+us.User)
		}
		if strings.Join(got, ",") != "p1/Alice@Contoso.com,p2/alice@contoso.com" &&
			strings.Join(got, ",") != "p2/alice@contoso.com,p1/Alice@Contoso.com" {
			t.Errorf("alice's open sessions: %v; want p1's and p2's", got)
		}
		p, err := s.ListSessionsPlan(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(p, "user_sessions_open_by_user") || strings.Contains(p, "SCAN user_sessions") || strings.Contains(p, "Seq Scan") {
			t.Errorf("the plan of a user's sessions in every pool is not one range of user_sessions_open_by_user:\n%s", p)
		}
	})
}
