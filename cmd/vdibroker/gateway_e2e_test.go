//go:build linux

package main

// The gateway's end-to-end test (phase 1, without the broker): a real
// FreeRDP 2.11 client logs on to a real xrdp session host through a real
// `vdibroker gateway`, and cannot reach the host without it. The host
// (xrdp in the RDP test's namespace) and the client (xfreerdp in a second
// namespace with one route: to the gateway) are on two private links the
// test made; only the gateway, in the root namespace, is on both.

import (
	"crypto/ed25519"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/gatewaytoken"
)

const (
	gwClientNetns = "vdbgw-client"
	gwVethHost    = "vdbgw0"
	gwVethClient  = "vdbgw1"
	gwHostAddr    = "10.214.0.1" // the gateway's side of the client's link
	gwClientAddr  = "10.214.0.2"
)

// gwClientNamespace makes the client's namespace: one link to the root
// namespace and no default route, so the client reaches 10.214.0.1 (the
// gateway) and nothing else.
func gwClientNamespace(t *testing.T) {
	exec.Command("ip", "netns", "del", gwClientNetns).Run() // a crashed run's
	exec.Command("ip", "link", "del", gwVethHost).Run()
	rdpRun(t, "ip", "netns", "add", gwClientNetns)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", gwClientNetns).CombinedOutput(); err != nil {
			t.Errorf("delete namespace %s: %v %s", gwClientNetns, err, out)
		}
	})
	rdpRun(t, "ip", "link", "add", gwVethHost, "type", "veth", "peer", "name", gwVethClient)
	rdpRun(t, "ip", "link", "set", gwVethClient, "netns", gwClientNetns)
	rdpRun(t, "ip", "addr", "add", gwHostAddr+"/30", "dev", gwVethHost)
	rdpRun(t, "ip", "link", "set", gwVethHost, "up")
	rdpRun(t, "ip", "netns", "exec", gwClientNetns, "ip", "addr", "add", gwClientAddr+"/30", "dev", gwVethClient)
	rdpRun(t, "ip", "netns", "exec", gwClientNetns, "ip", "link", "set", gwVethClient, "up")
	rdpRun(t, "ip", "netns", "exec", gwClientNetns, "ip", "link", "set", "lo", "up")
}

// inHostNS is the args of `ip` that run a command in the host's namespace.
func inHostNS(args ...string) []string { return append([]string{"netns", "exec", rdpNetns}, args...) }

// gwHostXRDP starts xrdp-sesman and xrdp, as packaged, in the host's
// namespace and waits until both listen.
func gwHostXRDP(t *testing.T) {
	t.Helper()
	rdpPIDFiles(t)
	rdpStart(t, "ip", nil, inHostNS("xrdp-sesman", "--nodaemon")...)
	rdpStart(t, "ip", nil, inHostNS("xrdp", "--nodaemon")...)
	e2eEventually(t, "xrdp listening on "+rdpNSAddr+":3389 and sesman on [::1]:3350", 20*time.Second, func() bool {
		out, _ := exec.Command("ip", inHostNS("ss", "-Hltn")...).Output()
		return strings.Contains(string(out), ":3389") && strings.Contains(string(out), "[::1]:3350")
	})
}

// gwProbe says whether a TCP connect from the client's namespace to addr
// succeeds within 3 s.
func gwProbe(addr string) bool {
	host, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command("ip", "netns", "exec", gwClientNetns, "timeout", "3", "bash", "-c",
		fmt.Sprintf("exec 3<>/dev/tcp/%s/%s", host, port))
	return cmd.Run() == nil
}

// gwSelfSigned writes a certificate for the gateway's address.
func gwSelfSigned(t *testing.T, dir string) (cert, key string) {
	cert, key = filepath.Join(dir, "gw.crt"), filepath.Join(dir, "gw.key")
	rdpRun(t, "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-keyout", key, "-out", cert,
		"-days", "1", "-nodes", "-subj", "/CN="+gwHostAddr, "-addext", "subjectAltName=IP:"+gwHostAddr)
	return cert, key
}

