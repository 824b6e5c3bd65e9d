package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
)

// Publishing from the pool page's "Published to users" card (R-E1, R-E2,
// R-E7): create an application group of the pool, assign and unassign
// users and groups (or all users), add and remove a RemoteApp group's
// applications, delete a group. Each form posts here (signedIn checks its
// CSRF token) and is one write of the API with the signed-in user's token,
// so the API's access checker decides whether the user may (a Reader or
// Helpdesk may not, a Contributor scoped to other pools may not) and its
// audit trail records what was done, as for the same change from the CLI.
// A form that changes what the page showed carries what it showed, the
// object's ETag, as If-Match: another administrator's write in between
// refuses it with 412 and nothing is written (R-E13); a create carries
// If-None-Match: *, so it never replaces a group or an application of the
// same name.

// addPublishRoutes registers the card's forms; routes calls it.
func (c *Console) addPublishRoutes() {
	c.mux.HandleFunc("POST /pools/{pool}/appgroups", c.signedIn(c.createAppGroup))
	c.mux.HandleFunc("POST /pools/{pool}/appgroups/{group}/assignments", c.signedIn(c.assignAppGroup))
	c.mux.HandleFunc("POST /pools/{pool}/appgroups/{group}/delete", c.signedIn(c.deleteAppGroup))
	c.mux.HandleFunc("POST /pools/{pool}/appgroups/{group}/apps", c.signedIn(c.addApp))
	// The application's name is the form's, not the path's: a browser
	// takes an application named ".." (or "%2E%2E") in a form's action as
	// a dot segment and posts to the group's delete instead.
	c.mux.HandleFunc("POST /pools/{pool}/appgroups/{group}/apps/remove", c.signedIn(c.removeApp))
}

// publishForm is one of the card's forms as posted and refused: which
// form (Form, and Group for a group's own forms), the values typed and
// the broker's error beside its field, so the page shows it again open,
// as typed.
type publishForm struct {
	Form, Group string
	Values      map[string]string
	Checks      map[string]bool
	Errors      map[string]string
}

// The card's forms.
const (
	formNewGroup = "new-group"
	formAssign   = "assign"
	formApp      = "app"
)

func newPublishForm(form, group string) *publishForm {
	return &publishForm{Form: form, Group: group, Values: map[string]string{}, Checks: map[string]bool{}, Errors: map[string]string{}}
}

// For is the form as posted when it is form of group, else a blank one:
// the page asks each of its forms for what to show.
func (f *publishForm) For(form, group string) *publishForm {
	if f != nil && f.Form == form && f.Group == group {
		return f
	}
	blank := newPublishForm(form, group)
	// Shown in the portal by default: an administrator who publishes an
	// application here wants her users to see it (the API's default is
	// false, for scripts).
	blank.Checks["showInPortal"] = true
	return blank
}

// Open reports whether group's forms are to be shown unfolded: one of
// them was posted and refused.
func (f *publishForm) Open(group string) bool {
	return f != nil && f.Group == group && f.Form != formNewGroup
}

// Posted reports whether f is a form as posted (not a blank one).
func (f *publishForm) Posted() bool {
	return f != nil && f.Form != "" && len(f.Values)+len(f.Errors) > 0
}

// appGroupFields are the new group form's inputs, the API's names.
var appGroupFields = []string{"name", "friendlyName", "applicationGroupType"}

// appFields are the new application form's text inputs, the API's names.
var appFields = []string{"name", "friendlyName", "filePath", "commandLineSetting", "commandLineArguments"}

// poolURL is the pool's page, at its card.
func poolURL(pool string) string { return "/pools/" + url.PathEscape(pool) + "#published" }

