package store_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// tunnel is an admitted tunnel of user's session id, its token expiring a
// minute after t0.
func tunnel(token, user, id string) *vdibroker.GatewayTunnel {
	return &vdibroker.GatewayTunnel{TokenID: token, User: user, HostPool: "gw", Session: id, Gateway: "rdgw-1",
		Open: t0, Expiry: t0.Add(time.Minute), LiveUntil: t0.Add(24 * time.Hour)}
}

// TestGatewayTokenOnce_RGW4: a token id is admitted once, across two
// store instances (replicas) racing with it, and stays refused after its
// tunnel closed; a token for an ended session or another user's session
// is refused.
func TestGatewayTokenOnce_RGW4(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		a, b := tg.open(t, store.Options{}), tg.open(t, store.Options{})
		mustPool(t, a, pool("gw", vdibroker.Pooled))
		mustHost(t, a, "gw", "h1")
		id := mustCommit(t, a, placement("gw", "h1", "alice", 10))
		ctx := t.Context()

		// Eight admissions of one token id on two replicas at once: one wins.
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			s := []*store.DB{a, b}[i%2]
			wg.Go(func() { errs[i] = s.AdmitGatewayTunnel(ctx, tunnel("tok-1", "alice", id), 0, t0) })
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case vdibroker.ErrorCode(err) != vdibroker.EConflict:
				t.Errorf("a losing admission: %v, want Conflict", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d admissions of one token id succeeded, want 1", won)
		}
		if _, err := a.GatewayClosed(ctx, "gw", id, "tok-1", "rdgw-1", t0.Add(time.Second), false); err != nil {
			t.Fatal(err)
		}
		wantCode(t, b.AdmitGatewayTunnel(ctx, tunnel("tok-1", "alice", id), 0, t0.Add(2*time.Second)), vdibroker.EConflict)

		// Someone else's session, and a session that ended.
		wantCode(t, a.AdmitGatewayTunnel(ctx, tunnel("tok-2", "bob", id), 0, t0), vdibroker.ENotFound)
		if err := a.EndSession(ctx, "gw", id, "test", t0); err != nil {
			t.Fatal(err)
		}
		wantCode(t, a.AdmitGatewayTunnel(ctx, tunnel("tok-3", "alice", id), 0, t0), vdibroker.ENotFound)
		wantCode(t, a.AdmitGatewayTunnel(ctx, tunnel("tok-4", "alice", "no-such-session"), 0, t0), vdibroker.ENotFound)
	})
}

// TestGatewayTunnelsPerUser_RGW4: a user's open tunnels across gateways
// are bounded, across replicas at once; a closed tunnel, or one past its
// lifetime, no longer counts, and a refused admission leaves its token id
// free to try again.
func TestGatewayTunnelsPerUser_RGW4(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		a, b := tg.open(t, store.Options{}), tg.open(t, store.Options{})
		p := pool("gw", vdibroker.Personal) // several sessions of one user
		mustPool(t, a, p)
		var ids []string
		for i := range 4 {
			h := fmt.Sprintf("h%d", i)
			mustHost(t, a, "gw", h)
			c := placement("gw", h, "alice", 10)
			c.Pooled = false
			ids = append(ids, mustCommit(t, a, c))
		}
		ctx := t.Context()
		// Six tunnels of alice at once on two replicas, at most 3.
		var wg sync.WaitGroup
		errs := make([]error, 6)
		for i := range errs {
			s := []*store.DB{a, b}[i%2]
			wg.Go(func() {
				errs[i] = s.AdmitGatewayTunnel(ctx, tunnel(fmt.Sprintf("t%d", i), "alice", ids[i%len(ids)]), 3, t0)
			})
		}
		wg.Wait()
		var admitted []int
		for i, err := range errs {
			switch {
			case err == nil:
				admitted = append(admitted, i)
			case vdibroker.ErrorCode(err) != vdibroker.ETooManyRequests:
				t.Errorf("tunnel %d: %v, want TooManyRequests", i, err)
			}
		}
		if len(admitted) != 3 {
			t.Fatalf("admitted %v, want 3 of 6", admitted)
		}
		refused := -1
		for i := range errs {
			if errs[i] != nil {
				refused = i
				break
			}
		}
		// One closes: the refused token may open now.
		first := admitted[0]
		if _, err := a.GatewayClosed(ctx, "gw", ids[first%len(ids)], fmt.Sprintf("t%d", first), "rdgw-1", t0, false); err != nil {
			t.Fatal(err)
		}
		if err := b.AdmitGatewayTunnel(ctx, tunnel(fmt.Sprintf("t%d", refused), "alice", ids[refused%len(ids)]), 3, t0); err != nil {
			t.Fatalf("after a close: %v", err)
		}
		wantCode(t, a.AdmitGatewayTunnel(ctx, tunnel("t-more", "alice", ids[0]), 3, t0), vdibroker.ETooManyRequests)
		// Past their lifetime the others count no more (a gateway died).
		if err := a.AdmitGatewayTunnel(ctx, tunnel("t-late", "alice", ids[0]), 3, t0.Add(25*time.Hour)); err != nil {
			t.Fatalf("after the lifetime: %v", err)
		}
		// Another user is not limited by alice's.
		c := placement("gw", "h0", "bob", 10)
		c.Pooled = false
		if err := a.AdmitGatewayTunnel(ctx, tunnel("t-bob", "bob", mustCommit(t, a, c)), 3, t0); err != nil {
			t.Fatal(err)
		}
	})
}

