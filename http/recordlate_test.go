package http_test

import (
	"context"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/intercept"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/store"
)

// TestPodConnectNonceRecordedLate_RG5: a pod connect that makes no
// session (here refused: its pool has no host) commits its held nonce on
// its own before it is answered; a commit that ends past the nonce's
// RecordBy (its window's end and a minute) may have come after another
// that forgot the nonce of a call this one replays, so the connect is
// refused, 401 saying so, not answered with its outcome. The server's
// clock moves two minutes and a second on while the nonce's commit is
// under way (a slow commit): signed at t, RecordBy is t+120. Without the
// check the connect's own refusal (not 401) was answered. A connect
// whose commit is not late is answered its outcome.
func TestPodConnectNonceRecordedLate_RG5(t *testing.T) {
	rs, err := store.Open(t.Context(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	var slow atomic.Bool
	hook := func(ctx context.Context, op string, call func(context.Context) error) error {
		if op == intercept.OpUseNonces && slow.Load() {
			offset.Add(int64(2*time.Minute + time.Second))
		}
		return call(ctx)
	}
	secret := []byte(testFedSecret)
	srv := testserver.New(testserver.Config{Store: intercept.NewStore(rs, hook), AdminToken: adminToken, Pod: "pod1", Site: "s",
		Peers: vhttp.NewPodClient("pod1", secret), FederationSecret: secret, Now: now})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close() })
	e := &env{t: t, store: rs, clock: &clock{}, urls: []string{ts.URL}, admin: vhttp.NewClient(ts.URL, adminToken), agents: map[string]string{}}
	e.pool("office", map[string]any{"maxSessionLimit": 5})
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "s"}},
		Pods:               []vdibroker.Pod{{Name: "pod1", Site: "s", URL: ts.URL}, {Name: "pod2", Site: "s", URL: "https://pod2.example.test"}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "office", Members: []vdibroker.Member{{Pod: "pod1", HostPool: "office"}}}}}
	if _, err := e.admin.PutFederation(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	body := `{"globalEntitlement":"office","hostPool":"office","user":"alice"}`
	connect := func() (int, string) {
		t.Helper()
		req, _ := nethttp.NewRequest("POST", ts.URL+federation.ConnectPath, strings.NewReader(body))
		req.Header = signedBy("pod2", secret, "POST", federation.ConnectPath, body, now())
		resp, err := nethttp.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	status, answer := connect()
	if status == nethttp.StatusUnauthorized || status < 400 {
		t.Fatalf("the connect to a pool without hosts, its nonce committed in time: %d %s; want its refusal, not 401", status, answer)
	}
	slow.Store(true)
	status, answer = connect()
	if status != nethttp.StatusUnauthorized || !strings.Contains(answer, "too late to tell it from a replay") {
		t.Errorf("the connect whose nonce's commit ended past its RecordBy: %d %s; want 401, too late to tell it from a replay", status, answer)
	}
}
