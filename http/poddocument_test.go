package http_test

import (
	"encoding/json"
	nethttp "net/http"
	"net/http/httptest"
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
		{"no principal", "pod1", testFedSecret, vdibroker.PodDocumentRequest{Document: doc}, vdibroker.EInvalid, "principal: must be 1..320 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := vhttp.NewPodClient(tc.from, []byte(tc.secret)).PutDocument(t.Context(), pod0, tc.req)
			wantCode(t, err, tc.code, tc.says)
		})
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