// TestGatewayReachedAndClosed_RGW2_RGW3: a tunnel that reaches the host
// turns the Pending session Active at once and confirms it, and the
// session counts as connecting until its agent reports it (R-LI2,
// R-LI3); the tunnel's close turns it Disconnected, the close of an older
// tunnel does not, and an ended session stays ended. Reports of a token
// not admitted for the session are NotFound.
func TestGatewayReachedAndClosed_RGW2_RGW3(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		mustPool(t, s, pool("gw", vdibroker.Pooled))
		mustHost(t, s, "gw", "h1")
		id := mustCommit(t, s, placement("gw", "h1", "alice", 10))
		ctx := t.Context()
		wantCounts(t, s, "gw", "h1", 1, 1)
		if err := s.AdmitGatewayTunnel(ctx, tunnel("tok-1", "alice", id), 0, t0); err != nil {
			t.Fatal(err)
		}
		_, err := s.GatewayReached(ctx, "gw", id, "tok-other", "rdgw-1", t0)
		wantCode(t, err, vdibroker.ENotFound)
		_, err = s.GatewayReached(ctx, "gw", id, "tok-1", "rdgw-2", t0) // admitted through rdgw-1 (R-GW4)
		wantCode(t, err, vdibroker.ENotFound)
		_, err = s.GatewayClosed(ctx, "gw", "other-session", "tok-1", "rdgw-1", t0, false)
		wantCode(t, err, vdibroker.ENotFound)

		at := t0.Add(3 * time.Second)
		u, err := s.GatewayReached(ctx, "gw", id, "tok-1", "rdgw-1", at)
		if err != nil {
			t.Fatal(err)
		}
		got := session(t, s, "gw", id)
		if got.State != vdibroker.StateActive || !got.StateTime.Equal(at) || got.Gateway != "rdgw-1" || got.GatewayTime == nil || !got.GatewayTime.Equal(at) || !got.ConfirmedByGateway() {
			t.Fatalf("after the tunnel reached the host: %+v, want Active since %v through rdgw-1", got, at)
		}
		if u.State != got.State || u.Gateway != got.Gateway {
			t.Errorf("GatewayReached answered %+v, the store holds %+v", u, got)
		}
		wantCounts(t, s, "gw", "h1", 1, 1) // connecting until the agent says so

		// The agent's heartbeat before the user's logon: the session stays.
		if _, err := s.ApplyHeartbeat(ctx, "gw", "h1", &vdibroker.HeartbeatRequest{}, at.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if got := session(t, s, "gw", id); got.State != vdibroker.StateActive {
			t.Fatalf("a heartbeat without the session ended it: %+v", got)
		}
		wantCounts(t, s, "gw", "h1", 1, 1)
		// The agent reports the logon: no longer connecting, still confirmed.
		if _, err := s.ApplyHeartbeat(ctx, "gw", "h1", &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{
			{ID: "x1", User: "alice", State: vdibroker.StateActive}}}, at.Add(2*time.Second)); err != nil {
			t.Fatal(err)
		}
		got = session(t, s, "gw", id)
		if got.State != vdibroker.StateActive || got.AgentSessionID != "x1" || !got.ConfirmedByGateway() || got.Adopted {
			t.Fatalf("after the agent's report: %+v", got)
		}
		wantCounts(t, s, "gw", "h1", 1, 0)

		// A second tunnel (the user connected again) reaches the session,
		// then the first one's close comes: it changes nothing.
		tok2 := tunnel("tok-2", "alice", id)
		tok2.Gateway = "rdgw-2"
		if err := s.AdmitGatewayTunnel(ctx, tok2, 0, t0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GatewayReached(ctx, "gw", id, "tok-2", "rdgw-2", at.Add(3*time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GatewayClosed(ctx, "gw", id, "tok-1", "rdgw-1", at.Add(4*time.Second), false); err != nil {
			t.Fatal(err)
		}
		if got := session(t, s, "gw", id); got.State != vdibroker.StateActive || got.Gateway != "rdgw-2" {
			t.Fatalf("the older tunnel's close moved the session: %+v", got)
		}
		// Only the gateway that admitted a tunnel closes it (R-GW4).
		_, err = s.GatewayClosed(ctx, "gw", id, "tok-2", "rdgw-1", at.Add(5*time.Second), false)
		wantCode(t, err, vdibroker.ENotFound)
		if got := session(t, s, "gw", id); got.State != vdibroker.StateActive {
			t.Fatalf("another gateway's close moved the session: %+v", got)
		}
		u, err = s.GatewayClosed(ctx, "gw", id, "tok-2", "rdgw-2", at.Add(5*time.Second), false)
		if err != nil {
			t.Fatal(err)
		}
		if got := session(t, s, "gw", id); got.State != vdibroker.StateDisconnected || u.State != vdibroker.StateDisconnected || !got.StateTime.Equal(at.Add(5*time.Second)) {
			t.Fatalf("after the last tunnel closed: %+v (answered %+v), want Disconnected", got, u)
		}
		wantCounts(t, s, "gw", "h1", 1, 0)

		// An ended session stays ended whatever a gateway says.
		if err := s.AdmitGatewayTunnel(ctx, tunnel("tok-3", "alice", id), 0, t0); err != nil {
			t.Fatal(err)
		}
		if err := s.EndSession(ctx, "gw", id, "test", at.Add(6*time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GatewayReached(ctx, "gw", id, "tok-3", "rdgw-1", at.Add(7*time.Second)); err != nil {
			t.Fatal(err)
		}
		if got := session(t, s, "gw", id); got.State != vdibroker.StateLoggedOff {
			t.Fatalf("a gateway reopened an ended session: %+v", got)
		}
		wantCounts(t, s, "gw", "h1", 0, 0)
	})
}

// TestGatewaySessionNeverReported_RGW2: a session a gateway turned Active
// whose agent never reports it ends after pendingTimeoutSeconds since the
// tunnel reached the host (R-S3), counts included; one that closed before
// the agent saw it (Disconnected, unreported) likewise.
func TestGatewaySessionNeverReported_RGW2(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		mustPool(t, s, pool("gw", vdibroker.Pooled)) // pendingTimeoutSeconds 300
		mustHost(t, s, "gw", "h1")
		ctx := t.Context()
		alice := mustCommit(t, s, placement("gw", "h1", "alice", 10))
		bob := mustCommit(t, s, placement("gw", "h1", "bob", 10))
		for _, c := range []struct{ tok, user, id string }{{"ta", "alice", alice}, {"tb", "bob", bob}} {
			if err := s.AdmitGatewayTunnel(ctx, tunnel(c.tok, c.user, c.id), 0, t0); err != nil {
				t.Fatal(err)
			}
			if _, err := s.GatewayReached(ctx, "gw", c.id, c.tok, "rdgw-1", t0.Add(100*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.GatewayClosed(ctx, "gw", bob, "tb", "rdgw-1", t0.Add(100*time.Second), false); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, s, "gw", "h1", 2, 2)
		beat := func(at time.Duration) {
			t.Helper()
			if _, err := s.ApplyHeartbeat(ctx, "gw", "h1", &vdibroker.HeartbeatRequest{}, t0.Add(at)); err != nil {
				t.Fatal(err)
			}
		}
		beat(400 * time.Second) // 300 s after the tunnel: not over
		if a, b := session(t, s, "gw", alice), session(t, s, "gw", bob); a.State != vdibroker.StateActive || b.State != vdibroker.StateDisconnected {
			t.Fatalf("within the pending timeout: alice %s, bob %s", a.State, b.State)
		}
		beat(401 * time.Second)
		for _, id := range []string{alice, bob} {
			if u := session(t, s, "gw", id); u.State != vdibroker.StateLoggedOff || u.EndReason != vdibroker.EndPendingTimeout {
				t.Errorf("never reported: %+v, want LoggedOff PendingTimeout", u)
			}
		}
		wantCounts(t, s, "gw", "h1", 0, 0)
	})
}

// TestGatewayKeys_RGW6: keys come back newest first; of two replicas
// rotating at once one adds a key; only the newest kept are kept.
func TestGatewayKeys_RGW6(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		a, b := tg.open(t, store.Options{}), tg.open(t, store.Options{})
		ctx := t.Context()
		key := func(id string, at time.Time) vdibroker.GatewayKey {
			return vdibroker.GatewayKey{ID: id, Seed: []byte(id + "-seed-of-thirty-two-bytes-xxxxx")[:32], CreateTime: at}
		}
		if added, err := a.AddGatewayKey(ctx, key("k1", t0), time.Unix(0, 0), 3); err != nil || !added {
			t.Fatalf("first key: %v %v", added, err)
		}
		// Due at t0+1h on both replicas at once: one key.
		var wg sync.WaitGroup
		added := make([]bool, 2)
		for i, s := range []*store.DB{a, b} {
			wg.Go(func() {
				var err error
				added[i], err = s.AddGatewayKey(ctx, key(fmt.Sprintf("k2-%d", i), t0.Add(time.Hour)), t0, 3)
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if added[0] == added[1] {
			t.Fatalf("replicas rotating at once added %v, want one key", added)
		}
		for i, at := range []time.Duration{2 * time.Hour, 3 * time.Hour} {
			if _, err := b.AddGatewayKey(ctx, key(fmt.Sprintf("k%d", i+3), t0.Add(at)), time.Time{}, 3); err != nil {
				t.Fatal(err)
			}
		}
		keys, err := a.GatewayKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, k := range keys {
			ids = append(ids, k.ID)
			if string(k.Seed) != (k.ID + "-seed-of-thirty-two-bytes-xxxxx")[:32] {
				t.Errorf("key %s: seed %q", k.ID, k.Seed)
			}
		}
		if len(ids) != 3 || ids[0] != "k4" || ids[1] != "k3" || !keys[2].CreateTime.Equal(t0.Add(time.Hour)) {
			t.Fatalf("keys %v, want k4, k3 and the rotated k2 (the newest 3)", ids)
		}
	})
}

// TestGatewayKeyRevokeKeepsItsKey_RGW6: a revoke (keep 1) leaves the key
// it adds alone, even when another key's create time is later (a replica
// whose clock runs ahead made it, and a backup may hold it): keeping the
// newest kept that key and dropped the new one. A rotation (keep 3) keeps
// its key and the newest two others.
func TestGatewayKeyRevokeKeepsItsKey_RGW6(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		s := tg.open(t, store.Options{})
		ctx := t.Context()
		key := func(id string, at time.Time) vdibroker.GatewayKey {
			return vdibroker.GatewayKey{ID: id, Seed: []byte(id + "-seed-of-thirty-two-bytes-xxxxx")[:32], CreateTime: at}
		}
		ids := func() []string {
			t.Helper()
			keys, err := s.GatewayKeys(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, k := range keys {
				out = append(out, k.ID)
			}
			return out
		}
		for _, k := range []vdibroker.GatewayKey{key("old", t0.Add(-time.Hour)), key("ahead", t0.Add(time.Hour))} {
			if _, err := s.AddGatewayKey(ctx, k, time.Time{}, 3); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.AddGatewayKey(ctx, key("rot", t0), time.Time{}, 3); err != nil {
			t.Fatal(err)
		}
		if got := ids(); !slices.Equal(got, []string{"ahead", "rot", "old"}) {
			t.Fatalf("after a rotation: %v, want ahead, rot, old", got)
		}
		if _, err := s.AddGatewayKey(ctx, key("rot2", t0.Add(time.Minute)), time.Time{}, 3); err != nil {
			t.Fatal(err)
		}
		if got := ids(); !slices.Equal(got, []string{"ahead", "rot2", "rot"}) {
			t.Fatalf("after a second rotation: %v, want ahead, rot2, rot", got)
		}
		if _, err := s.AddGatewayKey(ctx, key("new", t0.Add(2*time.Minute)), time.Time{}, 1); err != nil {
			t.Fatal(err)
		}
		if got := ids(); !slices.Equal(got, []string{"new"}) {
			t.Errorf("after a revoke: %v, want the revoke's key alone", got)
		}
	})
}

// TestGatewayKeyRevokeRacesRotation_RGW6: a revoke on one replica and a
// scheduled rotation on another at once (its clock a second ahead) end
// with the revoke's key alone, whichever commits first: the rotation
// after it finds a key newer than its notBefore and adds none; the
// revoke after it drops the rotation's key.
func TestGatewayKeyRevokeRacesRotation_RGW6(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		a, b := tg.open(t, store.Options{}), tg.open(t, store.Options{})
		ctx := t.Context()
		key := func(id string, at time.Time) vdibroker.GatewayKey {
			return vdibroker.GatewayKey{ID: id, Seed: []byte(id + "-seed-of-thirty-two-bytes-xxxxx")[:32], CreateTime: at}
		}
		for i := range 10 {
			at := t0.Add(time.Duration(i) * 48 * time.Hour)
			if _, err := a.AddGatewayKey(ctx, key(fmt.Sprintf("due%d", i), at.Add(-24*time.Hour)), time.Time{}, 3); err != nil {
				t.Fatal(err)
			}
			revoke := fmt.Sprintf("revoke%d", i)
			var wg sync.WaitGroup
			wg.Go(func() {
				if _, err := a.AddGatewayKey(ctx, key(revoke, at), time.Time{}, 1); err != nil {
					t.Error(err)
				}
			})
			wg.Go(func() {
				// Due: the newest key is a day old (rotation every day).
				if _, err := b.AddGatewayKey(ctx, key(fmt.Sprintf("sched%d", i), at.Add(time.Second)), at.Add(time.Second-24*time.Hour), 3); err != nil {
					t.Error(err)
				}
			})
			wg.Wait()
			keys, err := b.GatewayKeys(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, k := range keys {
				ids = append(ids, k.ID)
			}
			if !slices.Equal(ids, []string{revoke}) {
				t.Fatalf("round %d: keys %v, want %s alone", i, ids, revoke)
			}
		}
	})
}

// TestPruneGatewayTunnels_RGW4: a record goes once its token expired and
// its tunnel closed or outlived its lifetime; until then its id stays
// refused.
func TestPruneGatewayTunnels_RGW4(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		mustPool(t, s, pool("gw", vdibroker.Personal))
		mustHost(t, s, "gw", "h1")
		ctx := t.Context()
		c := placement("gw", "h1", "alice", 10)
		c.Pooled = false
		id := mustCommit(t, s, c)
		for _, tok := range []string{"closed", "open", "young"} {
			g := tunnel(tok, "alice", id)
			if tok == "young" {
				g.Expiry = t0.Add(time.Hour)
			}
			if err := s.AdmitGatewayTunnel(ctx, g, 0, t0); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.GatewayClosed(ctx, "gw", id, "closed", "rdgw-1", t0, false); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GatewayClosed(ctx, "gw", id, "young", "rdgw-1", t0, false); err != nil {
			t.Fatal(err)
		}
		// Two minutes on: "closed" expired and closed; "open" is open;
		// "young" is closed but its token is still valid.
		n, err := s.PruneGatewayTunnels(ctx, t0.Add(2*time.Minute), 100)
		if err != nil || n != 1 {
			t.Fatalf("prune: %d %v, want 1", n, err)
		}
		wantCode(t, s.AdmitGatewayTunnel(ctx, tunnel("open", "alice", id), 0, t0), vdibroker.EConflict)
		wantCode(t, s.AdmitGatewayTunnel(ctx, tunnel("young", "alice", id), 0, t0), vdibroker.EConflict)
		// A day on, the open one outlived its lifetime, the young one expired.
		if n, err := s.PruneGatewayTunnels(ctx, t0.Add(25*time.Hour), 1); err != nil || n != 1 {
			t.Fatalf("prune with limit 1: %d %v", n, err)
		}
		if n, err := s.PruneGatewayTunnels(ctx, t0.Add(25*time.Hour), 100); err != nil || n != 1 {
			t.Fatalf("prune the rest: %d %v", n, err)
		}
	})
}

// TestGatewayRepeatedReportsAuditOnce_RGW4: a gateway's credential that
// repeats the reach and the close of one tunnel, or alternates the reach
// of two tunnels of a session, writes one audit entry per tunnel's reach
// and close, not one per report: the audit log an RD gateway can fill is
// bounded by the tunnels the broker admitted. A repeat changes nothing:
// a reach after the close does not turn the session Active again.
func TestGatewayRepeatedReportsAuditOnce_RGW4(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		mustPool(t, s, pool("gw", vdibroker.Pooled))
		mustHost(t, s, "gw", "h1")
		id := mustCommit(t, s, placement("gw", "h1", "alice", 10))
		ctx := t.Context()
		for _, tok := range []string{"tok-1", "tok-2"} {
			if err := s.AdmitGatewayTunnel(ctx, tunnel(tok, "alice", id), 0, t0); err != nil {
				t.Fatal(err)
			}
		}
		audited := func(action string) context.Context {
			return vdibroker.WithAudit(ctx, &vdibroker.AuditEntry{Time: t0, Principal: vdibroker.AuditPrincipal{Kind: "token", ID: "gw-token", Role: "Gateway"},
				Action: action, Target: "hostpools/gw/usersessions/" + id, HostPool: "gw"})
		}
		count := func(action string) int {
			t.Helper()
			list, err := s.ListAudit(ctx, vdibroker.AuditFilter{Action: action})
			if err != nil {
				t.Fatal(err)
			}
			return len(list)
		}
		// Each reported five times, alternating: tok-1, tok-2, tok-1, ...
		for i := range 10 {
			tok := []string{"tok-1", "tok-2"}[i%2]
			if _, err := s.GatewayReached(audited("gateway.tunnel.reached"), "gw", id, tok, "rdgw-1", t0.Add(time.Duration(i)*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		if got := count("gateway.tunnel.reached"); got != 2 {
			t.Errorf("%d reach entries for 2 tunnels reported 10 times, want 2", got)
		}
		if got := session(t, s, "gw", id); got.State != vdibroker.StateActive {
			t.Fatalf("after the reaches: %s", got.State)
		}
		// tok-2 reached last; its close disconnects, then every report
		// again of either tunnel changes nothing and audits nothing.
		for i := range 5 {
			for _, tok := range []string{"tok-2", "tok-1"} {
				if _, err := s.GatewayClosed(audited("gateway.tunnel.close"), "gw", id, tok, "rdgw-1", t0.Add(time.Minute), false); err != nil {
					t.Fatal(err)
				}
				if _, err := s.GatewayReached(audited("gateway.tunnel.reached"), "gw", id, tok, "rdgw-1", t0.Add(time.Minute+time.Duration(i)*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if got := count("gateway.tunnel.close"); got != 2 {
			t.Errorf("%d close entries for 2 tunnels closed 5 times each, want 2", got)
		}
		if got := count("gateway.tunnel.reached"); got != 2 {
			t.Errorf("%d reach entries after the closes, want still 2", got)
		}
		if got := session(t, s, "gw", id); got.State != vdibroker.StateDisconnected {
			t.Errorf("a reach reported again after the close: %s, want Disconnected", got.State)
		}
	})
}

// TestGatewayTunnelUserWithoutCase_RGW4: user names compare without case
// (R-E5), and so do a token's user and its session's: a reconnect as
// "Alice" to alice's session opens its tunnel, and the tunnel limit
// counts alice's tunnels under every spelling of her name together.
func TestGatewayTunnelUserWithoutCase_RGW4(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		var ids []string
		for _, p := range []string{"gw1", "gw2"} {
			mustPool(t, s, pool(p, vdibroker.Pooled))
			mustHost(t, s, p, "h1")
			ids = append(ids, mustCommit(t, s, placement(p, "h1", "alice", 10)))
		}
		g := tunnel("tok-1", "Alice", ids[0])
		g.HostPool = "gw1"
		if err := s.AdmitGatewayTunnel(ctx, g, 1, t0); err != nil {
			t.Fatalf("alice's session through a token of Alice: %v", err)
		}
		g = tunnel("tok-2", "ALICE", ids[1])
		g.HostPool = "gw2"
		wantCode(t, s.AdmitGatewayTunnel(ctx, g, 1, t0), vdibroker.ETooManyRequests)
	})
}

// TestLiveGatewayTunnels_RGW4: a gateway's check of its open tunnels
// answers only those admitted through it, not closed, whose session is
// open and the token's user's; a tunnel it holds open past its record's
// lifetime is renewed, so the record is not pruned under it.
func TestLiveGatewayTunnels_RGW4(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		mustPool(t, s, pool("gw", vdibroker.Pooled))
		mustHost(t, s, "gw", "h1")
		ctx := t.Context()
		alice := mustCommit(t, s, placement("gw", "h1", "alice", 10))
		bob := mustCommit(t, s, placement("gw", "h1", "bob", 10))
		other := tunnel("other-gw", "alice", alice)
		other.Gateway = "rdgw-2"
		for _, g := range []*vdibroker.GatewayTunnel{tunnel("live", "alice", alice), tunnel("closed", "alice", alice),
			tunnel("ended", "bob", bob), other, tunnel("as-bob", "alice", alice), tunnel("elsewhere", "alice", alice)} {
			if err := s.AdmitGatewayTunnel(ctx, g, 0, t0); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.GatewayClosed(ctx, "gw", alice, "closed", "rdgw-1", t0, false); err != nil {
			t.Fatal(err)
		}
		if err := s.EndSession(ctx, "gw", bob, "test", t0); err != nil {
			t.Fatal(err)
		}
		ask := []vdibroker.GatewayTunnel{*tunnel("live", "alice", alice), *tunnel("closed", "alice", alice),
			*tunnel("ended", "bob", bob), *tunnel("other-gw", "alice", alice), *tunnel("never", "alice", alice),
			*tunnel("as-bob", "bob", alice), *tunnel("elsewhere", "alice", bob)}
		got, err := s.LiveGatewayTunnels(ctx, "rdgw-1", ask, t0, t0.Add(48*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != "[live]" {
			t.Errorf("live tunnels: %v, want [live]", got)
		}
		// At t0+23h the record of "live" ends within the hour: renewed to
		// t0+48h, so a prune at t0+25h keeps it (its id stays used).
		if _, err := s.LiveGatewayTunnels(ctx, "rdgw-1", ask[:1], t0.Add(24*time.Hour+time.Minute), t0.Add(48*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.PruneGatewayTunnels(ctx, t0.Add(25*time.Hour), 100); err != nil {
			t.Fatal(err)
		}
		wantCode(t, s.AdmitGatewayTunnel(ctx, tunnel("live", "alice", alice), 0, t0.Add(25*time.Hour)), vdibroker.EConflict)
		if got, err := s.LiveGatewayTunnels(ctx, "rdgw-1", nil, t0, t0); err != nil || got != nil {
			t.Errorf("no tunnels: %v %v", got, err)
		}
	})
}

// TestLiveGatewayTunnelsDisconnected_RGW4: a session Disconnected, not
// ended (its user's tunnel that reached it closed, R-GW3), keeps its other
// open tunnel: only an ended session's tunnels are left out.
func TestLiveGatewayTunnelsDisconnected_RGW4(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		mustPool(t, s, pool("gw", vdibroker.Pooled))
		mustHost(t, s, "gw", "h1")
		ctx := t.Context()
		carol := mustCommit(t, s, placement("gw", "h1", "carol", 10))
		for _, tok := range []string{"first", "second"} {
			if err := s.AdmitGatewayTunnel(ctx, tunnel(tok, "carol", carol), 0, t0); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.GatewayReached(ctx, "gw", carol, "first", "rdgw-1", t0); err != nil {
			t.Fatal(err)
		}
		u, err := s.GatewayClosed(ctx, "gw", carol, "first", "rdgw-1", t0, false)
		if err != nil {
			t.Fatal(err)
		}
		if u.State != vdibroker.StateDisconnected {
			t.Fatalf("the session after its reaching tunnel closed: %s, want Disconnected", u.State)
		}
		got, err := s.LiveGatewayTunnels(ctx, "rdgw-1", []vdibroker.GatewayTunnel{*tunnel("second", "carol", carol)}, t0, t0.Add(48*time.Hour))
		if err != nil || fmt.Sprint(got) != "[second]" {
			t.Errorf("live tunnels of a Disconnected session: %v %v, want [second]", got, err)
		}
	})
}

// TestGatewayTunnelUserOfAnOlderReplica_RGW4: a tunnel an older replica
// admitted (before the tunnels' users were folded: during a rolling
// upgrade, or open since before it, for up to a day) stored the token's
// user as it was spelled; it still counts toward that user's limit when
// the same spelling comes again, as it does from one identity provider.
func TestGatewayTunnelUserOfAnOlderReplica_RGW4(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		var ids []string
		for _, p := range []string{"gw1", "gw2"} {
			mustPool(t, s, pool(p, vdibroker.Pooled))
			mustHost(t, s, p, "h1")
			ids = append(ids, mustCommit(t, s, placement(p, "h1", "Alice@Contoso.com", 10)))
		}
		// As an older replica wrote it: user_name as the token spelled it.
		if err := s.ExecRaw(ctx, fmt.Sprintf(`INSERT INTO gateway_tunnels (token_id, user_name, host_pool, session_id, gateway,
			open_time, expire_time, live_until, closed) VALUES ('tok-old', 'Alice@Contoso.com', 'gw1', '%s', 'rdgw-1', %d, %d, %d, FALSE)`,
			ids[0], t0.UnixNano(), t0.Add(time.Minute).UnixNano(), t0.Add(24*time.Hour).UnixNano())); err != nil {
			t.Fatal(err)
		}
		g := tunnel("tok-new", "Alice@Contoso.com", ids[1])
		g.HostPool = "gw2"
		wantCode(t, s.AdmitGatewayTunnel(ctx, g, 1, t0), vdibroker.ETooManyRequests)
	})
}

// TestGatewayRepeatedReportsAtOnce_RGW4: a gateway's report repeated
// while the first is still being written (a retry after its timeout),
// on two replicas at once, is audited once too: the tunnel's reach and
// close are claimed in one statement each, not read first and written
// after (two transactions both read "not reached" on PostgreSQL, each
// waited for the session's host, and each audited the reach).
func TestGatewayRepeatedReportsAtOnce_RGW4(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		a, b := tg.open(t, store.Options{}), tg.open(t, store.Options{})
		mustPool(t, a, pool("gw", vdibroker.Pooled))
		mustHost(t, a, "gw", "h1")
		id := mustCommit(t, a, placement("gw", "h1", "alice", 10))
		ctx := t.Context()
		if err := a.AdmitGatewayTunnel(ctx, tunnel("tok-1", "alice", id), 0, t0); err != nil {
			t.Fatal(err)
		}
		audited := func(action string) context.Context {
			return vdibroker.WithAudit(ctx, &vdibroker.AuditEntry{Time: t0, Principal: vdibroker.AuditPrincipal{Kind: "token", ID: "gw-token", Role: "Gateway"},
				Action: action, Target: "hostpools/gw/usersessions/" + id, HostPool: "gw"})
		}
		atOnce := func(report func(s *store.DB) error) {
			var wg sync.WaitGroup
			for i := range 8 {
				s := []*store.DB{a, b}[i%2]
				wg.Go(func() {
					if err := report(s); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
		}
		atOnce(func(s *store.DB) error {
			_, err := s.GatewayReached(audited("gateway.tunnel.reached"), "gw", id, "tok-1", "rdgw-1", t0.Add(time.Second))
			return err
		})
		atOnce(func(s *store.DB) error {
			_, err := s.GatewayClosed(audited("gateway.tunnel.close"), "gw", id, "tok-1", "rdgw-1", t0.Add(time.Minute), false)
			return err
		})
		for _, action := range []string{"gateway.tunnel.reached", "gateway.tunnel.close"} {
			list, err := a.ListAudit(ctx, vdibroker.AuditFilter{Action: action})
			if err != nil || len(list) != 1 {
				t.Errorf("%s reported 8 times at once: %d entries, %v; want 1", action, len(list), err)
			}
		}
	})
}
