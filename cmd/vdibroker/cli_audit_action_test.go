//go:build unix

package main

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/pgtest"
)

// TestCLIAuditListActionNeverAudited_RSEC: `audit list --action "GET
// /healthz"` fails naming action, saying the route's requests are not
// audited, rather than listing nothing after a day of probes: no entry
// is ever recorded under the pattern of a route that refuses no one.
// Over the API, on SQLite and on PostgreSQL, every pattern the broker
// serves is an action or refused as one: refused are the health probe
// and the gateways' public keys, the mounted pages (the console, the
// portal, Prometheus, the API's 404) and the console's and the
// portal's own routes (their single sign-on callbacks, static files,
// sign-in pages: what they write is under signin, form and
// portal.launch), and what is not served (a readiness probe, a
// .well-known document); so is the pattern of a route whose entries are
// under an action of its own (PUT /api/v1/hostpools/{pool}:
// hostpool.put), the 400 naming it; every other route of the API is an
// action, its refusals recorded under its pattern.
func TestCLIAuditListActionNeverAudited_RSEC(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir()}
			if engine == "postgres" {
				m.Database = pgtest.SchemaDSN(t, "vdibroker_cli_audit_", "PostgreSQL audit list test")
			}
			if err := m.Open(t.Context()); err != nil {
				t.Fatalf("start broker: %v", err)
			}
			t.Cleanup(func() { m.Close() })
			b := &cliBroker{tb: t, m: m}
			// Probes, with no token and a bad one.
			for _, path := range []string{"/healthz", "/healthz?live", "/api/v1/gateway/keys"} {
				for _, token := range []string{"", "not-a-token"} {
					req, _ := http.NewRequestWithContext(t.Context(), "GET", m.URL()+path, nil)
					if token != "" {
						req.Header.Set("Authorization", "Bearer "+token)
					}
					res, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					res.Body.Close()
					if res.StatusCode != 200 {
						t.Fatalf("GET %s with token %q: %d, want 200", path, token, res.StatusCode)
					}
				}
			}
			r := b.cli("audit", "list", "--action", "GET /healthz")
			if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "action") || !strings.Contains(r.stderr, `"GET /healthz"`) ||
				!strings.Contains(r.stderr, "requests are not audited") {
				t.Errorf("audit list --action \"GET /healthz\": exit %d, stdout %q, stderr %q; want exit 1 naming action, saying its requests are not audited", r.code, r.stdout, r.stderr)
			}

			api := vhttp.NewClient(m.URL(), m.AdminToken)
			refused := []string{
				// API routes that refuse no one.
				"GET /healthz", "GET /api/v1/gateway/keys",
				// Mounted beside the API.
				"/", "/portal/", "GET /metrics", "/api/v1/",
				// The console's and the portal's single sign-on callbacks
				// (the console's is served with serve --oidc-issuer) and
				// static files; with every other route of theirs below.
				"GET /signin/oidc/callback", "GET /portal/signin/oidc/callback", "GET /static/", "GET /portal/static/",
				// Not served at all.
				"GET /readyz", "GET /.well-known/openid-configuration", "GET /api/v1/.well-known/jwks.json",
			}
			refused = append(append(refused, m.console.Routes()...), m.portal.Routes()...)
			var ownAction, taken []string
			all := append(m.Server.Routes(), refused...)
			slices.Sort(all)
			for _, p := range slices.Compact(all) {
				_, err := api.ListAudit(t.Context(), vhttp.AuditQuery{Action: p})
				var ve *vdibroker.Error
				switch {
				case slices.Contains(refused, p):
					if !errors.As(err, &ve) || ve.Code != vdibroker.EInvalid || ve.Field != "action" {
						t.Errorf("?action=%s: %v; want 400 naming action: no entry is recorded under it", p, err)
					}
				case errors.As(err, &ve) && ve.Field == "action" && strings.Contains(ve.Message, "under its action, "):
					// A route of its own action: named in the 400.
					named := false
					for _, a := range vhttp.AuditActions() {
						named = named || strings.Contains(ve.Message, "under its action, "+a+",") || strings.Contains(ve.Message, "under its action, "+a+" (")
					}
					if !named {
						t.Errorf("?action=%s: %q; want it to name the route's audit action", p, ve.Message)
					}
					ownAction = append(ownAction, p)
				case err != nil:
					t.Errorf("?action=%s: %v; want it taken: a refusal of the route is recorded under its pattern", p, err)
				default:
					taken = append(taken, p)
				}
			}
			if !slices.Contains(ownAction, "PUT /api/v1/hostpools/{pool}") || !slices.Contains(ownAction, "POST /api/v1/agent/register") ||
				!slices.Contains(taken, "GET /api/v1/hostpools") || !slices.Contains(taken, "POST /api/v1/agent/heartbeat") {
				t.Errorf("patterns refused for their routes' own actions %q, taken %q; want PUT /api/v1/hostpools/{pool} and POST /api/v1/agent/register among the first, GET /api/v1/hostpools and POST /api/v1/agent/heartbeat among the others", ownAction, taken)
			}
		})
	}
}
