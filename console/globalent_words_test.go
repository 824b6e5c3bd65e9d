package console_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// The Federation page's words after a change say what is true on every
// pod (R-G3, R-G5): a new member whose pool its pod lacks, a delete a
// peer did not take, a peer that did not answer; and its forms mark the
// field refused, for assistive technology too.

// rowOf is the table row of body that holds attr, up to its </tr>, or "".
func rowOf(body, attr string) string {
	i := strings.Index(body, attr)
	if i < 0 {
		return ""
	}
	row := body[i:]
	if j := strings.Index(row, "</tr>"); j >= 0 {
		row = row[:j]
	}
	return row
}

// TestGlobalEntitlementMemberPoolNotFound_RG3: a member added whose host
// pool its pod does not have (ams1/deskz) is added, and the flash says
// so, from the loads the page reads anyway: nobody is placed there until
// the pool exists. A member whose pool exists on its pod (ams1's pool-b,
// read into the page's load cache before the change) is told placeable.
func TestGlobalEntitlementMemberPoolNotFound_RG3(t *testing.T) {
	fra, ams := newFraAmsPods(t)
	if _, err := ams.admin.PutHostPool(t.Context(), "pool-b", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	b := fra.browser()
	b.signin(adminToken)

	a := b.post("/federation/globalentitlements/members", geForm(b.csrf("/federation"), 1, "entitlement", "office", "op", "add", "pod", "ams1", "hostPool", "deskz"))
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, "ams1/deskz is a member of office, but pod ams1 has no host pool deskz", "nobody is placed there through it until that pool exists on ams1",
		"Every pod of the federation holds generation 2", `data-member="ams1/deskz"`)
	if strings.Contains(a.body, "users it entitles may be placed there") {
		t.Errorf("the flash says users may be placed in a pool its pod lacks:\n%s", a.body)
	}
	if d := docOf(t, ams); d.Generation != 2 || len(entitlement(d, "office").Members) != 3 {
		t.Errorf("ams1 after the add: %+v", d)
	}

	a = b.post("/federation/globalentitlements/members", geForm(b.csrf("/federation"), 2, "entitlement", "office", "op", "add", "pod", "ams1", "hostPool", "pool-b"))
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, "ams1/pool-b is a member of office: users it entitles may be placed there")
	if strings.Contains(a.body, "has no host pool pool-b") {
		t.Errorf("an existing pool is said not found:\n%s", a.body)
	}
}

// TestGlobalEntitlementDeleteMissedByPeer_RG5: an entitlement deleted
// while ams1 answers 503 is deleted on fra1 only; the flash does not say
// nobody connects through it, but that ams1 still holds it and places
// through it; ams1 indeed still holds it. Its peer row shows no latency
// for ams1 once it stops answering at all.
func TestGlobalEntitlementDeleteMissedByPeer_RG5(t *testing.T) {
	fra, ams := newFraAmsPods(t)
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(gate.Close)
	doc := docOf(t, fra)
	doc.Generation = 2
	doc.Pods[1].URL = gate.URL
	for _, x := range []*env{fra, ams} {
		d := *doc
		if _, err := x.admin.PutFederation(t.Context(), &d); err != nil {
			t.Fatal(err)
		}
	}
	b := fra.browser()
	b.signin(adminToken)
	// ams1 answered, if only with a refusal: its time is shown.
	if row := rowOf(b.get("/federation").body, `data-peer="ams1"`); !strings.Contains(row, " ms</td>") {
		t.Errorf("ams1 answered, but its row shows no latency: %s", row)
	}
	a := b.post("/federation/globalentitlements/delete", geForm(b.csrf("/federation"), 2, "entitlement", "office"))
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, `data-result-pod="ams1" data-result="refused"`, "Global entitlement office deleted on this pod",
		"ams1 still holds it, and the users it entitles connect through it there until it takes this document", "ams1 did not take it")
	if strings.Contains(a.body, "nobody connects through it any more") {
		t.Errorf("the flash says nobody connects through office, which ams1 still holds:\n%s", a.body)
	}
	if d := docOf(t, ams); d.Generation != 2 || entitlement(d, "office") == nil {
		t.Errorf("ams1 after the missed delete: %+v", d)
	}
	if d := docOf(t, fra); d.Generation != 3 || entitlement(d, "office") != nil {
		t.Errorf("fra1 after the delete: %+v", d)
	}
}

// TestFederationPeerLatency_RG5: a peer that did not answer (nothing
// listens at its URL) shows no latency, only its health; the time its
// call took to fail says nothing of the peer.
func TestFederationPeerLatency_RG5(t *testing.T) {
	e := newPodEnv(t)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // its port now refuses connections
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "emea"}},
		Pods: []vdibroker.Pod{{Name: "fra1", Site: "emea", URL: e.url}, {Name: "nyc1", Site: "emea", URL: gone.URL}}}
	if _, err := e.admin.PutFederation(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signin(adminToken)
	a := b.get("/federation")
	wantStatus(t, a, http.StatusOK)
	row := rowOf(a.body, `data-peer="nyc1"`)
	if !strings.Contains(row, "unreachable") || strings.Contains(row, " ms") || !strings.Contains(row, "<td>—</td>") {
		t.Errorf("the unreachable peer's row: %s", row)
	}
}

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