func TestGatewayE2EXfreerdpThroughGateway(t *testing.T) {
	if os.Getenv("VDIBROKER_TEST_RDP") != "1" {
		t.Skip("gateway end-to-end test: set VDIBROKER_TEST_RDP=1 to run it (as root, with xrdp xorgxrdp freerdp2-x11 xvfb imagemagick iproute2 openssl; .ci/run installs them)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("gateway end-to-end test: VDIBROKER_TEST_RDP=1 needs root (network namespaces, a local user, xrdp)")
	}
	for _, tool := range []string{"xrdp", "xrdp-sesman", "xfreerdp", "Xvfb", "ip", "ss", "openssl", "import", "convert"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("gateway end-to-end test: %s not found", tool)
		}
	}
	start := time.Now()
	dir := t.TempDir()
	bin := e2eBuild(t, dir)
	rdpNamespace(t) // the host's link: 10.213.0.1 (root) - 10.213.0.2 (xrdp)
	gwClientNamespace(t)
	password, uid := rdpTestUser(t)
	hostAddr := rdpNSAddr + ":3389"

	// The session host: xrdp as packaged, in its namespace.
	gwHostXRDP(t)

	// The client cannot reach the host: no route from its namespace.
	if gwProbe(hostAddr) {
		t.Fatalf("the client's namespace reaches %s directly; the test's isolation is broken", hostAddr)
	}

	// The test's own token key, published to the gateway as a JWKS file.
	signer, err := gatewaytoken.GenerateSigner("e2e-1")
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := gatewaytoken.MarshalJWKS(map[string]ed25519.PublicKey{"e2e-1": signer.PublicKey()})
	keysFile := filepath.Join(dir, "keys.json")
	os.WriteFile(keysFile, jwks, 0o644)
	gw, gwAddr := gwStart(t, bin, dir, "--keys-file", keysFile)
	if !gwProbe(gwAddr) {
		t.Fatalf("the client's namespace does not reach the gateway at %s", gwAddr)
	}
	display := rdpXvfb(t)

	mint := func(mut func(*gatewaytoken.Claims)) string {
		now := time.Now()
		c := gatewaytoken.Claims{ID: gatewaytoken.NewID(), User: rdpUser, Session: "e2e-session", Pool: "e2e-pool",
			Host: hostAddr, NotBefore: now.Unix(), Expiry: now.Add(5 * time.Minute).Unix()}
		if mut != nil {
			mut(&c)
		}
		tok, err := signer.Sign(c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	// The .rdp file a broker would hand out: the host's address, and the
	// gateway with its access token.
	rdpFile := func(tok string) string {
		return strings.Join([]string{"full address:s:" + hostAddr, "username:s:" + rdpUser,
			"gatewayhostname:s:" + gwAddr, "gatewayusagemethod:i:1", "gatewaycredentialssource:i:5",
			"gatewayprofileusagemethod:i:1", "gatewayaccesstoken:s:" + tok, "redirectprinters:i:0", "audiomode:i:2", ""}, "\r\n")
	}
	client := func(name, tok string, extra ...string) *rdpDaemon {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(rdpFile(tok)), 0o600); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"netns", "exec", gwClientNetns, "xfreerdp", path, "/p:" + password, "/cert:ignore", "/size:1024x768"}, extra...)
		return rdpStart(t, "ip", []string{"DISPLAY=" + display}, args...)
	}
	gwLogHas := func(s string) bool { return strings.Contains(gw.output(), s) }

	// A direct connect from the client's namespace fails too, as a client.
	direct := rdpStart(t, "ip", []string{"DISPLAY=" + display}, "netns", "exec", gwClientNetns,
		"xfreerdp", "/v:"+hostAddr, "/u:"+rdpUser, "/p:"+password, "/cert:ignore")
	select {
	case <-direct.done:
	case <-time.After(60 * time.Second):
		t.Fatal("a direct xfreerdp to the host still runs after 60 s")
	}
	if _, _, ok := rdpXorg(uid); ok {
		t.Fatal("a direct connect made a session")
	}

	// Through the gateway on two HTTP connections (RDG_OUT_DATA, RDG_IN_DATA):
	// the user logs on to a real xrdp session.
	first := client("two-connections.rdp", mint(nil), "/gt:http,no-websockets")
	var xdisplay int
	e2eEventually(t, "the user's xrdp session (its X server)", 60*time.Second, func() bool {
		var ok bool
		_, xdisplay, ok = rdpXorg(uid)
		return ok
	})
	e2eEventually(t, "the client attached through the gateway", 30*time.Second, func() bool { return rdpClientConnected(t, xdisplay) })
	if !gwLogHas("tunnel reached its host") {
		t.Fatalf("the gateway did not log the tunnel:\n%s", tail(gw.output(), 2000))
	}
	gwScreenshot(t, display, "gateway-client.png")
	first.stop()
	e2eEventually(t, "the client detached", 20*time.Second, func() bool { return !rdpClientConnected(t, xdisplay) })
	e2eEventually(t, "the gateway's tunnel closed", 20*time.Second, func() bool { return gwLogHas("msg=\"tunnel closed\"") })

	// Again over the WebSocket variant, FreeRDP's default: back to the same
	// session.
	ws := client("websocket.rdp", mint(nil))
	e2eEventually(t, "the client attached again over WebSocket", 60*time.Second, func() bool { return rdpClientConnected(t, xdisplay) })
	ws.stop()
	e2eEventually(t, "the client detached again", 20*time.Second, func() bool { return !rdpClientConnected(t, xdisplay) })

	// Refused tokens: each client ends without reaching the host, and the
	// gateway says why.
	valid := mint(nil)
	parts := strings.Split(valid, ".")
	otherHost := mint(func(c *gatewaytoken.Claims) { c.Host = rdpHostAddr + ":3389" })
	altered := strings.Join([]string{parts[0], parts[1], strings.Split(otherHost, ".")[2], parts[3]}, ".")
	for _, tc := range []struct{ name, tok, reason, code string }{
		{"token for another host", otherHost, "reason=target_mismatch", "E_PROXY_RAP_ACCESSDENIED"},
		{"expired token", mint(func(c *gatewaytoken.Claims) {
			c.NotBefore, c.Expiry = time.Now().Add(-20*time.Minute).Unix(), time.Now().Add(-10*time.Minute).Unix()
		}), "reason=token_expired", "E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED"},
		{"altered token", altered, "reason=token_bad_signature", "E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED"},
	} {
		before := strings.Count(gw.output(), tc.reason)
		c := client(strings.ReplaceAll(tc.name, " ", "-")+".rdp", tc.tok, "/log-level:DEBUG")
		gwRefused(t, gw, c, tc.name, tc.reason, tc.code, before, xdisplay)
	}
	t.Logf("gateway end-to-end test took %v", time.Since(start).Round(time.Second))
}

