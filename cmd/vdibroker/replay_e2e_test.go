//go:build unix

package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestPodCallReplayOnAnotherReplica_RG5: two replicas of one pod share a
// PostgreSQL database; a signed pod-to-pod call answered by one is refused
// as a replay by the other (the nonces are in the database), and a
// freshly signed call is answered by either.
func TestPodCallReplayOnAnotherReplica_RG5(t *testing.T) {
	dsn := e2ePostgresDSN(t)
	dir := t.TempDir()
	secret := []byte("replay-federation-secret-0123456789")
	secretFile := filepath.Join(dir, "federation.secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "vdb_admin_replay_test_0123456789abcdef")
	var replicas []*Main
	for i := range 2 {
		m := &Main{Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, "r", string(rune('a'+i))), Database: dsn,
			Federation: FederationFlags{PodName: "pod1", SecretFile: secretFile, PodTimeout: time.Second}}
		if err := m.Open(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		replicas = append(replicas, m)
	}
	admin := vhttp.NewClient(replicas[0].URL(), replicas[0].AdminToken)
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "s"}},
		Pods: []vdibroker.Pod{{Name: "pod1", Site: "s", URL: "https://pod1.example.test"}, {Name: "pod2", Site: "s", URL: "https://pod2.example.test"}}}
	if _, err := admin.PutFederation(context.Background(), doc); err != nil {
		t.Fatal(err)
	}
	signed := func() map[string]string {
		return federation.Sign(secret, "GET", federation.LoadsPath, "pod2", nil, time.Now())
	}
	h := signed()
	if got := getLoads(t, replicas[0].URL(), h); got != http.StatusOK {
		t.Fatalf("a signed call to replica A: %d, want 200", got)
	}
	if got := getLoads(t, replicas[0].URL(), h); got != http.StatusUnauthorized {
		t.Errorf("the call replayed on replica A: %d, want 401", got)
	}
	if got := getLoads(t, replicas[1].URL(), h); got != http.StatusUnauthorized {
		t.Errorf("the call replayed on replica B: %d, want 401 (the nonce is the pod's, not a replica's)", got)
	}
	if got := getLoads(t, replicas[1].URL(), signed()); got != http.StatusOK {
		t.Errorf("a new signed call to replica B: %d, want 200", got)
	}
}

// getLoads sends GET federation.LoadsPath to the broker at base with
// the headers h (a pod's signature, from federation.Sign) and returns
// the answer's status.
func getLoads(t *testing.T, base string, h map[string]string) int {
	t.Helper()
	req, err := http.NewRequest("GET", base+federation.LoadsPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
