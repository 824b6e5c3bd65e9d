package console

import (
	"cmp"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
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
			data["Error"] = "Nothing to show: " + rq.describe(err)
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
	// Apps are a RemoteApp group's applications (readApps).
	Apps []publishedApp
}

// ETag is the group's as the API answers it (R-E13): the card's forms
// that change the group send it back as If-Match (publish.go).
func (g publishedGroup) ETag() string { return vdibroker.ETag(g.UpdateTime) }

// publishedApp is one application of a RemoteApp group on the card.
type publishedApp struct{ vdibroker.Application }

// ETag is the application's (R-E13), for its remove form.
func (a publishedApp) ETag() string { return vdibroker.ETag(a.UpdateTime) }

// readApps reads the applications of the card's RemoteApp groups; a
// group whose list is refused shows none.
func (card *publishedCard) readApps(ctx context.Context, a *api) {
	for i := range card.Groups {
		g := &card.Groups[i]
		if g.ApplicationGroupType != vdibroker.AppGroupRemoteApp {
			continue
		}
		apps, err := a.listApps(ctx, g.Name)
		if err != nil {
			continue
		}
		for _, app := range apps {
			g.Apps = append(g.Apps, publishedApp{app})
		}
	}
}

// publishedGlobal is a global entitlement naming the pool as a member of
// this pod (R-E9): those it entitles open the pool's desktops (Kind
// Desktop), or its Application, through it, with no group of the pool.
type publishedGlobal struct {
	Name, Kind, Application string
	// To says, in words, whom it entitles.
	To string
}

// publishedCard is the pool page's "Published to users" card (R-E1,
// R-E2, R-E4, R-E9): the pool's application groups and who each is
// assigned to, the global entitlements naming it, and, when no end user
// can open the pool's desktops, why and what to do, so an administrator
// who created a pool here learns it is not yet in anyone's portal. nil
// when the groups cannot be read.
type publishedCard struct {
	Groups []publishedGroup
	Global []publishedGlobal
	// Warning says why end users can open nothing of the pool: its
	// desktops are published to nobody, through no group and no global
	// entitlement, and no application is either. "" otherwise.
	Warning string
	// Note says, without alarm, that the desktops are published to
	// nobody while applications are: a pool for RemoteApps, as AVD's
	// RemoteApp host pools are, whose Desktop group is left unassigned.
	Note string
}

// Desktop is the name of the pool's Desktop group, "" when it has none.
func (card *publishedCard) Desktop() string {
	for _, g := range card.Groups {
		if g.ApplicationGroupType == vdibroker.AppGroupDesktop {
			return g.Name
		}
	}
	return ""
}

// globalReach is what the page knows of the global entitlements naming
// a pool: Known is false on a pod whose federation document this
// sign-in could not read (a principal scoped to host pools).
type globalReach struct {
	Members []publishedGlobal
	Known   bool
}

// publishedOf is pool p's card from its application groups and, when
// needed, global, which is asked only when no Desktop group is assigned
// (it may then be what publishes the desktops).
func publishedOf(p *poolAnswer, groups []vdibroker.ApplicationGroup, global func() globalReach) *publishedCard {
	card := &publishedCard{}
	var desktop *vdibroker.ApplicationGroup
	desktopTo, appsTo := false, false
	for i, g := range groups {
		pg := publishedGroup{ApplicationGroup: g, To: assignedText(g.Assignments)}
		card.Groups = append(card.Groups, pg)
		switch g.ApplicationGroupType {
		case vdibroker.AppGroupDesktop:
			desktop, desktopTo = &groups[i], pg.To != ""
		case vdibroker.AppGroupRemoteApp:
			appsTo = appsTo || pg.To != ""
		}
	}
	if desktopTo {
		return card
	}
	reach := global()
	card.Global = reach.Members
	for _, ge := range reach.Members {
		if ge.Kind == vdibroker.KindApplication {
			appsTo = true
		} else {
			return card // its desktops open through ge (R-E9)
		}
	}
	pool := shellWord(p.Name)
	fix := fmt.Sprintf("vdibroker applicationgroup create --name %s --host-pool %s --application-group-type Desktop --users U,.. or --groups G,.. or --all-users true", shellWord(p.Name+"-desktop"), pool)
	why := "no Desktop application group publishes them"
	if desktop != nil {
		fix = fmt.Sprintf("vdibroker applicationgroup update --name %s --add-users U,.. or --add-groups G,.. or --all-users true", shellWord(desktop.Name))
		why = fmt.Sprintf("its Desktop group %s is assigned to nobody", desktop.Name)
	}
	// On a pod whose document this sign-in cannot read, a global
	// entitlement may name the pool: say so rather than "cannot".
	unknown := ""
	if !reach.Known {
		unknown = " A global entitlement naming this pool would still open it to those it entitles (R-E9); this sign-in cannot read the federation's."
	}
	if appsTo {
		card.Note = fmt.Sprintf("Its desktops are published through no group (%s): end users open only its applications (R-E3). To publish its desktops too: %s.%s", why, fix, unknown)
		return card
	}
	switch {
	case !reach.Known:
		card.Warning = "End users cannot connect to this pool's desktops directly: " + why + ", so a user's connect is refused NotEntitled (R-E3, R-E4)."
	case desktop == nil:
		card.Warning = "End users cannot open this pool's desktops: " + why + ", so they are in nobody's portal and a user's connect is refused NotEntitled (R-E3, R-E4)."
	default:
		card.Warning = "End users cannot open this pool's desktops: " + why + " (R-E2, R-E3)."
	}
	if p.HostPoolType == vdibroker.Personal {
		card.Warning += " Nor can the users its hosts are assigned to: a host's assignment says which desktop is a user's (R-PE1, R-PE2), not that she may open it."
	}
	card.Warning += " Publish them: " + fix + "." + unknown
	return card
}

