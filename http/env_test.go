package http_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/vdibroker/vdibroker/internal/pgtest"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	kclock "k8s.io/utils/clock"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/identity"
	"github.com/vdibroker/vdibroker/intercept"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/power"
	"github.com/vdibroker/vdibroker/store"
)

const adminToken = "test-admin-token"

// clock is the servers' injected time: real time plus an offset tests move
// forward (heartbeat age R-H1, pending timeout R-S3, token expiry).
// Freeze stops the real time's part, for a test of a rate (the buckets of
// R-SEC) that a slow machine's real time would refill between its steps.
type clock struct{ offset, frozen atomic.Int64 }

func (c *clock) Now() time.Time {
	if f := c.frozen.Load(); f != 0 {
		return time.Unix(0, f).Add(time.Duration(c.offset.Load()))
	}
	return time.Now().Add(time.Duration(c.offset.Load()))
}
func (c *clock) Advance(d time.Duration) { c.offset.Add(int64(d)) }
func (c *clock) Freeze()                 { c.frozen.Store(time.Now().UnixNano()) }

// env is one or more real servers (httptest, 127.0.0.1) on one real store.
type env struct {
	t      testing.TB
	store  vdibroker.Store
	clock  *clock
	srvs   []*testserver.Server
	urls   []string
	admin  *vhttp.Client // talks to the first server
	agents map[string]string
	mu     sync.Mutex
	// ticks has one channel per replica, told (without blocking) each time
	// its maintenance tick ends (waitTicks).
	ticks []chan struct{}
	// calls counts a pod's pod-to-pod calls by peer URL and path
	// (fedPods).
	calls *callCounter
	down  func() // closes a pod's HTTP server (fedPods)
	// storeDown, with envOptions.failing, has one flag per replica: while
	// set, each call of that replica's store fails.
	storeDown []*atomic.Bool
}

// waitTicks waits until replica i has ended n maintenance ticks that began
// after the call: a test of what the ticks do waits for them, not for a
// time. The first tick may have begun before the call, so it is not
// counted: n+1 tick ends are awaited.
func (e *env) waitTicks(i, n int) {
	e.t.Helper()
	select {
	case <-e.ticks[i]: // a tick that ended before the call
	default:
	}
	for range n + 1 {
		select {
		case <-e.ticks[i]:
		case <-time.After(30 * time.Second):
			e.t.Fatalf("replica %d ended no maintenance tick in 30 s", i)
		}
	}
}

type envOptions struct {
	dsn      string // "" = SQLite in a temp dir
	replicas int
	rand     func(int) int
	// maintenance is the servers' MaintenanceInterval (0 = the default);
	// a test that moves the clock past a timeout sets it long, so the
	// background loop cannot act between its steps.
	maintenance time.Duration
	// storeTimeout is the servers' StoreTimeout (0 = the default).
	storeTimeout time.Duration
	// oidc is the servers' OpenID provider (nil: none).
	oidc *identity.Provider
	// power are the servers' power drivers (nil: none).
	power power.Set
	// gateway is the servers' RD gateway side.
	gateway broker.GatewayConfig
	// gatewayClock is the clock of newGatewayWorldWith's gateway (nil:
	// the real one).
	gatewayClock kclock.WithTickerAndDelayedExecution
	// mount are patterns each server mounts (Server.Mount) before it
	// serves, as serve mounts the console at "/" and Prometheus at "GET
	// /metrics"; each answers 200 "mounted".
	mount []string
	// storeCall, when set, is told of every call that reaches replica
	// i's store: past the broker's guard, which refuses calls during an
	// outage (op is the vdibroker.Store method's name).
	storeCall func(i int, op string)
	// failing makes each replica's store fail every call (as a database
	// that refuses connections) while the test sets its env.storeDown.
	failing bool
}

// newEnv starts a SQLite-backed server.
func newEnv(t testing.TB) *env { return newEnvWith(t, envOptions{}) }

// postgresDSN returns VDIBROKER_TEST_POSTGRES_DSN or skips.
func postgresDSN(t testing.TB) string {
	dsn := os.Getenv("VDIBROKER_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("PostgreSQL test: set VDIBROKER_TEST_POSTGRES_DSN=postgres://... to run it")
	}
	return dsn
}

