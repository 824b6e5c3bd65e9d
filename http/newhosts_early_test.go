package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/intercept"
)

// TestNewHostsSpentRefusedBeforeWrite_RSEC (R-SEC): once the store
// refused a registration token's new host for its rate, the token's next
// new hosts are refused while its bucket is still empty before any write
// transaction: each costs a read (RegistrationCreatesHost) and no
// RegisterHost, the store's write, and is answered as the store's
// refusal was (429, the same Retry-After and JSON error). Before, each
// was a write transaction rolled back: agents by the thousand waiting on
// one token cost SQLite's one writer, which every connect needs, a
// transaction each time one came back. What the store would not refuse
// for the rate goes to it as before, and answers as before: a re-key, a
// registration after an admin's reset, the claim of a host an admin
// created (all taken), a token at its maxHosts (PermissionDenied, not
// 429), a revoked token (401); a made-up token makes no bucket. Once the
// bucket refills, a new host is taken again.
func TestNewHostsSpentRefusedBeforeWrite_RSEC(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	e := newEnvWith(t, envOptions{maintenance: time.Hour, storeCall: func(_ int, op string) {
		mu.Lock()
		calls[op]++
		mu.Unlock()
	}})
	// took returns the calls of the store ops that concern a
	// registration since the last took: RegisterHost is its write
	// transaction, RegistrationCreatesHost the read before it, and
	// AppendAudit the entry of a refusal.
	took := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		got := map[string]int{}
		for _, op := range []string{intercept.OpRegisterHost, intercept.OpRegistrationCreatesHost, intercept.OpAppendAudit} {
			if calls[op] > 0 {
				got[op] = calls[op]
			}
		}
		clear(calls)
		return got
	}
	e.clock.Freeze()
	const burst = 2
	srv := e.srvs[0].Server
	vhttp.BoundNewHosts(srv, burst)
	ctx := context.Background()
	p := uniq("nhw")
	e.pool(p, nil)
	tok, err := e.admin.CreateRegistrationToken(ctx, p, vdibroker.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// answer is a registration's status, Retry-After and error body.
	type answer struct {
		status     int
		retryAfter string
		code, msg  string
	}
	post := func(token, host string) answer {
		t.Helper()
		res, data := postRegistration(t, e.urls[0], registration(token, host))
		var b errorBody
		json.Unmarshal(data, &b)
		return answer{res.StatusCode, res.Header.Get("Retry-After"), b.Error.Code, b.Error.Message}
	}
	creds := make([]string, burst)
	for i := range burst {
		res, err := e.admin.Register(ctx, registration(tok.Token, fmt.Sprintf("nhw-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		creds[i] = res.Credential
	}

	// The first new host past the burst: refused by the store's
	// admission, in its write transaction.
	took()
	first := post(tok.Token, "nhw-over")
	if first.status != http.StatusTooManyRequests || first.retryAfter == "" || first.code != vdibroker.ETooManyRequests {
		t.Fatalf("new host past the burst: %+v, want 429 with Retry-After", first)
	}
	if got := took(); got[intercept.OpRegisterHost] != 1 {
		t.Fatalf("store calls of the first refusal: %v, want its RegisterHost", got)
	}

	// The next ones, the agents coming back: the same answer, no write.
	const n = 20
	for i := range n {
		if got := post(tok.Token, fmt.Sprintf("nhw-wait-%02d", i)); got != first {
			t.Fatalf("new host %d while the token's are spent: %+v, want the store's refusal %+v", i, got, first)
		}
	}
	if got, want := took(), map[string]int{intercept.OpRegistrationCreatesHost: n}; !maps.Equal(got, want) {
		t.Errorf("store calls of %d refused new hosts: %v, want %v (a read each, no RegisterHost: no write transaction)", n, got, want)
	}

	// A made-up token: the store's 401, and no bucket.
	buckets := vhttp.NewHostBuckets(srv)
	if got := post("vdbr_made-up", "nhw-x"); got.status != http.StatusUnauthorized {
		t.Errorf("a made-up token: %+v, want 401", got)
	}
	if got := vhttp.NewHostBuckets(srv); got != buckets {
		t.Errorf("buckets of new hosts after a made-up token: %d, want %d", got, buckets)
	}

	// What creates no host goes to the store, and is taken.
	takenWhileSpent(t, e.admin, p, tok.Token, creds[0], "nhw-0", "nhw-1", "nhw-made")
	took()
	if _, err := e.admin.Register(ctx, registration(tok.Token, "nhw-made")); err != nil {
		t.Errorf("the claim of a host an admin created while the token's new hosts are spent: %v", err)
	}
	if got := took(); got[intercept.OpRegisterHost] != 1 {
		t.Errorf("store calls of the claim: %v, want its RegisterHost", got)
	}
	if got := post(tok.Token, "nhw-wait-again"); got != first {
		t.Errorf("a new host after the re-key, reset and claim: %+v, want %+v", got, first)
	}
	if got := took(); got[intercept.OpRegisterHost] != 0 {
		t.Errorf("store calls of a new host after the re-key, reset and claim: %v, want no RegisterHost", got)
	}

	// A token at its maxHosts is refused for that, as before: one place
	// past the burst, taken a second later, and the next new host is
	// PermissionDenied, not 429.
	limited, err := e.admin.CreateRegistrationToken(ctx, p, vdibroker.RegistrationTokenRequest{MaxHosts: burst + 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range burst {
		if _, err := e.admin.Register(ctx, registration(limited.Token, fmt.Sprintf("nhw-limited-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if got := post(limited.Token, "nhw-limited-over"); got.status != http.StatusTooManyRequests {
		t.Fatalf("the limited token's new host past the burst: %+v, want 429", got)
	}
	e.clock.Advance(time.Minute / vhttp.NewHostsPerTokenPerMinute)
	if _, err := e.admin.Register(ctx, registration(limited.Token, "nhw-limited-last")); err != nil {
		t.Fatalf("the limited token's last place a second later: %v", err)
	}
	took()
	if got := post(limited.Token, "nhw-limited-more"); got.status != http.StatusForbidden || got.code != vdibroker.EPermission {
		t.Errorf("a new host of a token at its maxHosts, its new hosts spent: %+v, want 403 PermissionDenied", got)
	}
	if got := took(); got[intercept.OpRegisterHost] != 1 {
		t.Errorf("store calls of the maxHosts refusal: %v, want its RegisterHost", got)
	}

	// The second also gave tok a new host, and one only.
	if _, err := e.admin.Register(ctx, registration(tok.Token, "nhw-later")); err != nil {
		t.Errorf("a new host a second later: %v", err)
	}
	took()
	if got := post(tok.Token, "nhw-later-2"); got != first {
		t.Errorf("a second new host in that second: %+v, want %+v", got, first)
	}
	if got := took(); got[intercept.OpRegisterHost] != 0 {
		t.Errorf("store calls of a second new host in that second: %v, want no RegisterHost", got)
	}

	// A revoked token is the store's 401, not 429.
	if err := e.admin.DeleteRegistrationToken(ctx, p, tok.ID); err != nil {
		t.Fatal(err)
	}
	if got := post(tok.Token, "nhw-revoked"); got.status != http.StatusUnauthorized {
		t.Errorf("a new host of the revoked token: %+v, want 401", got)
	}
}
