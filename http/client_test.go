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

// TestClientMaxPages: with MaxPages a list reads that many pages and no
// more (the CLI's "did you mean" reads one page of names, not a list of
// 250,000); without it, every page.
func TestClientMaxPages(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"mp01", "mp02", "mp03", "mp04", "mp05"} {
		e.pool(n, nil)
	}
	c := e.client(0, adminToken)
	c.PageSize = 2
	c.MaxPages = 1
	pools, err := c.ListHostPools(context.Background())
	if err != nil || len(pools) != 2 || pools[0].Name != "mp01" || pools[1].Name != "mp02" {
		t.Fatalf("MaxPages 1 of 2: %v, %d pools; want mp01, mp02", err, len(pools))
	}
	c.MaxPages = 2
	if pools, err = c.ListHostPools(context.Background()); err != nil || len(pools) != 4 {
		t.Fatalf("MaxPages 2 of 2: %v, %d pools; want 4", err, len(pools))
	}
	c.MaxPages = 0
	if pools, err = c.ListHostPools(context.Background()); err != nil || len(pools) != 5 {
		t.Fatalf("MaxPages 0: %v, %d pools; want all 5", err, len(pools))
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

// TestAPIPathDotSegmentsRefused (R-SEC, defence in depth): a path under
// /api/v1 with a "." or ".." segment, or an empty one inside it, is
// refused 400 naming the path. The mux redirected it (307, which keeps
// the method) to the cleaned path, so a client that builds its paths
// without escaping a name of dots, following the redirect as Go's client
// does, deleted another resource: DELETE
// /api/v1/applicationgroups/../hostpools/victim deleted the pool victim.
// A name of dots escaped (%2E%2E) is a name, answered not found.
func TestAPIPathDotSegmentsRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("victim", nil)
	for _, p := range []string{
		"/api/v1/applicationgroups/../hostpools/victim",
		"/api/v1/tokens/../hostpools/victim",
		"/api/v1/hostpools/x/../victim",
		"/api/v1/hostpools/./victim",
		"/api/v1/hostpools//victim",
	} {
		status, ve, raw := rawDo(t, e, "DELETE", p, adminToken, "")
		if status != 400 || ve == nil || ve.Code != vdibroker.EInvalid || ve.Field != "path" {
			t.Errorf("DELETE %s: %d %s, want 400 InvalidArgument naming the path", p, status, raw)
		}
		if _, err := e.admin.GetHostPool(ctx, "victim"); err != nil {
			t.Fatalf("DELETE %s deleted the pool: %v", p, err)
		}
	}
	if status, ve, raw := rawDo(t, e, "DELETE", "/api/v1/applicationgroups/%2E%2E", adminToken, ""); status != 404 || ve == nil || ve.Message != `application group ".." not found` {
		t.Errorf("DELETE of the group named ..: %d %s, want 404 naming it", status, raw)
	}
}
