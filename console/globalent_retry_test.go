package console_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// testClock is a clock standing at base until moved by Advance.
type testClock struct {
	base   time.Time
	offset atomic.Int64
}

func (c *testClock) Now() time.Time          { return c.base.Add(time.Duration(c.offset.Load())) }
func (c *testClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// roundTripFunc is an http.RoundTripper from a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestGlobalEntitlementPeerBusy_RG5 (R-SEC): a peer takes
// PodDocumentsPerPod writes of the federation document at once from one
// pod, then one every 2 s (30 a minute), refusing the others 429 with
// Retry-After. ams1 took 30 from fra1 already (the same document again,
// signed as fra1): the change an administrator saves on fra1's
// Federation page is taken by fra1 and refused by ams1, and the page
// says when to send it again, from ams1's Retry-After (2 s: one write
// of a bucket of 30 a minute): in ams1's row and in the banner, as a
// time on the console's clock. The time counts from ams1's answer, not
// from when fra1 sent: ams1's answer to a write takes 3 s to reach fra1
// here (the transport moves the clock), so a send at the time said is
// not refused again. Once that time came, the page's "send again" brings
// ams1 to the same generation. The console's clock stands hours from the
// real one, so a time read from the real clock is not taken for it.
func TestGlobalEntitlementPeerBusy_RG5(t *testing.T) {
	clk := &testClock{base: time.Now().Truncate(time.Second).Add(5*time.Hour + 17*time.Minute + 23*time.Second)}
	fra, ams := newFraAmsPodsWith(t, clk.Now, func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if r.Method == http.MethodPut && r.URL.Path == federation.DocumentPath {
				clk.Advance(3 * time.Second)
			}
			return resp, err
		})
	})
	doc := docOf(t, ams)
	asFra := vhttp.NewPodClient("fra1", []byte("console-test-federation-secret"))
	asFra.Now = clk.Now
	amsPod := vdibroker.Pod{Name: "ams1", URL: ams.url}
	for i := range vhttp.PodDocumentsPerPod {
		if _, err := asFra.PutDocument(t.Context(), amsPod, vdibroker.PodDocumentRequest{Document: *doc, Principal: "admin"}); err != nil {
			t.Fatalf("fra1's write %d at ams1: %v", i+1, err)
		}
	}

	b := fra.browser()
	b.signin(adminToken)
	sent := clk.Now()
	a := b.post("/federation/globalentitlements/assignments", geForm(b.csrf("/federation"), 1, "entitlement", "office", "op", "add", "kind", "user", "principal", "erin"))
	wantStatus(t, a, http.StatusOK)
	// 3 s for ams1's answer to arrive, then 2 s: ams1's bucket refills
	// one write in 60/30 s (Retry-After 2).
	again := sent.Add(3*time.Second + 2*time.Second).Local().Format("15:04:05 MST")
	wantContains(t, a, `data-result-pod="fra1" data-result="applied"`, `data-result-pod="ams1" data-result="refused"`,
		"TooManyRequests: pod fra1 writes the federation document faster than 30 a minute; slow down (send again in 2s, after "+again+")",
		"This pod holds generation 2, but ams1 did not take it",
		"ams1 refused it for now and takes it again in 2s, after "+again+": send this document again then with the button below",
		`action="/federation/resend"`)
	if d := docOf(t, ams); d.Generation != 1 {
		t.Errorf("ams1 holds generation %d, want 1 (it refused)", d.Generation)
	}

	clk.Advance(2 * time.Second) // sent+5 s, the time said
	a = b.post("/federation/resend", geForm(b.csrf("/federation"), 2))
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, `data-result-pod="ams1" data-result="applied"`, "Every pod of the federation holds generation 2")
	if d := docOf(t, ams); d.Generation != 2 || len(entitlement(d, "office").Users) != 1 {
		t.Errorf("ams1 after the resend: %+v", d)
	}
}
