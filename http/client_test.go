package http_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestClientBehindPathPrefix: a broker mounted under a prefix (reverse
// proxy) works, including following nextLink.
func TestClientBehindPathPrefix(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"pfx01", "pfx02", "pfx03"} {
		e.pool(n, nil)
	}
	proxy := httptest.NewServer(http.StripPrefix("/broker", e.srvs[0].Handler()))
	defer proxy.Close()
	c := vhttp.NewClient(proxy.URL+"/broker/", adminToken)
	c.PageSize = 1
	pools, err := c.ListHostPools(context.Background())
	if err != nil || len(pools) != 3 || pools[2].Name != "pfx03" {
		t.Fatalf("list through prefix: %v %d", err, len(pools))
	}
}

// TestClientErrors: error answers become *vdibroker.Error, also when a
// proxy in between answers plain text.
func TestClientErrors(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream unavailable", http.StatusServiceUnavailable)
	}))
	defer plain.Close()
	_, err := vhttp.NewClient(plain.URL, "x").GetHostPool(context.Background(), "p")
	wantCode(t, err, vdibroker.EInternal, "HTTP 503", "upstream unavailable")

	e := newEnv(t)
	_, err = e.client(0, "wrong").ListHostPools(context.Background())
	wantCode(t, err, vdibroker.EUnauthenticated, "invalid token")
	_, err = e.admin.PutHostPool(context.Background(), "pool01", map[string]any{"maxSessionLimit": 0})
	if ve := wantCode(t, err, vdibroker.EInvalid, "maxSessionLimit: must be 1..999999"); ve.Field != "maxSessionLimit" {
		t.Errorf("field %q", ve.Field)
	}
	if err := e.admin.Healthz(context.Background()); err != nil {
		t.Errorf("healthz: %v", err)
	}
}
