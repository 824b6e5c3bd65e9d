package http_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker"
	"github.com/vdibroker/vdibroker/gateway"
	"github.com/vdibroker/vdibroker/gateway/tsgu"
	"github.com/vdibroker/vdibroker/gatewaytoken"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/echotest"
	"github.com/vdibroker/vdibroker/internal/pgtest"
)

// gwWorld is a broker with a server-wide gateway, a real vdibroker
// gateway (package gateway, on a TLS listener on loopback) that reads the
// broker's keys from its URL and reports to it over HTTP with a Gateway
// token, and session hosts that are echo servers on loopback.
type gwWorld struct {
	e      *env
	gw     *gateway.Gateway
	gwAddr string
	broker *gateway.HTTPBroker // the gateway's reports
	keys   *gatewaytoken.Keyring
	reg    *prometheus.Registry // the gateway's metrics
}

func newGatewayWorld(t *testing.T, cfg broker.GatewayConfig) *gwWorld {
	return newGatewayWorldWith(t, envOptions{maintenance: time.Hour, gateway: cfg})
}

func newGatewayWorldWith(t *testing.T, o envOptions) *gwWorld {
	t.Helper()
	o.gateway.HostName = "rdgw.example.test"
	e := newEnvWith(t, o)
	ctx := context.Background()
	tr, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleGateway, Subject: "rdgw-1"})
	if err != nil {
		t.Fatal(err)
	}
	w := &gwWorld{e: e, broker: &gateway.HTTPBroker{URL: e.urls[0] + "/api/v1/gateway/tunnels", Token: tr.Secret}}
	// The gateway reads the keys from the broker, as --keys-url does.
	if w.keys, err = gatewaytoken.NewKeyring(ctx, gatewaytoken.URLSource{URL: e.urls[0] + "/api/v1/gateway/keys"}, 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	w.reg = prometheus.NewRegistry()
	w.gw, err = gateway.New(gateway.Config{Name: "rdgw-1", Verifier: w.keys, Broker: w.broker, RequestBurst: 1000,
		Clock: o.gatewayClock, Registry: w.reg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(w.gw)
	srv.EnableHTTP2 = false
	srv.StartTLS()
	t.Cleanup(func() { srv.Close(); w.gw.Close() })
	w.gwAddr = srv.Listener.Addr().String()
	return w
}

// addEchoHost registers host in pool at an echo server's address and
// heartbeats it once.
func (w *gwWorld) addEchoHost(t *testing.T, pool, host string) string {
	t.Helper()
	rt, err := w.e.admin.CreateRegistrationToken(context.Background(), pool, vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	addr := echotest.Listen(t)
	res, err := w.e.admin.Register(context.Background(), &vdibroker.RegisterRequest{Token: rt.Token, HostName: host, Address: addr, Protocols: []string{"RDP"}})
	if err != nil {
		t.Fatal(err)
	}
	w.e.mu.Lock()
	w.e.agents[host] = res.Credential
	w.e.mu.Unlock()
	w.e.heartbeat(host)
	return addr
}

var tokenLine = regexp.MustCompile(`(?m)^gatewayaccesstoken:s:(\S+)\r$`)

// dial opens a tunnel through the gateway with the token of an .rdp file.
func (w *gwWorld) dial(t *testing.T, rdpFile, target string) (*gateway.ClientConn, error) {
	t.Helper()
	m := tokenLine.FindStringSubmatch(rdpFile)
	if m == nil {
		t.Fatalf("no gatewayaccesstoken in:\n%s", rdpFile)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return gateway.Dial(ctx, gateway.DialConfig{Gateway: w.gwAddr, TLSConfig: &tls.Config{InsecureSkipVerify: true},
		Token: m[1], Target: target, ClientName: "test"})
}

func (w *gwWorld) session(t *testing.T, pool, id string) *vdibroker.UserSession {
	t.Helper()
	u, err := w.e.admin.GetUserSession(context.Background(), pool, id)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// eventually waits for cond, bounded: the gateway reports a close after
// its tunnel's pumps end, on its own goroutine.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// opened connects user in pool through the gateway and reports the open
// of its token's tunnel as the gateway would, at at, from 192.0.2.7; it
// returns the report and the session's id.
func (w *gwWorld) opened(t *testing.T, pool, user string, at time.Time) (gateway.TunnelEvent, string) {
	t.Helper()
	ctx := context.Background()
	c, err := w.e.admin.Connect(ctx, pool, vhttp.ConnectRequest{User: user})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := w.keys.Verify(tokenLine.FindStringSubmatch(c.RDPFile)[1], time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ev := gateway.TunnelEvent{TokenID: claims.ID, User: claims.User, Session: claims.Session, Pool: claims.Pool, Host: claims.Host,
		Client: "192.0.2.7", Gateway: "rdgw-1", At: at, Expiry: time.Unix(claims.Expiry, 0)}
	if err := w.broker.TunnelOpen(ctx, ev); err != nil {
		t.Fatal(err)
	}
	return ev, c.SessionID
}

// echoed sends four bytes through conn to its echo host and wants them
// back.
func echoed(t *testing.T, conn io.ReadWriter) {
	t.Helper()
	go conn.Write([]byte("rdp!"))
	got := make([]byte, 4)
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != "rdp!" {
		t.Fatalf("through the tunnel: %q %v", got, err)
	}
}

// TestGatewayConnectAndTunnel_RGW1_RGW2_RGW3: a connect in a pool that
// goes through the server's gateway answers an .rdp that names it and
// holds a token the gateway verifies with the keys the broker publishes;
// the tunnel reaches the host and the session is Active at once (no
// heartbeat since the connect), confirmed, still connecting for R-LI3,
// and its decision record says through which gateway; the tunnel's close
// turns it Disconnected; a reconnect's new token reaches the same
// session; a used token, a token for another host and a pool set to
// Direct are refused or send no token; every step is audited.
func TestGatewayConnectAndTunnel_RGW1_RGW2_RGW3(t *testing.T) {
	w := newGatewayWorld(t, broker.GatewayConfig{})
	ctx := context.Background()
	w.e.pool("gwpool", map[string]any{"idleSessionLimitMinutes": 20, "activeSessionLimitMinutes": 600})
	addr := w.addEchoHost(t, "gwpool", "gwh001")

	c, err := w.e.admin.Connect(ctx, "gwpool", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if c.State != vdibroker.StatePending || c.Gateway != "rdgw.example.test" {
		t.Fatalf("connect: %+v, want Pending through rdgw.example.test", c)
	}
	for _, line := range []string{"full address:s:" + addr + "\r\n", "gatewayhostname:s:rdgw.example.test\r\n", "gatewayusagemethod:i:1\r\n",
		"gatewaycredentialssource:i:5\r\n", "gatewayprofileusagemethod:i:1\r\n"} {
		if !strings.Contains(c.RDPFile, line) {
			t.Errorf("rdpFile lacks %q:\n%s", line, c.RDPFile)
		}
	}
	// The token the gateway checks: the session's user, pool and host, the
	// pool's limits, minutes of validity.
	claims, err := w.keys.Verify(tokenLine.FindStringSubmatch(c.RDPFile)[1], time.Now())
	if err != nil {
		t.Fatalf("the gateway cannot verify the broker's token: %v", err)
	}
	if claims.User != "alice" || claims.Session != c.SessionID || claims.Pool != "gwpool" || claims.Host != addr ||
		claims.IdleSeconds != 20*60 || claims.LifetimeSeconds != 600*60 || claims.StartWaitSeconds != 0 ||
		claims.Expiry-claims.NotBefore != int64(vdibroker.DefaultGatewayTokenTTL/time.Second) {
		t.Errorf("claims %+v", claims)
	}

	conn, err := w.dial(t, c.RDPFile, addr)
	if err != nil {
		t.Fatalf("tunnel: %v", err)
	}
	echoed(t, conn)
	// Active at once: the agent has not heartbeated since the connect.
	u := w.session(t, "gwpool", c.SessionID)
	if u.State != vdibroker.StateActive || u.Gateway != "rdgw-1" || u.GatewayTime == nil {
		t.Fatalf("session after the tunnel reached the host: %+v, want Active through rdgw-1", u)
	}
	if h, _ := w.e.admin.GetSessionHost(ctx, "gwpool", "gwh001"); h.Sessions != 1 || h.ConnectingSessions != 1 {
		t.Errorf("host counts %d sessions, %d connecting; want 1 and 1 until the agent reports the session", h.Sessions, h.ConnectingSessions)
	}
	rec, err := w.e.admin.Placement(ctx, "gwpool", c.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Gateway == nil || rec.Gateway.Name != "rdgw-1" || !rec.Gateway.Time.Equal(*u.GatewayTime) {
		t.Errorf("decision record's gateway %+v, want rdgw-1 at %v", rec.Gateway, u.GatewayTime)
	}

	// The same token again: refused, whoever presents it.
	if _, err := w.dial(t, c.RDPFile, addr); !refusedWith(err, tsgu.EProxyCookieAuthenticationDenied) {
		t.Errorf("second use of a token: %v, want refused E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED", err)
	}

	// The client leaves: Disconnected, without a heartbeat.
	conn.Close()
	eventually(t, "the session Disconnected", func() bool { return w.session(t, "gwpool", c.SessionID).State == vdibroker.StateDisconnected })

	// A reconnect (R-C1) answers the same session with a new token.
	again, err := w.e.admin.Connect(ctx, "gwpool", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if again.SessionID != c.SessionID || again.RDPFile == c.RDPFile {
		t.Fatalf("reconnect %+v, want session %s with a new token", again, c.SessionID)
	}
	// Its token names this host only.
	if _, err := w.dial(t, again.RDPFile, "127.0.0.1:1"); !refusedWith(err, tsgu.EProxyRAPAccessDenied) {
		t.Errorf("a token for another host: %v, want E_PROXY_RAP_ACCESSDENIED", err)
	}
	again, _ = w.e.admin.Connect(ctx, "gwpool", vhttp.ConnectRequest{User: "alice"})
	conn, err = w.dial(t, again.RDPFile, addr)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the session Active again", func() bool { return w.session(t, "gwpool", c.SessionID).State == vdibroker.StateActive })
	conn.Close()

	// Every tunnel's open, reach and close is in the audit log, as the
	// gateway's token, with the client's address.
	entries, err := w.e.admin.ListAudit(ctx, vhttp.AuditQuery{Target: "hostpools/gwpool/usersessions/" + c.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, a := range entries {
		seen[a.Action+" "+a.Outcome]++
		if strings.HasPrefix(a.Action, "gateway.") && (a.Principal.Role != vdibroker.RoleGateway || a.RemoteAddr != "127.0.0.1") {
			t.Errorf("audit entry %+v: want the Gateway token and the client's address", a)
		}
	}
	eventually(t, "the last close audited", func() bool {
		entries, _ = w.e.admin.ListAudit(ctx, vhttp.AuditQuery{Target: "hostpools/gwpool/usersessions/" + c.SessionID, Action: "gateway.tunnel.close"})
		return len(entries) >= 3 // the first tunnel, the refused target, the last
	})
	if seen["gateway.tunnel.open ok"] != 3 || seen["gateway.tunnel.reached ok"] != 2 || seen["gateway.tunnel.open refused"] != 1 {
		t.Errorf("audit entries %v, want 3 opens, 2 reached, 1 refused open", seen)
	}

	// A pool set to Direct: no gateway, no token.
	w.e.pool("direct", map[string]any{"gatewayUsage": "Direct"})
	w.addEchoHost(t, "direct", "dh001")
	d, err := w.e.admin.Connect(ctx, "direct", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Gateway != "" || strings.Contains(d.RDPFile, "gateway") {
		t.Errorf("a Direct pool's answer goes through a gateway: %+v", d)
	}
	// A pool's own gateway wins over the server's.
	w.e.pool("own", map[string]any{"gatewayHostName": "rdgw-own.example.test:8443"})
	w.addEchoHost(t, "own", "oh001")
	o, _ := w.e.admin.Connect(ctx, "own", vhttp.ConnectRequest{User: "alice"})
	if o.Gateway != "rdgw-own.example.test:8443" || !strings.Contains(o.RDPFile, "gatewayhostname:s:rdgw-own.example.test:8443\r\n") {
		t.Errorf("a pool's own gateway: %+v", o)
	}
}

func refusedWith(err error, code uint32) bool {
	var re *gateway.RefusedError
	return errors.As(err, &re) && re.Code == code
}

// TestGatewayReportsRefused_RGW4: a report is taken only from a Gateway
// token (or the admin token), for a token this broker issued and a session
// still open; a User token cannot report, a Gateway token can do nothing
// else, and a forged token id is refused before anything is stored.
func TestGatewayReportsRefused_RGW4(t *testing.T) {
	w := newGatewayWorld(t, broker.GatewayConfig{MaxTunnelsPerUser: 1})
	ctx := context.Background()
	w.e.pool("gwpool", nil)
	addr := w.addEchoHost(t, "gwpool", "gwh001")
	c, err := w.e.admin.Connect(ctx, "gwpool", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := w.keys.Verify(tokenLine.FindStringSubmatch(c.RDPFile)[1], time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ev := gateway.TunnelEvent{TokenID: claims.ID, User: claims.User, Session: claims.Session, Pool: claims.Pool, Host: claims.Host,
		Client: "192.0.2.7", Gateway: "rdgw-1", At: time.Now(), Expiry: time.Unix(claims.Expiry, 0)}

	user, err := w.e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	asUser := &gateway.HTTPBroker{URL: w.broker.URL, Token: user.Secret}
	if err := asUser.TunnelOpen(ctx, ev); err == nil || !strings.Contains(err.Error(), "HTTP 403") {
		t.Errorf("a User token reports: %v, want 403", err)
	}
	// Claims altered in the report (another user, another host): not a
	// token the broker issued.
	for _, mut := range []func(*gateway.TunnelEvent){
		func(e *gateway.TunnelEvent) { e.User = "mallory" },
		func(e *gateway.TunnelEvent) { e.Host = "127.0.0.1:22" },
		func(e *gateway.TunnelEvent) { e.Expiry = e.Expiry.Add(time.Hour) },
		func(e *gateway.TunnelEvent) { e.TokenID = gatewaytoken.NewID() + gatewaytoken.NewID() },
	} {
		bad := ev
		mut(&bad)
		if err := w.broker.TunnelOpen(ctx, bad); !errors.Is(err, gateway.ErrNotAdmitted) {
			t.Errorf("report %+v: %v, want ErrNotAdmitted", bad, err)
		}
	}
	if u := w.session(t, "gwpool", c.SessionID); u.State != vdibroker.StatePending {
		t.Fatalf("refused reports moved the session: %+v", u)
	}
	// The real report, twice: the second is the token's second use.
	if err := w.broker.TunnelOpen(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if err := w.broker.TunnelOpen(ctx, ev); !errors.Is(err, gateway.ErrTokenUsed) {
		t.Errorf("second open: %v, want ErrTokenUsed", err)
	}
	// MaxTunnelsPerUser 1: alice's next tunnel, through the real gateway
	// and with a fresh token, is refused while this one is open.
	next, _ := w.e.admin.Connect(ctx, "gwpool", vhttp.ConnectRequest{User: "alice"})
	if _, err := w.dial(t, next.RDPFile, addr); !refusedWith(err, tsgu.EProxyMaxConnectionsReached) {
		t.Errorf("alice's second tunnel: %v, want E_PROXY_MAXCONNECTIONSREACHED", err)
	}
	if err := w.broker.TunnelClose(ctx, ev); err != nil {
		t.Fatal(err)
	}
	conn, err := w.dial(t, next.RDPFile, addr)
	if err != nil {
		t.Fatalf("after the first tunnel closed: %v", err)
	}
	conn.Close()

	// The Gateway token reads nothing, connects nobody.
	for _, call := range []struct{ method, path, body string }{
		{"GET", "/api/v1/hostpools", ""},
		{"GET", "/api/v1/hostpools/gwpool/usersessions", ""},
		{"POST", "/api/v1/hostpools/gwpool/connect", `{"user": "alice"}`},
		{"GET", "/api/v1/whoami", ""},
		{"POST", "/api/v1/gateway/keys/rotate", ""},
	} {
		if status, _, raw := rawDo(t, w.e, call.method, call.path, w.broker.Token, call.body); status != 403 {
			t.Errorf("Gateway token %s %s: %d %s, want 403", call.method, call.path, status, raw)
		}
	}
	// A malformed report names its field.
	status, ve, raw := rawDo(t, w.e, "POST", "/api/v1/gateway/tunnels/open", w.broker.Token, `{"tokenId": "x", "user": "alice", "sessionId": "s", "hostPool": "gwpool", "host": "nohost", "tokenExpiry": "2026-01-01T00:00:00Z"}`)
	if status != 400 || ve == nil || ve.Field != "host" {
		t.Errorf("malformed report: %d %s, want 400 on host", status, raw)
	}
	// A session id or token id with a control character is refused
	// before it is looked up: a refused report's audit entry names its
	// session in its target (R-SEC).
	for field, body := range map[string]string{
		"sessionId": `{"tokenId": "x", "user": "alice", "sessionId": "s\u001b[2J", "hostPool": "gwpool", "host": "h:3389", "tokenExpiry": "2026-01-01T00:00:00Z"}`,
		"tokenId":   `{"tokenId": "x\u0085", "user": "alice", "sessionId": "s", "hostPool": "gwpool", "host": "h:3389", "tokenExpiry": "2026-01-01T00:00:00Z"}`,
	} {
		status, ve, raw := rawDo(t, w.e, "POST", "/api/v1/gateway/tunnels/open", w.broker.Token, body)
		if status != 400 || ve == nil || ve.Field != field || !strings.Contains(ve.Message, "control characters") {
			t.Errorf("report with a control character in %s: %d %s, want 400 on %s", field, status, raw, field)
		}
	}
}

// stopForOutage stops pg, restarts it at the test's end unless restart
// was called (before the schema is dropped), and waits until the broker
// at base says its store is down.
func stopForOutage(t *testing.T, pg *pgtest.Server, base string, storeTimeout time.Duration) (restart func()) {
	t.Helper()
	pg.Stop()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			pg.Restart()
		}
	})
	waitHealth(t, base, 503, storeTimeout+2*time.Second)
	return func() {
		pg.Restart()
		restarted = true
		waitHealth(t, base, 200, 15*time.Second)
	}
}

// TestGatewayDuringOutage_PostgreSQL (R-GW4, R-OUT1): while the store is
// down, a reconnect answered from memory carries a token signed with the
// keys in hand, and the gateway's open of its tunnel, with the Gateway
// token the replica checked before the outage, is admitted in the
// replica's memory, once: the user reaches the host, a second use of the
// token is refused.
func TestGatewayDuringOutage_PostgreSQL(t *testing.T) {
	pg := pgtest.Start(t)
	const storeTimeout = 2 * time.Second
	w := newGatewayWorldWith(t, envOptions{dsn: pg.DSN, maintenance: 200 * time.Millisecond, storeTimeout: storeTimeout})
	ctx := context.Background()
	w.e.pool("gwout", nil)
	addr := w.addEchoHost(t, "gwout", "goh001")
	c, err := w.e.admin.Connect(ctx, "gwout", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	// A first tunnel: the replica checks the gateway's token against the
	// store (and, during the outage, remembers it).
	first, err := w.dial(t, c.RDPFile, addr)
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	w.e.heartbeat("goh001", vdibroker.AgentSession{ID: "x1", User: "alice", State: vdibroker.StateActive})
	restart := stopForOutage(t, pg, w.e.urls[0], storeTimeout)

	again, err := w.e.admin.Connect(ctx, "gwout", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatalf("reconnect during the outage: %v", err)
	}
	if again.SessionID != c.SessionID || again.Gateway != "rdgw.example.test" {
		t.Fatalf("reconnect during the outage: %+v, want session %s through the gateway", again.ConnectResponse, c.SessionID)
	}
	conn, err := w.dial(t, again.RDPFile, addr)
	if err != nil {
		t.Fatalf("tunnel during the outage: %v", err)
	}
	echoed(t, conn)
	if _, err := w.dial(t, again.RDPFile, addr); !refusedWith(err, tsgu.EProxyCookieAuthenticationDenied) {
		t.Errorf("the token's second use during the outage: %v, want refused", err)
	}
	// The gateway's check of its tunnels is not answered while the store
	// is down (503: the gateway keeps them); once it is back, the tunnel
	// the replica admitted from memory is stored and goes on (R-GW4).
	claims, err := w.keys.Verify(tokenLine.FindStringSubmatch(again.RDPFile)[1], time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ev := gateway.TunnelEvent{TokenID: claims.ID, User: claims.User, Session: claims.Session, Pool: claims.Pool, Host: claims.Host,
		Client: "127.0.0.1", Gateway: "rdgw-1", At: time.Now(), Expiry: time.Unix(claims.Expiry, 0)}
	if open, err := w.broker.CheckTunnels(ctx, "rdgw-1", []gateway.TunnelEvent{ev}); err == nil || !strings.Contains(err.Error(), "HTTP 503") {
		t.Errorf("a check during the outage: %v %v, want HTTP 503", open, err)
	}
	restart()
	for range 2 { // stored at the first check, found at the second
		if open, err := w.broker.CheckTunnels(ctx, "rdgw-1", []gateway.TunnelEvent{ev}); err != nil || len(open) != 1 || open[0] != ev.TokenID {
			t.Errorf("a check after the outage: %v %v, want the tunnel admitted during it", open, err)
		}
	}
	conn.Close()
}

// TestGatewayCloseSentAfterOutage_RGW3_PostgreSQL: a tunnel that closes
// while the broker's store is down is reported again once it is back (the
// gateway's close reports, sent every 15 s on its clock): its session
// turns Disconnected, the close is audited, and the gateway keeps none.
func TestGatewayCloseSentAfterOutage_RGW3_PostgreSQL(t *testing.T) {
	pg := pgtest.Start(t)
	clk := clocktesting.NewFakeClock(time.Now())
	const storeTimeout = 2 * time.Second
	w := newGatewayWorldWith(t, envOptions{dsn: pg.DSN, maintenance: time.Hour, storeTimeout: storeTimeout, gatewayClock: clk})
	ctx := context.Background()
	w.e.pool("gwclose", nil)
	addr := w.addEchoHost(t, "gwclose", "gch001")
	c, err := w.e.admin.Connect(ctx, "gwclose", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := w.dial(t, c.RDPFile, addr)
	if err != nil {
		t.Fatal(err)
	}
	echoed(t, conn)
	eventually(t, "the session Active through the tunnel", func() bool {
		return w.session(t, "gwclose", c.SessionID).State == vdibroker.StateActive
	})
	pending := func() float64 {
		n, err := testutil.GatherAndCount(w.reg, "vdibroker_gateway_close_reports_pending")
		if err != nil || n != 1 {
			t.Fatalf("the gateway's metrics: %v (%d)", err, n)
		}
		mfs, _ := w.reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "vdibroker_gateway_close_reports_pending" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}

	restart := stopForOutage(t, pg, w.e.urls[0], storeTimeout)
	conn.CloseChannel()
	conn.Close()
	eventually(t, "the close report kept", func() bool { return pending() == 1 })

	restart()
	if st := w.session(t, "gwclose", c.SessionID).State; st != vdibroker.StateActive {
		t.Fatalf("before the report is sent again the session is %s, want Active still", st)
	}
	clk.Step(15 * time.Second)
	eventually(t, "the close taken", func() bool { return pending() == 0 })
	if st := w.session(t, "gwclose", c.SessionID).State; st != vdibroker.StateDisconnected {
		t.Errorf("after the close report the session is %s, want Disconnected (R-GW3)", st)
	}
	entries, err := w.e.admin.ListAudit(ctx, vhttp.AuditQuery{Target: "hostpools/gwclose/usersessions/" + c.SessionID, Action: "gateway.tunnel.close"})
	if err != nil || len(entries) != 1 || entries[0].Error != "" {
		t.Errorf("audit of the close: %v %+v, want one entry", err, entries)
	}
}

// TestRevokeGatewayKeys_RGW6: POST /gateway/keys/rotate?revoke=true
// leaves one new key published, none of those before; a revoke that is
// not true or false ("1" and "t" too, which strconv.ParseBool reads as
// true) is 400 naming the field, and the keys stay. Each is audited (R-SEC):
// a rotation as gatewaykey.rotate, a revoke as gatewaykey.revoke naming
// the keys it dropped, a refused revoke as a refused gatewaykey.revoke.
func TestRevokeGatewayKeys_RGW6(t *testing.T) {
	e := newEnv(t)
	keys := func() []string {
		t.Helper()
		status, _, raw := rawDo(t, e, "GET", "/api/v1/gateway/keys", "", "")
		ks, err := gatewaytoken.ParseJWKS(raw)
		if status != 200 || err != nil {
			t.Fatalf("keys: %d %v %s", status, err, raw)
		}
		return ks.KeyIDs()
	}
	rotate := func(query string, want int) {
		t.Helper()
		if status, _, raw := rawDo(t, e, "POST", "/api/v1/gateway/keys/rotate"+query, adminToken, ""); status != want {
			t.Fatalf("rotate%s: %d %s, want %d", query, status, raw, want)
		}
	}
	first := keys()
	rotate("", 204)
	two := keys()
	if len(first) != 1 || len(two) != 2 {
		t.Fatalf("keys %v, then after a rotate %v; want one, then two", first, two)
	}
	for _, v := range []string{"maybe", "1", "t", "TRUE", ""} {
		status, ve, raw := rawDo(t, e, "POST", "/api/v1/gateway/keys/rotate?revoke="+v, adminToken, "")
		if status != 400 || ve == nil || ve.Field != "revoke" {
			t.Errorf("revoke=%s: %d %s, want 400 on revoke", v, status, raw)
		}
	}
	if got := keys(); !slices.Equal(got, two) {
		t.Errorf("after a refused revoke: %v, want %v", got, two)
	}
	rotate("?revoke=true", 204)
	if got := keys(); len(got) != 1 || slices.Contains(two, got[0]) {
		t.Errorf("after the revoke: %v, want one key, none of %v", got, two)
	}

	ctx := t.Context()
	rot, _, after := oneEntry(t, e, "gatewaykey.rotate", "gateway/keys/rotate")
	added := slices.DeleteFunc(slices.Clone(two), func(k string) bool { return slices.Contains(first, k) })
	if rot.Outcome != vdibroker.AuditOK || rot.Principal.Kind != vdibroker.PrincipalAdmin || len(added) != 1 || after["kid"] != added[0] {
		t.Errorf("the rotation's entry: %+v, after %v; want the admin's, adding %v", rot, after, added)
	}
	list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "gatewaykey.revoke"})
	if err != nil {
		t.Fatal(err)
	}
	var done []*vdibroker.AuditEntry
	refused := 0
	for _, a := range list {
		switch {
		case a.Outcome == vdibroker.AuditOK:
			done = append(done, a)
		case strings.Contains(a.Error, "revoke"):
			refused++
		}
	}
	if len(done) != 1 || refused != 5 {
		t.Fatalf("gatewaykey.revoke entries: %d done, %d refused; want 1 and the 5 refused", len(done), refused)
	}
	var before, revoked map[string]any
	_ = json.Unmarshal(done[0].Before, &before)
	_ = json.Unmarshal(done[0].After, &revoked)
	var dropped []string
	for _, k := range before["dropped"].([]any) {
		dropped = append(dropped, k.(string))
	}
	slices.Sort(two)
	if !slices.Equal(dropped, two) || revoked["kid"] != keys()[0] {
		t.Errorf("the revoke's entry: before %v after %v; want %v dropped, %s added", before, revoked, two, keys()[0])
	}
}

// TestGatewayCloseRepeatedAfterPrune_RGW3: a close the broker took, sent
// again by a gateway that did not get the answer (it keeps a close it
// has no answer to and sends it again, R-GW3), is taken again with
// nothing changed, also once the tunnel's record is pruned (its token
// expired and it was closed): not a 404, which the gateway counts and
// logs as a refusal and the broker audits as a refused report, for a
// close it had in fact recorded.
func TestGatewayCloseRepeatedAfterPrune_RGW3(t *testing.T) {
	w := newGatewayWorld(t, broker.GatewayConfig{})
	ctx := context.Background()
	w.e.pool("gwpool", nil)
	w.addEchoHost(t, "gwpool", "gwh001")
	ev, sessionID := w.opened(t, "gwpool", "alice", time.Now())
	if err := w.broker.ChannelOpen(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if err := w.broker.TunnelClose(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if err := w.broker.TunnelClose(ctx, ev); err != nil {
		t.Errorf("the close again, its record kept: %v", err)
	}
	// The token expired, the closed tunnel's record pruned.
	w.e.clock.Advance(time.Hour)
	if n, err := w.e.store.PruneGatewayTunnels(ctx, w.e.clock.Now(), 100); err != nil || n != 1 {
		t.Fatalf("pruned %d tunnel records (%v), want 1", n, err)
	}
	if err := w.broker.TunnelClose(ctx, ev); err != nil {
		t.Errorf("the close again, its record pruned: %v, want taken", err)
	}
	if st := w.session(t, "gwpool", sessionID).State; st != vdibroker.StateDisconnected {
		t.Errorf("session %s, want Disconnected", st)
	}
	entries, err := w.e.admin.ListAudit(ctx, vhttp.AuditQuery{Target: "hostpools/gwpool/usersessions/" + sessionID, Action: "gateway.tunnel.close"})
	if err != nil || len(entries) != 1 || entries[0].Outcome != vdibroker.AuditOK {
		t.Errorf("close audit entries %v %+v, want the one close", err, entries)
	}
	// A token the broker did not issue is still refused.
	bad := ev
	bad.TokenID = gatewaytoken.NewID() + gatewaytoken.NewID()
	if err := w.broker.TunnelClose(ctx, bad); !errors.Is(err, gateway.ErrNotAdmitted) {
		t.Errorf("close of a forged token: %v, want ErrNotAdmitted", err)
	}
}

// TestGatewayLateCloseLeavesSession_RGW3: a close reported long after it
// happened (a gateway's report sent again once the broker takes reports
// again) ends the tunnel's record and is audited, but leaves the session
// Active: the user may have come back through a tunnel the broker did not
// hear of while its store was down, which the agent has reported since.
// A close reported at once still turns it Disconnected, as one of a
// gateway of an earlier release (no sentAt) does whatever its clock.
func TestGatewayLateCloseLeavesSession_RGW3(t *testing.T) {
	w := newGatewayWorld(t, broker.GatewayConfig{})
	ctx := context.Background()
	w.e.pool("gwlate", nil)
	w.addEchoHost(t, "gwlate", "gwl001")
	event := func(user string) (gateway.TunnelEvent, string) {
		ev, id := w.opened(t, "gwlate", user, w.e.clock.Now())
		if err := w.broker.ChannelOpen(ctx, ev); err != nil {
			t.Fatal(err)
		}
		if st := w.session(t, "gwlate", id).State; st != vdibroker.StateActive {
			t.Fatalf("%s's session %s after the reach, want Active", user, st)
		}
		return ev, id
	}
	late, lateID := event("alice")
	late.At, late.SentAt = w.e.clock.Now().Add(-time.Minute), w.e.clock.Now()
	if err := w.broker.TunnelClose(ctx, late); err != nil {
		t.Fatal(err)
	}
	if st := w.session(t, "gwlate", lateID).State; st != vdibroker.StateActive {
		t.Errorf("after a close reported a minute late the session is %s, want Active (left to the agent)", st)
	}
	entries, err := w.e.admin.ListAudit(ctx, vhttp.AuditQuery{Target: "hostpools/gwlate/usersessions/" + lateID, Action: "gateway.tunnel.close"})
	if err != nil || len(entries) != 1 || entries[0].Outcome != vdibroker.AuditOK {
		t.Errorf("close audit entries %v %+v, want the late close recorded", err, entries)
	}
	prompt, promptID := event("bob")
	prompt.At, prompt.SentAt = w.e.clock.Now().Add(-5*time.Second), w.e.clock.Now()
	if err := w.broker.TunnelClose(ctx, prompt); err != nil {
		t.Fatal(err)
	}
	if st := w.session(t, "gwlate", promptID).State; st != vdibroker.StateDisconnected {
		t.Errorf("after a close reported at once the session is %s, want Disconnected", st)
	}
	// A gateway whose clock is two minutes behind the broker's says when
	// it sent each close (SentAt, its clock as At is): one sent at once
	// moves the session, one sent again a minute after it happened does
	// not, whatever the broker's clock says of the gateway's.
	behind := w.e.clock.Now().Add(-2 * time.Minute)
	skewed, skewedID := event("carol")
	skewed.At, skewed.SentAt = behind, behind.Add(time.Second)
	if err := w.broker.TunnelClose(ctx, skewed); err != nil {
		t.Fatal(err)
	}
	if st := w.session(t, "gwlate", skewedID).State; st != vdibroker.StateDisconnected {
		t.Errorf("after a close sent at once by a gateway whose clock is behind the session is %s, want Disconnected", st)
	}
	resent, resentID := event("dave")
	resent.At, resent.SentAt = behind.Add(-time.Minute), behind
	if err := w.broker.TunnelClose(ctx, resent); err != nil {
		t.Fatal(err)
	}
	if st := w.session(t, "gwlate", resentID).State; st != vdibroker.StateActive {
		t.Errorf("after a close sent again a minute late by a gateway whose clock is behind the session is %s, want Active", st)
	}
	// A gateway of an earlier release says nothing of when it sent a
	// close: it sends each once, when the tunnel ends, so its closes are
	// not late, even with its clock two minutes behind the broker's.
	older, olderID := event("erin")
	older.At, older.SentAt = behind, time.Time{}
	if err := w.broker.TunnelClose(ctx, older); err != nil {
		t.Fatal(err)
	}
	if st := w.session(t, "gwlate", olderID).State; st != vdibroker.StateDisconnected {
		t.Errorf("after a close of an older gateway (no sentAt) whose clock is behind the session is %s, want Disconnected", st)
	}
}