// createAppGroup is POST /pools/{pool}/appgroups: PUT
// /api/v1/applicationgroups/{name} of the pool, assigned to nobody yet,
// with If-None-Match: * (R-E13). A second Desktop group of the pool is
// the API's 409 beside the type (R-E1).
func (c *Console) createAppGroup(rq *request) {
	pool := rq.r.PathValue("pool")
	f := newPublishForm(formNewGroup, "")
	for _, k := range appGroupFields {
		f.Values[k] = strings.TrimSpace(rq.r.PostFormValue(k))
	}
	name := f.Values["name"]
	if name == "" {
		f.Errors["name"] = "name: is required"
		c.renderPoolPublish(rq, http.StatusBadRequest, "Nothing was created: correct the fields marked below.", f)
		return
	}
	g := &vdibroker.ApplicationGroup{Name: name, HostPool: pool, ApplicationGroupType: f.Values["applicationGroupType"], FriendlyName: f.Values["friendlyName"]}
	stored, err := rq.api.putAppGroup(rq.r.Context(), name, g, http.Header{"If-None-Match": {"*"}})
	if err != nil {
		if vdibroker.ErrorCode(err) == vdibroker.EPreconditionFailed {
			f.Errors["name"] = fmt.Sprintf("name: an application group %q exists already (of this pool or another): choose another name, or change that one", name)
			c.renderPoolPublish(rq, http.StatusPreconditionFailed, "Nothing was created: the name is taken.", f)
			return
		}
		c.publishRefused(rq, f, err, "Nothing was created", func(field string) string { return formField(field, appGroupFields) })
		return
	}
	next := "Assign users or groups to it below: until then no end user can open its desktops (R-E2, R-E3)."
	if stored.ApplicationGroupType == vdibroker.AppGroupRemoteApp {
		next = "Add its applications and assign users or groups to it below: until then no end user can open them (R-E2, R-E3)."
	}
	c.redirect(rq, poolURL(pool), fmt.Sprintf("Application group %s (%s) created. %s", name, stored.ApplicationGroupType, next)+warned(stored.Warnings))
}

// assignAppGroup is POST /pools/{pool}/appgroups/{group}/assignments: op
// add or remove a user or a group (kind, principal), or allUsers true or
// false; the group read is written back with the change and If-Match
// etag, the ETag of the group the page showed (R-E13).
func (c *Console) assignAppGroup(rq *request) {
	pool, name := rq.r.PathValue("pool"), rq.r.PathValue("group")
	ctx := rq.r.Context()
	f := newPublishForm(formAssign, name)
	op, kind := rq.r.PostFormValue("op"), rq.r.PostFormValue("kind")
	principal := strings.TrimSpace(rq.r.PostFormValue("principal"))
	if op == "add" {
		f.Values["kind"], f.Values["principal"] = kind, principal
	}
	switch {
	case op != "add" && op != "remove" && op != "allUsers":
		c.renderPoolPublish(rq, http.StatusBadRequest, "op: must be add, remove or allUsers", f)
		return
	case op != "allUsers" && kind != "user" && kind != "group":
		f.Errors["kind"] = "kind: must be user or group"
		c.renderPoolPublish(rq, http.StatusBadRequest, "Nothing was changed: correct the fields marked below.", f)
		return
	case op == "add" && principal == "":
		f.Errors["principal"] = fmt.Sprintf("principal: is required, the %s's name (1..%d characters)", kind, vdibroker.MaxUserLen)
		c.renderPoolPublish(rq, http.StatusBadRequest, "Nothing was changed: correct the fields marked below.", f)
		return
	}
	// The name is checked as the API checks an assignment's before the
	// group is read: a name no group can hold is refused beside the field
	// in its own words (not the API's assignments.users[N]), and is never
	// quoted back in a message that says it "is not assigned" (the
	// session's one-shot message would keep the whole body, R-SEC).
	if op != "allUsers" {
		if err := vdibroker.ValidateUser("principal", principal); err != nil {
			if op == "add" {
				f.Errors["principal"] = vdibroker.ErrorMessage(err)
				c.renderPoolPublish(rq, http.StatusBadRequest, "Nothing was changed: correct the fields marked below.", f)
				return
			}
			c.renderPoolPublish(rq, http.StatusBadRequest, "Nothing was removed: "+vdibroker.ErrorMessage(err), f)
			return
		}
	}
	g, ok := c.poolGroup(rq, pool, name, f)
	if !ok {
		return
	}
	as := &g.Assignments
	list := &as.Users
	if kind == "group" {
		list = &as.Groups
	}
	var msg string
	switch op {
	case "add":
		if vdibroker.ContainsUser(*list, principal) {
			c.redirect(rq, poolURL(pool), fmt.Sprintf("The %s %s is assigned to %s already: nothing changed.", kind, principal, name))
			return
		}
		*list = vdibroker.EditUsers(*list, []string{principal}, nil)
		msg = fmt.Sprintf("The %s %s is assigned to %s: %s open %s (R-E2).", kind, principal, name, whoOpens(kind), whatOpens(g))
	case "remove":
		if !vdibroker.ContainsUser(*list, principal) {
			c.redirect(rq, poolURL(pool), fmt.Sprintf("The %s %s is not assigned to %s: nothing removed.", kind, principal, name))
			return
		}
		*list = vdibroker.EditUsers(*list, nil, []string{principal})
		msg = fmt.Sprintf("The %s %s is no longer assigned to %s: the next connect is refused NotEntitled unless another assignment grants it; an open session goes on until it ends (R-E3).", kind, principal, name)
		if as.AllUsers {
			msg += " The group is still assigned to all users, who keep it through that."
		}
	case "allUsers":
		on := rq.r.PostFormValue("allUsers") == "true"
		if as.AllUsers == on {
			c.redirect(rq, poolURL(pool), "Nothing changed: "+name+" was so already.")
			return
		}
		as.AllUsers = on
		msg = fmt.Sprintf("%s is assigned to all users: every end user may open %s (R-E2).", name, whatOpens(g))
		if !on {
			msg = fmt.Sprintf("%s is no longer assigned to all users: only the users and groups it names may open %s (R-E2, R-E3).", name, whatOpens(g))
		}
	}
	stored, err := rq.api.putAppGroup(ctx, name, g, ifMatch(rq, g.UpdateTime))
	if err != nil {
		c.publishRefused(rq, f, err, "Nothing was changed", func(field string) string {
			if strings.HasPrefix(field, "assignments.") {
				return "principal"
			}
			return ""
		})
		return
	}
	c.redirect(rq, poolURL(pool), msg+warned(stored.Warnings))
}

