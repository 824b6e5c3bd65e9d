package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// idemLargestEntry bounds idemEntrySize of the largest answer a connect
// returns (TestIdempotencyLargestAnswer measures it): idemMaxBytes holds
// at least idemMaxBytes/idemLargestEntry of them.
const idemLargestEntry = 40 << 10

// wide is n characters of 4 bytes each (U+1D538), the most bytes a field
// counted in characters holds, after prefix.
func wide(prefix string, n int) string {
	return prefix + strings.Repeat("\U0001D538", n-len([]rune(prefix)))
}

// largestConnect is a service on a real SQLite store with a pool of
// the longest name and the longest customRdpProperty and a host of the
// longest name and address, through a gateway of the longest name when
// gateway is set; user, signed in (a User principal of an OpenID
// sign-in, its subject her name), connects to a RemoteApp of the longest
// friendly name and command line with the longest key. It returns the
// service, its store and the answer.
func largestConnect(t *testing.T, gateway bool, user string) (*Service, *store.DB, *vdibroker.ConnectAnswer) {
	t.Helper()
	ctx := t.Context()
	st, err := store.OpenWith(ctx, "", t.TempDir(), nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fc := clocktesting.NewFakeClock(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	cfg := Config{Store: st, Clock: fc, MaintenanceInterval: 10000 * time.Hour}
	if gateway {
		cfg.Gateway.HostName = strings.Repeat("g", vdibroker.MaxGatewayHostLen-4) + ":443"
	}
	svc := New(cfg)
	t.Cleanup(func() { svc.Close() })
	pool := strings.Repeat("p", vdibroker.MaxPoolNameLen)
	p := vdibroker.NewHostPool(pool)
	p.CustomRdpProperty = wide("alternate shell:s:", vdibroker.MaxCustomRdpPropertyLen)
	if _, _, err := svc.StorePool(ctx, pool, nil, p, false); err != nil {
		t.Fatal(err)
	}
	host := strings.Repeat("h", vdibroker.MaxHostNameLen)
	addr := strings.Repeat("a", 253) + ":65535"
	if _, err := st.PutSessionHost(ctx, &vdibroker.SessionHost{HostPool: pool, Name: host,
		Address:   addr,
		Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true, CreateTime: fc.Now()}); err != nil {
		t.Fatal(err)
	}
	heartbeat(t, svc, pool, host)
	a, err := svc.Connect(asEndUser(ctx, user), pool, vdibroker.ConnectRequest{User: user, RemoteApp: largestApp}, largestKey)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(a.RDPFile, largestApp.CommandLine) || !strings.Contains(a.RDPFile, p.CustomRdpProperty) ||
		gateway != strings.Contains(a.RDPFile, "gatewayaccesstoken:s:") {
		t.Fatalf("the answer lacks the command line, the pool's property or the gateway's token:\n%.300s", a.RDPFile)
	}
	return svc, st, a
}

// largestApp is a RemoteApp of the longest name, friendly name and
// command line; largestKey the longest Idempotency-Key.
var (
	largestApp = &vdibroker.RemoteApp{Program: strings.Repeat("n", vdibroker.MaxAppNameLen),
		Name: wide("f", vdibroker.MaxTextLen), CommandLine: wide("c", vdibroker.MaxCommandLineLen)}
	largestKey = strings.Repeat("k", 255)
)

// asEndUser is ctx signed in as user through the portal (R-U1).
func asEndUser(ctx context.Context, user string) context.Context {
	return vdibroker.WithPrincipal(ctx, &vdibroker.Principal{Kind: vdibroker.PrincipalOIDC, Role: vdibroker.RoleUser,
		Subject: user, TokenID: strings.Repeat("t", 64)})
}

// TestIdempotencyLargestAnswer (R-C6, R-SEC): the largest answer a
// connect returns, measured through the real connect: straight to the
// host for a user of the longest name in bytes (256 characters of 4
// bytes), and through a gateway for the user whose access token holds
// the most bytes once encoded (256 characters, each escaped as six in
// the token's JSON), both to a host of the longest address. Its entry is within idemLargestEntry; the default
// budget then holds those answers within idemMaxBytes (and is filled,
// not emptied); and a connect whose key the budget dropped, run again,
// answers the same session (R-C1) and places no second one.
func TestIdempotencyLargestAnswer(t *testing.T) {
	var (
		largest                *idemEntry
		largestAnswer          *vdibroker.ConnectAnswer
		svc                    *Service
		st                     *store.DB
		largestUser, otherUser string
	)
	for _, tc := range []struct {
		name        string
		gateway     bool
		user, other string
	}{
		{"straight to the host", false, wide("u", vdibroker.MaxUserLen), wide("v", vdibroker.MaxUserLen)},
		{"through the gateway", true, "u" + strings.Repeat("<", 255), "v" + strings.Repeat("<", 255)},
	} {
		s, db, a := largestConnect(t, tc.gateway, tc.user)
		if len(s.idem.m) != 1 {
			t.Fatalf("%s: %d keys kept, want the connect's one", tc.name, len(s.idem.m))
		}
		for _, e := range s.idem.m {
			t.Logf("%s: the entry holds %d bytes (.rdp file %d, key %d, caller %d)", tc.name, e.size, len(a.RDPFile), len(e.key), len(e.caller))
			if e.size != idemEntrySize(e.key, e.caller, a) || e.size != s.idem.bytes {
				t.Fatalf("%s: entry size %d, counted %d, want %d", tc.name, e.size, s.idem.bytes, idemEntrySize(e.key, e.caller, a))
			}
			if largest == nil || e.size > largest.size {
				largest, largestAnswer, svc, st, largestUser, otherUser = e, a, s, db, tc.user, tc.other
			}
		}
	}
	if largest.size > idemLargestEntry {
		t.Errorf("the largest entry holds %d bytes, more than idemLargestEntry (%d): the docs' figures are wrong", largest.size, idemLargestEntry)
	}

	// The default budget with the largest answers: never over it, and
	// filled to within one answer of it.
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	c := newIdempotency(func() time.Time { return now })
	n := int(idemMaxBytes/largest.size) + 100
	for i := range n {
		k := fmt.Sprintf("%0*d", len(largest.key), i)
		user := ""
		if i%2 == 0 {
			user = fmt.Sprintf("%0*d", len(largest.caller), i%2000) // 1,000 end users
		}
		c.do(user, k, func() (*vdibroker.ConnectAnswer, bool) { return largestAnswer, true })
		if c.bytes > idemMaxBytes {
			t.Fatalf("after %d answers the cache holds %d bytes, over idemMaxBytes (%d)", i+1, c.bytes, idemMaxBytes)
		}
	}
	if c.bytes <= idemMaxBytes-largest.size {
		t.Errorf("the cache holds %d bytes of the largest answers, want more than %d: it drops more than it must", c.bytes, idemMaxBytes-largest.size)
	}

	// A key dropped by the budget, run again: the same session (R-C1),
	// not a second one.
	ctx := t.Context()
	svc.idem.mu.Lock()
	svc.idem.maxBytes = largest.size + 100 // one such answer
	svc.idem.mu.Unlock()
	if _, err := svc.Connect(asEndUser(ctx, otherUser), strings.Repeat("p", vdibroker.MaxPoolNameLen),
		vdibroker.ConnectRequest{User: otherUser, RemoteApp: largestApp}, largestKey); err != nil {
		t.Fatal(err)
	}
	if len(svc.idem.m) != 1 || svc.idem.bytes > svc.idem.maxBytes {
		t.Fatalf("%d keys of %d bytes kept, want the other user's one within %d", len(svc.idem.m), svc.idem.bytes, svc.idem.maxBytes)
	}
	pool := strings.Repeat("p", vdibroker.MaxPoolNameLen)
	again, err := svc.Connect(asEndUser(ctx, largestUser), pool, vdibroker.ConnectRequest{User: largestUser, RemoteApp: largestApp}, largestKey)
	if err != nil {
		t.Fatal(err)
	}
	if again.SessionID != largestAnswer.SessionID || again.Created {
		t.Errorf("the dropped key's connect again: session %s (created %v), want %s reconnected", again.SessionID, again.Created, largestAnswer.SessionID)
	}
	sessions, err := st.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: pool})
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) != 2 {
		t.Errorf("the pool holds %d sessions, want 2 (one each)", len(sessions))
	}
}

