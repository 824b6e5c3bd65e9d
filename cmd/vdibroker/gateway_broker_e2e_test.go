//go:build linux

package main

// The gateway's end-to-end test with the broker (phase 2): everything is
// real and the broker issues the tokens. `vdibroker serve` answers a
// connect with an .rdp that sends the client through `vdibroker gateway`
// with an access token it signed; xfreerdp 2.11 in a namespace that
// reaches only the gateway opens that file and logs on to real xrdp, with
// `vdibroker agent --sessions-provider xrdp` beside it in the host's
// namespace. The gateway reads the broker's keys from its URL and reports
// each tunnel to it with a Gateway token: the session turns Active when
// the tunnel reaches the host, before the agent could say so, and
// Disconnected when it closes; a reconnect reaches the same session (after
// the gateway's own token was replaced by SIGHUP and the old one
// deleted), a logoff ends it, and tokens the broker issued are refused
// once used, once altered, or for another host.

import (
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// gwAudit returns the broker's audit entries of action for session.
func gwAudit(api e2eAPI, action, session string) []vdibroker.AuditEntry {
	var list struct {
		Value []vdibroker.AuditEntry `json:"value"`
	}
	api.call("GET", "/auditlog?"+url.Values{"action": {action}, "target": {"hostpools/" + rdpPool + "/usersessions/" + session}}.Encode(), nil, 200, &list)
	return list.Value
}

// gwAfter decodes an audit entry's after.
func gwAfter(t *testing.T, e vdibroker.AuditEntry) vdibroker.UserSession {
	var u vdibroker.UserSession
	if err := json.Unmarshal(e.After, &u); err != nil {
		t.Fatalf("audit entry %s: after %s: %v", e.Action, e.After, err)
	}
	return u
}

func TestGatewayE2EThroughTheBroker(t *testing.T) {
	if os.Getenv("VDIBROKER_TEST_RDP") != "1" {
		t.Skip("gateway end-to-end test with the broker: set VDIBROKER_TEST_RDP=1 to run it (as root, with xrdp xorgxrdp freerdp2-x11 xvfb imagemagick iproute2 openssl; .ci/run installs them)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("gateway end-to-end test: VDIBROKER_TEST_RDP=1 needs root (network namespaces, a local user, xrdp)")
	}
	for _, tool := range []string{"xrdp", "xrdp-sesman", "xfreerdp", "Xvfb", "ip", "ss", "openssl", "import", "convert", "useradd", "chpasswd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("gateway end-to-end test: %s not found", tool)
		}
	}
	start := time.Now()
	dir := t.TempDir()
	bin := e2eBuild(t, dir)
	rdpNamespace(t)      // the host's link: 10.213.0.1 (broker, gateway) - 10.213.0.2 (xrdp, agent)
	gwClientNamespace(t) // the client's link: 10.214.0.1 (gateway) - 10.214.0.2 (xfreerdp)
	password, uid := rdpTestUser(t)
	hostAddr := rdpNSAddr + ":3389"

	// The broker, and xrdp with the agent in the host's namespace. The
	// agent's heartbeat is long: what turns the session Active below is
	// the gateway's report, not the agent.
	const admin = "vdb_admin_e2e_gateway_broker_test"
	const heartbeat = 15 * time.Second
	defaults := filepath.Join(dir, "rdp-defaults")
	os.WriteFile(defaults, []byte("redirectprinters:i:0\naudiomode:i:2\n"), 0o644)
	base := rdpServe(t, bin, filepath.Join(dir, "broker"), admin, "--rdp-defaults", defaults)
	api := e2eAPI{tb: t, base: base, token: admin}
	api.call("PUT", "/hostpools/"+rdpPool, map[string]any{"hostPoolType": "Pooled", "heartbeatTimeoutSeconds": 60}, 201, nil)
	var reg struct {
		Token string `json:"token"`
	}
	api.call("POST", "/hostpools/"+rdpPool+"/registrationtoken", map[string]any{"expiresInSeconds": 3600}, 201, &reg)
	gwHostXRDP(t)
	rdpStart(t, "ip", nil, inHostNS(bin, "agent", "--server", base, "--registration-token", reg.Token,
		"--host-name", rdpHostName, "--address", hostAddr, "--state-dir", filepath.Join(dir, "agent"),
		"--heartbeat-interval", heartbeat.String(), "--sessions-provider", "xrdp", "--log-level", "debug", "--insecure-http")...)
	e2eEventually(t, "the host Available", 30*time.Second, func() bool {
		h, ok := api.tryHost(rdpPool, rdpHostName)
		return ok && h.Status == vdibroker.StatusAvailable
	})

	// The gateway, on the client's link, with a Gateway token: the only
	// credential it holds.
	var gwTok struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	api.call("POST", "/tokens", map[string]any{"role": "Gateway", "subject": "gw-e2e"}, 201, &gwTok)
	tokenFile := filepath.Join(dir, "gateway.token")
	os.WriteFile(tokenFile, []byte(gwTok.Token+"\n"), 0o600)
	gw, gwAddr := gwStart(t, bin, dir, "--keys-url", base+"/api/v1/gateway/keys",
		"--broker-url", base+"/api/v1/gateway/tunnels", "--broker-token-file", tokenFile, "--insecure-http")
	// The pool's own gateway (the server has none): its connects go there.
	api.call("PATCH", "/hostpools/"+rdpPool, map[string]any{"gatewayHostName": gwAddr}, 200, nil)

	// The client reaches the gateway and not the host.
	if gwProbe(hostAddr) {
		t.Fatalf("the client's namespace reaches %s directly; the test's isolation is broken", hostAddr)
	}
	if !gwProbe(gwAddr) {
		t.Fatalf("the client's namespace does not reach the gateway at %s", gwAddr)
	}
	display := rdpXvfb(t)
	gwLogHas := func(s string) bool { return strings.Contains(gw.output(), s) }
	client := func(name, rdpFile string) *rdpDaemon {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(rdpFile), 0o600); err != nil {
			t.Fatal(err)
		}
		return rdpStart(t, "ip", []string{"DISPLAY=" + display}, "netns", "exec", gwClientNetns,
			"xfreerdp", path, "/p:"+password, "/cert:ignore", "/size:1024x768", "/log-level:INFO")
	}

	// Connect through the API: the .rdp names the gateway and holds the
	// broker's token.
	var first vdibroker.ConnectResponse
	api.call("POST", "/hostpools/"+rdpPool+"/connect", map[string]any{"user": rdpUser}, 201, &first)
	for _, line := range []string{"full address:s:" + hostAddr + "\r\n", "gatewayhostname:s:" + gwAddr + "\r\n",
		"gatewayusagemethod:i:1\r\n", "gatewaycredentialssource:i:5\r\n", "gatewayaccesstoken:s:v1."} {
		if !strings.Contains(first.RDPFile, line) {
			t.Fatalf("the broker's rdpFile lacks %q:\n%s", line, first.RDPFile)
		}
	}
	beforeTunnel := api.host(rdpPool, rdpHostName).LastHeartBeat
	c1 := client("first.rdp", first.RDPFile)

	// Active when the tunnel reaches the host: the gateway's report did
	// it, while the agent had not reported the session (its audit entry
	// says so), and the host counts it as connecting until the agent does.
	var active vdibroker.UserSession
	e2eEventually(t, "the session Active through the gateway", 60*time.Second, func() bool {
		s := api.sessions(rdpPool, url.Values{"user": {rdpUser}})
		if len(s) == 1 && s[0].State == vdibroker.StateActive {
			active = s[0]
		}
		return active.ID != ""
	})
	_, _, xorgThen := rdpXorg(uid)
	reached := gwAudit(api, "gateway.tunnel.reached", first.SessionID)
	if len(reached) != 1 {
		t.Fatalf("audit entries of the tunnel reaching the host: %+v, want 1", reached)
	}
	if after := gwAfter(t, reached[0]); after.State != vdibroker.StateActive || after.AgentSessionID != "" || after.Gateway != "gw-e2e" {
		t.Errorf("the session as the gateway's report left it: %+v, want Active, not yet reported by the agent, through gw-e2e", after)
	}
	if active.ID != first.SessionID || active.Gateway != "gw-e2e" || active.GatewayTime == nil {
		t.Errorf("the Active session %+v, want %s through gw-e2e", active, first.SessionID)
	}
	if active.AgentSessionID == "" {
		if h := api.host(rdpPool, rdpHostName); h.ConnectingSessions != 1 {
			t.Errorf("host connectingSessions %d while the agent has not reported the session, want 1", h.ConnectingSessions)
		}
	}
	t.Logf("Active %v after the connect; the user's X server existed then: %v; last heartbeat before the tunnel %v, now %v",
		active.StateTime.Sub(active.CreateTime).Round(time.Millisecond), xorgThen, *beforeTunnel, *api.host(rdpPool, rdpHostName).LastHeartBeat)

	// The user logs on to xrdp through the tunnel.
	var xorgPID, xdisplay int
	e2eEventually(t, "the user's xrdp session (its X server)", 60*time.Second, func() bool {
		var ok bool
		xorgPID, xdisplay, ok = rdpXorg(uid)
		return ok
	})
	e2eEventually(t, "the client attached through the gateway", 30*time.Second, func() bool { return rdpClientConnected(t, xdisplay) })
	gwScreenshot(t, display, "gateway-broker-client.png")
	// The agent confirms it: no longer connecting, still the same session.
	e2eEventually(t, "the agent's report of the session", 2*heartbeat+10*time.Second, func() bool {
		s := api.sessions(rdpPool, url.Values{"user": {rdpUser}})
		return len(s) == 1 && s[0].ID == first.SessionID && s[0].AgentSessionID != ""
	})
	if h := api.host(rdpPool, rdpHostName); h.Sessions != 1 || h.ConnectingSessions != 0 {
		t.Errorf("host counts %d sessions, %d connecting after the agent's report; want 1 and 0", h.Sessions, h.ConnectingSessions)
	}
	var rec struct {
		Chosen  string `json:"chosen"`
		Gateway *struct {
			Name string    `json:"name"`
			Time time.Time `json:"time"`
		} `json:"gateway"`
	}
	api.call("GET", "/hostpools/"+rdpPool+"/usersessions/"+first.SessionID+"/placement", nil, 200, &rec)
	if rec.Chosen != rdpHostName || rec.Gateway == nil || rec.Gateway.Name != "gw-e2e" {
		t.Errorf("decision record: chosen %s, gateway %+v; want %s reached through gw-e2e", rec.Chosen, rec.Gateway, rdpHostName)
	}

	// The client goes away: the tunnel closes and the session is
	// Disconnected by the gateway's report; the xrdp session stays.
	c1.stop()
	e2eEventually(t, "the session Disconnected by the tunnel's close", 20*time.Second, func() bool {
		return len(gwAudit(api, "gateway.tunnel.close", first.SessionID)) == 1
	})
	if after := gwAfter(t, gwAudit(api, "gateway.tunnel.close", first.SessionID)[0]); after.State != vdibroker.StateDisconnected {
		t.Errorf("the session as the tunnel's close left it: %+v, want Disconnected", after)
	}
	if s := api.sessions(rdpPool, url.Values{"user": {rdpUser}}); len(s) != 1 || s[0].State != vdibroker.StateDisconnected {
		t.Errorf("sessions after the close: %+v, want one Disconnected", s)
	}
	e2eEventually(t, "the client detached on the host", 20*time.Second, func() bool { return !rdpClientConnected(t, xdisplay) })
	if p, _, ok := rdpXorg(uid); !ok || p != xorgPID {
		t.Fatalf("the X server %d ended with the client (now %d, %v)", xorgPID, p, ok)
	}

	// Refused, with tokens the broker issued: the first .rdp again (its
	// token is used), an altered token and a token for another host.
	var fresh vdibroker.ConnectResponse
	api.call("POST", "/hostpools/"+rdpPool+"/connect", map[string]any{"user": rdpUser}, 200, &fresh)
	tok := regexp.MustCompile(`gatewayaccesstoken:s:(\S+)\r\n`).FindStringSubmatch(fresh.RDPFile)[1]
	parts := strings.Split(tok, ".")
	claims := strings.Split(regexp.MustCompile(`gatewayaccesstoken:s:(\S+)\r\n`).FindStringSubmatch(first.RDPFile)[1], ".")[2]
	altered := strings.Replace(fresh.RDPFile, tok, strings.Join([]string{parts[0], parts[1], claims, parts[3]}, "."), 1)
	otherHost := strings.Replace(fresh.RDPFile, "full address:s:"+hostAddr, "full address:s:"+rdpHostAddr+":3389", 1)
	for _, tc := range []struct{ name, rdp, reason, code string }{
		{"used token", first.RDPFile, "reason=token_reused", "E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED"},
		{"altered token", altered, "reason=token_bad_signature", "E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED"},
		{"token for another host", otherHost, "reason=target_mismatch", "E_PROXY_RAP_ACCESSDENIED"},
	} {
		before := strings.Count(gw.output(), tc.reason)
		c := client(strings.ReplaceAll(tc.name, " ", "-")+".rdp", tc.rdp)
		gwRefused(t, gw, c, tc.name, tc.reason, tc.code, before, xdisplay)
	}
	if s := api.sessions(rdpPool, url.Values{"user": {rdpUser}}); len(s) != 1 || s[0].State != vdibroker.StateDisconnected {
		t.Errorf("sessions after the refused tunnels: %+v, want the one Disconnected", s)
	}

	// The gateway's credential replaced without a restart, which would
	// drop every tunnel: a new Gateway token in its file, SIGHUP, the old
	// token deleted. The reconnect below is reported with the new one
	// (the broker refuses the deleted one, and the gateway then the
	// tunnel).
	var gwTok2 struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	api.call("POST", "/tokens", map[string]any{"role": "Gateway", "subject": "gw-e2e"}, 201, &gwTok2)
	if err := os.WriteFile(tokenFile, []byte(gwTok2.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	readBefore := strings.Count(gw.output(), "SIGHUP: token file read")
	if err := gw.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	e2eEventually(t, "the gateway reading its token file again", 20*time.Second, func() bool {
		return strings.Count(gw.output(), "SIGHUP: token file read") > readBefore
	})
	api.call("DELETE", "/tokens/"+gwTok.ID, nil, 204, nil)

	// Reconnect through the broker (R-C1): the same session, a new token,
	// the same X server; Active again at the tunnel.
	var again vdibroker.ConnectResponse
	api.call("POST", "/hostpools/"+rdpPool+"/connect", map[string]any{"user": rdpUser}, 200, &again)
	if !again.Reconnect || again.SessionID != first.SessionID || again.RDPFile == first.RDPFile {
		t.Fatalf("reconnect answer %+v, want session %s again with a new token", again, first.SessionID)
	}
	c2 := client("again.rdp", again.RDPFile)
	e2eEventually(t, "the session Active again through the gateway", 60*time.Second, func() bool {
		return len(gwAudit(api, "gateway.tunnel.reached", first.SessionID)) == 2
	})
	e2eEventually(t, "the client attached again", 60*time.Second, func() bool { return rdpClientConnected(t, xdisplay) })
	if p, _, ok := rdpXorg(uid); !ok || p != xorgPID {
		t.Fatalf("reconnect landed on X server %d (%v), want the session's %d", p, ok, xorgPID)
	}
	if s := api.sessions(rdpPool, url.Values{"user": {rdpUser}}); len(s) != 1 || s[0].State != vdibroker.StateActive {
		t.Errorf("sessions after the reconnect: %+v, want one Active", s)
	}

	// Logoff through the API (R-S4): the agent ends the xrdp session at
	// its next heartbeat, the client is told, the tunnel closes.
	api.call("DELETE", "/hostpools/"+rdpPool+"/usersessions/"+first.SessionID, nil, 202, nil)
	e2eEventually(t, "the user's processes gone from the host", 2*heartbeat+15*time.Second, func() bool { return len(rdpUserProcs(uid, false)) == 0 })
	e2eEventually(t, "the broker's session LoggedOff", 30*time.Second, func() bool {
		s := api.sessions(rdpPool, url.Values{"user": {rdpUser}, "state": {vdibroker.StateLoggedOff}})
		return len(s) == 1 && s[0].ID == first.SessionID && len(api.sessions(rdpPool, url.Values{"user": {rdpUser}})) == 0
	})
	select {
	case <-c2.done:
	case <-time.After(20 * time.Second):
		t.Error("xfreerdp still runs after the logoff ended its session")
	}
	e2eEventually(t, "the gateway's tunnel closed", 20*time.Second, func() bool { return strings.Count(gw.output(), `msg="tunnel closed"`) >= 3 })
	if gwLogHas("reason=broker_unavailable") {
		t.Errorf("the gateway could not reach the broker:\n%s", tail(gw.output(), 3000))
	}
	t.Logf("gateway end-to-end test with the broker took %v", time.Since(start).Round(time.Second))
}
