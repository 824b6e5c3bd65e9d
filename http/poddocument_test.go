package http_test

import (
	"encoding/json"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/store"
)

// TestPodDocument_RG5: a peer's console's write of the federation
// document (PUT /api/v1/pod/federation, signed) is stored as the pod's
// own PUT stores it, its generation checked the same, and recorded as
// federation.put by the calling pod for its writer; only a pod of the
// document with the secret sends one, a replay is refused, and a pod
// with no document yet takes none (the first comes from federation
// apply, R-SEC).
func TestPodDocument_RG5(t *testing.T) {
	envs := fedPods(t, 2, 1, 5, vdibroker.DistributionNone)
	pod0 := vdibroker.Pod{Name: "pod0", URL: envs[0].urls[0]}
	st, err := envs[0].admin.GetFederation(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	doc := *st.Document
	doc.Generation = 2
	doc.GlobalEntitlements[0].Users = []string{"dora"}
	req := vdibroker.PodDocumentRequest{Document: doc, Principal: "admin"}

	got, err := vhttp.NewPodClient("pod1", []byte(testFedSecret)).PutDocument(t.Context(), pod0, req)
	if err != nil || got.Generation != 2 {
		t.Fatalf("pod1's write to pod0: %+v, %v", got, err)
	}
	if st, err := envs[0].admin.GetFederation(t.Context()); err != nil || st.Document.Generation != 2 || !vdibroker.ContainsUser(st.Document.GlobalEntitlements[0].Users, "dora") {
		t.Fatalf("pod0 after the write: %+v, %v", st, err)
	}
	entries, err := envs[0].admin.ListAudit(t.Context(), vhttp.AuditQuery{Action: "federation.put", Target: "federation", Newest: true})
	if err != nil || len(entries) == 0 {
		t.Fatalf("pod0's audit: %v, %v", entries, err)
	}
	if p := entries[0].Principal; p.Kind != vdibroker.PrincipalPod || p.ID != "pod1" || p.Name != "admin" || entries[0].Outcome != vdibroker.AuditOK {
		t.Errorf("pod0's newest federation.put: %+v", entries[0])
	}

	for _, tc := range []struct {
		name, from, secret string
		req                vdibroker.PodDocumentRequest
		code, says         string
	}{
		{"the same generation with other content", "pod1", testFedSecret, vdibroker.PodDocumentRequest{Document: *st.Document, Principal: "admin"}, vdibroker.EConflict, "generation"},
		{"a pod not in the document", "intruder", testFedSecret, req, vdibroker.EPermission, "intruder"},
		{"another secret", "pod1", "another-federation-secret", req, vdibroker.EUnauthenticated, ""},
		{"no principal", "pod1", testFedSecret, vdibroker.PodDocumentRequest{Document: doc}, vdibroker.EInvalid, "principal: must be 1..261 characters, got 0"},
		{"a principal longer than a console's", "pod1", testFedSecret, vdibroker.PodDocumentRequest{Document: doc, Principal: "oidc:" + strings.Repeat("x", vdibroker.MaxUserLen+1)}, vdibroker.EInvalid, "principal: must be 1..261 characters, got 262"},
		// The audit trail's name of the writer (R-SEC): an escape
		// sequence there would reach a terminal that reads the trail.
		{"a principal with control characters", "pod1", testFedSecret, vdibroker.PodDocumentRequest{Document: doc, Principal: "admin\x1b[2J"}, vdibroker.EInvalid, "principal: must not contain control characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := vhttp.NewPodClient(tc.from, []byte(tc.secret)).PutDocument(t.Context(), pod0, tc.req)
			wantCode(t, err, tc.code, tc.says)
		})
	}

	// The console names an OpenID Connect administrator "oidc:" and her
	// subject, which the broker takes up to vdibroker.MaxUserLen
	// characters, any of them beyond ASCII: her change reaches the peers
	// (a bound of 320 bytes refused it there, the pods' documents then
	// differing, R-G5).
	long := "oidc:" + strings.Repeat("é", vdibroker.MaxUserLen)
	if err := vdibroker.ValidateUser("sub", strings.TrimPrefix(long, "oidc:")); err != nil {
		t.Fatalf("the subject is not one the broker takes: %v", err)
	}
	if _, err := vhttp.NewPodClient("pod1", []byte(testFedSecret)).PutDocument(t.Context(), pod0, vdibroker.PodDocumentRequest{Document: doc, Principal: long}); err != nil {
		t.Errorf("a write for an OpenID Connect administrator with a long subject: %v", err)
	} else if entries, err := envs[0].admin.ListAudit(t.Context(), vhttp.AuditQuery{Action: "federation.put", Target: "federation", Newest: true}); err != nil || len(entries) == 0 || entries[0].Outcome != vdibroker.AuditOK ||
		!strings.HasPrefix(entries[0].Principal.Name, "oidc:éé") {
		// The audit trail holds the name as it bounds every name.
		t.Errorf("pod0's newest federation.put: %+v, %v; want its principal oidc:éé…", entries, err)
	}

	// A replay of a signed write is refused.
	doc.Generation = 3
	body, _ := json.Marshal(vdibroker.PodDocumentRequest{Document: doc, Principal: "admin"})
	h := signedBy("pod1", []byte(testFedSecret), "PUT", federation.DocumentPath, string(body), time.Now())
	if got := podCallStatus(t, pod0.URL, "PUT", federation.DocumentPath, string(body), h.Clone()); got != nethttp.StatusOK {
		t.Fatalf("a signed write: HTTP %d", got)
	}
	if got := podCallStatus(t, pod0.URL, "PUT", federation.DocumentPath, string(body), h); got != nethttp.StatusUnauthorized {
		t.Errorf("its replay: HTTP %d, want 401", got)
	}

	// A pod with no document takes none from a peer.
	s, err := store.Open(t.Context(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	srv := testserver.New(testserver.Config{Store: s, AdminToken: adminToken, Pod: "pod9", Site: "s0",
		Peers: vhttp.NewPodClient("pod9", []byte(testFedSecret)), FederationSecret: []byte(testFedSecret)})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close() })
	_, err = vhttp.NewPodClient("pod1", []byte(testFedSecret)).PutDocument(t.Context(), vdibroker.Pod{Name: "pod9", URL: ts.URL}, req)
	wantCode(t, err, vdibroker.EPermission, "no federation document yet")
	if _, err := vhttp.NewClient(ts.URL, adminToken).GetFederation(t.Context()); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("pod9 after a peer's write: %v, want no document", err)
	}
}