// checkIdemBytes fails unless c's running byte total is the sum of its
// kept answers' sizes, recomputed, within c.maxBytes, and the expiry
// order holds every kept answer.
func checkIdemBytes(tb testing.TB, c *idempotency, step int) {
	tb.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var sum int64
	kept := 0
	for _, e := range c.m {
		if e.answer != nil && isDone(e) {
			sum += idemEntrySize(e.key, e.caller, e.answer)
			kept++
		}
	}
	inOrder := 0
	for _, e := range c.order {
		if !e.gone {
			inOrder++
		}
	}
	if sum != c.bytes || sum > c.maxBytes || inOrder != kept || len(c.m) > idemMax {
		tb.Fatalf("step %d: counted %d bytes, recomputed %d (budget %d); %d kept, %d in the order, %d keys",
			step, c.bytes, sum, c.maxBytes, kept, inOrder, len(c.m))
	}
}

// TestIdempotencyBytesDoNotDrift (R-C6, R-SEC): a seeded run of
// connects (end users' and others', answers of random sizes, some
// larger than the budget, some failing, keys repeated) over a clock
// that passes idemTTL now and then: after each, the running byte total
// equals the sum of the kept answers' sizes recomputed, and stays
// within the budget.
func TestIdempotencyBytesDoNotDrift(t *testing.T) {
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	c := newIdempotency(func() time.Time { return now })
	c.maxBytes = 64 << 10
	rng := rand.New(rand.NewPCG(1, 2))
	drops := 0
	for i := range 20000 {
		now = now.Add(time.Duration(rng.Int64N(int64(idemTTL / 500))))
		user := ""
		if rng.IntN(3) > 0 {
			user = fmt.Sprintf("user%d", rng.IntN(20))
		}
		key := fmt.Sprintf("key%d", rng.IntN(3000))
		size := rng.IntN(8 << 10)
		if rng.IntN(200) == 0 {
			size = int(c.maxBytes) // with the key and overhead, over the budget
		}
		fail := rng.IntN(10) == 0
		before := len(c.m)
		var fresh []string // kept, and not expiring at this connect
		if size == int(c.maxBytes) && !fail {
			for k, e := range c.m {
				if k != key && isDone(e) && now.Sub(e.kept) < idemTTL {
					fresh = append(fresh, k)
				}
			}
		}
		c.do(user, key, func() (*vdibroker.ConnectAnswer, bool) {
			if fail {
				return nil, false
			}
			return &vdibroker.ConnectAnswer{ConnectResponse: vdibroker.ConnectResponse{RDPFile: strings.Repeat("x", size)}}, true
		})
		if len(c.m) <= before {
			drops++
		}
		// An answer larger than the budget is not kept, and no other goes for it.
		for _, k := range fresh {
			if _, ok := c.m[k]; !ok {
				t.Fatalf("step %d: an answer larger than the budget pushed %s out", i, k)
			}
		}
		if _, ok := c.m[key]; ok && fresh != nil && len(c.m) != len(fresh)+1 {
			t.Fatalf("step %d: an answer larger than the budget is kept", i)
		}
		checkIdemBytes(t, c, i)
	}
	if drops < 1000 {
		t.Errorf("only %d connects dropped a key: the run did not exercise the bounds", drops)
	}
}

