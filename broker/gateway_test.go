package broker

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/gatewaytoken"
	"github.com/vdibroker/vdibroker/placement"
	"github.com/vdibroker/vdibroker/store"
)

var tokenLine = regexp.MustCompile(`gatewayaccesstoken:s:(\S+)\r\n`)

// gatewayFixture is a service on a real SQLite store, on a fake clock,
// going through the gateway rdgw.example.test, with a pool "gwp" of one
// host h1 that heartbeated.
func gatewayFixture(t *testing.T, cfg GatewayConfig) (*Service, *store.DB, *clocktesting.FakeClock) {
	t.Helper()
	ctx := t.Context()
	st, err := store.OpenWith(ctx, "", t.TempDir(), nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fc := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	cfg.HostName = "rdgw.example.test"
	// The maintenance tick never comes: the test calls gatewayMaintain.
	svc := New(Config{Store: st, Clock: fc, MaintenanceInterval: 10000 * time.Hour, Gateway: cfg})
	t.Cleanup(func() { svc.Close() })
	if _, _, err := svc.StorePool(ctx, "gwp", nil, vdibroker.NewHostPool("gwp"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutSessionHost(ctx, &vdibroker.SessionHost{HostPool: "gwp", Name: "h1", Address: "10.0.0.1:3389",
		Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true, CreateTime: fc.Now()}); err != nil {
		t.Fatal(err)
	}
	heartbeat(t, svc, "gwp", "h1")
	return svc, st, fc
}

// keyOf connects user (h1 heartbeats first) and returns the key id the answer's token is
// signed with, and the token.
func keyOf(t *testing.T, svc *Service, user string) (kid, tok string) {
	t.Helper()
	heartbeat(t, svc, "gwp", "h1") // alive whatever the clock did
	a, err := svc.Connect(t.Context(), "gwp", vdibroker.ConnectRequest{User: user}, "")
	if err != nil {
		t.Fatal(err)
	}
	m := tokenLine.FindStringSubmatch(a.RDPFile)
	if m == nil {
		t.Fatalf("no token in:\n%s", a.RDPFile)
	}
	return strings.Split(m[1], ".")[1], m[1]
}

// published returns the key ids of the service's JWKS and the key set.
func published(t *testing.T, svc *Service) (*gatewaytoken.KeySet, string) {
	t.Helper()
	doc, err := svc.GatewayKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ks, err := gatewaytoken.ParseJWKS(doc)
	if err != nil {
		t.Fatal(err)
	}
	return ks, strings.Join(ks.KeyIDs(), ",")
}

// TestGatewayKeyRotation_RGW6: the first key signs at once; a rotated key
// is published at once and signs only after the publish delay, while the
// previous one stays published, so a token signed just before the
// rotation still verifies; the store keeps three keys.
func TestGatewayKeyRotation_RGW6(t *testing.T) {
	cfg := GatewayConfig{HostName: "rdgw.example.test", KeyRotation: 24 * time.Hour, PublishDelay: 5 * time.Minute}
	svc, st, fc := gatewayFixture(t, cfg)
	ctx := t.Context()
	k1, tok1 := keyOf(t, svc, "u1")
	// A second replica on the same store.
	other := New(Config{Store: st, Clock: fc, MaintenanceInterval: 10000 * time.Hour, Gateway: cfg})
	t.Cleanup(func() { other.Close() })
	if _, ids := published(t, other); ids != k1 {
		t.Fatalf("the other replica publishes %s, want %s", ids, k1)
	}
	if _, ids := published(t, svc); ids != k1 {
		t.Fatalf("published %s, want the first key %s", ids, k1)
	}
	svc.gatewayMaintain(ctx) // not due: nothing
	if _, ids := published(t, svc); ids != k1 {
		t.Fatalf("published %s before the rotation was due", ids)
	}

	fc.Step(24 * time.Hour)
	svc.gatewayMaintain(ctx)
	other.gatewayMaintain(ctx) // due there too: no second key
	ks, ids := published(t, svc)
	if len(ks.KeyIDs()) != 2 || !strings.Contains(ids, k1) {
		t.Fatalf("after the rotation: published %s, want %s and a new key", ids, k1)
	}
	// A token of the old key, issued before, still verifies (a client
	// on its way to the gateway is not refused).
	if _, err := ks.Verify(tok1, fc.Now().Add(-24*time.Hour)); err != nil {
		t.Errorf("a token of the previous key no longer verifies: %v", err)
	}
	if k, _ := keyOf(t, svc, "u2"); k != k1 {
		t.Errorf("signed with %s within the publish delay, want the old key %s", k, k1)
	}
	fc.Step(5 * time.Minute)
	k2, _ := keyOf(t, svc, "u3")
	if k2 == k1 || !strings.Contains(ids, k2) {
		t.Errorf("after the publish delay signed with %s, want the new key of %s", k2, ids)
	}

	// Two more rotations: three keys kept, the first gone.
	for range 2 {
		fc.Step(24 * time.Hour)
		svc.gatewayMaintain(ctx)
	}
	if ks, ids := published(t, svc); len(ks.KeyIDs()) != 3 || strings.Contains(ids, k1) || !strings.Contains(ids, k2) {
		t.Errorf("after three rotations published %s, want three keys with %s and without %s", ids, k2, k1)
	}
	// An admin's rotation: published now, signing after the delay.
	before, _ := keyOf(t, svc, "u4")
	if err := svc.RotateGatewayKey(ctx, false); err != nil {
		t.Fatal(err)
	}
	if k, _ := keyOf(t, svc, "u5"); k != before {
		t.Errorf("an admin's new key signs at once (%s, want %s until the delay passed)", k, before)
	}
}

// TestGatewayKeyRevoke_RGW6: an admin's rotation with revoke (a key that
// leaked) signs at once with a new key, the only one published and
// kept; the other replica drops the old keys at its next read of them;
// a token of an old key no longer names a token the broker issued, so
// its tunnel is closed at its gateway's next check.
func TestGatewayKeyRevoke_RGW6(t *testing.T) {
	cfg := GatewayConfig{HostName: "rdgw.example.test", KeyRotation: 24 * time.Hour, PublishDelay: 5 * time.Minute}
	svc, st, fc := gatewayFixture(t, cfg)
	ctx := t.Context()
	other := New(Config{Store: st, Clock: fc, MaintenanceInterval: 10000 * time.Hour, Gateway: cfg})
	t.Cleanup(func() { other.Close() })
	old, oldTok := keyOf(t, svc, "u1")
	fc.Step(24 * time.Hour)
	svc.gatewayMaintain(ctx) // a scheduled rotation: two keys
	if ks, _ := published(t, other); len(ks.KeyIDs()) != 2 {
		t.Fatalf("before the revoke the other replica publishes %v, want two keys", ks.KeyIDs())
	}
	before, _ := published(t, svc)
	oldClaims, err := before.Verify(oldTok, fc.Now().Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}

	fc.Step(time.Second)
	if err := svc.RotateGatewayKey(ctx, true); err != nil {
		t.Fatal(err)
	}
	ks, ids := published(t, svc)
	if len(ks.KeyIDs()) != 1 || strings.Contains(ids, old) || slices.Contains(before.KeyIDs(), ids) {
		t.Fatalf("after the revoke published %s, want one new key, neither of %v", ids, before.KeyIDs())
	}
	if k, _ := keyOf(t, svc, "u2"); k != ids {
		t.Errorf("after the revoke signed with %s, want the new key %s at once", k, ids)
	}
	stored, err := st.GatewayKeys(ctx)
	if err != nil || len(stored) != 1 || stored[0].ID != ids {
		t.Errorf("stored keys %v %v, want %s alone", stored, err, ids)
	}
	rep := &vdibroker.TunnelReport{TokenID: oldClaims.ID, User: oldClaims.User, Session: oldClaims.Session, Pool: oldClaims.Pool,
		Host: oldClaims.Host, Expiry: time.Unix(oldClaims.Expiry, 0)}
	if ok, err := svc.issued(ctx, rep); err != nil || ok {
		t.Errorf("a token of the revoked key: issued %v %v, want not the broker's", ok, err)
	}
	fc.Step(gatewayKeysTTL)
	if _, ids2 := published(t, other); ids2 != ids {
		t.Errorf("the other replica after its keys' TTL publishes %s, want %s alone", ids2, ids)
	}
	if k, _ := keyOf(t, other, "u3"); k != ids {
		t.Errorf("the other replica signs with %s, want %s", k, ids)
	}
}

// TestStartVMOnConnectThroughGateway_RGW5 (R-A4): through a gateway, the
// connect that starts a host gets a Pending session on it at once and a
// token that asks the gateway to wait for the host; its decision record
// says so. A user who connects while that host starts for someone else
// is answered HostStarting as before, and a pool that goes straight to
// its hosts keeps R-A4's 503.
func TestStartVMOnConnectThroughGateway_RGW5(t *testing.T) {
	svc, st, _, p := powerFixture(t, vdibroker.Pooled, 1, 2)
	svc.gw = newGatewaySide(GatewayConfig{HostName: "rdgw.example.test"})
	ctx := t.Context()
	a, err := svc.Connect(ctx, "pwr", vdibroker.ConnectRequest{User: "alice"}, "")
	if err != nil {
		t.Fatalf("connect through the gateway while every host is stopped: %v", err)
	}
	if !a.Created || a.State != vdibroker.StatePending || a.SessionHost != "h1" || powerOf(t, st, "pwr", "h1") != vdibroker.PowerStarting {
		t.Fatalf("answer %+v, h1 %s; want a new Pending session on h1, Starting", a.ConnectResponse, powerOf(t, st, "pwr", "h1"))
	}
	tok := tokenLine.FindStringSubmatch(a.RDPFile)
	if tok == nil {
		t.Fatalf("no token:\n%s", a.RDPFile)
	}
	ks, _ := published(t, svc)
	c, err := ks.Verify(tok[1], time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// pendingTimeoutSeconds (300) is below the start timeout (10 min).
	if c.Host != "h1:3389" || c.StartWaitSeconds != 300 {
		t.Errorf("claims %+v, want host h1:3389 and a wait of 300 s", c)
	}
	rec, err := svc.Placement(ctx, "pwr", a.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	var e placement.Explain
	if err := json.Unmarshal(rec, &e); err != nil {
		t.Fatal(err)
	}
	if !e.StartedOnConnect || e.Chosen != "h1" || e.NoCapacityReason == "" {
		t.Errorf("decision record %+v, want started on connect on h1 with the no-capacity reason", e)
	}
	if h, _ := st.GetSessionHost(ctx, "pwr", "h1"); h.Sessions != 1 || h.ConnectingSessions != 1 {
		t.Errorf("h1 counts %d/%d, want 1 session connecting", h.Sessions, h.ConnectingSessions)
	}
	// bob: h1 (limit 1) is alice's; h2 starts for him, and he waits too.
	b, err := svc.Connect(ctx, "pwr", vdibroker.ConnectRequest{User: "bob"}, "")
	if err != nil || b.SessionHost != "h2" {
		t.Fatalf("bob: %+v %v, want a session on h2, started for him", b, err)
	}
	// carol: both hosts starting, both full: HostStarting.
	if _, err := svc.Connect(ctx, "pwr", vdibroker.ConnectRequest{User: "carol"}, ""); vdibroker.ErrorCode(err) != vdibroker.EHostStarting {
		t.Errorf("carol: %v, want HostStarting", err)
	}

	// The same pool straight to its hosts: R-A4's 503.
	svc2, st2, _, _ := powerFixture(t, vdibroker.Pooled, 1, 1)
	svc2.gw = newGatewaySide(GatewayConfig{HostName: "rdgw.example.test"})
	p.GatewayUsage = vdibroker.GatewayUsageDirect
	if _, _, err := svc2.StorePool(ctx, "pwr", nil, p, false); err != nil {
		t.Fatal(err)
	}
	if _, err := svc2.Connect(ctx, "pwr", vdibroker.ConnectRequest{User: "alice"}, ""); vdibroker.ErrorCode(err) != vdibroker.EHostStarting {
		t.Errorf("a Direct pool: %v, want HostStarting", err)
	}
	if powerOf(t, st2, "pwr", "h1") != vdibroker.PowerStarting {
		t.Errorf("the Direct pool's host was not started")
	}
}

// TestGatewayReportChecks_RGW4: the service takes a report only for a
// token it issued, with the claims it issued it with, within the token's
// window: a report after the token expired is refused even where the id
// was never used (its record may be pruned already).
func TestGatewayReportChecks_RGW4(t *testing.T) {
	svc, _, fc := gatewayFixture(t, GatewayConfig{})
	ctx := t.Context()
	_, tok := keyOf(t, svc, "alice")
	ks, _ := published(t, svc)
	c, err := ks.Verify(tok, fc.Now())
	if err != nil {
		t.Fatal(err)
	}
	r := func() *vdibroker.TunnelReport {
		return &vdibroker.TunnelReport{TokenID: c.ID, User: c.User, Session: c.Session, Pool: c.Pool, Host: c.Host,
			Gateway: "rdgw-1", At: fc.Now(), Expiry: time.Unix(c.Expiry, 0)}
	}
	other := r()
	other.Session = "another-session"
	if err := svc.TunnelOpen(ctx, other); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("a report naming another session: %v, want NotFound", err)
	}
	fc.Step(vdibroker.DefaultGatewayTokenTTL + gatewaytoken.Leeway + time.Second)
	if err := svc.TunnelOpen(ctx, r()); vdibroker.ErrorCode(err) != vdibroker.ENotFound || !strings.Contains(err.Error(), "expired") {
		t.Errorf("a report after the token expired: %v, want NotFound naming the expiry", err)
	}
	fc.Step(-vdibroker.DefaultGatewayTokenTTL)
	if err := svc.TunnelOpen(ctx, r()); err != nil {
		t.Errorf("within the token's window: %v", err)
	}
}

// TestGatewayRefusalsBounded_RSEC: a gateway's refused reports are caused
// by its clients, so they go to the bounded refusal audit per client
// address, whatever the gateway's credential: one client's flood is one
// entry whole and one summary; many clients' together write no more than
// a window's budget (2 × RefusalsPerWindow + 1 entries).
func TestGatewayRefusalsBounded_RSEC(t *testing.T) {
	svc, st, fc := gatewayFixture(t, GatewayConfig{})
	gw := &vdibroker.Principal{Role: vdibroker.RoleGateway, Subject: "rdgw-1", TokenID: "gwtoken1", Kind: vdibroker.PrincipalToken}
	ctx := vdibroker.WithPrincipal(t.Context(), gw)
	forged := func(client string) *vdibroker.TunnelReport {
		return &vdibroker.TunnelReport{TokenID: "forged-" + client, User: "alice", Session: "s1", Pool: "gwp", Host: "10.0.0.1:3389",
			Client: client, Gateway: "rdgw-1", At: fc.Now(), Expiry: fc.Now().Add(time.Minute)}
	}
	count := func(action string) int {
		t.Helper()
		entries, err := st.ListAudit(t.Context(), vdibroker.AuditFilter{Action: action, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	// One client, 200 forged tokens: one entry whole.
	for range 200 {
		if err := svc.TunnelOpen(ctx, forged("198.51.100.7")); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			t.Fatalf("a forged token id: %v, want NotFound", err)
		}
	}
	if n := count("gateway.tunnel.open"); n != 1 {
		t.Errorf("one client's 200 refused reports wrote %d entries whole, want 1", n)
	}
	// 100 more clients, one refusal each: the window's budget is 20.
	for i := range 100 {
		_ = svc.TunnelOpen(ctx, forged(fmt.Sprintf("203.0.113.%d", i)))
	}
	if n := count("gateway.tunnel.open"); n != vdibroker.RefusalsPerWindow {
		t.Errorf("101 clients' refused reports wrote %d entries whole, want %d", n, vdibroker.RefusalsPerWindow)
	}
	fc.Step(vdibroker.RefusalWindow)
	svc.flushRefusals(t.Context())
	sums, err := st.ListAudit(t.Context(), vdibroker.AuditFilter{Action: vdibroker.RefusalSummaryAction, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) > vdibroker.RefusalsPerWindow+1 {
		t.Errorf("%d summaries, want at most %d", len(sums), vdibroker.RefusalsPerWindow+1)
	}
	// Every refusal is in the audit: written whole, or counted in a
	// summary (the flood's own, or the other addresses').
	counted := 0
	for _, e := range sums {
		var n int
		if _, err := fmt.Sscanf(e.Error, "%d more refused requests", &n); err != nil {
			t.Fatalf("summary %q", e.Error)
		}
		counted += n
	}
	if want := 300 - vdibroker.RefusalsPerWindow; counted != want {
		t.Errorf("the summaries count %d refusals, want %d", counted, want)
	}
}
