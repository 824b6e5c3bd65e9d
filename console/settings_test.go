package console_test

import (
	"context"
	"html"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// control returns the form control (input, select or textarea start tag)
// named name on the page, "" when there is none.
func control(page, name string) string {
	re := regexp.MustCompile(`<(?:input|select|textarea)\s[^>]*name="` + regexp.QuoteMeta(name) + `"[^>]*>`)
	return re.FindString(page)
}

// settingsFormOf is the pool page's settings form.
func settingsFormOf(t *testing.T, page string) string {
	t.Helper()
	i := strings.Index(page, `id="settings"`)
	if i < 0 {
		t.Fatalf("no settings form on the page")
	}
	return page[i : i+strings.Index(page[i:], "</form>")]
}

// TestSettingsFormFollowsTheSchema_RP4: the pool page has a control for
// every setting of the schema that can change and applies to the pool's
// type, with the schema's min, max and help; immutable settings have none.
func TestSettingsFormFollowsTheSchema_RP4(t *testing.T) {
	e := newEnv(t)
	e.seed()
	if _, err := e.admin.PutHostPool(context.Background(), "pool-p", map[string]any{"hostPoolType": "Personal"}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signin(adminToken)
	if _, err := e.admin.PutHostPool(context.Background(), "pool-li", map[string]any{"loadBalancerType": "LoadIndex"}); err != nil {
		t.Fatal(err)
	}
	pools := map[string][2]string{
		"pool-a":  {vdibroker.Pooled, vdibroker.DepthFirst},
		"pool-li": {vdibroker.Pooled, vdibroker.LoadIndex},
		"pool-p":  {vdibroker.Personal, vdibroker.Persistent},
	}
	for pool, types := range pools {
		poolType, lbType := types[0], types[1]
		a := b.get("/pools/" + pool)
		wantStatus(t, a, http.StatusOK)
		// The settings form's own controls: the page's other forms (the
		// Published to users card's) have fields of their own names.
		page := html.UnescapeString(stripRuleLinks(settingsFormOf(t, a.body)))
		for _, f := range vdibroker.PoolFields() {
			c := control(page, f.Path)
			readBy := f.LoadBalancerTypes == nil || slices.Contains(f.LoadBalancerTypes, lbType)
			if f.Immutable || !f.AppliesTo(poolType) || !readBy {
				if c != "" {
					t.Errorf("%s: %s has a control %s, want none", pool, f.Path, c)
				}
				continue
			}
			if c == "" {
				t.Errorf("%s: no control for %s", pool, f.Path)
				continue
			}
			if !strings.Contains(page, f.Help) {
				t.Errorf("%s: the help of %s (%q) is not shown", pool, f.Path, f.Help)
			}
			switch f.Kind {
			case vdibroker.KindInt, vdibroker.KindNumber:
				want := []string{`type="number"`, `min="` + vdibroker.FormatValue(f.Min) + `"`}
				if !math.IsInf(f.Max, 1) {
					want = append(want, `max="`+vdibroker.FormatValue(f.Max)+`"`)
				}
				for _, w := range want {
					if !strings.Contains(c, w) {
						t.Errorf("%s: %s control %s lacks %s", pool, f.Path, c, w)
					}
				}
				if !strings.Contains(page, f.Range()) {
					t.Errorf("%s: the range of %s (%s) is not shown", pool, f.Path, f.Range())
				}
			case vdibroker.KindEnum:
				for _, v := range f.Values(poolType) {
					if !strings.Contains(page, `<option value="`+v+`"`) {
						t.Errorf("%s: %s lacks option %s", pool, f.Path, v)
					}
				}
			}
		}
	}
}

// TestSettingsFormSavesEveryField: the settings the form gained from the
// schema (timeouts, texts, assignment type) are saved and refused like the
// others (R-P4), and a form that does not post one leaves it as it is.
func TestSettingsFormSavesEveryField(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ctx := context.Background()
	b := e.browser()
	b.signin(adminToken)
	post := func(set map[string]string) answer {
		v := url.Values{"csrf": {b.csrf("/pools/pool-a")}, "loadBalancerType": {"DepthFirst"}, "loadBalancing.includeSessionCount": {"on"}}
		for k, x := range set {
			v.Set(k, x)
		}
		return b.post("/pools/pool-a/settings", v)
	}
	a := post(map[string]string{"heartbeatTimeoutSeconds": "5"})
	wantStatus(t, a, http.StatusBadRequest)
	wantContains(t, a, `id="e-heartbeatTimeoutSeconds"`, "heartbeatTimeoutSeconds: must be 10..3600, got 5")

	a = post(map[string]string{"heartbeatTimeoutSeconds": "120", "friendlyName": "Lab desktops", "disconnectedSessionTimeoutMinutes": "60"})
	wantStatus(t, a, http.StatusSeeOther)
	p, err := e.admin.GetHostPool(ctx, "pool-a")
	if err != nil {
		t.Fatal(err)
	}
	if p.HeartbeatTimeoutSeconds != 120 || p.FriendlyName != "Lab desktops" || p.DisconnectedSessionTimeoutMinutes != 60 {
		t.Errorf("after save: heartbeat %d friendlyName %q disconnected %d", p.HeartbeatTimeoutSeconds, p.FriendlyName, p.DisconnectedSessionTimeoutMinutes)
	}
	if p.MaxSessionLimit != 4 || p.PendingTimeoutSeconds != 300 {
		t.Errorf("fields not posted changed: limit %d pending %d, want 4 and 300", p.MaxSessionLimit, p.PendingTimeoutSeconds)
	}
}
