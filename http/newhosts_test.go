package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// registration is the registration of host with token, its address
// host's name at port 3389.
func registration(token, host string) *vdibroker.RegisterRequest {
	return &vdibroker.RegisterRequest{Token: token, HostName: host, Address: host + ".example.test:3389"}
}

// postRegistration posts req to the server at url as an agent does, and
// returns its answer and the answer's body.
func postRegistration(t *testing.T, url string, req *vdibroker.RegisterRequest) (*http.Response, []byte) {
	t.Helper()
	body, _ := json.Marshal(req)
	res, err := http.Post(url+"/api/v1/agent/register", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, data
}

// errorBody is the JSON error body of an answer.
type errorBody struct {
	Error struct{ Code, Message string } `json:"error"`
}

// takenWhileSpent checks, while token's new hosts are spent, that what
// creates no host is taken: the re-key of its host reKeyed with that
// host's credential cred, and the registration of its host reset after
// an admin's reset. An admin then creates the host made in pool, which
// the caller has the token claim.
func takenWhileSpent(t *testing.T, admin *vhttp.Client, pool, token, cred, reKeyed, reset, made string) {
	t.Helper()
	ctx := t.Context()
	if _, err := admin.ReKey(ctx, cred, registration(token, reKeyed)); err != nil {
		t.Errorf("a re-key with the host's credential while the token's new hosts are spent: %v", err)
	}
	if err := admin.ResetRegistration(ctx, pool, reset); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Register(ctx, registration(token, reset)); err != nil {
		t.Errorf("a registration after an admin's reset while the token's new hosts are spent: %v", err)
	}
	if _, err := admin.PutSessionHost(ctx, pool, made, vhttp.SessionHostRequest{}); err != nil {
		t.Fatal(err)
	}
}

// TestNewHostsPerTokenBound_RSEC (R-SEC): a registration token, maxHosts 0
// (any number of hosts) included, registers NewHostsPerTokenBurst new
// hosts at once, then NewHostsPerTokenPerMinute a minute: past it a new
// host is refused 429 TooManyRequests with Retry-After and the JSON error
// naming the bound, and nothing is written (no host, no place of the
// token). The hosts a token registers are the rows, audit entries and
// log lines its holder (a golden image's) could otherwise write as fast
// as the server answers. What creates no host keeps its own rules while
// the token's bucket is empty: the re-key of a host with its credential
// (ReKeysPerHost), the registration after an admin reset it, the claim
// of a pooled host an admin created; another token of the pool has a
// bucket of its own. Once the clock moves on, new hosts are taken again.
func TestNewHostsPerTokenBound_RSEC(t *testing.T) {
	e := newEnv(t)
	e.clock.Freeze() // the bucket refills only as the test moves the clock
	ctx := context.Background()
	p := uniq("nh")
	e.pool(p, nil)
	tok, err := e.admin.CreateRegistrationToken(ctx, p, vdibroker.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// A golden image's clones at once: the whole burst, 8 at a time.
	creds := make([]string, vhttp.NewHostsPerTokenBurst)
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []error
	for range 8 {
		wg.Go(func() {
			for i := range work {
				res, err := e.admin.Register(ctx, registration(tok.Token, fmt.Sprintf("nh-%04d", i)))
				if err != nil {
					mu.Lock()
					failed = append(failed, fmt.Errorf("nh-%04d: %w", i, err))
					mu.Unlock()
					continue
				}
				creds[i] = res.Credential
			}
		})
	}
	for i := range vhttp.NewHostsPerTokenBurst {
		work <- i
	}
	close(work)
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of the burst's %d registrations refused, the first: %v", len(failed), vhttp.NewHostsPerTokenBurst, failed[0])
	}

	// The next new host: 429, Retry-After, the error body naming the bound.
	wantBound := fmt.Sprintf("faster than %d at once, then %d a minute", vhttp.NewHostsPerTokenBurst, vhttp.NewHostsPerTokenPerMinute)
	res, data := postRegistration(t, e.urls[0], registration(tok.Token, "nh-over"))
	var answer errorBody
	if err := json.Unmarshal(data, &answer); err != nil {
		t.Fatalf("the refusal's body %q: %v", data, err)
	}
	if ra, _ := strconv.Atoi(res.Header.Get("Retry-After")); res.StatusCode != http.StatusTooManyRequests || ra <= 0 ||
		answer.Error.Code != vdibroker.ETooManyRequests || !strings.Contains(answer.Error.Message, wantBound) {
		t.Fatalf("new host %d of the token: %d Retry-After %q %s; want 429 with Retry-After and TooManyRequests naming %q",
			vhttp.NewHostsPerTokenBurst+1, res.StatusCode, res.Header.Get("Retry-After"), data, wantBound)
	}
	// Nothing written: no host, the token's count as it was.
	hosts, err := e.admin.ListSessionHosts(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != vhttp.NewHostsPerTokenBurst {
		t.Errorf("%d hosts in the pool after the refusal, want %d", len(hosts), vhttp.NewHostsPerTokenBurst)
	}
	tokens, err := e.admin.ListRegistrationTokens(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 1 || tokens[0].Hosts != vhttp.NewHostsPerTokenBurst {
		t.Errorf("registration tokens after the refusal: %+v, want one that registered %d hosts", tokens, vhttp.NewHostsPerTokenBurst)
	}

	// What creates no host keeps its own rules.
	takenWhileSpent(t, e.admin, p, tok.Token, creds[0], "nh-0000", "nh-0001", "nh-made")
	if _, err := e.admin.Register(ctx, registration(tok.Token, "nh-made")); err != nil {
		t.Errorf("the claim of a pooled host an admin created while the token's new hosts are spent: %v", err)
	}
	// Another token has its own bucket.
	other, err := e.admin.CreateRegistrationToken(ctx, p, vdibroker.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.Register(ctx, registration(other.Token, "nh-other")); err != nil {
		t.Errorf("another token's new host: %v", err)
	}
	// The token's next new host is still refused: none of the above
	// gave it one.
	_, err = e.admin.Register(ctx, registration(tok.Token, "nh-over"))
	if vdibroker.ErrorCode(err) != vdibroker.ETooManyRequests || vdibroker.ErrorRetryAfter(err) <= 0 {
		t.Fatalf("new host after the re-key, reset, claim and another token's: %v (retry after %s), want 429 with Retry-After",
			err, vdibroker.ErrorRetryAfter(err))
	}

	// One new host a minute / NewHostsPerTokenPerMinute later, and one
	// only.
	e.clock.Advance(time.Minute / vhttp.NewHostsPerTokenPerMinute)
	if _, err := e.admin.Register(ctx, registration(tok.Token, "nh-over")); err != nil {
		t.Errorf("a new host %s after the bound was reached: %v", time.Minute/vhttp.NewHostsPerTokenPerMinute, err)
	}
	_, err = e.admin.Register(ctx, registration(tok.Token, "nh-over2"))
	if vdibroker.ErrorCode(err) != vdibroker.ETooManyRequests {
		t.Errorf("a second new host in the same second: %v, want 429", err)
	}
	// A minute later, a minute's worth.
	e.clock.Advance(time.Minute)
	for i := range vhttp.NewHostsPerTokenPerMinute {
		if _, err := e.admin.Register(ctx, registration(tok.Token, fmt.Sprintf("nh-later-%02d", i))); err != nil {
			t.Fatalf("new host %d a minute later: %v", i+1, err)
		}
	}
}

// TestNewHostsPerTokenConcurrent_RSEC (R-SEC): registrations of new
// hosts sent at once on one registration token, from more workers than
// the store has connections, take exactly NewHostsPerTokenBurst hosts
// while the clock stands still: a refusal spends no place of the token's
// maxHosts (its transaction rolls back), and a maxHosts refusal spends
// nothing of the bucket. Worked numbers: maxHosts = burst + 40; the
// first wave of burst + 100 takes burst (500) hosts, 100 are 429. The
// clock then moves 100 s (100 new hosts' worth): a second wave of 100
// takes the token's last 40 places, the other 60 are refused for
// maxHosts (Permission), none 429, as the token's count and its bucket
// move in step.
func TestNewHostsPerTokenConcurrent_RSEC(t *testing.T) {
	e := newEnv(t)
	e.clock.Freeze()
	ctx := context.Background()
	p := uniq("nhc")
	e.pool(p, nil)
	const extra = 100
	const places = 40
	tok, err := e.admin.CreateRegistrationToken(ctx, p, vdibroker.RegistrationTokenRequest{MaxHosts: vhttp.NewHostsPerTokenBurst + places})
	if err != nil {
		t.Fatal(err)
	}
	// wave registers n new hosts named prefix-i from 24 workers at once
	// and counts the answers by error code ("" for a host registered).
	wave := func(prefix string, n int) map[string]int {
		t.Helper()
		got := map[string]int{}
		var mu sync.Mutex
		work := make(chan int)
		var wg sync.WaitGroup
		for range 24 {
			wg.Go(func() {
				for i := range work {
					name := fmt.Sprintf("%s-%04d", prefix, i)
					_, err := e.admin.Register(ctx, &vdibroker.RegisterRequest{Token: tok.Token, HostName: name, Address: name + ".example.test:3389"})
					code := vdibroker.ErrorCode(err)
					if err == nil {
						code = ""
					}
					mu.Lock()
					got[code]++
					mu.Unlock()
					if code != "" && code != vdibroker.ETooManyRequests && code != vdibroker.EPermission {
						t.Errorf("%s: %v", name, err)
					}
				}
			})
		}
		for i := range n {
			work <- i
		}
		close(work)
		wg.Wait()
		return got
	}
	count := func() (hosts, registered int) {
		t.Helper()
		list, err := e.admin.ListSessionHosts(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		tokens, err := e.admin.ListRegistrationTokens(ctx, p)
		if err != nil || len(tokens) != 1 {
			t.Fatalf("registration tokens: %+v, %v", tokens, err)
		}
		return len(list), tokens[0].Hosts
	}

	got := wave("first", vhttp.NewHostsPerTokenBurst+extra)
	if want := map[string]int{"": vhttp.NewHostsPerTokenBurst, vdibroker.ETooManyRequests: extra}; !maps.Equal(got, want) {
		t.Errorf("first wave of %d at once: answers by code %v, want %v", vhttp.NewHostsPerTokenBurst+extra, got, want)
	}
	if hosts, registered := count(); hosts != vhttp.NewHostsPerTokenBurst || registered != vhttp.NewHostsPerTokenBurst {
		t.Errorf("after the first wave: %d hosts, the token counts %d; want %d and %d", hosts, registered, vhttp.NewHostsPerTokenBurst, vhttp.NewHostsPerTokenBurst)
	}

	e.clock.Advance(extra * time.Minute / vhttp.NewHostsPerTokenPerMinute)
	got = wave("second", extra)
	if want := map[string]int{"": places, vdibroker.EPermission: extra - places}; !maps.Equal(got, want) {
		t.Errorf("second wave of %d at once, %d places left: answers by code %v, want %v", extra, places, got, want)
	}
	if hosts, registered := count(); hosts != vhttp.NewHostsPerTokenBurst+places || registered != vhttp.NewHostsPerTokenBurst+places {
		t.Errorf("after the second wave: %d hosts, the token counts %d; want %d", hosts, registered, vhttp.NewHostsPerTokenBurst+places)
	}
}
