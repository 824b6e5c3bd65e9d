//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	vhttp "github.com/vdibroker/vdibroker/http"
)

// A real OpenID provider: Ory Hydra (v2.3, built from the Go module proxy
// by .ci/run into VDIBROKER_TEST_HYDRA), served as localhost while the
// broker is on 127.0.0.1, with its login, consent and logout screens
// served by the test as Hydra expects of an application of its own.

// hydraLogin is the login, consent and logout application Hydra sends
// browsers to; it speaks Hydra's admin API. Its one user is carol
// (pw-carol, group pin-ops).
type hydraLogin struct {
	t     *testing.T
	admin string // Hydra's admin URL
}

var hydraForm = template.Must(template.New("login").Parse(`<!doctype html><html><head><title>Hydra login</title></head><body>
<form method="post" action="/login"><input type="hidden" name="challenge" value="{{.}}">
<input id="username" name="username"><input id="password" name="password" type="password">
<button id="login" type="submit">Sign in</button></form></body></html>`))

// call sends a request to Hydra's admin API and decodes its answer.
func (h *hydraLogin) call(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, h.admin+path, rd)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s %s", method, path, res.Status, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// accept accepts a login, consent or logout request and sends the browser
// where Hydra says.
func (h *hydraLogin) accept(w http.ResponseWriter, r *http.Request, kind, challenge string, body any) {
	var to struct {
		RedirectTo string `json:"redirect_to"`
	}
	q := url.Values{kind + "_challenge": {challenge}}
	if err := h.call("PUT", "/admin/oauth2/auth/requests/"+kind+"/accept?"+q.Encode(), body, &to); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	http.Redirect(w, r, to.RedirectTo, http.StatusFound)
}

func (h *hydraLogin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == "GET" && r.URL.Path == "/login":
		ch := r.URL.Query().Get("login_challenge")
		var lr struct {
			Skip    bool   `json:"skip"`
			Subject string `json:"subject"`
		}
		if err := h.call("GET", "/admin/oauth2/auth/requests/login?"+url.Values{"login_challenge": {ch}}.Encode(), nil, &lr); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		if lr.Skip { // Hydra remembers this browser
			h.accept(w, r, "login", ch, map[string]any{"subject": lr.Subject})
			return
		}
		hydraForm.Execute(w, ch)
	case r.Method == "POST" && r.URL.Path == "/login":
		if r.PostFormValue("username") != "carol" || r.PostFormValue("password") != "pw-carol" {
			http.Error(w, "wrong user or password", http.StatusUnauthorized)
			return
		}
		h.accept(w, r, "login", r.PostFormValue("challenge"), map[string]any{"subject": "carol", "remember": true, "remember_for": 3600})
	case r.URL.Path == "/consent":
		ch := r.URL.Query().Get("consent_challenge")
		var cr struct {
			Scopes   []string `json:"requested_scope"`
			Audience []string `json:"requested_access_token_audience"`
		}
		if err := h.call("GET", "/admin/oauth2/auth/requests/consent?"+url.Values{"consent_challenge": {ch}}.Encode(), nil, &cr); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		h.accept(w, r, "consent", ch, map[string]any{"grant_scope": cr.Scopes, "grant_access_token_audience": cr.Audience,
			"session": map[string]any{"id_token": map[string]any{"groups": []string{"pin-ops"}, "preferred_username": "carol@example.test"}}})
	case r.URL.Path == "/logout":
		h.accept(w, r, "logout", r.URL.Query().Get("logout_challenge"), nil)
	default:
		http.NotFound(w, r)
	}
}