// whoOpens is who an assignment of kind entitles.
func whoOpens(kind string) string {
	if kind == "group" {
		return "its members may"
	}
	return "they may"
}

// whatOpens is what group g publishes, in words.
func whatOpens(g *vdibroker.ApplicationGroup) string {
	if g.ApplicationGroupType == vdibroker.AppGroupRemoteApp {
		return "its applications"
	}
	return "the pool's desktops"
}

// deleteAppGroup is POST /pools/{pool}/appgroups/{group}/delete: DELETE
// with If-Match, the group the page showed; its applications go with it
// (R-E1). The group's ETag covers its set of applications (R-E13): an
// application added or removed since the page was read, even between
// this request's read and its DELETE, has the API refuse it 412, so it
// never takes an application the page did not show.
func (c *Console) deleteAppGroup(rq *request) {
	pool, name := rq.r.PathValue("pool"), rq.r.PathValue("group")
	f := newPublishForm(formAssign, name)
	g, ok := c.poolGroup(rq, pool, name, f)
	if !ok {
		return
	}
	if err := rq.api.deleteAppGroup(rq.r.Context(), name, ifMatch(rq, g.UpdateTime)); err != nil {
		c.publishRefused(rq, f, err, "Nothing was deleted", func(string) string { return "" })
		return
	}
	c.redirect(rq, poolURL(pool), fmt.Sprintf("Application group %s deleted%s: those it alone entitled can no longer open %s (R-E3).",
		name, map[bool]string{true: ", with its applications", false: ""}[g.ApplicationGroupType == vdibroker.AppGroupRemoteApp], whatOpens(g)))
}