// suitePostgres is the base DSN while TestPostgresSuite reruns the
// end-to-end tests on PostgreSQL (tests run one at a time, not in parallel).
var suitePostgres string

// schemaDSN creates a schema of its own for the test and returns base with
// search_path pointing at it; the schema is dropped when the test ends.
func schemaDSN(t testing.TB, base string) string {
	t.Helper()
	return pgtest.Schema(t, base, "vdibroker_http_")
}

func newEnvWith(t testing.TB, o envOptions) *env {
	t.Helper()
	ctx := context.Background()
	if o.dsn == "" && suitePostgres != "" {
		o.dsn = suitePostgres
	}
	if o.dsn != "" {
		o.dsn = schemaDSN(t, o.dsn)
	}
	st, err := store.Open(ctx, o.dsn, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, store: st, clock: &clock{}, agents: map[string]string{}}
	if o.replicas == 0 {
		o.replicas = 1
	}
	for i := 0; i < o.replicas; i++ {
		// Each replica gets its own store handle when on PostgreSQL, as
		// separate processes would.
		rs := st
		if i > 0 && o.dsn != "" {
			rs, err = store.Open(ctx, o.dsn, t.TempDir(), nil)
			if err != nil {
				t.Fatalf("open store for replica %d: %v", i, err)
			}
			t.Cleanup(func() { rs.Close() })
		}
		ticks := make(chan struct{}, 1)
		e.ticks = append(e.ticks, ticks)
		if o.failing {
			down := new(atomic.Bool)
			e.storeDown = append(e.storeDown, down)
			rs = intercept.NewStore(rs, func(ctx context.Context, op string, call func(context.Context) error) error {
				if down.Load() && op != intercept.OpClose {
					return errors.New("connection refused")
				}
				return call(ctx)
			})
		}
		if o.storeCall != nil {
			rs = intercept.NewStore(rs, func(ctx context.Context, op string, call func(context.Context) error) error {
				o.storeCall(i, op)
				return call(ctx)
			})
		}
		srv := testserver.New(testserver.Config{Store: rs, Now: e.clock.Now, Rand: o.rand, AdminToken: adminToken,
			MaintenanceInterval: o.maintenance, StoreTimeout: o.storeTimeout, OIDC: o.oidc, PowerDrivers: o.power, Gateway: o.gateway,
			AfterTick: func() {
				select {
				case ticks <- struct{}{}:
				default:
				}
			}})
		for _, pattern := range o.mount {
			srv.Mount(pattern, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "mounted") }))
		}
		ts := httptest.NewServer(srv.Handler())
		t.Cleanup(func() { ts.Close(); srv.Close() })
		e.srvs = append(e.srvs, srv)
		e.urls = append(e.urls, ts.URL)
	}
	e.admin = vhttp.NewClient(e.urls[0], adminToken)
	t.Cleanup(e.checkAuditActions) // before the servers and the store close
	return e
}

// checkAuditActions fails the test if an entry any path of it wrote has an
// action that GET /auditlog?action= would refuse, had it found nothing
// (R-SEC): every action written is in vhttp.AuditActions or is a refused
// API route's pattern (AuditedRoutes, not a mounted one).
func (e *env) checkAuditActions() {
	if e.t.Failed() {
		return
	}
	known := map[string]bool{}
	for _, a := range vhttp.AuditActions() {
		known[a] = true
	}
	for _, srv := range e.srvs {
		for _, r := range srv.AuditedRoutes() {
			known[r] = true
		}
	}
	var after int64
	for {
		list, err := e.store.ListAudit(context.Background(), vdibroker.AuditFilter{After: after, Limit: 1000})
		if err != nil {
			e.t.Errorf("list audit: %v", err)
			return
		}
		for _, a := range list {
			if !known[a.Action] {
				e.t.Errorf("audit entry %d has action %q, which is neither in vhttp.AuditActions nor an API route: GET /auditlog?action=%s would be refused", a.Seq, a.Action, a.Action)
			}
		}
		if len(list) < 1000 {
			return
		}
		after = list[len(list)-1].Seq
	}
}

