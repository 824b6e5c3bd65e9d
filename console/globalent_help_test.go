package console_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestGlobalEntitlementHelpSaysTheTokenStays_RSEC_RG5: the Federation
// page's help above its global entitlement forms says what a change
// does with the signed-in token, as docs/federation.md does: this pod
// takes it, and the other pods get the document as a signed pod-to-pod
// call, never the token. It once said the change went to every pod
// "with your token, as vdibroker federation apply does", which an
// administrator would read as her token sent to every URL the document
// names.
func TestGlobalEntitlementHelpSaysTheTokenStays_RSEC_RG5(t *testing.T) {
	fra, _ := newFraAmsPods(t)
	b := fra.browser()
	b.signin(adminToken)
	page := b.get("/federation")
	wantStatus(t, page, http.StatusOK)
	i := strings.Index(page.body, `id="ge-manage-help"`)
	if i < 0 {
		t.Fatalf("no help for the global entitlement forms:\n%s", page.body)
	}
	help, _, _ := strings.Cut(page.body[i:], "</p>")
	if strings.Contains(help, "with your token") || !strings.Contains(help, "your token does not leave this pod") || !strings.Contains(help, "signed with the federation secret") {
		t.Errorf("the help does not say the token stays on this pod:\n%s", help)
	}
}

// TestHomeSitesHelpSaysWhichGroupWins_RG3: the Federation page's home
// sites card says which home site a user in several groups with home
// sites starts at: the one listed first there, whatever the order of
// her groups, as federation.StartSite chooses (TestStartSiteAnyCase) and
// docs/federation.md says.
func TestHomeSitesHelpSaysWhichGroupWins_RG3(t *testing.T) {
	fra, _ := newFraAmsPods(t)
	b := fra.browser()
	b.signin(adminToken)
	page := b.get("/federation")
	wantStatus(t, page, http.StatusOK)
	i := strings.Index(page.body, `id="home-sites"`)
	if i < 0 {
		t.Fatalf("no home sites card:\n%s", page.body)
	}
	card, _, _ := strings.Cut(page.body[i:], "</section>")
	for _, want := range []string{"A user in several groups with home sites starts at the one listed first above, whatever the order of her groups", "a home site added goes last"} {
		if !strings.Contains(card, want) {
			t.Errorf("the home sites card does not say %q:\n%s", want, card)
		}
	}
}