// addApp is POST /pools/{pool}/appgroups/{group}/apps: PUT
// .../applications/{name} with If-None-Match: * (R-E7, R-E13).
func (c *Console) addApp(rq *request) {
	pool, group := rq.r.PathValue("pool"), rq.r.PathValue("group")
	f := newPublishForm(formApp, group)
	for _, k := range appFields {
		v := rq.r.PostFormValue(k)
		if k != "commandLineArguments" {
			v = strings.TrimSpace(v)
		}
		f.Values[k] = v
	}
	f.Checks["showInPortal"] = rq.r.PostFormValue("showInPortal") == "on"
	name := f.Values["name"]
	if name == "" {
		f.Errors["name"] = fmt.Sprintf("name: is required, the alias the .rdp file names (%d..%d characters)", vdibroker.MinAppNameLen, vdibroker.MaxAppNameLen)
		c.renderPoolPublish(rq, http.StatusBadRequest, "Nothing was added: correct the fields marked below.", f)
		return
	}
	if _, ok := c.poolGroup(rq, pool, group, f); !ok {
		return
	}
	app := &vdibroker.Application{Name: name, FilePath: f.Values["filePath"], FriendlyName: f.Values["friendlyName"],
		CommandLineSetting: f.Values["commandLineSetting"], CommandLineArguments: f.Values["commandLineArguments"], ShowInPortal: f.Checks["showInPortal"]}
	stored, err := rq.api.putApp(rq.r.Context(), group, name, app, http.Header{"If-None-Match": {"*"}})
	if err != nil {
		if vdibroker.ErrorCode(err) == vdibroker.EPreconditionFailed {
			f.Errors["name"] = fmt.Sprintf("name: application group %s has an application %q already: choose another name, or remove that one first", group, name)
			c.renderPoolPublish(rq, http.StatusPreconditionFailed, "Nothing was added: the name is taken.", f)
			return
		}
		c.publishRefused(rq, f, err, "Nothing was added", func(field string) string { return formField(field, appFields) })
		return
	}
	shown := "it is listed in the portal of those the group is assigned to"
	if !stored.ShowInPortal {
		shown = "it is not listed in the portal (show in portal is off): those the group is assigned to may still open it by name"
	}
	c.redirect(rq, poolURL(pool), fmt.Sprintf("Application %s added to %s: %s (R-E7).", name, group, shown)+warned(stored.Warnings))
}

// removeApp is POST /pools/{pool}/appgroups/{group}/apps/remove, the
// application named app: DELETE with If-Match etag, the application the
// page showed (R-E13).
func (c *Console) removeApp(rq *request) {
	pool, group, name := rq.r.PathValue("pool"), rq.r.PathValue("group"), rq.r.PostFormValue("app")
	f := newPublishForm(formApp, group)
	if err := vdibroker.ValidateName("app", name, vdibroker.MinAppNameLen, vdibroker.MaxAppNameLen); err != nil {
		c.renderPoolPublish(rq, http.StatusBadRequest, "Nothing was removed: "+vdibroker.ErrorMessage(err), f)
		return
	}
	if _, ok := c.poolGroup(rq, pool, group, f); !ok {
		return
	}
	etag := rq.r.PostFormValue("etag")
	if etag == "" {
		etag = "*" // a form without one: the application, whatever it is now
	}
	if err := rq.api.deleteApp(rq.r.Context(), group, name, http.Header{"If-Match": {etag}}); err != nil {
		c.publishRefused(rq, f, err, "Nothing was removed", func(string) string { return "" })
		return
	}
	c.redirect(rq, poolURL(pool), fmt.Sprintf("Application %s removed from %s: nobody can open it any more (R-E3).", name, group))
}

// ifMatch is the If-Match of a change to what the page showed: the form's
// etag, or, in a form without one, the ETag of the object just read
// (updated at updated).
func ifMatch(rq *request, updated time.Time) http.Header {
	etag := rq.r.PostFormValue("etag")
	if etag == "" {
		etag = vdibroker.ETag(updated)
	}
	return http.Header{"If-Match": {etag}}
}

// poolGroup reads application group name and checks that it is pool's:
// the form's path names both, and a group of another pool is not this
// page's to change. A refusal is answered (ok false).
func (c *Console) poolGroup(rq *request, pool, name string, f *publishForm) (*vdibroker.ApplicationGroup, bool) {
	g, err := rq.api.getAppGroup(rq.r.Context(), name)
	if err == nil && g.HostPool != pool {
		err = vdibroker.Errorf(vdibroker.ENotFound, "application group %q is not one of host pool %q's", name, pool)
	}
	if err != nil {
		c.publishRefused(rq, f, err, "Nothing was changed", func(string) string { return "" })
		return nil, false
	}
	return g, true
}

