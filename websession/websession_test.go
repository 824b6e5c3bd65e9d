package websession_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/pgtest"
	"github.com/vdibroker/vdibroker/internal/syncbuf"
	"github.com/vdibroker/vdibroker/store"
	"github.com/vdibroker/vdibroker/websession"
)

// stores opens two handles of one fresh database, as two replicas have:
// SQLite in a temp dir, or PostgreSQL when VDIBROKER_TEST_POSTGRES_DSN
// is set.
func stores(t *testing.T) (vdibroker.Store, vdibroker.Store) {
	t.Helper()
	dsn, dir := "", t.TempDir()
	if os.Getenv("VDIBROKER_TEST_POSTGRES_DSN") != "" {
		dsn = pgtest.SchemaDSN(t, "vdibroker_websession_", "web session tests")
	}
	open := func() vdibroker.Store {
		s, err := store.Open(t.Context(), dsn, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a := open()
	if dsn == "" {
		return a, a // SQLite: one process holds the file
	}
	return a, open()
}

func manager(t *testing.T, st vdibroker.WebSessionStore, clk *clocktesting.FakeClock) *websession.Manager {
	t.Helper()
	m := websession.New(websession.Config{Store: st, Area: "console", Cookie: "vdibroker_session", Clock: clk, TTL: time.Hour})
	t.Cleanup(m.Close)
	return m
}

// open opens a session for principal and returns its cookie.
func open(t *testing.T, m *websession.Manager, token, principal string) (*websession.Session, *http.Cookie) {
	t.Helper()
	w := httptest.NewRecorder()
	s, err := m.Open(t.Context(), w, httptest.NewRequest("POST", "/signin", nil), token, principal, vdibroker.RoleReader, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	cs := w.Result().Cookies()
	if len(cs) != 1 {
		t.Fatalf("cookies %v", cs)
	}
	return s, cs[0]
}

func get(m *websession.Manager, ck *http.Cookie) *websession.Session {
	r := httptest.NewRequest("GET", "/", nil)
	r.AddCookie(ck)
	return m.Get(r)
}

// TestSessionOnAnotherReplica (R-SEC, web sessions): a session opened by
// one replica is the same on another: token, principal, role, CSRF token
// and flash. The cookie is HttpOnly and SameSite=Lax and holds no token;
// the database holds neither the cookie's value nor the token; a cookie
// of the right shape that is not a session's gets nothing. Ended on one
// replica, it is gone on the other.
func TestSessionOnAnotherReplica(t *testing.T) {
	sa, sb := stores(t)
	clk := clocktesting.NewFakeClock(time.Now())
	a, b := manager(t, sa, clk), manager(t, sb, clk)
	const token = "vdbt_0123456789abcdef0123456789abcdef"
	s, ck := open(t, a, token, "token:r1")
	if !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || bytes.Contains([]byte(ck.Value), []byte(token)) {
		t.Errorf("cookie %+v", ck)
	}
	got := get(b, ck)
	if got == nil || got.Token != token || got.Principal != "token:r1" || got.Role != vdibroker.RoleReader || got.CSRF != s.CSRF || got.CSRF == "" {
		t.Fatalf("on the other replica: %+v", got)
	}
	row, err := sb.WebSession(t.Context(), vdibroker.HashSecret(ck.Value), clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(row.Sealed, []byte(token)) || row.IDHash == ck.Value {
		t.Error("the database holds the token or the cookie's value in clear")
	}
	a.SetFlash(t.Context(), got, "Drained host-1.")
	if msg := b.TakeFlash(t.Context(), get(b, ck)); msg != "Drained host-1." {
		t.Errorf("flash %q", msg)
	}
	if msg := a.TakeFlash(t.Context(), get(a, ck)); msg != "" {
		t.Errorf("flash shown twice: %q", msg)
	}
	forged := *ck
	// Its first character changed: "ab" in place of the first two was the
	// same cookie whenever the value began with them (the project's CI).
	first := "a"
	if ck.Value[0] == 'a' {
		first = "b"
	}
	forged.Value = first + ck.Value[1:]
	if get(b, &forged) != nil {
		t.Error("a cookie that is not a session's got one")
	}
	w := httptest.NewRecorder()
	b.End(t.Context(), w, httptest.NewRequest("POST", "/signout", nil), got)
	if get(a, ck) != nil {
		t.Error("a session ended on one replica lives on the other")
	}
}

// TestSweepOnTimer: expired sessions are deleted from the database when
// the sweep's ticker fires, not before: the clock is stepped to the
// expiry (no sweep yet, the row stays), then by one sweep interval.
func TestSweepOnTimer(t *testing.T) {
	st, _ := stores(t)
	start := time.Now()
	clk := clocktesting.NewFakeClock(start)
	m := websession.New(websession.Config{Store: st, Area: "console", Cookie: "vdibroker_session", Clock: clk, TTL: time.Hour,
		SweepInterval: 2 * time.Hour})
	t.Cleanup(m.Close)
	_, ck := open(t, m, "tok", "token:r1")
	hash := vdibroker.HashSecret(ck.Value)
	stored := func() bool {
		_, err := st.WebSession(t.Context(), hash, start) // as of its start: expired rows count
		return err == nil
	}
	// The sweep's goroutine makes its ticker: stepped before that, the
	// clock would move the ticker's first tick past the steps below.
	for deadline := time.Now().Add(time.Minute); !clk.HasWaiters(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the sweep made no ticker on the clock")
		}
	}
	clk.Step(time.Hour) // expired, but no sweep has run yet
	if get(m, ck) != nil {
		t.Error("an expired session was answered")
	}
	if !stored() {
		t.Fatal("deleted before a sweep")
	}
	clk.Step(time.Hour) // the sweep's tick
	// The tick is handled on the sweep's goroutine: wait for its write.
	for deadline := time.Now().Add(10 * time.Second); stored(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the sweep's tick did not delete the expired session")
		}
	}
}

// failing is the real store, failing every read while down is set.
type failing struct {
	vdibroker.WebSessionStore
	down atomic.Bool
}

func (f *failing) WebSession(ctx context.Context, h string, now time.Time) (*vdibroker.WebSession, error) {
	if f.down.Load() {
		return nil, &vdibroker.Error{Code: vdibroker.EStoreUnavailable, Message: "store down"}
	}
	return f.WebSessionStore.WebSession(ctx, h, now)
}

func (f *failing) DeleteWebSession(ctx context.Context, h string) error {
	if f.down.Load() {
		return &vdibroker.Error{Code: vdibroker.EStoreUnavailable, Message: "store down"}
	}
	return f.WebSessionStore.DeleteWebSession(ctx, h)
}

// TestEndWhileTheStoreFails (R-SEC, web sessions): a sign-out the store
// does not record ends nothing: End says so, the cookie is not cleared
// and the session is still answered (from this replica's copy while the
// store is down, from the store once it is back), so the user, told, can
// sign out again; clearing the cookie alone would leave a copy of it,
// stolen before, good for hours. Once the store answers, End ends it.
func TestEndWhileTheStoreFails(t *testing.T) {
	st, _ := stores(t)
	f := &failing{WebSessionStore: st}
	clk := clocktesting.NewFakeClock(time.Now())
	m := manager(t, f, clk)
	s, ck := open(t, m, "tok", "token:r1")
	f.down.Store(true)
	w := httptest.NewRecorder()
	if err := m.End(t.Context(), w, httptest.NewRequest("POST", "/signout", nil), s); vdibroker.ErrorCode(err) != vdibroker.EStoreUnavailable {
		t.Errorf("End while the store is down: %v, want StoreUnavailable", err)
	}
	if cs := w.Result().Cookies(); len(cs) != 0 {
		t.Errorf("a sign-out the store did not record cleared %v", cs)
	}
	if get(m, ck) == nil {
		t.Error("the session is gone from this replica though the store still has it: the user cannot sign out again")
	}
	f.down.Store(false)
	if get(m, ck) == nil {
		t.Fatal("the session is gone from the store")
	}
	w = httptest.NewRecorder()
	if err := m.End(t.Context(), w, httptest.NewRequest("POST", "/signout", nil), s); err != nil {
		t.Fatal(err)
	}
	if cs := w.Result().Cookies(); len(cs) != 1 || cs[0].MaxAge >= 0 {
		t.Errorf("sign-out's cookies %v, want the session's cleared", cs)
	}
	if get(m, ck) != nil {
		t.Error("signed out, the session is still answered")
	}
}

// TestOutageHonoursSessionsInUse (R-OUT1, R-SEC): during an outage a
// replica honours its copies of the sessions in use as the outage began
// (read within OutageGrace before the store last answered it), not a copy
// of one signed out on another replica hours before, which it cannot
// know: a copy of that cookie, stolen, would sign in for the rest of its
// 12 hours.
func TestOutageHonoursSessionsInUse(t *testing.T) {
	st, _ := stores(t)
	f := &failing{WebSessionStore: st}
	clk := clocktesting.NewFakeClock(time.Now())
	a, b := manager(t, st, clk), manager(t, f, clk)
	gone, goneCk := open(t, a, "tok-gone", "token:r1")
	if get(b, goneCk) == nil { // b's copy
		t.Fatal("the session on the other replica")
	}
	clk.Step(5 * time.Minute)
	a.End(t.Context(), httptest.NewRecorder(), httptest.NewRequest("POST", "/signout", nil), gone)
	clk.Step(30 * time.Minute)
	_, inUseCk := open(t, a, "tok-in-use", "token:r2")
	clk.Step(time.Minute)
	if get(b, inUseCk) == nil {
		t.Fatal("the session in use on the other replica")
	}
	clk.Step(time.Minute)
	f.down.Store(true)
	if s := get(b, goneCk); s != nil {
		t.Errorf("during the outage a session signed out 32 minutes before it was answered: %+v", s)
	}
	if s := get(b, inUseCk); s == nil || s.Token != "tok-in-use" {
		t.Errorf("during the outage the session in use as it began: %+v", s)
	}
	clk.Step(50 * time.Minute) // a long outage signs nobody out (the TTL is an hour)
	if s := get(b, inUseCk); s == nil {
		t.Error("50 minutes into the outage the session in use as it began was not answered")
	}
}

// TestSessionThroughAnOutage (R-OUT1): while the store does not answer,
// a session this replica has read is still answered until it expires; a
// session it never read is not.
func TestSessionThroughAnOutage(t *testing.T) {
	st, _ := stores(t)
	f := &failing{WebSessionStore: st}
	clk := clocktesting.NewFakeClock(time.Now())
	m := manager(t, f, clk)
	_, ck := open(t, m, "tok", "token:r1")
	other := manager(t, st, clk)
	_, ck2 := open(t, other, "tok2", "token:r2")
	f.down.Store(true)
	if s := get(m, ck); s == nil || s.Token != "tok" {
		t.Errorf("during an outage: %+v", s)
	}
	if get(m, ck2) != nil {
		t.Error("a session this replica never read was answered during an outage")
	}
	clk.Step(time.Hour)
	if get(m, ck) != nil {
		t.Error("an expired session was answered during an outage")
	}
}

// TestOutageCopiesBounded (R-OUT1, R-SEC): the copies a replica keeps for
// an outage are bounded (Config.MaxCopies): past it, the copy read
// longest ago goes, and through an outage the others are answered; those
// an outage would not honour go first, so a user of a minute ago keeps
// hers though a busier morning's are older.
func TestOutageCopiesBounded(t *testing.T) {
	st, _ := stores(t)
	f := &failing{WebSessionStore: st}
	clk := clocktesting.NewFakeClock(time.Now())
	m := websession.New(websession.Config{Store: f, Area: "console", Cookie: "vdibroker_session", Clock: clk, TTL: 2 * time.Hour, MaxCopies: 2})
	t.Cleanup(m.Close)
	_, stale := open(t, m, "tok-stale", "token:r0")
	clk.Step(20 * time.Minute) // beyond OutageGrace
	_, first := open(t, m, "tok-1", "token:r1")
	clk.Step(time.Minute)
	_, second := open(t, m, "tok-2", "token:r2")
	clk.Step(time.Minute)
	if get(m, first) == nil { // read again: now the most recent
		t.Fatal("the first session")
	}
	clk.Step(time.Minute)
	_, third := open(t, m, "tok-3", "token:r3")
	f.down.Store(true)
	for name, c := range map[string]struct {
		ck   *http.Cookie
		kept bool
	}{"the stale one": {stale, false}, "the one read longest ago": {second, false}, "one read again": {first, true}, "the newest": {third, true}} {
		if got := get(m, c.ck) != nil; got != c.kept {
			t.Errorf("during the outage, %s answered %v, want %v", name, got, c.kept)
		}
	}
}

// TestHostPrefixOverHTTPS (R-SEC, web sessions): over HTTPS the session
// cookie is __Host-<name>, Secure, at "/" with no Domain (the configured
// path is the plain-HTTP one), so a sibling subdomain cannot plant or
// shadow it; a cookie of the plain name, which such a sibling can plant
// (its own session, to sign the browser in as itself), is no session
// there, though it is one over plain HTTP. Signing out over HTTPS ends
// and clears a plain-named session cookie as well (one an older replica
// set during a rolling upgrade). Over plain HTTP (the demo on
// 127.0.0.1), where browsers refuse the prefix, the cookie keeps its
// name and path and is not Secure.
func TestHostPrefixOverHTTPS(t *testing.T) {
	st, _ := stores(t)
	clk := clocktesting.NewFakeClock(time.Now())
	m := websession.New(websession.Config{Store: st, Area: "portal", Cookie: "vdibroker_portal", Path: "/portal/", Clock: clk, TTL: time.Hour})
	t.Cleanup(m.Close)
	request := func(method, target string, cks ...*http.Cookie) *http.Request {
		r := httptest.NewRequest(method, target, nil)
		for _, ck := range cks {
			r.AddCookie(ck)
		}
		return r
	}
	openAt := func(target, principal string) (*websession.Session, *http.Cookie) {
		t.Helper()
		w := httptest.NewRecorder()
		s, err := m.Open(t.Context(), w, request("POST", target), "tok-"+principal, principal, vdibroker.RoleUser, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		cs := w.Result().Cookies()
		if len(cs) != 1 {
			t.Fatalf("cookies %v", cs)
		}
		return s, cs[0]
	}

	_, tlsCk := openAt("https://broker.example/portal/signin", "token:alice")
	if tlsCk.Name != "__Host-vdibroker_portal" || !tlsCk.Secure || tlsCk.Path != "/" || tlsCk.Domain != "" || !tlsCk.HttpOnly || tlsCk.SameSite != http.SameSiteLaxMode {
		t.Errorf("session cookie over HTTPS %+v: want __Host-vdibroker_portal, Secure, HttpOnly, SameSite=Lax, Path=/, no Domain", tlsCk)
	}
	if s := m.Get(request("GET", "https://broker.example/portal/", tlsCk)); s == nil || s.Principal != "token:alice" {
		t.Errorf("the __Host- cookie over HTTPS: %+v", s)
	}

	_, plainCk := openAt("http://127.0.0.1/portal/signin", "token:mallory")
	if plainCk.Name != "vdibroker_portal" || plainCk.Secure || plainCk.Path != "/portal/" || !plainCk.HttpOnly {
		t.Errorf("session cookie over plain HTTP %+v: want vdibroker_portal at /portal/, HttpOnly, not Secure", plainCk)
	}
	if s := m.Get(request("GET", "http://127.0.0.1/portal/", plainCk)); s == nil || s.Principal != "token:mallory" {
		t.Errorf("the plain cookie over plain HTTP: %+v", s)
	}
	// mallory's valid session, planted under the plain name (Domain= the
	// parent domain, as a sibling subdomain can), is no session over
	// HTTPS; beside alice's own, alice's is the one read.
	if s := m.Get(request("GET", "https://broker.example/portal/", plainCk)); s != nil {
		t.Errorf("a planted plain-named cookie over HTTPS signed the browser in as %s", s.Principal)
	}
	if s := m.Get(request("GET", "https://broker.example/portal/", plainCk, tlsCk)); s == nil || s.Principal != "token:alice" {
		t.Errorf("with a planted cookie beside hers: %+v, want alice's session", s)
	}

	// Sign-out over HTTPS with a plain-named session of hers (an older
	// replica's) ends both.
	_, oldCk := openAt("http://broker.example/portal/signin", "token:alice")
	s := m.Get(request("GET", "https://broker.example/portal/", tlsCk))
	w := httptest.NewRecorder()
	m.End(t.Context(), w, request("POST", "https://broker.example/portal/signout", tlsCk, oldCk), s)
	cleared := map[string]string{}
	for _, ck := range w.Result().Cookies() {
		if ck.MaxAge < 0 {
			cleared[ck.Name] = ck.Path
		}
	}
	if cleared["__Host-vdibroker_portal"] != "/" || cleared["vdibroker_portal"] != "/portal/" {
		t.Errorf("sign-out cleared %v; want both cookies, each at its path", cleared)
	}
	for _, ck := range []*http.Cookie{tlsCk, oldCk} {
		if _, err := st.WebSession(t.Context(), vdibroker.HashSecret(ck.Value), clk.Now()); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			t.Errorf("after sign-out the session of %s: %v, want NotFound", ck.Name, err)
		}
	}
}

// TestAnotherAreasCookie (R-SEC, web sessions): a valid session of the
// portal, its cookie's value sent under the console's name, is no
// session of the console, and writes no log line: any signed-in user can
// send it at every request, so a line each would let one fill the log.
func TestAnotherAreasCookie(t *testing.T) {
	st, _ := stores(t)
	clk := clocktesting.NewFakeClock(time.Now())
	var log syncbuf.Buffer
	console := websession.New(websession.Config{Store: st, Area: "console", Cookie: "vdibroker_session", Clock: clk, TTL: time.Hour,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	t.Cleanup(console.Close)
	portal := websession.New(websession.Config{Store: st, Area: "portal", Cookie: "vdibroker_portal", Path: "/portal/", Clock: clk, TTL: time.Hour})
	t.Cleanup(portal.Close)
	_, ck := open(t, portal, "vdbt_user", "token:u1")
	for range 3 {
		if s := get(console, &http.Cookie{Name: "vdibroker_session", Value: ck.Value}); s != nil {
			t.Fatalf("a portal session signed in to the console: %+v", s)
		}
	}
	if log.String() != "" {
		t.Errorf("another area's cookie was logged:\n%s", log.String())
	}
	if s := get(portal, ck); s == nil || s.Token != "vdbt_user" {
		t.Errorf("the portal's own session: %+v", s)
	}
}

// TestSignInAgainEndsTheFormer (R-SEC, web sessions): a browser that
// signs in again, with the cookie of its sign-in before, ends that one
// on every replica: a copy of the old cookie gets nothing. A sign-in
// without a cookie ends nobody's.
func TestSignInAgainEndsTheFormer(t *testing.T) {
	sa, sb := stores(t)
	clk := clocktesting.NewFakeClock(time.Now())
	a, b := manager(t, sa, clk), manager(t, sb, clk)
	_, other := open(t, a, "vdbt_other", "token:r2")
	_, first := open(t, a, "vdbt_first", "token:r1")
	req := httptest.NewRequest("POST", "/signin", nil)
	req.AddCookie(first)
	w := httptest.NewRecorder()
	if _, err := b.Open(t.Context(), w, req, "vdbt_second", "token:r1", vdibroker.RoleReader, time.Time{}); err != nil {
		t.Fatal(err)
	}
	second := w.Result().Cookies()[0]
	if get(a, first) != nil || get(b, first) != nil {
		t.Error("the sign-in before still has its session after signing in again")
	}
	if s := get(a, second); s == nil || s.Token != "vdbt_second" {
		t.Errorf("the new sign-in: %+v", s)
	}
	if get(a, other) == nil {
		t.Error("another browser's session ended")
	}
}

// padded is a token of n bytes beginning with name.
func padded(name string, n int) string {
	return name + strings.Repeat("x", max(0, n-len(name)))
}

// checkCopies fails t unless m's byte total is the sum of its copies'
// sizes worked out again, and within its bounds.
func checkCopies(tb testing.TB, m *websession.Manager, maxCopies int, maxBytes int64) {
	tb.Helper()
	n, total, sum := m.Copies()
	if total != sum || total < 0 || total > maxBytes || n > maxCopies {
		tb.Fatalf("%d copies counting %d bytes, holding %d: want the two equal, 0 to %d bytes, at most %d copies", n, total, sum, maxBytes, maxCopies)
	}
}

// TestOutageCopiesByteBudget (R-OUT1, R-SEC): the copies a replica keeps
// for an outage are bounded in bytes too (Config.MaxCopyBytes), counted
// from what each holds (its ID token foremost): past the budget, those an
// outage would not honour go first, then the copy read longest ago,
// however few copies there are. A copy larger than the whole budget is
// not kept, and no other goes for it.
func TestOutageCopiesByteBudget(t *testing.T) {
	st, _ := stores(t)
	f := &failing{WebSessionStore: st}
	clk := clocktesting.NewFakeClock(time.Now())
	const tokenBytes = 10 << 10
	// One copy is its 10 KiB token, the principal "token:rN", the role,
	// the 64-hex cookie, its hash and CSRF token, and copyOverhead: the
	// budget holds two copies and a half, far below MaxCopies.
	probe := websession.New(websession.Config{Store: st, Area: "console", Cookie: "vdibroker_session", Clock: clk, TTL: 2 * time.Hour})
	t.Cleanup(probe.Close)
	one, _ := open(t, probe, padded("tok-probe", tokenBytes), "token:r9")
	size := websession.CopySize(one)
	if size < tokenBytes {
		t.Fatalf("a copy holding a %d-byte token is counted %d bytes", tokenBytes, size)
	}
	budget := 2*size + size/2
	m := websession.New(websession.Config{Store: f, Area: "console", Cookie: "vdibroker_session", Clock: clk, TTL: 2 * time.Hour,
		MaxCopies: 100, MaxCopyBytes: budget})
	t.Cleanup(m.Close)

	_, stale := open(t, m, padded("tok-stale", tokenBytes), "token:r0")
	clk.Step(20 * time.Minute) // beyond OutageGrace
	_, first := open(t, m, padded("tok-1", tokenBytes), "token:r1")
	checkCopies(t, m, 100, budget)
	clk.Step(time.Minute)
	// Stale, first and second would be three copies: the stale one goes.
	_, second := open(t, m, padded("tok-2", tokenBytes), "token:r2")
	checkCopies(t, m, 100, budget)
	clk.Step(time.Minute)
	if get(m, first) == nil { // read again: now the most recent
		t.Fatal("the first session")
	}
	clk.Step(time.Minute)
	// First, second and third would be three: second, read longest ago,
	// goes.
	_, third := open(t, m, padded("tok-3", tokenBytes), "token:r3")
	checkCopies(t, m, 100, budget)
	// A token of the whole budget: its copy alone exceeds it.
	_, huge := open(t, m, padded("tok-huge", int(budget)), "token:r4")
	checkCopies(t, m, 100, budget)
	if n, _, _ := m.Copies(); n != 2 {
		t.Errorf("%d copies after one too large for the budget, want first's and third's", n)
	}
	f.down.Store(true)
	for _, c := range []struct {
		name string
		ck   *http.Cookie
		kept bool
	}{
		{"the stale one", stale, false},
		{"the one read longest ago", second, false},
		{"one read again", first, true},
		{"the newest within the budget", third, true},
		{"one larger than the budget", huge, false},
	} {
		if got := get(m, c.ck) != nil; got != c.kept {
			t.Errorf("during the outage, %s answered %v, want %v", c.name, got, c.kept)
		}
	}
}

// TestCopyBytesDoNotDrift (R-OUT1, R-SEC): through a seeded sequence of
// sign-ins of every size (some larger than the budget), reads while the
// store answers and while it does not, sign-outs here and on another
// replica (read here as gone), revocations, sweeps and time passing, the
// byte total of the copies is after every step the sum of their sizes,
// never negative nor above the budget, with both bounds reached.
func TestCopyBytesDoNotDrift(t *testing.T) {
	st, other := stores(t)
	f := &failing{WebSessionStore: st}
	clk := clocktesting.NewFakeClock(time.Now())
	const maxCopies, budget = 6, 40 << 10
	m := websession.New(websession.Config{Store: f, Area: "console", Cookie: "vdibroker_session", Clock: clk, TTL: time.Hour,
		MaxCopies: maxCopies, MaxCopyBytes: budget})
	t.Cleanup(m.Close)
	o := manager(t, other, clk)
	rng := rand.New(rand.NewPCG(1, 2))
	var sessions []*websession.Session
	var cookies []*http.Cookie
	pick := func() int { return rng.IntN(len(cookies)) }
	var fullCount, fullBytes bool
	for i := range 400 {
		switch op := rng.IntN(10); {
		case op < 3 || len(cookies) == 0:
			n := rng.IntN(16 << 10)
			if rng.IntN(10) == 0 {
				n = budget + rng.IntN(1<<10) // larger than the whole budget
			}
			w := httptest.NewRecorder()
			s, err := m.Open(t.Context(), w, httptest.NewRequest("POST", "/signin", nil), padded(fmt.Sprint("tok-", i), n),
				fmt.Sprint("token:r", rng.IntN(40)), vdibroker.RoleReader, time.Time{})
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			sessions, cookies = append(sessions, s), append(cookies, w.Result().Cookies()[0])
		case op < 6:
			get(m, cookies[pick()])
		case op == 6:
			j := pick()
			o.End(t.Context(), httptest.NewRecorder(), httptest.NewRequest("POST", "/signout", nil), sessions[j])
			get(m, cookies[j]) // NotFound while the store answers
		case op == 7:
			m.Forget(t.Context(), sessions[pick()])
		case op == 8:
			m.Sweep(t.Context())
		default:
			clk.Step(time.Duration(rng.IntN(15)) * time.Minute)
			f.down.Store(rng.IntN(3) == 0)
		}
		checkCopies(t, m, maxCopies, budget)
		n, total, _ := m.Copies()
		fullCount = fullCount || n == maxCopies
		fullBytes = fullBytes || total > budget-(16<<10)
	}
	if !fullCount || !fullBytes {
		t.Errorf("the sequence reached MaxCopies %v, the byte budget %v: want both", fullCount, fullBytes)
	}
}

// TestCopyBytesConcurrent (R-OUT1, R-SEC): sign-ins, reads, sign-outs
// and sweeps from several goroutines at once, then, the store down,
// reads of the copies and revocations at once (run with -race: these
// touch no store, whose locks would order the goroutines), leave the
// byte total the sum of the copies' sizes, within the budget, at every
// look and at the end.
func TestCopyBytesConcurrent(t *testing.T) {
	st, _ := stores(t)
	f := &failing{WebSessionStore: st}
	clk := clocktesting.NewFakeClock(time.Now())
	const goroutines, maxCopies, budget = 4, 8, 48 << 10
	m := websession.New(websession.Config{Store: f, Area: "console", Cookie: "vdibroker_session", Clock: clk, TTL: time.Hour,
		MaxCopies: maxCopies, MaxCopyBytes: budget})
	t.Cleanup(m.Close)
	sessions := make([][]*websession.Session, goroutines)
	cookies := make([][]*http.Cookie, goroutines)
	errs := make(chan error, 2*goroutines)
	look := func() bool {
		if n, total, sum := m.Copies(); total != sum || total < 0 || total > budget || n > maxCopies {
			errs <- fmt.Errorf("%d copies counting %d bytes, holding %d", n, total, sum)
			return false
		}
		return true
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range 40 {
				switch op := rng.IntN(8); {
				case op < 4 || len(cookies[g]) == 0:
					w := httptest.NewRecorder()
					s, err := m.Open(context.Background(), w, httptest.NewRequest("POST", "/signin", nil),
						padded(fmt.Sprint("tok-", g, "-", i), rng.IntN(budget+budget/4)), fmt.Sprint("token:g", g, "-", i%8), vdibroker.RoleReader, time.Time{})
					if err != nil {
						errs <- err
						return
					}
					sessions[g], cookies[g] = append(sessions[g], s), append(cookies[g], w.Result().Cookies()[0])
				case op < 6:
					get(m, cookies[g][rng.IntN(len(cookies[g]))])
				case op == 6:
					m.End(context.Background(), httptest.NewRecorder(), httptest.NewRequest("POST", "/signout", nil), sessions[g][rng.IntN(len(sessions[g]))])
				default:
					m.Sweep(context.Background())
				}
				if !look() {
					return
				}
			}
		})
	}
	wg.Wait()
	f.down.Store(true)
	for g := range goroutines {
		wg.Go(func() {
			for i, s := range sessions[g] {
				get(m, cookies[(g+1)%goroutines][i%len(cookies[(g+1)%goroutines])])
				m.Forget(context.Background(), s)
				if !look() {
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkCopies(t, m, maxCopies, budget)
	if n, _, _ := m.Copies(); n != 0 {
		t.Errorf("%d copies after every session was revoked", n)
	}
}
