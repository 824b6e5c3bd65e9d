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

// TestClientDotNamesStayNames (R-SEC): a name or id "." or ".." (which
// url.PathEscape leaves as it is) stays one segment of the path, the
// name asked for: the broker answers that it has no such thing. The
// client took them as dot segments, so the request went to another path
// (DELETE /registrationtokens/.. to DELETE /hostpools/victim/, GET
// /users/../sessions to /api/v1/sessions), also behind a path prefix. An
// empty name is refused before anything is sent: it would name the
// collection, or a path with an empty segment.
func TestClientDotNamesStayNames(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("victim", nil)
	proxy := httptest.NewServer(http.StripPrefix("/broker", e.srvs[0].Handler()))
	defer proxy.Close()
	for _, c := range []*vhttp.Client{e.admin, vhttp.NewClient(proxy.URL+"/broker/", adminToken)} {
		for _, n := range []string{".", ".."} {
			for _, call := range []struct {
				what string
				err  error
				want string
			}{
				{"DeleteRegistrationToken", c.DeleteRegistrationToken(ctx, "victim", n), `registration token "` + n + `" not found in host pool "victim"`},
				{"DeleteToken", c.DeleteToken(ctx, n), `token "` + n + `" not found`},
				{"DeleteApplicationGroup", c.DeleteApplicationGroup(ctx, n), `application group "` + n + `" not found`},
				{"DeleteScalingPlan", c.DeleteScalingPlan(ctx, n), `scaling plan "` + n + `" not found`},
				{"GetSessionHost", second(c.GetSessionHost(ctx, "victim", n)), `session host "` + n + `" not found in host pool "victim"`},
				{"Logoff", second(c.Logoff(ctx, "victim", n)), `user session "` + n + `" not found in host pool "victim"`},
				{"GetApplication", second(c.GetApplication(ctx, n, "word")), `application group "` + n + `" not found`},
			} {
				if vdibroker.ErrorCode(call.err) != vdibroker.ENotFound || vdibroker.ErrorMessage(call.err) != call.want {
					t.Errorf("%s(%q): %v, want NotFound: %s", call.what, n, call.err, call.want)
				}
			}
		}
		if err := c.DeleteToken(ctx, ""); err == nil || vdibroker.ErrorCode(err) == vdibroker.ENotFound {
			t.Errorf("DeleteToken(\"\"): %v, want it refused before it is sent", err)
		}
		if _, err := c.GetApplication(ctx, "", "word"); err == nil || vdibroker.ErrorCode(err) == vdibroker.ENotFound {
			t.Errorf("GetApplication(\"\", word): %v, want it refused before it is sent", err)
		}
	}
	if _, err := e.admin.GetHostPool(ctx, "victim"); err != nil {
		t.Fatal(err)
	}
}

// second is the error of a call that returns a value too.
func second[T any](_ T, err error) error { return err }
