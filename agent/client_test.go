package agent

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// The broker's agent API never redirects. An answer that does (a proxy
// in front of it, or whoever answers in its name) must not send the
// registration token in the body or the host credential in the header
// to another address, nor to plain http:// after https://, which the
// agent refuses to be configured with (R-SEC: --insecure-http).
func TestClientFollowsNoRedirect(t *testing.T) {
	var mu sync.Mutex
	var leaked []string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		leaked = append(leaked, r.Method+" "+r.URL.Path+" auth="+r.Header.Get("Authorization")+" body="+string(body))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"hostPool":"p","hostName":"h","credential":"vdbh_attacker","commands":[]}`)
	}))
	t.Cleanup(elsewhere.Close)
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, elsewhere.URL+r.URL.Path, code)
		}))
		c := &Client{Server: front.URL, HTTP: &http.Client{}}
		if _, err := c.Register(t.Context(), vdibroker.RegisterRequest{Token: "vdbr_secret", HostName: "h", Address: "h:3389"}); err == nil || !strings.Contains(err.Error(), "redirect") {
			t.Errorf("register answered %d: err %v, want a redirect refused", code, err)
		}
		if _, err := c.Heartbeat(t.Context(), "vdbh_secret", vdibroker.HeartbeatRequest{}); err == nil || !strings.Contains(err.Error(), "redirect") {
			t.Errorf("heartbeat answered %d: err %v, want a redirect refused", code, err)
		}
		front.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) > 0 {
		t.Errorf("requests reached the redirect's target:\n%s", strings.Join(leaked, "\n"))
	}
}
