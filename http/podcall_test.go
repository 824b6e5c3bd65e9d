package http_test

import (
	"context"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/store"
)

// readFlag is a request body that records whether anything read it.
type readFlag struct {
	r    io.Reader
	read atomic.Bool
}

func (b *readFlag) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.r.Read(p)
}

// fedPodOne starts pod1, of site s, on a SQLite store and a loopback
// server, with the federation secret and a pod client for its calls to
// its peers; the caller puts its document.
func fedPodOne(t *testing.T) (*testserver.Server, *httptest.Server) {
	t.Helper()
	st, err := store.Open(t.Context(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	secret := []byte(testFedSecret)
	srv := testserver.New(testserver.Config{Store: st, AdminToken: adminToken, Pod: "pod1", Site: "s",
		Peers: vhttp.NewPodClient("pod1", secret), FederationSecret: secret})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close() })
	return srv, ts
}

// podOne starts pod1 of a document listing pod1 and pod2 on a SQLite
// store and returns its handler.
func podOne(t *testing.T) nethttp.Handler {
	t.Helper()
	srv, ts := fedPodOne(t)
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "s"}},
		Pods: []vdibroker.Pod{{Name: "pod1", Site: "s", URL: ts.URL}, {Name: "pod2", Site: "s", URL: "https://pod2.example.test"}}}
	if _, err := vhttp.NewClient(ts.URL, adminToken).PutFederation(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	return srv.Handler()
}

// TestPodCallChecksHeadersBeforeTheBody_RG5: a pod-to-pod call that its
// headers alone refuse (no signature, a nonce too long, a timestamp
// malformed or out of the window, signed for another pod, from a pod the
// document does not list) or that carries a query string, which its
// signature does not cover, is refused with none of its body read: a
// caller without the secret cannot have a pod read and hash a body of up
// to a MiB. A call whose headers pass has its body read and checked.
func TestPodCallChecksHeadersBeforeTheBody_RG5(t *testing.T) {
	h := podOne(t)
	secret := []byte(testFedSecret)
	const body = `{"user":"alice","hostPools":["office"]}`
	path := federation.SessionsPath
	signed := func(pod, to string, at time.Time) nethttp.Header {
		out := nethttp.Header{}
		for k, v := range federation.SignTo(secret, "POST", path, pod, to, []byte(body), at) {
			out.Set(k, v)
		}
		return out
	}
	with := func(hd nethttp.Header, k, v string) nethttp.Header {
		hd = hd.Clone()
		hd.Set(k, v)
		return hd
	}
	now := time.Now()
	for _, tc := range []struct {
		name    string
		query   string
		h       nethttp.Header
		want    int
		wantErr string // in the answer's body
	}{
		{name: "no signature", h: nethttp.Header{}, want: nethttp.StatusUnauthorized, wantErr: "without a federation signature"},
		{name: "no nonce", h: with(signed("pod2", "pod1", now), federation.HeaderNonce, ""), want: nethttp.StatusUnauthorized, wantErr: "without a federation signature"},
		{name: "a nonce too long", h: with(signed("pod2", "pod1", now), federation.HeaderNonce, strings.Repeat("n", 65)), want: nethttp.StatusUnauthorized, wantErr: "nonce longer"},
		{name: "a malformed timestamp", h: with(signed("pod2", "pod1", now), federation.HeaderTimestamp, "soon"), want: nethttp.StatusUnauthorized, wantErr: "malformed timestamp"},
		{name: "signed 2 minutes ago", h: signed("pod2", "pod1", now.Add(-2*federation.MaxSkew)), want: nethttp.StatusUnauthorized, wantErr: "from this pod's clock"},
		{name: "signed for another pod", h: signed("pod2", "pod3", now), want: nethttp.StatusUnauthorized, wantErr: "signed for pod"},
		{name: "from a pod the document does not list", h: signed("intruder", "pod1", now), want: nethttp.StatusForbidden, wantErr: "not in the federation document"},
		{name: "with a query string", query: "?user=bob", h: signed("pod2", "pod1", now), want: nethttp.StatusUnauthorized, wantErr: "query string"},
		{name: "with an empty query string", query: "?", h: signed("pod2", "pod1", now), want: nethttp.StatusUnauthorized, wantErr: "query string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &readFlag{r: strings.NewReader(body)}
			req := httptest.NewRequest("POST", path+tc.query, b)
			req.Header = tc.h
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != tc.want || !strings.Contains(w.Body.String(), tc.wantErr) {
				t.Errorf("got %d %s, want %d with %q", w.Code, w.Body, tc.want, tc.wantErr)
			}
			if b.read.Load() {
				t.Errorf("the body was read before the call was refused")
			}
		})
	}
	// Its headers pass: the body is read, and its signature checked.
	for _, tc := range []struct {
		name, body string
		want       int
	}{
		{"signed", body, nethttp.StatusOK},
		{"another body", `{"user":"mallory","hostPools":["office"]}`, nethttp.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &readFlag{r: strings.NewReader(tc.body)}
			req := httptest.NewRequest("POST", path, b)
			req.Header = signed("pod2", "pod1", time.Now())
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != tc.want || !b.read.Load() {
				t.Errorf("got %d %s, body read %v; want %d, body read", w.Code, w.Body, b.read.Load(), tc.want)
			}
		})
	}
}