// startHydra runs Hydra (in-memory store) with its issuer on localhost
// and returns the issuer and the admin URL.
func startHydra(t *testing.T, bin string) (issuer, admin string) {
	t.Helper()
	app := &hydraLogin{t: t}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	appSrv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: app}}
	appSrv.Start()
	t.Cleanup(appSrv.Close)
	appURL := "http://localhost:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	for attempt := 1; ; attempt++ {
		pub, adm := freePort(t), freePort(t)
		issuer, admin = "http://localhost:"+strconv.Itoa(pub), "http://127.0.0.1:"+strconv.Itoa(adm)
		app.admin = admin
		cmd := exec.Command(bin, "serve", "all", "--dev")
		cmd.Env = append(os.Environ(), "DSN=memory", "SECRETS_SYSTEM=vdibroker-test-hydra-system-secret", "LOG_LEVEL=warn",
			"URLS_SELF_ISSUER="+issuer, "URLS_LOGIN="+appURL+"/login", "URLS_CONSENT="+appURL+"/consent", "URLS_LOGOUT="+appURL+"/logout",
			"SERVE_PUBLIC_HOST=127.0.0.1", "SERVE_PUBLIC_PORT="+strconv.Itoa(pub), "SERVE_ADMIN_HOST=127.0.0.1", "SERVE_ADMIN_PORT="+strconv.Itoa(adm))
		logPath := filepath.Join(t.TempDir(), "hydra.log")
		logf, _ := os.Create(logPath)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-exited; logf.Close() })
		gone := false
		e2eEventually(t, "Hydra ready", 60*time.Second, func() bool {
			select {
			case <-exited:
				gone = true
				return true
			default:
			}
			// Bounded: what took a port may not answer.
			res, err := (&http.Client{Timeout: 2 * time.Second}).Get(admin + "/health/ready")
			if err != nil {
				return false
			}
			res.Body.Close()
			return res.StatusCode == 200
		})
		if !gone {
			break
		}
		// Another process took a port freePort picked before Hydra
		// bound it: again on others.
		if out, _ := os.ReadFile(logPath); !portTaken(string(out)) || attempt == portAttempts {
			t.Fatalf("Hydra exited (attempt %d of %d):\n%s", attempt, portAttempts, out)
		}
	}
	return issuer, admin
}

// TestOIDCHydraBrowser (R-SEC): Chromium signs in to the console through
// Ory Hydra on another site, lands on the overview as carol (Contributor
// on pin), signs out of the console and of Hydra (RP-initiated logout
// through Hydra's logout flow), and the next sign-in shows Hydra's login
// form again instead of signing in silently.
func TestOIDCHydraBrowser(t *testing.T) {
	bin := os.Getenv("VDIBROKER_TEST_HYDRA")
	if bin == "" {
		t.Skip("real provider test: set VDIBROKER_TEST_HYDRA to an Ory Hydra v2 binary (.ci/run builds one) and VDIBROKER_TEST_BROWSER=1")
	}
	ctx := newBrowser(t)
	issuer, admin := startHydra(t, bin)
	dir := t.TempDir()
	roles, secret := filepath.Join(dir, "roles.yaml"), filepath.Join(dir, "secret")
	os.WriteFile(roles, []byte(oidcRoles), 0o600)
	os.WriteFile(secret, []byte("vdibroker-console-hydra-secret\n"), 0o600)
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(),
		OIDC: OIDCFlags{Issuer: issuer, ClientID: "vdibroker-console", ClientSecretFile: secret, RoleMapFile: roles, GroupsClaim: "groups"}}
	if err := m.Open(t.Context()); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	h := &hydraLogin{t: t, admin: admin}
	if err := h.call("POST", "/admin/clients", map[string]any{
		"client_id": "vdibroker-console", "client_secret": "vdibroker-console-hydra-secret",
		"redirect_uris": []string{m.URL() + "/signin/oidc/callback"}, "post_logout_redirect_uris": []string{m.URL() + "/signin"},
		"grant_types": []string{"authorization_code"}, "response_types": []string{"code"}, "scope": "openid profile email",
		"token_endpoint_auth_method": "client_secret_basic",
	}, nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"pin", "pout"} {
		if _, err := vhttp.NewClient(m.URL(), m.AdminToken).PutHostPool(t.Context(), p, map[string]any{}); err != nil {
			t.Fatal(err)
		}
	}
	step(t, ctx, "sign in through Hydra", carolSignsIn(m.URL())...)
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('tr[data-pool="pout"]').length`))
	if err != nil || n != 0 {
		t.Errorf("the overview lists pout (%d, %v), outside the role's scope", n, err)
	}
	screenshot(t, ctx, "console-hydra-overview.png")
	step(t, ctx, "sign out, at Hydra too",
		chromedp.Click(chromedp.CSS(".signout button")),
		chromedp.WaitVisible(chromedp.CSS("#signin-oidc")),
		chromedp.Click(chromedp.CSS("#signin-oidc")),
		chromedp.WaitVisible(chromedp.CSS("#username")),
	)
}
