package console_test

import (
	"net/http"
	"strings"
	"testing"
)

// The Federation page's words after a change say what is true on every
// pod (R-G3, R-G5): a new member whose pool its pod lacks, a delete a
// peer did not take, a peer that did not answer; and its forms mark the
// field refused, for assistive technology too.

// TestHomeSiteKindRefused_RG3: a home site's kind refused is marked on
// the add form's select with aria-invalid and the error it describes,
// as its other fields; a refused remove (its hidden kind forged) is
// said in the banner, the add form left blank, nothing written. The
// entitle form's kind select is marked the same.
func TestHomeSiteKindRefused_RG3(t *testing.T) {
	fra, ams := newFraAmsPods(t)
	b := fra.browser()
	b.signin(adminToken)

	a := b.post("/federation/homesites", geForm(b.csrf("/federation"), 1, "op", "add", "kind", "robot", "principal", "alice", "site", "emea"))
	wantStatus(t, a, http.StatusBadRequest)
	wantContains(t, a, `<select id="hs-kind" name="kind" aria-invalid="true" aria-describedby="hs-kind-error">`,
		`<p class="field-error" id="hs-kind-error">kind: must be user or group: a home site names exactly one of them</p>`)

	a = b.post("/federation/homesites", geForm(b.csrf("/federation"), 1, "op", "remove", "kind", "robot", "principal", "alice"))
	wantStatus(t, a, http.StatusBadRequest)
	wantContains(t, a, "Nothing was removed: kind: must be user or group", `<select id="hs-kind" name="kind">`)
	if strings.Contains(a.body, `id="hs-kind-error"`) || strings.Contains(a.body, `aria-invalid="true"`) {
		t.Errorf("a refused remove marks the add form:\n%s", a.body)
	}

	a = b.post("/federation/globalentitlements/assignments", geForm(b.csrf("/federation"), 1, "entitlement", "office", "op", "add", "kind", "robot", "principal", "alice"))
	wantStatus(t, a, http.StatusBadRequest)
	wantContains(t, a, `<select id="e-0-kind" name="kind" aria-invalid="true" aria-describedby="e-0-kind-error">`, `<p class="field-error" id="e-0-kind-error">kind: must be user or group</p>`)
	for _, x := range []*env{fra, ams} {
		if d := docOf(t, x); d.Generation != 1 || len(d.HomeSites) != 0 {
			t.Errorf("%s after refused posts: %+v", x.url, d)
		}
	}
}
