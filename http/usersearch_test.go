package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestUserPrefixSearch_SPEC9: ?userPrefix= finds a pool's sessions by the
// start of the user name in any case, listed by name, and nextLink pages
// on through them, each once; it cannot be combined with ?user=, and bad
// prefixes are 400 naming the field.
func TestUserPrefixSearch_SPEC9(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("search", nil)
	e.addHosts("search", "sh", 2)
	var want []string
	for i := range 7 {
		u := fmt.Sprintf("Kim.%02d", 6-i) // created in reverse name order
		e.mustConnect("search", u)
		want = append([]string{u}, want...)
	}
	e.mustConnect("search", "kelly")
	e.mustConnect("search", "bob")

	got, err := e.admin.ListUserSessions(ctx, "search", vhttp.SessionQuery{UserPrefix: "KIM."})
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, s := range got {
		users = append(users, s.User)
	}
	if !slices.Equal(users, want) {
		t.Errorf("KIM.: %v, want %v (by name, any case)", users, want)
	}
	// Pages of 3 by nextLink: 3 + 3 + 1, in name order.
	var paged []string
	path := "/api/v1/hostpools/search/usersessions?" + url.Values{"userPrefix": {"k"}, "limit": {"3"}}.Encode()
	for pages := 0; path != ""; pages++ {
		if pages > 5 {
			t.Fatal("no end of pages")
		}
		status, ve, raw := rawDo(t, e, "GET", path, adminToken, "")
		var page struct {
			Value    []vdibroker.UserSession
			NextLink string
		}
		if status != 200 || json.Unmarshal(raw, &page) != nil {
			t.Fatalf("GET %s: %d %+v", path, status, ve)
		}
		for _, s := range page.Value {
			paged = append(paged, s.User)
		}
		path = page.NextLink
	}
	if wantK := append([]string{"kelly"}, want...); !slices.Equal(paged, wantK) {
		t.Errorf("k, paged by 3: %v, want %v", paged, wantK)
	}
	wantBadQueries(t, e, "/api/v1/hostpools/search/usersessions", map[string]string{
		"userPrefix=kim&user=Kim.01": "userPrefix",
		"userPrefix=%01kim":          "userPrefix",
		"userPrefix=kim%20":          "userPrefix",
	})
}

// wantBadQueries fails unless each query of path (by the admin) is 400
// naming its field.
func wantBadQueries(t *testing.T, e *env, path string, fields map[string]string) {
	t.Helper()
	for query, field := range fields {
		status, ve, _ := rawDo(t, e, "GET", path+"?"+query, adminToken, "")
		if status != 400 || ve == nil || ve.Field != field {
			t.Errorf("?%s: %d %+v, want 400 on %s", query, status, ve, field)
		}
	}
}
