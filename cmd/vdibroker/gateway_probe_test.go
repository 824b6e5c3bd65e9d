package main

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/syncbuf"
)

// TestGatewayStartChecksBrokerURL (R-GW4; docs/gateway.md, "Deploying
// with the broker", step 5): the standalone gateway checks --broker-url
// and its Gateway token at start against a real broker and says what to
// fix, instead of starting silently and refusing every user's tunnel
// later as broker_refused ("the broker did not issue the token"): a URL
// that is the broker's but not its tunnel API, a token the broker
// refuses, a broker that does not answer. Right, it says the broker
// takes its reports, under the name of its token's gateway (R-GW4); a
// Gateway token of another gateway names --name to fix, and the admin
// token, which the broker still takes, is warned of, naming the command
// that makes a Gateway token. It starts in every case. A web page answered in
// the broker's stead (a proxy's, say) is named in the warning as quoted
// text: its control characters (an escape sequence, a line break) reach
// neither the log as such nor the terminal.
func TestGatewayStartChecksBrokerURL(t *testing.T) {
	b := startCLIBroker(t)
	api := vhttp.NewClient(b.m.URL(), b.m.AdminToken)
	gw, err := api.CreateToken(t.Context(), vhttp.TokenRequest{Role: "Gateway", Subject: "rdgw"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := api.CreateToken(t.Context(), vhttp.TokenRequest{Role: "Gateway", Subject: "rdgw-other"})
	if err != nil {
		t.Fatal(err)
	}
	// A port nothing listens on: one taken and given back.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/api/v1/gateway/tunnels"
	ln.Close()
	// A web server that is not the broker, whose 404 page holds an
	// escape sequence and line breaks.
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, "<html>\n\x1b[2J\x1b[31mnot here\r\nlevel=ERROR msg=forged\n</html>")
	}))
	defer page.Close()
	// A broker of an earlier release: its check's answer names no
	// gateway, as it takes the name each report gives.
	older := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/api/v1/gateway/tunnels/check" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, `{"open": []}`)
	}))
	defer older.Close()
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	cert, key := ca.issue(t, dir, "gateway", 2, false)
	tunnels := b.m.URL() + "/api/v1/gateway/tunnels"
	for _, tc := range []struct {
		name, url, token string
		want             []string
		noName           bool // started without --name
	}{
		{"right", tunnels, gw.Secret, []string{"level=INFO", "broker takes this gateway's reports", "gateway=rdgw"}, false},
		{"no --name", tunnels, gw.Secret, []string{"level=INFO", "broker takes this gateway's reports", "gateway=rdgw"}, true},
		{"no --name, an older broker", older.URL + "/api/v1/gateway/tunnels", gw.Secret, []string{"level=WARN", "--name: the broker takes this gateway's reports, but it is older than this gateway", "through no gateway", "upgrade the broker first"}, true},
		{"another gateway's token", tunnels, other.Secret, []string{"level=WARN", "--name: the broker's Gateway token in --broker-token-file is another gateway's", `for gateway \"rdgw-other\", not \"rdgw\"`, "--role Gateway --subject"}, false},
		{"the admin token", tunnels, b.m.AdminToken, []string{"level=INFO", "broker takes this gateway's reports", "level=WARN", "--broker-token-file: the admin token, which may do anything", "vdibroker token create --role Gateway"}, false},
		{"the broker's root", b.m.URL() + "/", gw.Secret, []string{"level=WARN", "--broker-url: no tunnel API there", "/api/v1/gateway/tunnels"}, false},
		{"tunnels left off", b.m.URL() + "/api/v1/gateway", gw.Secret, []string{"level=WARN", "--broker-url: no tunnel API there", "no API at POST /api/v1/gateway/check"}, false},
		{"a token the broker refuses", tunnels, "vdbt_not_issued", []string{"level=WARN", "--broker-token-file: the broker refused this gateway's token", "--role Gateway"}, false},
		{"no token", tunnels, "", []string{"level=WARN", "--broker-token-file: the broker refused this gateway's token"}, false},
		{"nothing listens", closed, gw.Secret, []string{"level=WARN", "--broker-url: the broker did not answer", "connection refused"}, false},
		{"a web page", page.URL + "/api/v1/gateway/tunnels", gw.Secret, []string{"level=WARN", "--broker-url: no tunnel API there", `\x1b[31mnot here\r\nlevel=ERROR msg=forged`}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncbuf.Buffer
			name := "rdgw"
			if tc.noName {
				name = ""
			}
			m := &GatewayMain{Listen: "127.0.0.1:0", TLSCert: cert, TLSKey: key, Name: name,
				KeysURL: b.m.URL() + "/api/v1/gateway/keys", BrokerURL: tc.url, BrokerToken: tc.token,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
			if err := m.Open(t.Context()); err != nil {
				t.Fatalf("the gateway did not start: %v", err)
			}
			defer m.Close()
			<-m.probed
			got := logs.String()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("the start's log lacks %q:\n%s", w, got)
				}
			}
			for _, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
				if !strings.HasPrefix(line, "time=") || strings.ContainsAny(line, "\x1b\r") {
					t.Errorf("a log line that is not one of the logger's, or holds a control character: %q", line)
				}
			}
		})
	}
	// The checks the broker took wrote nothing to its audit trail.
	es, err := api.ListAudit(t.Context(), vhttp.AuditQuery{Principal: "rdgw"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.Action != "token.create" {
			t.Errorf("a gateway's start check left an audit entry: %s %s %s", e.Action, e.Target, e.Outcome)
		}
	}
}

// TestGatewayStartDoesNotWaitForBroker (R-GW4): a broker that takes the
// connection and never answers (as one behind a firewall that drops its
// packets holds the check until its timeout) does not hold the start:
// the gateway serves while its check waits, and a Close during the
// check ends it without a warning that the broker did not answer.
func TestGatewayStartDoesNotWaitForBroker(t *testing.T) {
	b := startCLIBroker(t)
	// The kernel completes the connections to a listener nobody
	// accepts from: the check's request is sent and never answered.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	cert, key := ca.issue(t, dir, "gateway", 2, false)
	var logs syncbuf.Buffer
	m := &GatewayMain{Listen: "127.0.0.1:0", TLSCert: cert, TLSKey: key, Name: "rdgw-probe",
		KeysURL: b.m.URL() + "/api/v1/gateway/keys", BrokerURL: "http://" + silent.Addr().String() + "/api/v1/gateway/tunnels", BrokerToken: "vdbt_x",
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	if err := m.Open(t.Context()); err != nil {
		t.Fatalf("the gateway did not start: %v", err)
	}
	select {
	case <-m.probed:
		t.Fatalf("the check of a broker that never answers ended before the gateway served:\n%s", logs.String())
	default:
	}
	// It serves: a TLS handshake with it completes.
	conn, err := tls.Dial("tcp", m.Addr(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("the gateway does not serve while its check waits: %v", err)
	}
	conn.Close()
	m.Close()
	<-m.probed
	if got := logs.String(); strings.Contains(got, "did not answer") {
		t.Errorf("a check cut short by Close warned that the broker did not answer:\n%s", got)
	}
}
