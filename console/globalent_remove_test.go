package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// TestGlobalEntitlementRefusedRemoveInBanner_RE9: a remove button of
// the Federation page that is refused is answered in the page's banner,
// where the administrator who pressed it looks, with the entitlement's
// forms unfolded and nothing marked beside the add forms' inputs, which
// were not posted (the home site's remove does the same,
// TestHomeSiteKindRefused_RG3). Refused: unassigning the last user of an
// entitlement without all users (it would name nobody, which entitles
// everyone, R-E9); removing a member whose host pool is no pool's name;
// unassigning a name longer than any user's. Nothing is written.
func TestGlobalEntitlementRefusedRemoveInBanner_RE9(t *testing.T) {
	fra, ams := newFraAmsPods(t)
	b := fra.browser()
	b.signin(adminToken)
	a := b.post("/federation/globalentitlements", geForm(b.csrf("/federation"), 1, "name", "sales", "kind", "Desktop", "scope", "AllSites",
		"sessionDistribution", "None", "pod", "ams1", "hostPool", "pool-a", "entitle", "user", "principal", "bob"))
	wantStatus(t, a, http.StatusOK)

	for _, tc := range []struct {
		name, path string
		form       []string
		says       string
	}{
		{"last user", "/federation/globalentitlements/assignments", []string{"entitlement", "sales", "op", "remove", "kind", "user", "principal", "bob"},
			"Nothing was changed: principal: bob is the last user entitled to sales"},
		{"bad host pool", "/federation/globalentitlements/members", []string{"entitlement", "sales", "op", "remove", "pod", "ams1", "hostPool", "p"},
			"Nothing was changed: hostPool: must be 3..64"},
		{"huge principal", "/federation/globalentitlements/assignments", []string{"entitlement", "sales", "op", "remove", "kind", "user", "principal", strings.Repeat("x", 300)},
			"Nothing was changed: principal: must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := b.post(tc.path, geForm(b.csrf("/federation"), 2, tc.form...))
			wantStatus(t, a, http.StatusBadRequest)
			wantContains(t, a, `id="error">`+tc.says, `data-manage-ge="sales" open>`)
			for _, marked := range []string{`class="field-error"`, `aria-invalid="true"`} {
				if strings.Contains(a.body, marked) {
					t.Errorf("a refused remove marks an add form's input (%s):\n%s", marked, a.body)
				}
			}
		})
	}
	for _, x := range []*env{fra, ams} {
		if d := docOf(t, x); d.Generation != 2 || len(entitlement(d, "sales").Users) != 1 {
			t.Errorf("%s after refused removes: %+v", x.url, d)
		}
	}
}

// TestGlobalEntitlementRefusedDeleteInBanner_RE9: a delete of a global
// entitlement that the API refuses naming a field of the document is
// answered in the page's banner, where the administrator who pressed the
// delete button looks, with the entitlement's forms unfolded and nothing
// marked beside its assign form's inputs, which were not posted (as a
// refused remove, TestGlobalEntitlementRefusedRemoveInBanner_RE9). The
// refusal: fra1 holds a document stored before its rules were as strict
// as now (entitlement office names user "bob " with a trailing space;
// written to its store directly, before the pod read any), so any
// document it would store next is refused naming
// globalEntitlements[0].users[0], which the assign form's principal
// input answers for. Nothing is written.
func TestGlobalEntitlementRefusedDeleteInBanner_RE9(t *testing.T) {
	fra := newPodEnv(t)
	fra.seed()
	pool := []vdibroker.Member{{Pod: "fra1", HostPool: "pool-a"}}
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "emea"}}, Pods: []vdibroker.Pod{{Name: "fra1", Site: "emea", URL: fra.url}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{
			{Name: "office", Scope: vdibroker.ScopeAllSites, SessionDistribution: vdibroker.DistributionNone, Members: pool, Users: []string{"bob "}},
			{Name: "sales", Scope: vdibroker.ScopeAllSites, SessionDistribution: vdibroker.DistributionNone, Members: pool, Users: []string{"carol"}},
		}}
	if _, err := fra.store.PutFederation(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	b := fra.browser()
	b.signin(adminToken)
	a := b.post("/federation/globalentitlements/delete", geForm(b.csrf("/federation"), 1, "entitlement", "sales"))
	wantStatus(t, a, http.StatusBadRequest)
	wantContains(t, a, `id="error">Nothing was deleted: globalEntitlements[0].users[0]: must not start or end with white space`, `data-manage-ge="sales" open>`)
	for _, marked := range []string{`class="field-error"`, `aria-invalid="true"`} {
		if strings.Contains(a.body, marked) {
			t.Errorf("a refused delete marks an assign form's input (%s):\n%s", marked, a.body)
		}
	}
	if d := docOf(t, fra); d.Generation != 1 || entitlement(d, "sales") == nil {
		t.Errorf("fra1 after the refused delete: %+v", d)
	}
}
