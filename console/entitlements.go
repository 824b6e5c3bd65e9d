package console

import (
	"context"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/vdibroker/vdibroker"
)

// The entitlements page (R-E10): what a user may use, and why. It lists
// each desktop, application and global entitlement the user is entitled
// to, with the assignment or group that grants it, from GET
// /api/v1/users/{user}/entitlements: Readers, Helpdesk and Contributors
// (the roles that sign in here) ask about anyone, with the user's groups, and see
// what of it their scope covers. End users ask the API about themselves.

// addEntitlementsPage parses the page and registers GET /entitlements;
// routes calls it.
func (c *Console) addEntitlementsPage() {
	funcs := pageFuncs()
	funcs["grant"] = grantText
	c.pages["entitlements"] = template.Must(template.New("entitlements").Funcs(funcs).
		ParseFS(templateFS, "templates/layout.html", "templates/entitlements.html"))
	c.mux.HandleFunc("GET /entitlements", c.signedIn(c.entitlementsPage))
}

// grantText says, in words, why a grant entitles its user.
func grantText(g vdibroker.Grant) string {
	switch g.Via {
	case vdibroker.ViaUser:
		return "assigned to the user (" + g.Principal + ")"
	case vdibroker.ViaGroup:
		return "through the group " + g.Principal
	case vdibroker.ViaAllUsers:
		return "assigned to all users"
	case vdibroker.ViaEveryone:
		return "everyone: the global entitlement names no users or groups"
	}
	return g.Via
}

// entitlementsPage is GET /entitlements?user=U&groups=G1,G2.
func (c *Console) entitlementsPage(rq *request) {
	q := rq.r.URL.Query()
	user := strings.TrimSpace(q.Get("user"))
	groupsText := q.Get("groups")
	var groups []string
	for _, g := range strings.Split(groupsText, ",") {
		if g = strings.TrimSpace(g); g != "" {
			groups = append(groups, g)
		}
	}
	data := map[string]any{"Title": "Entitlements", "Nav": "entitlements", "User": user, "Groups": groupsText}
	if user != "" {
		ents, err := rq.api.userEntitlements(rq.r.Context(), user, groups)
		if err != nil {
			c.apiError(rq, err)
			return
		}
		data["Ents"] = ents
	}
	c.page(rq, http.StatusOK, "entitlements", data)
}

// userEntitlements is GET /api/v1/users/{user}/entitlements.
func (a *api) userEntitlements(ctx context.Context, user string, groups []string) (*vdibroker.UserEntitlements, error) {
	var out vdibroker.UserEntitlements
	path := apiPrefix + "/users/" + url.PathEscape(user) + "/entitlements"
	if len(groups) > 0 {
		path += "?" + url.Values{"group": groups}.Encode()
	}
	if err := a.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
