package portal_test

import (
	"context"
	"html"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/portal"
)

// TestLaunchThroughGatewaySaysOnce_RU4_RGW1: through an RD gateway a
// connection file opens one connection, within the gateway token's
// lifetime (serve --gateway-token-ttl, here 7 minutes): the launch page
// says so, in the user's language, and that Open gives a new file, so
// that a user who opens the file twice, or the next morning, is not left
// with an RDP client's error. A file straight to the host says nothing
// of it.
func TestLaunchThroughGatewaySaysOnce_RU4_RGW1(t *testing.T) {
	e := newEnv(t, func(c *portal.Config) { c.GatewayTokenTTL = 7 * time.Minute })
	e.pool("gway", map[string]any{"gatewayHostName": "rdgw.example.test"}, 1)
	if _, err := e.admin.PutApplicationGroup(context.Background(), "gw-desktop", map[string]any{"hostPool": "gway", "applicationGroupType": "Desktop",
		"friendlyName": "Remote office", "assignments": map[string]any{"users": []string{"alice"}}}); err != nil {
		t.Fatal(err)
	}
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	const (
		en = "This file connects only once, and only within 7 minutes. To connect again, or later, choose Open again for a new file."
		de = "Mit dieser Datei können Sie sich nur einmal verbinden, und nur innerhalb von 7 Minuten."
		ar = "لا يتصل هذا الملف إلا مرة واحدة، وخلال ٧ دقائق فقط."
	)
	// page is the launch's page and its status's message in language
	// code.
	page := func(launch, code string) (string, string) {
		t.Helper()
		alice.get("/portal/?lang=" + code)
		_, p := alice.get(launch)
		_, s := alice.status(launch)
		return html.UnescapeString(p), s.Message
	}
	for _, tc := range []struct {
		name, resource string
		gateway        bool
	}{
		{"through the gateway", "desktop:gway", true},
		{"straight to the host", "desktop:desk", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alice.get("/portal/?lang=en")
			launch := alice.launch(csrf, tc.resource)
			if s := alice.await(launch, ended); s.State != "ready" {
				t.Fatalf("launch of %s: %+v", tc.resource, s)
			}
			for code, want := range map[string]string{"en": en, "de": de, "ar": ar} {
				p, msg := page(launch, code)
				if got := strings.Contains(p, want); got != tc.gateway {
					t.Errorf("%s launch page says %q: %v, want %v:\n%s", code, want, got, tc.gateway, p)
				}
				if got := strings.Contains(msg, want); got != tc.gateway {
					t.Errorf("%s status message %q says %q: %v, want %v", code, msg, want, got, tc.gateway)
				}
			}
			// The file is what the page says it is.
			_, file := alice.get(launch + "/file")
			if got := strings.Contains(file, "gatewayaccesstoken:s:"); got != tc.gateway {
				t.Errorf("the file carries a gateway token: %v, want %v:\n%s", got, tc.gateway, file)
			}
		})
	}
}
