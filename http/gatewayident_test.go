package http_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker"
	"github.com/vdibroker/vdibroker/gateway"
	"github.com/vdibroker/vdibroker/gateway/tsgu"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestGatewayTokenIsOneGateway_RGW4: a Gateway token is one gateway's,
// by name, and the broker takes that name from the token, not from the
// reports. A real gateway reporting as rdgw-b with the token of rdgw-1
// has its client refused (credential_refused, the protocol's internal
// error) and the broker records nothing: the session is untouched and
// the token id unused, so the same .rdp then opens through rdgw-1. Its
// check is refused 403 naming the field gateway. A report naming the
// token's gateway in other case or with a trailing dot (as host names
// compare), or naming none (a gateway given no --name), is taken under
// the token's spelling. A
// Gateway token issued before tokens named their gateway (its row's
// gateway empty, as migration 00078 leaves it) and the admin token still
// report under any name (none: the subject), so an upgrade cuts no
// gateway off, and a
// check's answer warns them. Only a Gateway token is for a gateway.
func TestGatewayTokenIsOneGateway_RGW4(t *testing.T) {
	w := newGatewayWorld(t, broker.GatewayConfig{})
	ctx := context.Background()
	w.e.pool("gwid", nil)
	addr := w.addEchoHost(t, "gwid", "gwi001")
	c, err := w.e.admin.Connect(ctx, "gwid", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}

	// Gateway B, a real one on loopback, holds rdgw-1's token.
	reg := prometheus.NewRegistry()
	b, err := gateway.New(gateway.Config{Name: "rdgw-b", Verifier: w.keys, RequestBurst: 1000, Registry: reg,
		Broker: &gateway.HTTPBroker{URL: w.broker.URL, Token: w.broker.Token}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(b)
	srv.EnableHTTP2 = false
	srv.StartTLS()
	defer func() { srv.Close(); b.Close() }()
	viaB := &gwWorld{e: w.e, gwAddr: srv.Listener.Addr().String()}
	if _, err := viaB.dial(t, c.RDPFile, addr); !refusedWith(err, tsgu.EProxyInternalError) {
		t.Fatalf("through rdgw-b with rdgw-1's token: %v, want E_PROXY_INTERNALERROR", err)
	}
	if n := refusalCount(t, reg, "credential_refused"); n != 1 {
		t.Errorf("rdgw-b counted %v credential_refused refusals, want 1", n)
	}
	if u := w.session(t, "gwid", c.SessionID); u.State != vdibroker.StatePending || u.Gateway != "" || u.GatewayTime != nil {
		t.Errorf("a refused report moved the session: %s through %q", u.State, u.Gateway)
	}
	// Nothing recorded: the token id is unused, and opens through rdgw-1.
	conn, err := w.dial(t, c.RDPFile, addr)
	if err != nil {
		t.Fatalf("the same .rdp through rdgw-1 after rdgw-b's refusal: %v", err)
	}
	eventually(t, "the session Active through rdgw-1", func() bool {
		u := w.session(t, "gwid", c.SessionID)
		return u.State == vdibroker.StateActive && u.Gateway == "rdgw-1"
	})
	conn.Close()

	check := func(token, name string) (int, *vdibroker.Error, vdibroker.TunnelCheckAnswer) {
		t.Helper()
		status, ve, raw := rawDo(t, w.e, "POST", "/api/v1/gateway/tunnels/check", token, `{"gateway": "`+name+`", "tunnels": []}`)
		var a vdibroker.TunnelCheckAnswer
		if status == 200 {
			if err := json.Unmarshal(raw, &a); err != nil {
				t.Fatalf("check answer %s: %v", raw, err)
			}
		}
		return status, ve, a
	}
	if status, ve, _ := check(w.broker.Token, "rdgw-b"); status != 403 || ve == nil || ve.Field != "gateway" ||
		!strings.Contains(ve.Message, `for gateway "rdgw-1", not "rdgw-b"`) {
		t.Errorf("rdgw-1's token checking as rdgw-b: %d %+v, want 403 on the field gateway naming both", status, ve)
	}
	for _, name := range []string{"RDGW-1", "rdgw-1.", ""} {
		if status, _, a := check(w.broker.Token, name); status != 200 || a.Gateway != "rdgw-1" || len(a.Warnings) != 0 {
			t.Errorf("rdgw-1's token checking as %q: %d %+v, want 200 under rdgw-1, no warning", name, status, a)
		}
	}

	// A Gateway token from before tokens named their gateway.
	const oldSecret = "vdbt_from_an_earlier_release"
	if err := w.e.store.CreateToken(ctx, &vdibroker.Token{ID: "oldgw", Role: vdibroker.RoleGateway, Subject: "rdgw",
		Hash: vdibroker.HashSecret(oldSecret), CreateTime: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"rdgw-1": "rdgw-1", "rdgw-7": "rdgw-7", "": "rdgw"} {
		if status, _, a := check(oldSecret, name); status != 200 || a.Gateway != want || len(a.Warnings) != 1 ||
			!strings.Contains(a.Warnings[0], "for no gateway in particular") || !strings.Contains(a.Warnings[0], "token delete --id oldgw") {
			t.Errorf("a token without a gateway checking as %s: %d %+v, want 200 under that name with a warning", name, status, a)
		}
	}
	if status, _, a := check(adminToken, "rdgw-7"); status != 200 || a.Gateway != "rdgw-7" || len(a.Warnings) != 1 ||
		!strings.Contains(a.Warnings[0], "admin token") || !strings.Contains(a.Warnings[0], "--role Gateway") {
		t.Errorf("the admin token checking: %d %+v, want 200 with a warning to give a Gateway token", status, a)
	}
	list, err := w.e.admin.ListTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tk := range list {
		if tk.Role == vdibroker.RoleGateway {
			got[tk.Subject] = tk.Gateway
		}
	}
	if got["rdgw-1"] != "rdgw-1" || got["rdgw"] != "" || len(got) != 2 {
		t.Errorf("the Gateway tokens' gateways by subject: %v, want rdgw-1's its subject, the old one's none", got)
	}

	// Issuing: --gateway names the gateway; the other roles have none.
	named, err := w.e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleGateway, Subject: "edge team", Gateway: "rdgw-c"})
	if err != nil || named.Gateway != "rdgw-c" {
		t.Errorf("a Gateway token for rdgw-c: %+v, %v", named, err)
	}
	for _, body := range []string{
		`{"role": "Reader", "subject": "ops", "gateway": "rdgw-1"}`,
		`{"role": "Gateway", "subject": "rdgw", "gateway": " rdgw-1"}`,
	} {
		if status, ve, raw := rawDo(t, w.e, "POST", "/api/v1/tokens", adminToken, body); status != 400 || ve == nil || ve.Field != "gateway" {
			t.Errorf("POST /tokens %s: %d %s, want 400 on the field gateway", body, status, raw)
		}
	}
}

// refusalCount is vdibroker_gateway_refusals_total{reason} of a gateway's
// registry.
func refusalCount(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "vdibroker_gateway_refusals_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestGatewayTokenMovesOnlyItsTunnels_RGW4: the channel and close reports
// of a tunnel are taken from the gateway that admitted it only. The
// holder of rdgw-2's Gateway token who has seen a user's access token
// (the client tried it there too; an .rdp passed on) cannot claim the
// tunnel rdgw-1 admitted: its channel report does not turn the session
// Active through rdgw-2, and its close neither ends the tunnel's record
// (which would have rdgw-1's next check close the user's tunnel) nor
// turns the session Disconnected. Each is 404, as for a tunnel never
// admitted, and records nothing; rdgw-1's own reports still move the
// session.
func TestGatewayTokenMovesOnlyItsTunnels_RGW4(t *testing.T) {
	w := newGatewayWorld(t, broker.GatewayConfig{})
	ctx := context.Background()
	w.e.pool("gwown", nil)
	w.addEchoHost(t, "gwown", "gwo001")
	other, err := w.e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleGateway, Subject: "rdgw-2"})
	if err != nil {
		t.Fatal(err)
	}
	asOther := &gateway.HTTPBroker{URL: w.broker.URL, Token: other.Secret}

	// rdgw-1 admitted the tunnel; rdgw-2 reports it reached the host,
	// under no name (its token's) and under rdgw-1's (refused 403).
	ev, sid := w.opened(t, "gwown", "alice", time.Now())
	for _, name := range []string{"", "rdgw-2"} {
		theirs := ev
		theirs.Gateway = name
		if err := asOther.ChannelOpen(ctx, theirs); !errors.Is(err, gateway.ErrNotAdmitted) {
			t.Errorf("rdgw-2's channel report of rdgw-1's tunnel as %q: %v, want ErrNotAdmitted (404)", name, err)
		}
	}
	if u := w.session(t, "gwown", sid); u.State != vdibroker.StatePending || u.Gateway != "" {
		t.Errorf("rdgw-2's channel report moved the session: %s through %q", u.State, u.Gateway)
	}
	if err := w.broker.ChannelOpen(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if u := w.session(t, "gwown", sid); u.State != vdibroker.StateActive || u.Gateway != "rdgw-1" {
		t.Fatalf("rdgw-1's channel report: %s through %q, want Active through rdgw-1", u.State, u.Gateway)
	}

	// rdgw-2 reports its close.
	closed := ev
	closed.Gateway, closed.Reason, closed.Reached, closed.SentAt = "", "client", true, time.Now()
	if err := asOther.TunnelClose(ctx, closed); !errors.Is(err, gateway.ErrNotAdmitted) {
		t.Errorf("rdgw-2's close of rdgw-1's tunnel: %v, want ErrNotAdmitted (404)", err)
	}
	if u := w.session(t, "gwown", sid); u.State != vdibroker.StateActive {
		t.Errorf("rdgw-2's close moved the session to %s", u.State)
	}
	if open, err := w.broker.CheckTunnels(ctx, "rdgw-1", []gateway.TunnelEvent{ev}); err != nil || len(open) != 1 {
		t.Errorf("rdgw-1's check after rdgw-2's close: %v %v, want its tunnel to go on", open, err)
	}
	// rdgw-1's own close ends it.
	closed.Gateway = "rdgw-1"
	if err := w.broker.TunnelClose(ctx, closed); err != nil {
		t.Fatal(err)
	}
	if u := w.session(t, "gwown", sid); u.State != vdibroker.StateDisconnected {
		t.Errorf("rdgw-1's close: %s, want Disconnected", u.State)
	}
}

// TestGatewayTokenForTheSameGatewaySpelledOtherwiseWarns_RGW4: gateway
// names compare as host names do (vdibroker.SameGateway), so a Gateway
// token made for rdgw-1's name in other case or with a trailing dot is
// rdgw-1's too: its reports reach and close the tunnels rdgw-1 admitted.
// A token rotated so means that; two machines named so would share their
// tunnels, so the token is issued with a warning naming the other token
// and both spellings. The same spelling (a rotation, as before names
// folded), another name and a legacy token without a gateway warn of
// nothing.
func TestGatewayTokenForTheSameGatewaySpelledOtherwiseWarns_RGW4(t *testing.T) {
	w := newGatewayWorld(t, broker.GatewayConfig{})
	ctx := context.Background()
	w.e.pool("gwshare", nil)
	w.addEchoHost(t, "gwshare", "gws001")
	list, err := w.e.admin.ListTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := ""
	for _, tk := range list {
		if tk.Gateway == "rdgw-1" {
			first = tk.ID
		}
	}
	if err := w.e.store.CreateToken(ctx, &vdibroker.Token{ID: "oldgw", Role: vdibroker.RoleGateway, Subject: "gateways",
		Hash: vdibroker.HashSecret("vdbt_from_an_earlier_release"), CreateTime: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		subject, gateway string
		warn             bool
	}{
		{"rdgw-1 rotated", "rdgw-1", false},
		{"rdgw-10", "", false},
		{"gw-upper", "RDGW-1", true},
		{"gw-dot", "rdgw-1.", true},
	} {
		tr, err := w.e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleGateway, Subject: c.subject, Gateway: c.gateway})
		if err != nil {
			t.Fatal(err)
		}
		warned := false
		for _, m := range tr.Warnings {
			if strings.Contains(m, "token "+first+` ("rdgw-1"`) && strings.Contains(m, `gateway "`+c.gateway+`"`) &&
				strings.Contains(m, "compare as host names do") {
				warned = true
			}
		}
		if warned != c.warn || (!c.warn && len(tr.Warnings) != 0) {
			t.Errorf("a Gateway token for %q: warnings %q, want a warning naming token %s and rdgw-1: %v", cmp.Or(c.gateway, c.subject), tr.Warnings, first, c.warn)
		}
		if c.gateway != "rdgw-1." {
			continue
		}
		// What the warning says: that token closes rdgw-1's tunnel.
		ev, sid := w.opened(t, "gwshare", "alice", time.Now())
		if err := w.broker.ChannelOpen(ctx, ev); err != nil {
			t.Fatal(err)
		}
		closed := ev
		closed.Gateway, closed.Reason, closed.Reached, closed.SentAt = "", "client", true, time.Now()
		if err := (&gateway.HTTPBroker{URL: w.broker.URL, Token: tr.Secret}).TunnelClose(ctx, closed); err != nil {
			t.Errorf("the token for rdgw-1. closing rdgw-1's tunnel: %v, want it taken (one gateway)", err)
		}
		if u := w.session(t, "gwshare", sid); u.State != vdibroker.StateDisconnected {
			t.Errorf("after the close by rdgw-1.'s token: %s, want Disconnected", u.State)
		}
	}
}
