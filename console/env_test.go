package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/console"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/pgtest"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/store"
)

const adminToken = "console-test-admin"

// suitePostgres is set while TestConsolePostgres reruns console tests on
// PostgreSQL: newEnvWith then opens a schema of the test's own.
var suitePostgres bool

// env is the real broker (SQLite store, API server) with the console
// mounted at "/" on its mux, served on 127.0.0.1 by httptest.
type env struct {
	t      *testing.T
	url    string
	store  vdibroker.Store
	admin  *vhttp.Client
	agents map[string]string // host -> credential
	ts     *httptest.Server  // newPodEnvNamed's, to stop the pod
}

func newEnv(t *testing.T) *env { return newEnvWith(t, nil) }

// newEnvWith lets a test adjust the console's Config (clock, TTL).
func newEnvWith(t *testing.T, adjust func(*console.Config)) *env {
	t.Helper()
	ctx := context.Background()
	dsn := ""
	if suitePostgres {
		dsn = pgtest.SchemaDSN(t, "vdibroker_console_", "console PostgreSQL test")
	}
	st, err := store.Open(ctx, dsn, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	srv := testserver.New(testserver.Config{Store: st, AdminToken: adminToken})
	t.Cleanup(func() { srv.Close() })
	cfg := console.Config{API: srv.Handler(), Store: st, Sessions: st, Refusals: &console.AuditRefusals{Audit: srv.Broker}}
	if adjust != nil {
		adjust(&cfg)
	}
	c := console.New(cfg)
	t.Cleanup(func() { c.Close() })
	srv.Mux().Handle("/", c)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &env{t: t, url: ts.URL, store: st, admin: vhttp.NewClient(ts.URL, adminToken), agents: map[string]string{}}
}

// seed creates pool "pool-a" (DepthFirst, limit 4) with three hosts that
// heartbeat (Available) and connects users, so DepthFirst fills host-1
// first (R-DF2).
func (e *env) seed(users ...string) {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.admin.PutHostPool(ctx, "pool-a", map[string]any{"loadBalancerType": "DepthFirst", "maxSessionLimit": 4}); err != nil {
		e.t.Fatalf("create pool: %v", err)
	}
	rt, err := e.admin.CreateRegistrationToken(ctx, "pool-a", vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
	if err != nil {
		e.t.Fatalf("registration token: %v", err)
	}
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("host-%d", i)
		reg, err := e.admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: name, Address: name + ".example:3389"})
		if err != nil {
			e.t.Fatalf("register %s: %v", name, err)
		}
		e.agents[name] = reg.Credential
		e.heartbeat(name, nil)
	}
	for _, u := range users {
		if _, err := e.admin.Connect(ctx, "pool-a", vhttp.ConnectRequest{User: u}); err != nil {
			e.t.Fatalf("connect %s: %v", u, err)
		}
	}
}

// heartbeat sends one heartbeat for host with the given sessions and
// returns the commands the broker queued for it.
func (e *env) heartbeat(host string, sessions []vdibroker.AgentSession) []vdibroker.Command {
	e.t.Helper()
	resp, err := e.admin.Heartbeat(context.Background(), e.agents[host], &vdibroker.HeartbeatRequest{
		Metrics:  &vdibroker.Metrics{CPUPercent: 42, MemoryPercent: 61},
		Sessions: sessions,
	})
	if err != nil {
		e.t.Fatalf("heartbeat %s: %v", host, err)
	}
	return resp.Commands
}

// activeSession has host-1's agent report user's session Active and
// returns its id (seed placed it on host-1).
func (e *env) activeSession(user string) string {
	e.t.Helper()
	e.heartbeat("host-1", []vdibroker.AgentSession{{ID: "7", User: user, State: vdibroker.StateActive}})
	open, err := e.admin.ListUserSessions(context.Background(), "pool-a", vhttp.SessionQuery{User: user})
	if err != nil || len(open) != 1 {
		e.t.Fatalf("%s's session: %v %v", user, open, err)
	}
	return open[0].ID
}

func (e *env) token(role string) string {
	e.t.Helper()
	tok, err := e.admin.CreateToken(context.Background(), vhttp.TokenRequest{Role: role, Subject: strings.ToLower(role) + "-1"})
	if err != nil {
		e.t.Fatalf("create %s token: %v", role, err)
	}
	return tok.Secret
}

// browser is an HTTP client with cookies that does not follow redirects,
// so tests see each answer.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: e.t, base: e.url, c: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

type answer struct {
	status   int
	body     string
	location string
	header   http.Header
}

func (b *browser) do(method, path string, form url.Values) answer {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.base)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(data), resp.Header.Get("Location"), resp.Header}
}

func (b *browser) get(path string) answer { return b.do(http.MethodGet, path, nil) }

func (b *browser) post(path string, form url.Values) answer { return b.do(http.MethodPost, path, form) }

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF token from a page's forms.
func (b *browser) csrf(path string) string {
	b.t.Helper()
	a := b.get(path)
	m := csrfField.FindStringSubmatch(a.body)
	if m == nil {
		b.t.Fatalf("no csrf field on %s (HTTP %d)", path, a.status)
	}
	return m[1]
}

// signin signs in with token and fails the test unless it worked.
func (b *browser) signin(token string) {
	b.t.Helper()
	a := b.post("/signin", url.Values{"csrf": {b.csrf("/signin")}, "token": {token}, "next": {"/"}})
	if a.status != http.StatusSeeOther || a.location != "/" {
		b.t.Fatalf("sign in: HTTP %d location %q\n%s", a.status, a.location, a.body)
	}
}

func wantStatus(t *testing.T, a answer, want int) {
	t.Helper()
	if a.status != want {
		t.Fatalf("HTTP %d, want %d\n%s", a.status, want, a.body)
	}
}

func wantContains(t *testing.T, a answer, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(a.body, s) {
			t.Errorf("page lacks %q", s)
		}
	}
}

func connectReq(user string) vhttp.ConnectRequest { return vhttp.ConnectRequest{User: user} }

var (
	ruleLink = regexp.MustCompile(`<a class="rule" href="/rules#(R-[A-Z]+[0-9]*)"[^>]*>R-[A-Z]+[0-9]*</a>`)
	anyTag   = regexp.MustCompile(`<[^>]+>`)
)

// stripRuleLinks undoes the console's links of rule ids (R-C2 is shown as
// a link to /rules#R-C2), so a page's words can be compared with text.
func stripRuleLinks(page string) string { return ruleLink.ReplaceAllString(page, "$1") }

// textOf is a page with every tag removed.
func textOf(page string) string { return anyTag.ReplaceAllString(page, "") }
