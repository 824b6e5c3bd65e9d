package console

import (
	"context"
	"fmt"
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
	data := map[string]any{"Title": "Entitlements", "Nav": "entitlements", "User": user, "Groups": groupsText, "Invalid": ""}
	if user != "" {
		ents, err := rq.api.userEntitlements(rq.r.Context(), user, groups)
		switch {
		case vdibroker.ErrorCode(err) == vdibroker.EInvalid:
			// A name the broker refuses (too long, a control character):
			// the form again with what was typed, the field marked and
			// the broker's words naming it, not an error page that loses
			// the form.
			data["Error"] = "Nothing to show: " + describe(err)
			data["Invalid"] = entitlementsField(vdibroker.ErrorField(err))
			c.page(rq, http.StatusBadRequest, "entitlements", data)
			return
		case err != nil:
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

// entitlementsField is the form's input a refused API field belongs to:
// "user", or "groups" for the API's "group" and "group[i]".
func entitlementsField(apiField string) string {
	if apiField == "group" || strings.HasPrefix(apiField, "group[") {
		return "groups"
	}
	return apiField
}

// publishedGroup is one application group of a pool on the pool's page.
type publishedGroup struct {
	vdibroker.ApplicationGroup
	// To says, in words, who is assigned; "" when nobody is.
	To string
}

// publishedCard is the pool page's "Published to users" card (R-E1,
// R-E2, R-E4): the pool's application groups and who each is assigned
// to, and, when no end user can open the pool's desktops, why and what
// to do, so an administrator who created a pool here learns it is not
// yet in anyone's portal. nil when the groups cannot be read.
type publishedCard struct {
	Groups []publishedGroup
	// Warning says why end users cannot open the pool's desktops; ""
	// when a Desktop group is assigned to someone.
	Warning string
}

// publishedOf reads pool's application groups for its page.
func publishedOf(ctx context.Context, a *api, pool string) *publishedCard {
	groups, err := a.listAppGroups(ctx, pool)
	if err != nil {
		return nil
	}
	card := &publishedCard{}
	desktop := ""
	for _, g := range groups {
		pg := publishedGroup{ApplicationGroup: g, To: assignedText(g.Assignments)}
		card.Groups = append(card.Groups, pg)
		if g.ApplicationGroupType == vdibroker.AppGroupDesktop {
			desktop = g.Name
			if pg.To == "" {
				card.Warning = fmt.Sprintf("End users cannot open this pool's desktops: its Desktop group %s is assigned to nobody (R-E2, R-E3). Assign it: vdibroker applicationgroup update --name %s --add-users U,.. or --add-groups G,.. or --all-users true.", g.Name, g.Name)
			}
		}
	}
	if desktop == "" {
		card.Warning = fmt.Sprintf("End users cannot open this pool's desktops: no Desktop application group publishes them, so they are in nobody's portal and a user's connect is refused NotEntitled (R-E4). Publish them: vdibroker applicationgroup create --name %s-desktop --host-pool %s --application-group-type Desktop --users U,.. or --groups G,.. or --all-users true.", pool, pool)
	}
	return card
}

// assignedText says who assignments name: "all users", or the users and
// groups; "" for nobody.
func assignedText(as vdibroker.Assignments) string {
	var parts []string
	if as.AllUsers {
		parts = append(parts, "all users")
	}
	if n := len(as.Users); n > 0 {
		parts = append(parts, countText(n, "user")+": "+listText(as.Users))
	}
	if n := len(as.Groups); n > 0 {
		parts = append(parts, countText(n, "group")+": "+listText(as.Groups))
	}
	return strings.Join(parts, "; ")
}

// listText is the first few names of a list, and how many more.
func listText(names []string) string {
	const shown = 5
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:shown], ", ") + fmt.Sprintf(" and %d more", len(names)-shown)
}

// countText is "1 user", "3 users".
func countText(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