// client returns a client of server i with token.
func (e *env) client(i int, token string) *vhttp.Client {
	return vhttp.NewClient(e.urls[i], token)
}

// uniq returns a name unique to this test (PostgreSQL runs share a database).
func uniq(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1e9)
}

// pool creates a pool with body (map of §2 fields) and fails the test on error.
func (e *env) pool(name string, body map[string]any) *vhttp.HostPoolResult {
	e.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	p, err := e.admin.PutHostPool(context.Background(), name, body)
	if err != nil {
		e.t.Fatalf("put pool %s: %v", name, err)
	}
	return p
}

// addHosts registers n hosts <prefix>01.. in pool through the real agent
// endpoints and sends each a first heartbeat, so they are Available (R-H1).
func (e *env) addHosts(pool, prefix string, n int) []string {
	e.t.Helper()
	ctx := context.Background()
	rt, err := e.admin.CreateRegistrationToken(ctx, pool, vhttp.RegistrationTokenRequest{})
	if err != nil {
		e.t.Fatalf("registration token: %v", err)
	}
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s%03d", prefix, i+1)
		e.register(rt.Token, names[i])
		e.heartbeat(names[i])
	}
	return names
}

// register registers host with a registration token and keeps its credential.
func (e *env) register(token, host string) string {
	e.t.Helper()
	res, err := e.admin.Register(context.Background(), &vdibroker.RegisterRequest{
		Token: token, HostName: host, Address: host + ".example.test:3389", Protocols: []string{"RDP"},
	})
	if err != nil {
		e.t.Fatalf("register %s: %v", host, err)
	}
	e.mu.Lock()
	e.agents[host] = res.Credential
	e.mu.Unlock()
	return res.Credential
}

// heartbeat sends host's heartbeat reporting sessions (R-S2).
func (e *env) heartbeat(host string, sessions ...vdibroker.AgentSession) *vdibroker.HeartbeatResponse {
	e.t.Helper()
	res, err := e.heartbeatErr(host, &vdibroker.HeartbeatRequest{Sessions: sessions})
	if err != nil {
		e.t.Fatalf("heartbeat %s: %v", host, err)
	}
	return res
}

func (e *env) heartbeatErr(host string, hb *vdibroker.HeartbeatRequest) (*vdibroker.HeartbeatResponse, error) {
	e.mu.Lock()
	cred := e.agents[host]
	e.mu.Unlock()
	return e.admin.Heartbeat(context.Background(), cred, hb)
}

// connect connects user in pool as admin.
func (e *env) connect(pool, user string) (*vhttp.ConnectResult, error) {
	return e.admin.Connect(context.Background(), pool, vhttp.ConnectRequest{User: user})
}

func (e *env) mustConnect(pool, user string) *vhttp.ConnectResult {
	e.t.Helper()
	r, err := e.connect(pool, user)
	if err != nil {
		e.t.Fatalf("connect %s to %s: %v", user, pool, err)
	}
	return r
}

// sessionsPerHost counts open sessions per host from the API.
func (e *env) sessionsPerHost(pool string) map[string]int {
	e.t.Helper()
	hosts, err := e.admin.ListSessionHosts(context.Background(), pool)
	if err != nil {
		e.t.Fatalf("list hosts: %v", err)
	}
	m := map[string]int{}
	for _, h := range hosts {
		m[h.Name] = h.Sessions
	}
	return m
}

// wantCode fails unless err is a *vdibroker.Error with code (and, when
// given, its message contains each of contains).
func wantCode(t testing.TB, err error, code string, contains ...string) *vdibroker.Error {
	t.Helper()
	var e *vdibroker.Error
	if !errors.As(err, &e) {
		t.Fatalf("got error %v, want a *vdibroker.Error with code %s", err, code)
	}
	if e.Code != code {
		t.Fatalf("got code %s (%s), want %s", e.Code, e.Message, code)
	}
	for _, c := range contains {
		if !strings.Contains(e.Message, c) {
			t.Errorf("message %q does not contain %q", e.Message, c)
		}
	}
	return e
}