// gwRefused waits, bounded, for a client the gateway must refuse to end,
// and checks that the gateway logged reason once more than before, that
// the client reported the protocol's code, and that no client is
// attached to the session on xdisplay.
func gwRefused(t *testing.T, gw, c *rdpDaemon, name, reason, code string, before, xdisplay int) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: xfreerdp still runs after 60 s", name)
	}
	if strings.Count(gw.output(), reason) <= before {
		t.Errorf("%s: the gateway did not log %s:\n%s", name, reason, tail(gw.output(), 2000))
	}
	if !strings.Contains(c.output(), code) {
		t.Errorf("%s: xfreerdp did not report %s:\n%s", name, code, tail(c.output(), 2000))
	}
	if rdpClientConnected(t, xdisplay) {
		t.Fatalf("%s: a client is attached to the session", name)
	}
}

// gwStart runs `vdibroker gateway` named gw-e2e on the client's link
// (10.214.0.1, a port of its own) with a certificate for that address and
// args, and returns it once it listens, with its address.
func gwStart(t *testing.T, bin, dir string, args ...string) (*rdpDaemon, string) {
	t.Helper()
	cert, key := gwSelfSigned(t, dir)
	gw := rdpStart(t, bin, nil, append([]string{"gateway", "--listen", gwHostAddr + ":0", "--tls-cert", cert, "--tls-key", key,
		"--name", "gw-e2e", "--log-level", "debug"}, args...)...)
	listening := regexp.MustCompile(`vdibroker gateway listening on (\S+)`)
	var addr string
	e2eEventually(t, "the gateway listening", 20*time.Second, func() bool {
		if m := listening.FindStringSubmatch(gw.output()); m != nil {
			addr = m[1]
		}
		return addr != ""
	})
	return gw, addr
}

// gwScreenshot saves the client's display as name in the artifact
// directory once its window shows more than one colour.
func gwScreenshot(t *testing.T, display, name string) {
	path := filepath.Join(artifactDir(t), name)
	var colours string
	e2eEventually(t, "the client's window drawn", 20*time.Second, func() bool {
		rdpRun(t, "import", "-display", display, "-window", "root", path)
		colours = strings.TrimSpace(rdpRun(t, "convert", path, "-format", "%k", "info:"))
		n, _ := strconv.Atoi(colours)
		return n > 1
	})
	t.Logf("screenshot: %s (%s colours)", path, colours)
}
