package portal_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkHome50: the portal's first page (GET /portal/: the feed and
// the user's sessions, in-process API calls, the template) for a user
// with 50 resources (two desktops and 48 applications shown in the
// portal), over HTTP on loopback, SQLite. Not the 10,000-host pod of
// `bench pod`: see BENCHMARKS.md.
func BenchmarkHome50(b *testing.B) {
	e := newEnv(b, nil)
	ctx := context.Background()
	if _, err := e.admin.PutApplicationGroup(ctx, "desk-apps", map[string]any{"hostPool": "desk", "applicationGroupType": "RemoteApp",
		"assignments": map[string]any{"users": []string{"alice"}}}); err != nil {
		b.Fatal(err)
	}
	for i := range 48 {
		if _, err := e.admin.PutApplication(ctx, "desk-apps", fmt.Sprintf("app%02d", i), map[string]any{"filePath": fmt.Sprintf(`C:\Apps\app%02d.exe`, i),
			"friendlyName": fmt.Sprintf("Application %02d", i), "showInPortal": true}); err != nil {
			b.Fatal(err)
		}
	}
	alice := e.browser()
	alice.signIn(e.userToken("alice"))
	res, page := alice.get("/portal/")
	if res.StatusCode != http.StatusOK || strings.Count(page, `class="resource"`) != 50 {
		b.Fatalf("alice's page: %d, %d resources", res.StatusCode, strings.Count(page, `class="resource"`))
	}
	b.ResetTimer()
	for b.Loop() {
		if res, _ := alice.get("/portal/"); res.StatusCode != http.StatusOK {
			b.Fatal(res.Status)
		}
	}
}
