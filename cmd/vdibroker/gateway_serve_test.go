package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/gateway"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/echotest"
	"github.com/vdibroker/vdibroker/internal/syncbuf"
)

// inprocGateway is a serve running its RD gateway in process
// (--gateway-listen) on a test CA's certificate, with pool "inproc" of
// one host (an echo server at addr) and alice's connect answer c there,
// whose gateway token is token.
type inprocGateway struct {
	m              *Main
	ca             *testCA
	dir, cert, key string
	client         *http.Client
	admin          *vhttp.Client
	addr, token    string
	c              *vhttp.ConnectResult
	roots          *x509.CertPool
	// certClock is the clock serve's certificate reload reads: a test
	// steps it past the second between looks at the files.
	certClock *clocktesting.FakePassiveClock
}

// startInprocGateway starts an inprocGateway whose gateway has cfg;
// each of with changes serve's flags before it starts.
func startInprocGateway(t *testing.T, cfg gateway.Config, with ...func(*Main)) *inprocGateway {
	t.Helper()
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	g := &inprocGateway{dir: t.TempDir(), certClock: clocktesting.NewFakePassiveClock(time.Now())}
	g.ca = newTestCA(t, g.dir)
	g.cert, g.key = g.ca.issue(t, g.dir, "broker", 2, false)
	g.m = &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(), TLSCert: g.cert, TLSKey: g.key, TLSClock: g.certClock,
		Gateway: GatewayFlags{Listen: "127.0.0.1:0", Name: "rdgw-inproc", Config: cfg}}
	for _, f := range with {
		f(g.m)
	}
	if err := g.m.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.m.Close() })
	ctx := t.Context()
	var err error
	if g.client, err = (clientTLSOptions{CAFile: g.ca.file}).httpClient(g.m.URL(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	g.admin = vhttp.NewClient(g.m.URL(), g.m.AdminToken)
	g.admin.HTTPClient = g.client
	if _, err := g.admin.PutHostPool(ctx, "inproc", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	rt, err := g.admin.CreateRegistrationToken(ctx, "inproc", vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	g.addr = echotest.Listen(t)
	reg, err := g.admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "ip001", Address: g.addr, Protocols: []string{"RDP"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.admin.Heartbeat(ctx, reg.Credential, &vdibroker.HeartbeatRequest{}); err != nil {
		t.Fatal(err)
	}
	if g.c, err = g.admin.Connect(ctx, "inproc", vhttp.ConnectRequest{User: "alice"}); err != nil {
		t.Fatal(err)
	}
	tok := regexp.MustCompile(`gatewayaccesstoken:s:(\S+)\r\n`).FindStringSubmatch(g.c.RDPFile)
	if tok == nil {
		t.Fatalf("no token in:\n%s", g.c.RDPFile)
	}
	g.token = tok[1]
	g.roots = x509.NewCertPool()
	g.roots.AddCert(g.ca.cert)
	return g
}

// TestServeGatewayListen (R-GW1..R-GW3): serve --gateway-listen runs the
// RD gateway in the broker's process, on the broker's certificate: a
// connect's .rdp names it, the tunnel reaches the host with the broker's
// token, and its reports reach the broker as calls (no Gateway token
// exists, and the audit log names the gateway itself): the session is
// Active at once and Disconnected at the close. The gateway's metrics are
// the broker's; a renewed certificate is served without a restart.
func TestServeGatewayListen(t *testing.T) {
	g := startInprocGateway(t, gateway.Config{})
	m, ca, dir, cert, key, client, admin, addr, c, ctx := g.m, g.ca, g.dir, g.cert, g.key, g.client, g.admin, g.addr, g.c, t.Context()
	// Without --gateway-hostname, the gateway's own address.
	if c.Gateway != m.Gateway.Addr() || !strings.Contains(c.RDPFile, "gatewayhostname:s:"+m.Gateway.Addr()+"\r\n") {
		t.Fatalf("connect answer %+v, want the in-process gateway %s", c, m.Gateway.Addr())
	}
	roots := g.roots
	dial := func() (*gateway.ClientConn, error) {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return gateway.Dial(dctx, gateway.DialConfig{Gateway: m.Gateway.Addr(), TLSConfig: &tls.Config{RootCAs: roots},
			Token: g.token, Target: addr, ClientName: "test"})
	}
	conn, err := dial()
	if err != nil {
		t.Fatalf("tunnel through the in-process gateway: %v", err)
	}
	go conn.Write([]byte("rdp!"))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "rdp!" {
		t.Fatalf("through the tunnel: %q %v", buf, err)
	}
	u, err := admin.GetUserSession(ctx, "inproc", c.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if u.State != vdibroker.StateActive || u.Gateway != "rdgw-inproc" {
		t.Fatalf("session %+v, want Active through rdgw-inproc before any heartbeat", u)
	}
	if v := metricValue(scrapeWith(t, client, m.URL()), "vdibroker_gateway_tunnels_open"); v != 1 {
		t.Errorf("vdibroker_gateway_tunnels_open = %v on the broker's /metrics, want 1", v)
	}
	// A load balancer probes the gateway's own port (R-GW6: it holds the
	// broker's keys from its start).
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	defer hc.CloseIdleConnections()
	if resp, err := hc.Get("https://" + m.Gateway.Addr() + gateway.HealthPath); err != nil {
		t.Error(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != `{"status":"ok"}`+"\n" {
			t.Errorf("GET /healthz on the in-process gateway: %d %q, want 200 ok", resp.StatusCode, b)
		}
	}
	tokens, err := admin.ListTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 0 {
		t.Errorf("tokens %+v: the in-process gateway needs none", tokens)
	}
	entries, err := admin.ListAudit(ctx, vhttp.AuditQuery{Action: "gateway.tunnel.reached"})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Principal.Kind != vdibroker.PrincipalGateway || entries[0].Principal.ID != "rdgw-inproc" {
		t.Errorf("audit %+v, want one entry by the gateway rdgw-inproc", entries)
	}
	// Its token opens one tunnel.
	var re *gateway.RefusedError
	if _, err := dial(); !errors.As(err, &re) {
		t.Errorf("the token's second use: %v, want refused", err)
	}
	conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		u, err := admin.GetUserSession(ctx, "inproc", c.SessionID)
		if err == nil && u.State == vdibroker.StateDisconnected {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %+v %v: not Disconnected 10 s after the tunnel closed", u, err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A renewed certificate (serial 9) is served on the gateway's
	// listener too, without a restart: serve's reloader looks at the files
	// at most once a second of its clock, which the test steps.
	newCert, newKey := ca.issue(t, dir, "renewed", 9, false)
	for _, f := range [][2]string{{newCert, cert}, {newKey, key}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f[1]+".tmp", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(f[1]+".tmp", f[1]); err != nil {
			t.Fatal(err)
		}
	}
	// The files' modification time moves on past the loaded pair's even
	// on a file system of coarse timestamps.
	future := time.Now().Add(2 * time.Second)
	if err := os.Chtimes(cert, future, future); err != nil {
		t.Fatal(err)
	}
	g.certClock.SetTime(g.certClock.Now().Add(1100 * time.Millisecond))
	tc, err := tls.Dial("tcp", m.Gateway.Addr(), &tls.Config{RootCAs: roots})
	if err != nil {
		t.Fatalf("TLS to the gateway after the renewal: %v", err)
	}
	serial := tc.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	tc.Close()
	if serial != 9 {
		t.Fatalf("the gateway serves certificate serial %d a second after it was replaced, want the renewed 9", serial)
	}
}

// TestServeGatewayListenTunnelsPerUser_RGW4: the in-process gateway
// bounds one user's tunnels as serve's --gateway-max-tunnels-per-user
// says (0, a Main built in code: none), not by gateway.Config's default
// of 10: alice opens 11 tunnels to her session through it (from one
// address: its request rate is raised for them).
func TestServeGatewayListenTunnelsPerUser_RGW4(t *testing.T) {
	g := startInprocGateway(t, gateway.Config{RequestRate: 1000, RequestBurst: 1000})
	ctx := t.Context()
	token := g.token
	for i := range 11 {
		if i > 0 {
			c, err := g.admin.Connect(ctx, "inproc", vhttp.ConnectRequest{User: "alice"})
			if err != nil {
				t.Fatal(err)
			}
			token = regexp.MustCompile(`gatewayaccesstoken:s:(\S+)\r\n`).FindStringSubmatch(c.RDPFile)[1]
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		conn, err := gateway.Dial(dctx, gateway.DialConfig{Gateway: g.m.Gateway.Addr(), TLSConfig: &tls.Config{RootCAs: g.roots},
			Token: token, Target: g.addr, ClientName: "test"})
		cancel()
		if err != nil {
			t.Fatalf("alice's tunnel %d: %v, want open (no limit)", i+1, err)
		}
		t.Cleanup(func() { conn.Close() })
	}
}

// TestServeGatewayFlags: the gateway flags are checked before anything
// opens, naming the flag and what it allows.
func TestServeGatewayFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--gateway-listen", "127.0.0.1:0"}, "--gateway-listen needs --tls-cert"},
		{[]string{"--gateway-hostname", "rd gw"}, "--gateway-hostname: must be a DNS name or IP address"},
		{[]string{"--gateway-token-ttl", "2h"}, "--gateway-token-ttl: must be 1m..1h"},
		{[]string{"--gateway-key-rotation", "10m"}, "--gateway-key-rotation: must be at least 1h"},
		{[]string{"--gateway-max-tunnels-per-user", "-1"}, "--gateway-max-tunnels-per-user: must be 0 or more"},
		{[]string{"--gateway-reauthorize-every", "1s"}, "--gateway-reauthorize-every: must be 0 (never) or 10s..1h, got 1s"},
		{[]string{"--gateway-reauthorize-every", "2h"}, "--gateway-reauthorize-every: must be 0 (never) or 10s..1h, got 2h"},
	} {
		cmd := newServeCmd()
		cmd.SetArgs(append([]string{"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"}, tc.args...))
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("serve %v = %v, want a usage error saying %q", tc.args, err, tc.want)
		}
	}
}

// TestServeGatewayListenNeedsHostName_RGW1: without --gateway-hostname
// the connect answers' .rdp files name the in-process gateway's listener
// address (R-GW1); a listener on every address (0.0.0.0, [::], no host)
// would put an address no client reaches into every file, so it is a
// usage error asking for --gateway-hostname. A listener on one address,
// or any listener with a host name, starts.
func TestServeGatewayListenNeedsHostName_RGW1(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		refused bool
	}{
		{[]string{"--gateway-listen", "0.0.0.0:443"}, true},
		{[]string{"--gateway-listen", "[::]:443"}, true},
		{[]string{"--gateway-listen", ":443"}, true},
		{[]string{"--gateway-listen", "0.0.0.0:443", "--gateway-hostname", "rdgw.example.com"}, false},
		{[]string{"--gateway-listen", "10.0.0.5:443"}, false},
		{[]string{"--gateway-listen", "127.0.0.1:0"}, false},
		{[]string{"--gateway-listen", "rdgw.example.com:443"}, false},
	} {
		var f GatewayFlags
		fl := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		f.addFlags(fl)
		if err := fl.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := f.check(true)
		var ue usageError
		switch {
		case tc.refused && (!errors.As(err, &ue) || !strings.Contains(err.Error(), "give --gateway-hostname")):
			t.Errorf("serve %v = %v, want a usage error asking for --gateway-hostname", tc.args, err)
		case !tc.refused && err != nil:
			t.Errorf("serve %v = %v, want no error", tc.args, err)
		}
	}
}

// TestServeGatewayReauthorizeFlag: `vdibroker gateway --reauthorize-every`
// takes 0 (never) or 10s..1h, checked before anything opens, naming the
// flag (R-GW4).
func TestServeGatewayReauthorizeFlag(t *testing.T) {
	for _, tc := range []struct {
		value, want string
	}{
		{"5s", "--reauthorize-every: must be 0 (never) or 10s..1h, got 5s"},
		{"90m", "--reauthorize-every: must be 0 (never) or 10s..1h, got 1h30m"},
		{"-1m", "--reauthorize-every: must be 0 (never) or 10s..1h, got -1m"},
		// In range: the next check is the certificate's.
		{"0", "--tls-cert and --tls-key are required"},
		{"1m", "--tls-cert and --tls-key are required"},
	} {
		cmd := newGatewayCmd()
		cmd.SetArgs([]string{"--listen", "127.0.0.1:0", "--reauthorize-every", tc.value})
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("gateway --reauthorize-every %s = %v, want a usage error saying %q", tc.value, err, tc.want)
		}
	}
	if f := newGatewayCmd().Flags().Lookup("reauthorize-every"); f == nil || f.DefValue != "1m0s" {
		t.Errorf("--reauthorize-every's default: %v, want 1m0s", f)
	}
	if f := newServeCmd().Flags().Lookup("gateway-reauthorize-every"); f == nil || f.DefValue != "1m0s" {
		t.Errorf("--gateway-reauthorize-every's default: %v, want 1m0s", f)
	}
}

// TestServeGatewayListenBoundsServerErrors: what the in-process gateway's
// HTTP server logs of connections from anyone (a TLS handshake that is
// not one) is rate limited as serve's own listener's is, 10 lines a
// second in bursts of 100: 300 bad connections do not write 300 lines
// (R-GW1; docs/gateway.md, "Refusals").
func TestServeGatewayListenBoundsServerErrors(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	cert, key := ca.issue(t, dir, "broker", 2, false)
	var logs syncbuf.Buffer
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(), TLSCert: cert, TLSKey: key,
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
		Gateway: GatewayFlags{Listen: "127.0.0.1:0", Name: "rdgw-inproc"}}
	if err := m.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	start := time.Now()
	const conns = 300
	for range conns {
		c, err := net.Dial("tcp", m.Gateway.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")) // not a TLS handshake
		io.Copy(io.Discard, c)                               // the server closes it
		c.Close()
	}
	// The most the limiter lets through in the time taken, an upper bound
	// whatever the machine's speed.
	most := 100 + 10*int(time.Since(start)/time.Second+1)
	got := strings.Count(logs.String(), "TLS handshake error")
	if got == 0 || got > most || got >= conns {
		t.Errorf("%d lines of TLS handshake errors for %d bad connections, want 1..%d", got, conns, most)
	}
}

// TestGatewayTargetFlags: both gateways (`vdibroker gateway
// --target-ports`, `serve --gateway-target-ports`) allow a token's host
// on port 3389 only unless told otherwise, as RD Gateway's resource
// authorization policy does by default (R-GW1: a host's registered
// address is the agent's word); "any" lifts it, other ports are listed,
// and a bad port or network is a usage error naming the flag.
func TestGatewayTargetFlags(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		ports []uint16
		nets  int
		want  string // the usage error; empty: the flags are read
	}{
		{nil, []uint16{3389}, 0, ""},
		{[]string{"--target-ports", "any"}, nil, 0, ""},
		{[]string{"--target-ports", "3389,3390", "--target-networks", "10.20.0.0/16,fd00::/64"}, []uint16{3389, 3390}, 2, ""},
		{[]string{"--target-ports", "0"}, nil, 0, `--target-ports: "0" is not a port (1..65535, or any)`},
		{[]string{"--target-ports", "rdp"}, nil, 0, `--target-ports: "rdp" is not a port`},
		// Emptied, the flag is not "any" (R-GW1).
		{[]string{"--target-ports="}, nil, 0, "--target-ports: empty"},
		{[]string{"--target-ports", ""}, nil, 0, "--target-ports: empty"},
		{[]string{"--target-networks", "10.20.0.0"}, nil, 0, "--target-networks: netip.ParsePrefix"},
	} {
		m := &GatewayMain{}
		cmd := newGatewayCmdFor(m)
		// No certificate: the command stops at that check, after the
		// target flags are read.
		cmd.SetArgs(append([]string{"--listen", "127.0.0.1:0"}, tc.args...))
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		want := tc.want
		if want == "" {
			want = "--tls-cert and --tls-key are required"
			if !slices.Equal(m.Config.TargetPorts, tc.ports) || len(m.Config.TargetNetworks) != tc.nets {
				t.Errorf("gateway %v: ports %v, %d networks; want %v and %d", tc.args, m.Config.TargetPorts, len(m.Config.TargetNetworks), tc.ports, tc.nets)
			}
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("gateway %v = %v, want an error saying %q", tc.args, err, want)
		}

		// The same flags of serve's in-process gateway.
		var f GatewayFlags
		fl := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		f.addFlags(fl)
		args := slices.Clone(tc.args)
		for i, a := range args {
			args[i] = strings.Replace(a, "--target-", "--gateway-target-", 1)
		}
		if err := fl.Parse(args); err != nil {
			t.Fatal(err)
		}
		err = f.check(true)
		if tc.want == "" {
			if err != nil || !slices.Equal(f.Config.TargetPorts, tc.ports) || len(f.Config.TargetNetworks) != tc.nets {
				t.Errorf("serve %v: %v, ports %v, %d networks; want %v and %d", args, err, f.Config.TargetPorts, len(f.Config.TargetNetworks), tc.ports, tc.nets)
			}
		} else if want := strings.Replace(tc.want, "--target-", "--gateway-target-", 1); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("serve %v = %v, want an error saying %q", args, err, want)
		}
	}
}

// closeService is a GatewayService whose TunnelClose answers err.
type closeService struct {
	vdibroker.GatewayService
	err error
}

func (s closeService) TunnelClose(context.Context, *vdibroker.TunnelReport) error { return s.err }

// TestInProcessCloseRefusals_RGW3: the in-process gateway's close report
// the broker refuses is final (gateway.ErrRefused: not sent again); the
// store down or an internal error is sent again, as over HTTP.
func TestInProcessCloseRefusals_RGW3(t *testing.T) {
	for err, final := range map[error]bool{
		vdibroker.Errorf(vdibroker.ENotFound, "token x is not an access token this broker issued"): true,
		vdibroker.Errorf(vdibroker.EInvalid, "field user: must be set"):                            true,
		vdibroker.Errorf(vdibroker.EPermission, "not this pool"):                                   true,
		vdibroker.Errorf(vdibroker.EStoreUnavailable, "the store is down"):                         false,
		errors.New("disk I/O error"):                                                               false,
		context.DeadlineExceeded:                                                                   false,
	} {
		got := gatewayReports{svc: closeService{err: err}}.TunnelClose(t.Context(), gateway.TunnelEvent{TokenID: "x"})
		if got == nil || errors.Is(got, gateway.ErrRefused) != final {
			t.Errorf("%v: answered %v, final %v, want final %v", err, got, errors.Is(got, gateway.ErrRefused), final)
		}
	}
	if err := (gatewayReports{svc: closeService{}}).TunnelClose(t.Context(), gateway.TunnelEvent{TokenID: "x"}); err != nil {
		t.Errorf("a close taken: %v", err)
	}
}

// TestServeGatewayTokenTTLOnLaunchPage (R-GW1, R-U4): serve hands
// --gateway-token-ttl to the portal, whose launch page of a file through
// the gateway says in how many minutes the file connects once: 7 here,
// not the portal's default of 5.
func TestServeGatewayTokenTTLOnLaunchPage(t *testing.T) {
	g := startInprocGateway(t, gateway.Config{}, func(m *Main) { m.Gateway.TokenTTL = 7 * time.Minute })
	ctx, base := t.Context(), g.m.URL()
	if _, err := g.admin.PutApplicationGroup(ctx, "inproc-desktop", map[string]any{"hostPool": "inproc", "applicationGroupType": "Desktop",
		"friendlyName": "In-process", "assignments": map[string]any{"users": []string{"alice"}}}); err != nil {
		t.Fatal(err)
	}
	tok, err := g.admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Transport: g.client.Transport, Jar: jar}
	csrf := func(path string) string { return pageCSRF(t, c, base+path) }
	post := func(path string, form url.Values) *http.Response {
		t.Helper()
		res, err := c.PostForm(base+path, form)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	post("/portal/signin", url.Values{"csrf": {csrf("/portal/signin")}, "next": {"/portal/"}, "token": {tok.Secret}})
	res := post("/portal/launch", url.Values{"csrf": {csrf("/portal/")}, "resource": {"desktop:inproc"}})
	status := base + res.Request.URL.Path + "/status"
	var s struct{ State, Message string }
	for deadline := time.Now().Add(30 * time.Second); s.State != "ready"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the launch did not become ready: %+v", s)
		}
		_, body := getBody(t, c, status)
		if err := json.Unmarshal([]byte(body), &s); err != nil || s.State == "failed" {
			t.Fatalf("%s: %s %v", status, body, err)
		}
	}
	const want = "This file connects only once, and only within 7 minutes."
	if !strings.Contains(s.Message, want) {
		t.Errorf("the launch's message %q does not say %q", s.Message, want)
	}
}