// TestPodDocumentWritesBounded_RG5 (R-SEC): a holder of the federation
// secret, signing as a pod of the document, may write the document at a
// peer; each write is an audit entry holding the document before and
// after (up to a megabyte) and its log line. One pod writing document
// after document, each a generation higher, was taken as fast as the
// nonce budget allows (a thousand a second). PodDocumentsPerPod are taken
// at once, then 429 with Retry-After, recorded at most once; another pod's
// writes, and this pod's own administrator's, are not refused for it, and
// the pod is taken again once its bucket refilled.
func TestPodDocumentWritesBounded_RG5(t *testing.T) {
	envs := fedPods(t, 3, 1, 5, vdibroker.DistributionNone)
	envs[0].clock.Freeze()
	pod0 := vdibroker.Pod{Name: "pod0", URL: envs[0].urls[0]}
	st, err := envs[0].admin.GetFederation(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	doc := *st.Document
	put := func(from string) error {
		doc.Generation++
		_, err := vhttp.NewPodClient(from, []byte(testFedSecret)).PutDocument(t.Context(), pod0, vdibroker.PodDocumentRequest{Document: doc, Principal: "admin"})
		return err
	}
	audited := func() int {
		t.Helper()
		list, err := envs[0].admin.ListAudit(t.Context(), vhttp.AuditQuery{Action: "federation.put", Target: "federation"})
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	before := audited()
	for i := range vhttp.PodDocumentsPerPod {
		if err := put("pod1"); err != nil {
			t.Fatalf("pod1's write %d of %d: %v", i+1, vhttp.PodDocumentsPerPod, err)
		}
	}
	for range 20 {
		err := put("pod1")
		wantCode(t, err, vdibroker.ETooManyRequests, "pod pod1 writes the federation document faster than 30 a minute")
		// Its Retry-After, for the console to say when to send again:
		// one write of a bucket of 30 a minute, 2 s.
		if got := vdibroker.ErrorRetryAfter(err); got != 2*time.Second {
			t.Errorf("pod1's refused write: RetryAfter %v, want 2s", got)
		}
		doc.Generation-- // not stored
	}
	doc.Generation++
	body, _ := json.Marshal(vdibroker.PodDocumentRequest{Document: doc, Principal: "admin"})
	doc.Generation--
	req, _ := nethttp.NewRequest("PUT", pod0.URL+federation.DocumentPath, strings.NewReader(string(body)))
	req.Header = signedBy("pod1", []byte(testFedSecret), "PUT", federation.DocumentPath, string(body), time.Now())
	res, err := nethttp.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != nethttp.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Errorf("pod1's write past its bound: %d, Retry-After %q; want 429 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
	}
	// 30 writes; the 21 refusals from one address are counted, one
	// written at most (RecordRefusal).
	if got := audited() - before; got < vhttp.PodDocumentsPerPod || got > vhttp.PodDocumentsPerPod+1 {
		t.Errorf("%d federation.put entries after %d writes and 21 refused, want %d or one more", got, vhttp.PodDocumentsPerPod, vhttp.PodDocumentsPerPod)
	}
	if err := put("pod2"); err != nil {
		t.Errorf("pod2's write while pod1 is refused: %v", err)
	}
	doc.Generation++
	if _, err := envs[0].admin.PutFederation(t.Context(), &doc); err != nil {
		t.Errorf("pod0's administrator's write while pod1 is refused: %v", err)
	}
	envs[0].clock.Advance(2 * time.Second) // one write's worth of the bucket
	if err := put("pod1"); err != nil {
		t.Errorf("pod1's write once its bucket refilled: %v", err)
	}
	if st, err := envs[0].admin.GetFederation(t.Context()); err != nil || st.Document.Generation != doc.Generation {
		t.Errorf("pod0's document: %+v, %v; want generation %d", st, err, doc.Generation)
	}
}

// refusingPeer is a pod that answers every call status with body, a
// JSON one, and Retry-After header ("": none).
func refusingPeer(t *testing.T, header string, status int, body string) *httptest.Server {
	t.Helper()
	peer := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if header != "" {
			w.Header().Set("Retry-After", header)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(peer.Close)
	return peer
}

// TestPodDocumentRetryAfter_RG5: a peer's refusal of the federation
// document carries its Retry-After to the caller (the console says
// when to send again), bounded: a value a pod would not send (above an
// hour, not a number of seconds, not above 0) is not taken, and a
// refusal that is not a vdibroker pod's answer carries none.
func TestPodDocumentRetryAfter_RG5(t *testing.T) {
	for _, tc := range []struct {
		name, header string
		status       int
		body         string
		want         time.Duration
	}{
		{"seconds", "7", 429, `{"error":{"code":"TooManyRequests","message":"slow down"}}`, 7 * time.Second},
		{"an hour", "3600", 429, `{"error":{"code":"TooManyRequests","message":"slow down"}}`, time.Hour},
		{"over an hour", "3601", 429, `{"error":{"code":"TooManyRequests","message":"slow down"}}`, 0},
		{"a day", "86400", 429, `{"error":{"code":"TooManyRequests","message":"slow down"}}`, 0},
		{"huge", "99999999999999999999", 429, `{"error":{"code":"TooManyRequests","message":"slow down"}}`, 0},
		{"zero", "0", 429, `{"error":{"code":"TooManyRequests","message":"slow down"}}`, 0},
		{"negative", "-5", 429, `{"error":{"code":"TooManyRequests","message":"slow down"}}`, 0},
		{"plus", "+5", 429, `{"error":{"code":"TooManyRequests","message":"slow down"}}`, 0},
		{"fraction", "1.5", 429, `{"error":{"code":"TooManyRequests","message":"slow down"}}`, 0},
		{"HTTP date", "Wed, 21 Oct 2015 07:28:00 GMT", 429, `{"error":{"code":"TooManyRequests","message":"slow down"}}`, 0},
		{"none", "", 429, `{"error":{"code":"TooManyRequests","message":"slow down"}}`, 0},
		{"unavailable", "30", 503, `{"error":{"code":"PodUnavailable","message":"later"}}`, 30 * time.Second},
		{"not a vdibroker answer", "5", 429, `too many`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peer := refusingPeer(t, tc.header, tc.status, tc.body)
			_, err := vhttp.NewPodClient("pod1", []byte(testFedSecret)).PutDocument(t.Context(), vdibroker.Pod{Name: "pod0", URL: peer.URL},
				vdibroker.PodDocumentRequest{Document: vdibroker.Federation{Generation: 2}, Principal: "admin"})
			if err == nil {
				t.Fatal("a refusal answered no error")
			}
			if got := vdibroker.ErrorRetryAfter(err); got != tc.want {
				t.Errorf("Retry-After %q: RetryAfter %v, want %v (%v)", tc.header, got, tc.want, err)
			}
		})
	}
}