// formField is the form input an API field belongs to: itself when the
// form has it, else "" (the banner says it).
func formField(field string, inputs []string) string {
	for _, in := range inputs {
		if field == in {
			return in
		}
	}
	return ""
}

// publishRefused answers the API's refusal of one of the card's forms: a
// token no longer accepted ends the sign-in; anything else shows the pool
// page with the API's status, the form open as typed, the broker's words
// beside the field it names (fieldOf maps it to the form's input) or
// above the form, and for a 412 that the card shows the group as it is
// now (R-E13).
func (c *Console) publishRefused(rq *request, f *publishForm, err error, nothing string, fieldOf func(string) string) {
	code := vdibroker.ErrorCode(err)
	if code == vdibroker.EUnauthenticated {
		c.apiError(rq, err)
		return
	}
	status := vdibroker.HTTPStatus(code)
	if in := fieldOf(vdibroker.ErrorField(err)); in != "" {
		f.Errors[in] = vdibroker.ErrorMessage(err)
		c.renderPoolPublish(rq, status, nothing+": the broker refused a value (see the field below).", f)
		return
	}
	banner := nothing + ": " + rq.describe(err)
	if code == vdibroker.EPreconditionFailed {
		banner = nothing + ": someone else changed it since this page was read (R-E13). The card below shows it as it is now; make your change again."
	}
	c.renderPoolPublish(rq, status, banner, f)
}

// getAppGroup is GET /api/v1/applicationgroups/{name}.
func (a *api) getAppGroup(ctx context.Context, name string) (*vdibroker.ApplicationGroup, error) {
	var g vdibroker.ApplicationGroup
	return &g, a.do(ctx, http.MethodGet, appGroupPath(name), nil, &g)
}

// putAppGroup is PUT /api/v1/applicationgroups/{name} with h's
// precondition (R-E13); it answers the group stored with its warnings.
func (a *api) putAppGroup(ctx context.Context, name string, g *vdibroker.ApplicationGroup, h http.Header) (*vdibroker.ApplicationGroup, error) {
	var out vdibroker.ApplicationGroup
	return &out, a.doHeader(ctx, http.MethodPut, appGroupPath(name), h, g, &out)
}

// deleteAppGroup is DELETE /api/v1/applicationgroups/{name} with h's
// precondition.
func (a *api) deleteAppGroup(ctx context.Context, name string, h http.Header) error {
	return a.doHeader(ctx, http.MethodDelete, appGroupPath(name), h, nil, nil)
}

// listApps lists a RemoteApp group's applications.
func (a *api) listApps(ctx context.Context, group string) ([]vdibroker.Application, error) {
	return list[vdibroker.Application](ctx, a, appGroupPath(group)+"/applications")
}

// putApp is PUT .../applications/{name} with h's precondition.
func (a *api) putApp(ctx context.Context, group, name string, app *vdibroker.Application, h http.Header) (*vdibroker.Application, error) {
	var out vdibroker.Application
	return &out, a.doHeader(ctx, http.MethodPut, appGroupPath(group)+"/applications/"+nameSegment(name), h, app, &out)
}

// deleteApp is DELETE .../applications/{name} with h's precondition.
func (a *api) deleteApp(ctx context.Context, group, name string, h http.Header) error {
	return a.doHeader(ctx, http.MethodDelete, appGroupPath(group)+"/applications/"+nameSegment(name), h, nil, nil)
}

func appGroupPath(name string) string {
	return apiPrefix + "/applicationgroups/" + nameSegment(name)
}

// nameSegment is name as one segment of an API path: escaped, and a name
// of dots ("." and "..", an application's may be) with its dots escaped
// too (%2E), which the API takes as a name where "." and ".." are dot
// segments it refuses (R-SEC).
func nameSegment(name string) string {
	if name == "." || name == ".." {
		return strings.Repeat("%2E", len(name))
	}
	return url.PathEscape(name)
}