// budgetStore records the budgets of the nonces it records.
type budgetStore struct {
	*store.DB
	mu      sync.Mutex
	budgets []string
}

func (s *budgetStore) UseNonces(ctx context.Context, uses []vdibroker.NonceUse, expires, now time.Time) ([]error, error) {
	s.mu.Lock()
	for _, u := range uses {
		s.budgets = append(s.budgets, u.Pod)
	}
	s.mu.Unlock()
	return s.DB.UseNonces(ctx, uses, expires, now)
}

func (s *budgetStore) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.budgets
	s.budgets = nil
	return out
}

// TestPodCallBudgets_RG5: a pod-to-pod call's nonce spends the budget of
// the pod that signed it (vdibroker.MaxNoncesPerMinute is per calling
// pod), so one caller past its budget leaves the others' calls taken;
// while the pod holds no document, when any name is taken, every call
// spends one budget (vdibroker.NoDocumentBudget), so names made up at
// every call do not multiply it. The nonces are the store's (no
// OneProcessStore), as on PostgreSQL.
func TestPodCallBudgets_RG5(t *testing.T) {
	db, err := store.Open(t.Context(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st := &budgetStore{DB: db.(*store.DB)}
	secret := []byte(testFedSecret)
	srv := testserver.New(testserver.Config{Store: st, AdminToken: adminToken, Pod: "pod1", Site: "s",
		Peers: vhttp.NewPodClient("pod1", secret), FederationSecret: secret})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close() })
	loads := func(pod string) {
		t.Helper()
		if got := podCallStatus(t, ts.URL, "GET", federation.LoadsPath, "", signedBy(pod, secret, "GET", federation.LoadsPath, "", time.Now())); got != nethttp.StatusOK {
			t.Fatalf("a loads call signed by %s: %d, want 200", pod, got)
		}
	}
	for _, pod := range []string{"pod2", "made-up-1", "made-up-2"} {
		loads(pod)
	}
	if got, want := st.take(), []string{vdibroker.NoDocumentBudget, vdibroker.NoDocumentBudget, vdibroker.NoDocumentBudget}; !slices.Equal(got, want) {
		t.Errorf("budgets without a document: %q, want %q (one for all)", got, want)
	}
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "s"}},
		Pods: []vdibroker.Pod{{Name: "pod1", Site: "s", URL: ts.URL}, {Name: "pod2", Site: "s", URL: "https://pod2.example.test"},
			{Name: "pod3", Site: "s", URL: "https://pod3.example.test"}}}
	if _, err := vhttp.NewClient(ts.URL, adminToken).PutFederation(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	loads("pod2")
	loads("pod3")
	if got, want := st.take(), []string{"pod2", "pod3"}; !slices.Equal(got, want) {
		t.Errorf("budgets with a document: %q, want %q (each caller's)", got, want)
	}
}