// globalReach reads the global entitlements naming pool as a member of
// this pod from the federation document (GET /api/v1/federation, as the
// federation page does, but asking no peer, ?askPeers=false): nothing on a broker that is no pod or has no
// document. A principal scoped to host pools is refused global views;
// asked again on each of its pool pages, the API would audit each
// refusal (R-SEC), so once is enough (notGlobal).
func (c *Console) globalReach(rq *request, pool string) globalReach {
	if !c.pod {
		return globalReach{Known: true}
	}
	now := c.now()
	if c.notGlobal.has(rq.sid, now) {
		return globalReach{}
	}
	var st fedStatus
	// The document alone: no peer is asked for its health, which the
	// card does not show, so a peer that does not answer does not hold
	// the page for the pod timeout.
	err := rq.api.do(rq.r.Context(), http.MethodGet, apiPrefix+"/federation?askPeers=false", nil, &st)
	switch vdibroker.ErrorCode(err) {
	case "":
	case vdibroker.ENotFound:
		return globalReach{Known: true} // no document: no global entitlement
	case vdibroker.EPermission:
		c.notGlobal.add(rq.sid, rq.sess.Expires, now)
		return globalReach{}
	default:
		return globalReach{}
	}
	reach := globalReach{Known: true}
	for _, ge := range st.Document.GlobalEntitlements {
		if !slices.ContainsFunc(ge.Members, func(m vdibroker.Member) bool { return m.Pod == st.Pod && m.HostPool == pool }) {
			continue
		}
		to := assignedText(vdibroker.Assignments{Users: ge.Users, Groups: ge.Groups, AllUsers: ge.AllUsers})
		if ge.NamesNobody() {
			to = "everyone: it names no users or groups"
		}
		kind := cmp.Or(ge.Kind, vdibroker.KindDesktop)
		reach.Members = append(reach.Members, publishedGlobal{Name: ge.Name, Kind: kind, Application: ge.Application, To: to})
	}
	return reach
}

// shellWord is a name of the API's alphabet (A-Za-z0-9@._- and space) as
// one word of a command line: quoted when it holds a space.
func shellWord(name string) string {
	if strings.Contains(name, " ") {
		return "'" + name + "'"
	}
	return name
}

// assignedText says who assignments name: "all users", or the users and
// groups; "" for nobody.
func assignedText(as vdibroker.Assignments) string {
	var parts []string
	if as.AllUsers {
		parts = append(parts, "all users")
	}
	if n := len(as.Users); n > 0 {
		parts = append(parts, vdibroker.Plural(n, "user")+": "+listText(as.Users))
	}
	if n := len(as.Groups); n > 0 {
		parts = append(parts, vdibroker.Plural(n, "group")+": "+listText(as.Groups))
	}
	return strings.Join(parts, "; ")
}

// listText is the first few names of a list, and how many more: a group
// assigned to 1,000 users (vdibroker.MaxAssignments) is one line.
func listText(names []string) string {
	const shown = 5
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:shown], ", ") + fmt.Sprintf(" and %d more", len(names)-shown)
}
