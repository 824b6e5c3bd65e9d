package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/agent"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/store"
)

// testCA is a certificate authority of the test's own.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // the CA certificate, PEM
}

func newTestCA(t *testing.T, dir string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "vdibroker test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{cert: cert, key: key, file: filepath.Join(dir, "ca.pem")}
	writePEM(t, ca.file, "CERTIFICATE", der)
	return ca
}

// issue writes a certificate for name (a server for 127.0.0.1, or a client)
// and its key, and returns their paths.
func (ca *testCA) issue(t *testing.T, dir, name string, serial int64, client bool) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTLSAgentEndToEnd (R-SEC): serve over HTTPS with agent client
// certificates required; an agent with --ca-file and a client certificate
// registers and heartbeats (its host turns Available); one without a
// client certificate is refused; the CLI's client verifies the broker
// against the CA; a renewed server certificate is served without a
// restart.
func TestTLSAgentEndToEnd(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	srvCert, srvKey := ca.issue(t, dir, "broker", 2, false)
	agentCert, agentKey := ca.issue(t, dir, "tls-01", 3, true) // its name is the host's (R-SEC)
	certClock := clocktesting.NewFakePassiveClock(time.Now())
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(), TLSCert: srvCert, TLSKey: srvKey, TLSClientCA: ca.file, TLSClock: certClock}
	if err := m.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if !strings.HasPrefix(m.URL(), "https://") {
		t.Fatalf("URL %s, want https", m.URL())
	}
	ctx := t.Context()
	verified, err := clientTLSOptions{CAFile: ca.file}.httpClient(m.URL(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	admin := vhttp.NewClient(m.URL(), m.AdminToken)
	admin.HTTPClient = verified
	if _, err := admin.PutHostPool(ctx, "tlspool", map[string]any{}); err != nil {
		t.Fatalf("API over HTTPS with the CA: %v", err)
	}
	rt, err := admin.CreateRegistrationToken(ctx, "tlspool", vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}

	// Without a client certificate: refused.
	bare := &agent.Client{Server: m.URL(), HTTP: verified}
	_, err = bare.Register(ctx, vdibroker.RegisterRequest{Token: rt.Token, HostName: "tls-02", Address: "127.0.0.1:3389"})
	if vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
		t.Errorf("register without a client certificate: %v, want Unauthenticated", err)
	}

	// The real agent with --ca-file, --client-cert and --client-key.
	hc, err := clientTLSOptions{CAFile: ca.file, CertFile: agentCert, KeyFile: agentKey}.httpClient(m.URL(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{Server: m.URL(), RegistrationToken: rt.Token, HostName: "tls-01", Address: "127.0.0.1:3389",
		HeartbeatInterval: 200 * time.Millisecond, HTTPClient: hc, Sessions: agent.NoSessions{},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	actx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(actx) }()
	t.Cleanup(func() { stop(); <-done })
	deadline := time.Now().Add(20 * time.Second)
	for {
		h, err := admin.GetSessionHost(ctx, "tlspool", "tls-01")
		if err == nil && h.Status == vdibroker.StatusAvailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent's host is not Available over mTLS after 20 s: %+v, %v", h, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A client that does not trust the CA is refused by TLS itself.
	if _, err := http.Get(m.URL() + "/healthz"); err == nil {
		t.Error("GET over HTTPS without the CA succeeded; want a certificate error")
	}

	// Renew the server certificate in place: new connections get it.
	// The reloader looks at the files at most once a second of its clock.
	certClock.SetTime(certClock.Now().Add(1100 * time.Millisecond))
	renewedCert, renewedKey := ca.issue(t, dir, "broker-renewed", 99, false)
	for src, dst := range map[string]string{renewedCert: srvCert, renewedKey: srvKey} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	future := time.Now().Add(2 * time.Second)
	os.Chtimes(srvCert, future, future)
	os.Chtimes(srvKey, future, future)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	var serial int64
	for range 2 { // the first handshake after the change triggers the reload
		conn, err := tls.Dial("tcp", strings.TrimPrefix(m.URL(), "https://"), &tls.Config{RootCAs: pool})
		if err != nil {
			t.Fatal(err)
		}
		serial = conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
		conn.Close()
	}
	if serial != 99 {
		t.Errorf("after renewing the certificate the broker serves serial %d, want 99", serial)
	}
}

// TestAgentRefusesPlainHTTPOffLoopback: the agent and CLI send
// credentials; plain http:// is allowed to loopback only, unless
// --insecure-http.
func TestAgentRefusesPlainHTTPOffLoopback(t *testing.T) {
	for _, tc := range []struct {
		url      string
		insecure bool
		ok       bool
	}{
		{"http://127.0.0.1:8080", false, true},
		{"http://localhost:8080", false, true},
		{"http://[::1]:8080", false, true},
		{"https://broker.example.com", false, true},
		{"http://broker.example.com:8080", false, false},
		{"http://10.0.0.5:8080", false, false},
		{"http://broker.example.com:8080", true, true},
		{"broker.example.com:8080", false, false},
		{"ftp://broker.example.com", true, false},
	} {
		_, err := clientTLSOptions{InsecureHTTP: tc.insecure}.httpClient(tc.url, time.Second)
		if (err == nil) != tc.ok {
			t.Errorf("httpClient(%q, insecure=%v) = %v, want ok=%v", tc.url, tc.insecure, err, tc.ok)
		}
		if err != nil && !isUsageError(err) {
			t.Errorf("httpClient(%q): %v is not a usage error (exit 2)", tc.url, err)
		}
	}
}

// TestCLIOverTLSAndHostIdentity (R-SEC): the admin CLI verifies the
// broker against --ca-file (and fails without it), refuses plain http://
// off loopback before sending anything, and drives the host-identity
// verbs: a one-use registration token, its listing and revocation, and a
// host's registration reset.
func TestCLIOverTLSAndHostIdentity(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	cert, key := ca.issue(t, dir, "broker", 2, false)
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(), TLSCert: cert, TLSKey: key}
	if err := m.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	cli := func(args ...string) cliResult {
		return runCLI(t, append(args, "--server", m.URL(), "--token", m.AdminToken)...)
	}
	if r := cli("hostpool", "list"); r.code == 0 {
		t.Errorf("hostpool list over HTTPS without --ca-file succeeded: %s", r.stdout)
	}
	if r := runCLI(t, "hostpool", "list", "--server", "http://10.0.0.5:8080", "--token", "x"); r.code != 2 || !strings.Contains(r.stderr, "insecure-http") {
		t.Errorf("plain http:// off loopback: exit %d, %q; want 2 and a hint about --insecure-http", r.code, r.stderr)
	}
	tls := func(args ...string) cliResult { return cli(append(args, "--ca-file", ca.file)...) }
	if r := tls("hostpool", "create", "--name", "clipool"); r.code != 0 {
		t.Fatalf("hostpool create over HTTPS with --ca-file: exit %d: %s", r.code, r.stderr)
	}
	r := tls("registration-token", "create", "--host-pool", "clipool", "--max-hosts", "1", "-o", "json")
	if r.code != 0 {
		t.Fatalf("registration-token create --max-hosts 1: %s", r.stderr)
	}
	var rt struct{ ID, Token string }
	if err := json.Unmarshal([]byte(r.stdout), &rt); err != nil || rt.Token == "" {
		t.Fatalf("registration-token create answered %q", r.stdout)
	}
	hc, err := clientTLSOptions{CAFile: ca.file}.httpClient(m.URL(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ac := &agent.Client{Server: m.URL(), HTTP: hc}
	if _, err := ac.Register(t.Context(), vdibroker.RegisterRequest{Token: rt.Token, HostName: "cli-01", Address: "127.0.0.1:3389"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.Register(t.Context(), vdibroker.RegisterRequest{Token: rt.Token, HostName: "cli-02", Address: "127.0.0.1:3389"}); vdibroker.ErrorCode(err) != vdibroker.EPermission {
		t.Errorf("a second host with a one-use token: %v, want PermissionDenied", err)
	}
	if r := tls("registration-token", "list", "--host-pool", "clipool", "-o", "tsv", "--query", "[].[id, maxHosts, hosts]"); r.code != 0 || !strings.Contains(r.stdout, rt.ID+"\t1\t1") {
		t.Errorf("registration-token list: exit %d %q; want %s with maxHosts 1, hosts 1", r.code, r.stdout, rt.ID)
	}
	if r := tls("sessionhost", "reset-registration", "--host-pool", "clipool", "--name", "cli-01"); r.code != 0 {
		t.Errorf("sessionhost reset-registration: exit %d: %s", r.code, r.stderr)
	}
	if r := tls("token", "create", "--role", "Reader", "--subject", "auditor", "--host-pools", "clipool", "-o", "json", "--query", "hostPools"); r.code != 0 || !strings.Contains(r.stdout, `"clipool"`) {
		t.Errorf("token create --host-pools: exit %d %q; want the token scoped to clipool", r.code, r.stdout)
	}
	if r := tls("registration-token", "delete", "--host-pool", "clipool", "--id", rt.ID); r.code != 0 {
		t.Errorf("registration-token delete: exit %d: %s", r.code, r.stderr)
	}
	if _, err := ac.Register(t.Context(), vdibroker.RegisterRequest{Token: rt.Token, HostName: "cli-01", Address: "127.0.0.1:3389"}); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
		t.Errorf("registering with a deleted token: %v, want Unauthenticated", err)
	}
}

// TestPodClientTrustsTheFederationCA (review): pod-to-pod calls over HTTPS
// verify the peers against --federation-ca-file; without it, a pod whose
// certificate a private CA signed is refused.
func TestPodClientTrustsTheFederationCA(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	cert, key := ca.issue(t, dir, "pod", 5, false)
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte("a-federation-secret-of-32-bytes!"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, withCA := range []bool{false, true} {
		// The peer is on loopback: allowed by name (R-SEC: not by default).
		f := FederationFlags{PodName: "fra1", SecretFile: secretFile, PodTimeout: time.Second, Allow: []string{"127.0.0.1"}}
		if withCA {
			f.CAFile = ca.file
		}
		if err := f.load(); err != nil {
			t.Fatal(err)
		}
		resp, err := f.podClient().HTTPClient.Get(ts.URL)
		if resp != nil {
			resp.Body.Close()
		}
		if withCA && err != nil {
			t.Errorf("with --federation-ca-file the pod call failed: %v", err)
		}
		if !withCA && err == nil {
			t.Errorf("without --federation-ca-file a privately signed pod was trusted")
		}
	}
}

// TestServeTLSFlagsCheckedBeforeTheStore: serve's --tls-* mistakes (one
// of the pair, a certificate file that is not there) are said before the
// store is created or migrated: the data dir holds no database after.
func TestServeTLSFlagsCheckedBeforeTheStore(t *testing.T) {
	dir := t.TempDir()
	cert, _ := newTestCA(t, dir).issue(t, dir, "broker", 1, false)
	for _, tc := range []struct {
		name      string
		cert, key string
		want      string
	}{
		{"the certificate without its key", cert, "", "--tls-cert and --tls-key go together"},
		{"a key file not there", cert, filepath.Join(dir, "missing.key"), "missing.key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			m := &Main{Listen: "127.0.0.1:0", DataDir: data, TLSCert: tc.cert, TLSKey: tc.key}
			err := m.Open(t.Context())
			if err == nil {
				m.Close()
				t.Fatal("serve started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q; want it to say %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(data, store.SQLiteFile)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("after the refusal the data dir holds %s (%v); want no store made", store.SQLiteFile, err)
			}
		})
	}
}

// TestPlainHTTPWarning: serve warns when it listens without TLS on an
// address other than loopback (clients refuse http:// there without
// --insecure-http), and says nothing on loopback or with TLS.
func TestPlainHTTPWarning(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		tls  bool
		warn bool
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, false, false},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 8080}, false, false},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 8080}, false, true},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, false, true},
		{&net.TCPAddr{IP: net.IPv4(192, 0, 2, 10), Port: 8080}, false, true},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 8443}, true, false},
	} {
		w := plainHTTPWarning(tc.addr, tc.tls)
		if (w != "") != tc.warn || (tc.warn && !strings.Contains(w, "--tls-cert")) {
			t.Errorf("%v, TLS %v: %q; want a warning naming --tls-cert: %v", tc.addr, tc.tls, w, tc.warn)
		}
	}
}
