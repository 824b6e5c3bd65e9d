package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// internalSecret is what a service on the broker's network answers; no
// broker answer may show it.
const internalSecret = "INTERNAL-ONLY-answer-of-a-service-behind-the-firewall"

// openPod starts a pod pod1 with --federation-allow allow.
func openPod(t *testing.T, allow ...string) (*Main, *vhttp.Client, *vhttp.Client) {
	t.Helper()
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "federation.secret")
	if err := os.WriteFile(secretFile, []byte("ssrf-federation-secret-0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &Main{Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, "data"),
		Federation: FederationFlags{PodName: "pod1", SecretFile: secretFile, PodTimeout: time.Second, Allow: allow}}
	if err := m.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	admin := vhttp.NewClient(m.URL(), m.AdminToken)
	token := func(role string) *vhttp.Client {
		tr, err := admin.CreateToken(context.Background(), vhttp.TokenRequest{Role: role, Subject: strings.ToLower(role)})
		if err != nil {
			t.Fatal(err)
		}
		return vhttp.NewClient(m.URL(), tr.Secret)
	}
	return m, token("Contributor"), token("Reader")
}

// peerDoc is a document of pod1 and a peer at url.
func peerDoc(gen int64, url string) *vdibroker.Federation {
	return &vdibroker.Federation{Generation: gen, Sites: []vdibroker.Site{{Name: "s"}},
		Pods: []vdibroker.Pod{{Name: "pod1", Site: "s", URL: "https://pod1.example.test"}, {Name: "peer", Site: "s", URL: url}}}
}

// TestFederationPeersAreNotAnyURL_RSEC: a Contributor's federation
// document cannot make the broker request a URL on its own network. By
// default a peer must be https and never loopback or link-local (400
// naming the field); with an operator's --federation-allow the named
// peers are called, but a peer's answer that is not the broker's is never
// shown to a Reader, and a peer's redirect is not followed.
func TestFederationPeersAreNotAnyURL_RSEC(t *testing.T) {
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/moved"):
			http.Redirect(w, r, "/landed"+strings.TrimPrefix(r.URL.Path, "/moved"), http.StatusFound)
			return
		case strings.HasPrefix(r.URL.Path, "/landed"):
			// A pod's answer, were the redirect followed.
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"pod": "peer", "generation": 2, "pools": []}`))
			return
		}
		http.Error(w, internalSecret, http.StatusInternalServerError)
	}))
	t.Cleanup(internal.Close)
	ctx := context.Background()

	t.Run("default", func(t *testing.T) {
		_, contributor, _ := openPod(t)
		for _, url := range []string{internal.URL + "/internal", "https" + strings.TrimPrefix(internal.URL, "http") + "/internal",
			"https://169.254.169.254/latest/meta-data", "https://localhost:8443", "https://[::1]:8443"} {
			_, err := contributor.PutFederation(ctx, peerDoc(1, url))
			var ve *vdibroker.Error
			if !errors.As(err, &ve) || ve.Code != vdibroker.EInvalid || ve.Field != "pods[1].url" {
				t.Errorf("peer %s: %v, want InvalidArgument on pods[1].url", url, err)
			}
		}
		if _, err := contributor.PutFederation(ctx, peerDoc(1, "https://peer.example.test:8443")); err != nil {
			t.Errorf("an https peer by name: %v", err)
		}
	})

	t.Run("allowed loopback", func(t *testing.T) {
		_, contributor, reader := openPod(t, "http://127.0.0.1")
		for gen, path := range []string{"/internal", "/moved"} {
			if _, err := contributor.PutFederation(ctx, peerDoc(int64(gen+1), internal.URL+path)); err != nil {
				t.Fatalf("peer %s with --federation-allow http://127.0.0.1: %v", path, err)
			}
			st, err := reader.GetFederation(ctx)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := json.Marshal(st)
			if strings.Contains(string(raw), "INTERNAL-ONLY") {
				t.Errorf("GET /api/v1/federation shows a Reader the peer's answer: %s", raw)
			}
			if len(st.Peers) != 1 || st.Peers[0].Health == "ok" || st.Peers[0].Health == "" {
				t.Errorf("peer %s: %+v, want its failure named", path, st.Peers)
			}
		}
	})
}
