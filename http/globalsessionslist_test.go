package http_test

import (
	"fmt"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestGlobalSessionsListBound_RU3 (R-U3, R-G5, R-SEC): a principal lists
// sessions in other pods at most GlobalSessionListsPerPrincipal times at
// once, then as many a minute. Each listing is a round of pod-to-pod
// calls, each spending this pod's budget of calls at its peer (shared by
// every user's global connect) and, on PostgreSQL, a nonce row there; one
// at a time, a User token in a loop made a round per request. Past it:
// 429 with Retry-After and no pod call; another principal is not refused
// for it; a Reader, listing any user's, is bounded alike.
func TestGlobalSessionsListBound_RU3(t *testing.T) {
	envs := fedPods(t, 2, 1, 5, vdibroker.DistributionNone)
	e := envs[0]
	e.clock.Freeze() // the bound refills by the test's clock alone
	alice := e.userToken("alice", nil)
	path := "/api/v1/users/alice/globalsessions"
	peer := envs[1].urls[0] + federation.SessionsPath
	e.calls.take()
	for i := range vhttp.GlobalSessionListsPerPrincipal {
		if status, _, raw := rawDo(t, e, "GET", path, alice, ""); status != 200 {
			t.Fatalf("listing %d: %d %s, want 200", i+1, status, raw)
		}
	}
	if calls := e.calls.take(); calls[peer] == 0 {
		t.Fatalf("the listings asked pod1 nothing: %v", calls)
	}
	for i := range 20 {
		res, ve, raw := rawDoAt(t, e.urls[0], "GET", path, alice, "")
		if res.StatusCode != 429 || ve == nil || ve.Code != vdibroker.ETooManyRequests || res.Header.Get("Retry-After") == "" {
			t.Fatalf("listing %d past the bound: %d %s, want 429 with Retry-After", vhttp.GlobalSessionListsPerPrincipal+i+1, res.StatusCode, raw)
		}
	}
	if calls := e.calls.take(); len(calls) != 0 {
		t.Errorf("the refused listings called other pods: %v", calls)
	}
	if status, _, raw := rawDo(t, e, "GET", "/api/v1/users/bob/globalsessions", e.userToken("bob", nil), ""); status != 200 {
		t.Errorf("bob's listing meanwhile: %d %s, want 200", status, raw)
	}
	reader := e.roleToken("Reader", "rd")
	for i := range vhttp.GlobalSessionListsPerPrincipal {
		if status, _, raw := rawDo(t, e, "GET", fmt.Sprintf("/api/v1/users/user%d/globalsessions", i), reader, ""); status != 200 {
			t.Fatalf("a Reader's listing %d: %d %s, want 200", i+1, status, raw)
		}
	}
	e.calls.take()
	if status, _, raw := rawDo(t, e, "GET", "/api/v1/users/bob/globalsessions", reader, ""); status != 429 {
		t.Errorf("a Reader's listing past the bound: %d %s, want 429", status, raw)
	}
	if calls := e.calls.take(); len(calls) != 0 {
		t.Errorf("the Reader's refused listing called other pods: %v", calls)
	}
}