// TestIdempotencyBytesConcurrent (R-C6, R-SEC), for -race: connects of
// many goroutines on a few keys, answers held a while, under a budget
// of a few answers, so that answers are kept and dropped all the time.
// A key's connect never runs beside another of the same key (one still
// running is never dropped: a retry waits for its answer), and the byte
// total equals the recomputed sum at the end.
func TestIdempotencyBytesConcurrent(t *testing.T) {
	c := newIdempotency(time.Now)
	c.maxBytes = 4 * idemEntrySize("key00", "", &vdibroker.ConnectAnswer{ConnectResponse: vdibroker.ConnectResponse{RDPFile: strings.Repeat("x", 1000)}})
	var mu sync.Mutex
	running := map[string]int{}
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for range 2000 {
				if ctx.Err() != nil {
					return
				}
				key := fmt.Sprintf("key%02d", rng.IntN(12))
				user := fmt.Sprintf("user%d", rng.IntN(3))
				c.do(user, key, func() (*vdibroker.ConnectAnswer, bool) {
					mu.Lock()
					running[key]++
					twice := running[key] > 1
					mu.Unlock()
					if twice {
						t.Errorf("key %s runs twice at once", key)
						cancel()
					}
					for range rng.IntN(3) {
						runtime.Gosched()
					}
					mu.Lock()
					running[key]--
					mu.Unlock()
					return &vdibroker.ConnectAnswer{ConnectResponse: vdibroker.ConnectResponse{RDPFile: strings.Repeat("x", 500+rng.IntN(1000))}}, rng.IntN(8) > 0
				})
			}
		}()
	}
	wg.Wait()
	checkIdemBytes(t, c, -1)
}
