package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
)

// Global entitlements from the Federation page (SPEC §7, R-E9,
// R-G1..R-G4): create one, add and remove its member host pools, assign
// and unassign users, groups and all users, delete it. The federation
// document is one object, written whole (PUT /api/v1/federation), and
// every pod of the federation keeps its own copy: each form builds the
// new document from the one the page showed (its generation, a hidden
// field), one generation up, and puts it to this pod with the signed-in
// user's token (in-process, as every console call: the API decides who
// may write it), then, once this pod took it, to every other pod the
// document lists, at its URL, through the signed pod-to-pod channel
// (DocumentSender) for the principal. Not with the user's token, as
// `vdibroker federation apply` sends it: the document names the URLs, and
// a Contributor writes it, so a Contributor naming a URL of his own for a
// pod would be sent the token of the next administrator to make a change
// here (R-SEC); a signed call names the pod it is for and is refused by
// every other. The page then shows what each pod answered.
//
// The generation is the precondition: a page read before another
// administrator's change names an older generation than this pod holds,
// and is refused with 412 before anything is sent, the page shown as it
// now is (as R-E13's If-Match for the objects that have an ETag); a
// change made between this read and the write meets the API's own check
// (a generation not above the stored one with other content is 409), and
// is answered the same. A pod that holds a newer generation than this
// one refuses what this page sends; so this page writes nothing while a
// peer is known to hold a newer one. This pod's API decides who may
// write the document (ActionWrite, global: Contributor and the admin
// token), and each pod records the write in its own audit trail (a peer:
// principal kind pod, this pod acting for the writer).

// FederationConfig is how the Federation page reaches the other pods.
type FederationConfig struct {
	// Pods sends the document this pod took to the other pods
	// (vhttp.PodClient.PutDocument, signed with the federation secret):
	// serve passes its pod-to-pod client, which calls only the URLs
	// --federation-allow allows (R-SEC), trusts --federation-ca-file,
	// follows no redirect and uses no proxy. nil: the page sends nothing
	// to the other pods, and says so.
	Pods DocumentSender
	// Timeout bounds each pod's call; 0 is 10s.
	Timeout time.Duration
	// PeerWait is how long the page waits for the peers it asks for
	// their health and loads (GET /api/v1/federation and
	// /globalentitlements with peerWait); 0 is DefaultPeerWait. A peer
	// that has not answered by then is shown as not answering, its call
	// going on within --pod-timeout for the next read (R-G5).
	PeerWait time.Duration
}

// DefaultPeerWait is FederationConfig.PeerWait's default: a peer that
// answers at all answers its load call in milliseconds, and an
// administrator opening the page during a peer's outage sees it at once
// rather than after --pod-timeout.
const DefaultPeerWait = time.Second

// DocumentSender gives a pod the federation document this pod took from
// principal (vhttp.PodClient).
type DocumentSender interface {
	PutDocument(ctx context.Context, pod vdibroker.Pod, req vdibroker.PodDocumentRequest) (*vdibroker.Federation, error)
}

// The Federation page's forms (publishForm.Form).
const (
	formGENew      = "ge-new"
	formGEMember   = "ge-member"
	formGEAssign   = "ge-assign"
	formGESettings = "ge-settings"
	formHomeSite   = "home-site"
)

// geFields are the new global entitlement form's inputs, the API's names
// where the document has them.
var geFields = []string{"name", "kind", "application", "scope", "sessionDistribution", "pod", "hostPool", "entitle", "principal"}

// maxTyped bounds a value kept as typed in a form shown again: the
// longest name a field takes is MaxUserLen characters; what is longer is
// refused and shown cut (R-SEC).
const maxTyped = vdibroker.MaxUserLen

// typed is the posted value of field k, trimmed and bounded: one of more
// than maxTyped characters is cut to maxTyped and marked with "…", one
// character more than any field takes, so that it is still refused as
// too long. Characters, not bytes, as the API counts them: a name of 200
// Cyrillic letters is 400 bytes and valid, and one of 300 cut at 256
// bytes would be a shorter valid name nobody typed.
func typed(rq *request, k string) string {
	v := strings.TrimSpace(rq.r.PostFormValue(k))
	n := 0
	for i := range v {
		if n == maxTyped {
			return strings.ToValidUTF8(v[:i], "") + "…"
		}
		n++
	}
	return v
}

// addGlobalEntitlementRoutes registers the page's forms; EnableFederation
// calls it. The entitlement a form changes is a field of the form, not a
// segment of its path: a name of dots would be a dot segment there.
func (c *Console) addGlobalEntitlementRoutes() {
	c.mux.HandleFunc("POST /federation/globalentitlements", c.signedIn(c.createGlobalEntitlement))
	c.mux.HandleFunc("POST /federation/globalentitlements/members", c.signedIn(c.globalEntitlementMember))
	c.mux.HandleFunc("POST /federation/globalentitlements/assignments", c.signedIn(c.assignGlobalEntitlement))
	c.mux.HandleFunc("POST /federation/globalentitlements/delete", c.signedIn(c.deleteGlobalEntitlement))
	c.mux.HandleFunc("POST /federation/globalentitlements/settings", c.signedIn(c.globalEntitlementSettings))
	c.mux.HandleFunc("POST /federation/homesites", c.signedIn(c.homeSite))
	c.mux.HandleFunc("POST /federation/resend", c.signedIn(c.resendFederation))
}

// createGlobalEntitlement is POST /federation/globalentitlements: a new
// entitlement with its first member host pool and whom it entitles
// (R-E9). An entitlement must have a member (the API refuses one without),
// and this form asks for someone to entitle too: one naming nobody would
// entitle everyone (R-E9's upgrade rule), which an administrator
// creating one does not mean.
func (c *Console) createGlobalEntitlement(rq *request) {
	f := newPublishForm(formGENew, "")
	for _, k := range geFields {
		f.Values[k] = typed(rq, k)
	}
	f.Checks["useHomeSite"] = rq.r.PostFormValue("useHomeSite") == "on"
	gen, ok := c.postedGeneration(rq, f)
	if !ok {
		return
	}
	v := f.Values
	ge := vdibroker.GlobalEntitlement{Name: v["name"], Kind: v["kind"], Scope: v["scope"], SessionDistribution: v["sessionDistribution"],
		UseHomeSite: f.Checks["useHomeSite"], Members: []vdibroker.Member{{Pod: v["pod"], HostPool: v["hostPool"]}}}
	if ge.Kind == vdibroker.KindApplication {
		ge.Application = v["application"]
	}
	switch v["entitle"] {
	case federation.PrincipalUser, federation.PrincipalGroup:
		// Beside the form's input first: the document's users and
		// groups are the same name, checked the same.
		markFields(f, federation.CheckPrincipal(v["entitle"], v["principal"]))
		if v["entitle"] == federation.PrincipalUser {
			ge.Users = []string{v["principal"]}
		} else {
			ge.Groups = []string{v["principal"]}
		}
	case "allUsers":
		ge.AllUsers = true
	default:
		f.Errors["entitle"] = vdibroker.ErrorMessage(vdibroker.FieldError("entitle", "must be user, group or allUsers: an entitlement naming nobody would entitle everyone (R-E9)"))
	}
	markFields(f, federation.CheckEntitlement(&ge))
	if len(f.Errors) > 0 {
		c.renderFederationForm(rq, http.StatusBadRequest, fieldsBanner(f, "Nothing was created"), f)
		return
	}
	c.changeFederation(rq, f, gen, "Nothing was created", func(doc *vdibroker.Federation) (string, bool, error) {
		if err := federation.AddEntitlement(doc, ge); err != nil {
			return "", false, err
		}
		what := "its desktops"
		if ge.IsApplication() {
			what = "application " + ge.Application
		}
		return fmt.Sprintf("Global entitlement %s created with member %s/%s: %s may open %s through it (R-E9, R-G1).",
			ge.Name, ge.Members[0].Pod, ge.Members[0].HostPool, entitledText(&ge), what), true, nil
	}, nil)
}

// globalEntitlementMember is POST /federation/globalentitlements/members:
// op add or remove the member pod/hostPool of entitlement.
func (c *Console) globalEntitlementMember(rq *request) {
	name := typed(rq, "entitlement")
	f := newPublishForm(formGEMember, name)
	op, pod, pool := rq.r.PostFormValue("op"), typed(rq, "pod"), typed(rq, "hostPool")
	if op == "add" {
		f.Values["pod"], f.Values["hostPool"] = pod, pool
	}
	gen, ok := c.postedGeneration(rq, f)
	if !ok || !c.validEntitlement(rq, f, name) {
		return
	}
	if op != "add" && op != "remove" {
		c.renderFederationForm(rq, http.StatusBadRequest, "Nothing was changed: op must be add or remove.", f)
		return
	}
	m := vdibroker.Member{Pod: pod, HostPool: pool}
	if op == "remove" {
		// A remove button's hidden fields, not the add form's: a
		// refused remove is said in the banner, where the
		// administrator who pressed it looks, not beside the add
		// form's inputs (the entitlement's forms stay unfolded).
		f = removeForm(name)
	}
	if err := federation.CheckMember(m); err != nil {
		c.refuseInput(rq, f, err, "Nothing was changed")
		return
	}
	c.changeFederation(rq, f, gen, "Nothing was changed", func(doc *vdibroker.Federation) (string, bool, error) {
		if op == "add" {
			changed, err := federation.AddMember(doc, name, m)
			switch {
			case err != nil:
				return "", false, err
			case !changed:
				return fmt.Sprintf("%s/%s is a member of %s already: nothing changed.", pod, pool, name), false, nil
			}
			return fmt.Sprintf("%s/%s is a member of %s: users it entitles may be placed there (R-G3).", pod, pool, name), true, nil
		}
		changed, err := federation.RemoveMember(doc, name, m)
		switch {
		case err != nil:
			return "", false, err
		case !changed:
			return fmt.Sprintf("%s/%s is not a member of %s: nothing removed.", pod, pool, name), false, nil
		}
		return fmt.Sprintf("%s/%s is no longer a member of %s: no new session is placed there through it; a session open there goes on until it ends (R-G1 looks for existing sessions in member pools only).", pod, pool, name), true, nil
	}, func(msg string, loads []fedEntitlement, missed []string) string {
		// The loads the page read after the change say whether the
		// pod has the pool; a pod that did not take the change lists
		// only its old members, and the warning says that instead.
		if op != "add" || slices.Contains(missed, pod) || !memberNotFound(loads, name, m) {
			return msg
		}
		return fmt.Sprintf("%s/%s is a member of %s, but pod %s has no host pool %s (%s below): nobody is placed there through it until that pool exists on %s (R-G3).",
			pod, pool, name, pod, pool, federation.SkipNotFound, pod)
	})
}

// memberNotFound reports whether the loads say member m of entitlement
// name has no host pool on its pod (a pod that did not answer is not
// known to lack it).
func memberNotFound(loads []fedEntitlement, name string, m vdibroker.Member) bool {
	for _, g := range loads {
		if g.Name != name {
			continue
		}
		for _, x := range g.Members {
			if x.Pod == m.Pod && x.HostPool == m.HostPool {
				return x.Error == federation.SkipNotFound || x.Error == "" && (x.Facts == nil || !x.Facts.Found)
			}
		}
	}
	return false
}

// assignGlobalEntitlement is POST /federation/globalentitlements/assignments:
// op add or remove a user or a group (kind, principal), or allUsers true
// or false (R-E9), as the pool page's application groups are assigned.
func (c *Console) assignGlobalEntitlement(rq *request) {
	name := typed(rq, "entitlement")
	f := newPublishForm(formGEAssign, name)
	op, kind, principal := rq.r.PostFormValue("op"), rq.r.PostFormValue("kind"), typed(rq, "principal")
	if op == "add" {
		f.Values["kind"], f.Values["principal"] = kind, principal
	}
	gen, ok := c.postedGeneration(rq, f)
	if !ok || !c.validEntitlement(rq, f, name) {
		return
	}
	if op != "add" && op != "remove" && op != "allUsers" {
		c.renderFederationForm(rq, http.StatusBadRequest, "Nothing was changed: op must be add, remove or allUsers.", f)
		return
	}
	if op == "remove" || op == "allUsers" {
		// A button's hidden fields, not the add form's: a refused
		// remove is said in the banner, where the administrator who
		// pressed it looks (the entitlement's forms stay unfolded).
		f = removeForm(name)
	}
	if op != "allUsers" {
		if err := federation.CheckPrincipal(kind, principal); err != nil {
			c.refuseInput(rq, f, err, "Nothing was changed")
			return
		}
	}
	on := rq.r.PostFormValue("allUsers") == "true"
	c.changeFederation(rq, f, gen, "Nothing was changed", func(doc *vdibroker.Federation) (string, bool, error) {
		switch op {
		case "add":
			changed, err := federation.Entitle(doc, name, kind, principal)
			switch {
			case err != nil:
				return "", false, err
			case !changed:
				return fmt.Sprintf("The %s %s is entitled to %s already: nothing changed.", kind, principal, name), false, nil
			}
			return fmt.Sprintf("The %s %s is entitled to %s: %s connect through it (R-E9).", kind, principal, name, whoOpens(kind)), true, nil
		case "remove":
			changed, err := federation.Unentitle(doc, name, kind, principal)
			switch {
			case err != nil:
				return "", false, err
			case !changed:
				return fmt.Sprintf("The %s %s is not entitled to %s: nothing removed.", kind, principal, name), false, nil
			}
			return fmt.Sprintf("The %s %s is no longer entitled to %s: the next connect through it is refused NotEntitled unless another grant names them; an open session goes on until it ends (R-E9).", kind, principal, name), true, nil
		}
		changed, err := federation.SetAllUsers(doc, name, on)
		switch {
		case err != nil:
			return "", false, err
		case !changed:
			return "Nothing changed: " + name + " was so already.", false, nil
		case on:
			return fmt.Sprintf("%s entitles all users: every end user may connect through it (R-E9).", name), true, nil
		}
		return fmt.Sprintf("%s no longer entitles all users: only the users and groups it names may connect through it (R-E9).", name), true, nil
	}, nil)
}

// globalEntitlementSettings is POST /federation/globalentitlements/settings:
// entitlement's scope, sessionDistribution and useHomeSite (R-G3, R-G4),
// and the application of an Application entitlement (R-E9). Its kind
// does not change: a Desktop entitlement and an Application one open
// different things from their member pools (each pool must publish the
// application in a RemoteApp group), so turning one into the other is a
// new entitlement, deleted and created, not a setting; a post naming
// another kind is refused and says so. The application may change: the
// members then open the one named, as a new entitlement for it would.
func (c *Console) globalEntitlementSettings(rq *request) {
	name := typed(rq, "entitlement")
	f := newPublishForm(formGESettings, name)
	for _, k := range []string{"scope", "sessionDistribution", "application", "kind"} {
		f.Values[k] = typed(rq, k)
	}
	f.Checks["useHomeSite"] = rq.r.PostFormValue("useHomeSite") == "on"
	gen, ok := c.postedGeneration(rq, f)
	if !ok || !c.validEntitlement(rq, f, name) {
		return
	}
	v := f.Values
	set := federation.Settings{Kind: v["kind"], Application: v["application"], Scope: v["scope"], SessionDistribution: v["sessionDistribution"], UseHomeSite: f.Checks["useHomeSite"]}
	if err := federation.CheckSettings(set); err != nil {
		c.refuseInput(rq, f, err, "Nothing was changed")
		return
	}
	c.changeFederation(rq, f, gen, "Nothing was changed", func(doc *vdibroker.Federation) (string, bool, error) {
		was, changed, err := federation.ChangeSettings(doc, name, set)
		if err != nil {
			return "", false, err
		}
		if !changed {
			return fmt.Sprintf("Nothing changed: %s had these settings already.", name), false, nil
		}
		var said []string
		if set.Application != was.Application && was.IsApplication() {
			said = append(said, fmt.Sprintf("application %s (was %s): each member pool must publish it in a RemoteApp group (R-E9)", set.Application, was.Application))
		}
		if set.Scope != was.Scope {
			said = append(said, fmt.Sprintf("scope %s (was %s)", set.Scope, was.Scope))
		}
		if set.SessionDistribution != was.SessionDistribution {
			said = append(said, fmt.Sprintf("session distribution %s (was %s)", set.SessionDistribution, was.SessionDistribution))
		}
		if set.UseHomeSite != was.UseHomeSite {
			said = append(said, map[bool]string{true: "home sites used", false: "home sites no longer used"}[set.UseHomeSite])
		}
		return fmt.Sprintf("%s's settings changed: %s. The next connect through it is placed by them (R-G3, R-G4); a session open goes on where it is.", name, strings.Join(said, ", ")), true, nil
	}, nil)
}

// homeSite is POST /federation/homesites: op add, change (in place) or
// remove the home site of a user or a group (kind, principal; site for
// add and change), or move it up or down the list (R-G3). Checked as
// the API checks the document: exactly one of user and group, a site of
// the document, and one home site a user or a group, in any case (Alice
// is alice, R-E5): a second is refused, not replaced unseen. A change
// keeps its place in the list, where the first listed wins for a user
// in several groups; a remove and an add put it last. A home site places
// only through entitlements with useHomeSite; the page says so.
func (c *Console) homeSite(rq *request) {
	f := newPublishForm(formHomeSite, "")
	op, kind, principal, site := rq.r.PostFormValue("op"), rq.r.PostFormValue("kind"), typed(rq, "principal"), typed(rq, "site")
	if op == "add" {
		f.Values["kind"], f.Values["principal"], f.Values["site"] = kind, principal, site
	}
	gen, ok := c.postedGeneration(rq, f)
	if !ok {
		return
	}
	switch op {
	case "add":
		c.addHomeSite(rq, f, gen, kind, principal, site)
	case "remove":
		c.removeHomeSite(rq, gen, kind, principal)
	case "change":
		c.changeHomeSite(rq, gen, kind, principal, site)
	case "up", "down":
		c.moveHomeSite(rq, gen, kind, principal, op == "up")
	default:
		c.renderFederationForm(rq, http.StatusBadRequest, "Nothing was changed: op must be add, change, up, down or remove.", f)
	}
}

// addHomeSite is homeSite's op add: the add form f, refused beside its
// inputs; the new home site goes last.
func (c *Console) addHomeSite(rq *request, f *publishForm, gen int64, kind, principal, site string) {
	if err := federation.CheckHomeSite(kind, principal, site); err != nil {
		c.refuseInput(rq, f, err, "Nothing was changed")
		return
	}
	c.changeFederation(rq, f, gen, "Nothing was changed", func(doc *vdibroker.Federation) (string, bool, error) {
		if err := federation.AddHomeSite(doc, kind, principal, site); err != nil {
			return "", false, err
		}
		var using []string
		for _, ge := range doc.GlobalEntitlements {
			if ge.UseHomeSite {
				using = append(using, ge.Name)
			}
		}
		through := "no global entitlement uses home sites yet: set Use home sites in an entitlement's settings"
		if len(using) > 0 {
			through = "through " + andList(using) + map[bool]string{true: ", which use home sites", false: ", which uses home sites"}[len(using) > 1]
		}
		return fmt.Sprintf("The %s %s has home site %s: %s, a connect starts there (R-G3; a user's own home site before a group's).", kind, principal, site, through), true, nil
	}, nil)
}

// removeHomeSite is homeSite's op remove. Its button's hidden fields,
// not the add form's: the add form is not what was refused.
func (c *Console) removeHomeSite(rq *request, gen int64, kind, principal string) {
	f := removeForm("")
	if err := federation.CheckHomeSiteOwner(kind, principal); err != nil {
		c.refuseInput(rq, f, err, "Nothing was removed")
		return
	}
	c.changeFederation(rq, f, gen, "Nothing was removed", func(doc *vdibroker.Federation) (string, bool, error) {
		h, changed, err := federation.RemoveHomeSite(doc, kind, principal)
		switch {
		case err != nil:
			return "", false, err
		case !changed:
			return fmt.Sprintf("The %s %s has no home site: nothing removed.", kind, principal), false, nil
		}
		return fmt.Sprintf("The %s %s no longer has home site %s: through an entitlement that uses home sites, %s (R-G3).",
			kind, cmp.Or(h.User, h.Group), h.Site, map[string]string{"user": "her group's home site is used, else the site her connection arrived at",
				"group": "its members start at their own home site, another group's, or the site their connection arrived at"}[kind]), true, nil
	}, nil)
}

// changeHomeSite is homeSite's op change: the listed home site's own
// form (its row's site and button), refused in the banner.
func (c *Console) changeHomeSite(rq *request, gen int64, kind, principal, site string) {
	f := removeForm("")
	if err := federation.CheckHomeSite(kind, principal, site); err != nil {
		c.refuseInput(rq, f, err, "Nothing was changed")
		return
	}
	c.changeFederation(rq, f, gen, "Nothing was changed", func(doc *vdibroker.Federation) (string, bool, error) {
		was, changed, err := federation.ChangeHomeSite(doc, kind, principal, site)
		switch {
		case err != nil:
			return "", false, err
		case !changed:
			return fmt.Sprintf("The %s %s has home site %s already: nothing changed.", kind, cmp.Or(was.User, was.Group), site), false, nil
		}
		return fmt.Sprintf("The %s %s has home site %s (was %s), in the same place in the list: through an entitlement that uses home sites, a connect starts there (R-G3).",
			kind, cmp.Or(was.User, was.Group), site, was.Site), true, nil
	}, nil)
}

// moveHomeSite is homeSite's op up or down: the listed home site one
// place towards the first (which wins for a user in several groups,
// R-G3) or the last.
func (c *Console) moveHomeSite(rq *request, gen int64, kind, principal string, up bool) {
	f := removeForm("")
	if err := federation.CheckHomeSiteOwner(kind, principal); err != nil {
		c.refuseInput(rq, f, err, "Nothing was moved")
		return
	}
	c.changeFederation(rq, f, gen, "Nothing was moved", func(doc *vdibroker.Federation) (string, bool, error) {
		at, changed, err := federation.MoveHomeSite(doc, kind, principal, up)
		switch {
		case err != nil:
			return "", false, err
		case !changed:
			return fmt.Sprintf("The home site of the %s %s is %s of the list already: nothing moved.", kind, principal, map[bool]string{true: "first", false: "last"}[up]), false, nil
		}
		return fmt.Sprintf("The home site of the %s %s moved %s, to place %d of %d: a user in several groups with home sites starts at the one listed first (R-G3).",
			kind, principal, map[bool]string{true: "up", false: "down"}[up], at, len(doc.HomeSites)), true, nil
	}, nil)
}

// deleteGlobalEntitlement is POST /federation/globalentitlements/delete
// (the page asks first). Its button's form has no input of its own
// (removeForm): a refusal, even one the API made naming a field of the
// document, is said in the banner, where the administrator who pressed
// it looks, not beside the entitlement's assign form's inputs.
func (c *Console) deleteGlobalEntitlement(rq *request) {
	name := typed(rq, "entitlement")
	f := removeForm(name)
	gen, ok := c.postedGeneration(rq, f)
	if !ok || !c.validEntitlement(rq, f, name) {
		return
	}
	c.changeFederation(rq, f, gen, "Nothing was deleted", func(doc *vdibroker.Federation) (string, bool, error) {
		if err := federation.DeleteEntitlement(doc, name); err != nil {
			return "", false, err
		}
		return fmt.Sprintf("Global entitlement %s deleted: nobody connects through it any more; sessions opened through it go on in their pools until they end.", name), true, nil
	}, func(msg string, _ []fedEntitlement, missed []string) string {
		if len(missed) == 0 {
			return msg
		}
		// A pod that did not take it holds the old document, and
		// places through it still (R-G5).
		return fmt.Sprintf("Global entitlement %s deleted on this pod: nobody connects through it at a pod that took the change, but %s still %s it, and the users it entitles connect through it there until %s. "+
			"Sessions opened through it go on in their pools until they end.", name, andList(missed), map[bool]string{true: "hold", false: "holds"}[len(missed) > 1],
			map[bool]string{true: "they take this document", false: "it takes this document"}[len(missed) > 1])
	})
}

// resendFederation is POST /federation/resend: this pod's document, as
// the page showed it, sent again to the other pods, for those that did
// not take it (the page offers it when they differ). A pod that holds it
// already answers that nothing changed (applied).
func (c *Console) resendFederation(rq *request) {
	f := newPublishForm("", "")
	gen, ok := c.postedGeneration(rq, f)
	if !ok {
		return
	}
	st, ok := c.readForChange(rq, f, gen, "Nothing was sent")
	if !ok {
		return
	}
	// This pod's API decides whether the signed-in user may write the
	// document: the same document again changes nothing here.
	if err := rq.api.do(rq.r.Context(), http.MethodPut, apiPrefix+"/federation", &st.Document, nil); err != nil {
		c.federationRefused(rq, f, err, "Nothing was sent", nil)
		return
	}
	results := c.sendToPeers(rq, &st.Document, st.Pod)
	c.showApplied(rq, fmt.Sprintf("This pod's federation document (generation %d) was sent again to the other pods.", gen), &st.Document, st.Pod, results, nil)
}

// postedGeneration is the form's generation, the one of the document
// the page showed; a form without a valid one is refused (400).
func (c *Console) postedGeneration(rq *request, f *publishForm) (int64, bool) {
	gen, err := strconv.ParseInt(rq.r.PostFormValue("generation"), 10, 64)
	if err != nil || gen < 1 {
		c.renderFederationForm(rq, http.StatusBadRequest, "Nothing was changed: generation must be the document's generation the page showed (1 or more); reload the page.", f)
		return 0, false
	}
	return gen, true
}

// validEntitlement checks the form's entitlement name as the API checks
// one, before it is quoted anywhere (R-SEC).
func (c *Console) validEntitlement(rq *request, f *publishForm, name string) bool {
	if err := federation.ValidateEntitlementName("entitlement", name); err != nil {
		f.Group = ""
		c.renderFederationForm(rq, http.StatusBadRequest, "Nothing was changed: "+vdibroker.ErrorMessage(err), f)
		return false
	}
	return true
}

// removeForm is the form of a remove button of entitlement name (its
// members' and its users' and groups'): no input of its own, so a
// refusal is said in the banner; the entitlement's forms stay unfolded.
func removeForm(name string) *publishForm {
	return newPublishForm("", name)
}

// markFields puts each refusal of a Check function (federation's, joined)
// beside the input of f it names; one naming no input is kept for the
// banner (fieldsBanner). A refusal already beside its input stays.
func markFields(f *publishForm, err error) {
	if err == nil {
		return
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		in := geInput(vdibroker.ErrorField(e))
		if _, ok := f.Errors[in]; !ok {
			f.Errors[in] = vdibroker.ErrorMessage(e)
		}
	}
}

// fieldsBanner is the banner of a form refused beside its inputs: what
// was not done, and the refusal that names no input, if any.
func fieldsBanner(f *publishForm, nothing string) string {
	if msg := f.Errors[""]; msg != "" {
		return nothing + ": " + msg
	}
	return nothing + ": correct the fields marked below."
}

// refuseInput answers a form whose own values a Check refused (400,
// nothing read): beside its inputs, or, for a form without inputs (a
// remove button), in the banner, where the administrator who pressed it
// looks.
func (c *Console) refuseInput(rq *request, f *publishForm, err error, nothing string) {
	if f.Form == "" {
		c.renderFederationForm(rq, http.StatusBadRequest, nothing+": "+vdibroker.ErrorMessage(err), f)
		return
	}
	markFields(f, err)
	c.renderFederationForm(rq, http.StatusBadRequest, fieldsBanner(f, nothing), f)
}

// entitledText says whom ge entitles (R-E9).
func entitledText(ge *vdibroker.GlobalEntitlement) string {
	var who []string
	if ge.AllUsers {
		who = append(who, "all users")
	}
	for _, u := range ge.Users {
		who = append(who, "user "+u)
	}
	for _, g := range ge.Groups {
		who = append(who, "members of group "+g)
	}
	if len(who) == 0 {
		return "everyone (it names nobody)"
	}
	return strings.Join(who, ", ")
}

// readForChange reads this pod's federation status for a change to the
// document the page showed, generation gen: refused with 412 (the page
// shown as it now is) when the pod holds another generation, and with 409
// when a peer is known to hold a newer one, which would refuse what this
// page sends (the pods' documents would then differ). ok false: answered.
func (c *Console) readForChange(rq *request, f *publishForm, gen int64, nothing string) (*fedStatus, bool) {
	var st fedStatus
	if err := rq.api.do(rq.r.Context(), http.MethodGet, apiPrefix+"/federation", nil, &st); err != nil {
		c.federationRefused(rq, f, err, nothing, nil)
		return nil, false
	}
	if st.Document.Generation != gen {
		c.renderStale(rq, nothing, gen, st.Document.Generation)
		return nil, false
	}
	for _, p := range st.Peers {
		if p.Generation > gen {
			c.renderFederationForm(rq, http.StatusConflict, fmt.Sprintf("%s: pod %s holds generation %d of the federation document, newer than this pod's %d, and would refuse what this page sends. "+
				"This pod's document is behind: apply the newest one to every pod (vdibroker federation apply -f, or the Federation page of pod %s's console, sending it again), then make your change.",
				nothing, p.Pod, p.Generation, gen, p.Pod), f)
			return nil, false
		}
	}
	return &st, true
}

// renderStale answers a form of a page read at generation then while this
// pod holds now: 412, nothing written, the page as it now is.
func (c *Console) renderStale(rq *request, nothing string, then, now int64) {
	c.renderFederationForm(rq, http.StatusPreconditionFailed, fmt.Sprintf(
		"%s: the federation document changed since this page was read (generation %d then, %d now), by another administrator or another page. The page below shows it as it is now; make your change again.",
		nothing, then, now), nil)
}

// changeFederation makes one change to the document the page showed
// (generation gen) and sends it to every pod: change edits the document
// read and says what it did (changed false: nothing to send, said in a
// flash); its error is shown beside the form's field it names. This pod
// takes it first: nothing is sent elsewhere unless it did.
func (c *Console) changeFederation(rq *request, f *publishForm, gen int64, nothing string, change func(*vdibroker.Federation) (string, bool, error), refine refineFunc) {
	st, ok := c.readForChange(rq, f, gen, nothing)
	if !ok {
		return
	}
	doc := &st.Document
	msg, changed, err := change(doc)
	if err != nil {
		c.federationRefused(rq, f, err, nothing, geInput)
		return
	}
	if !changed {
		c.redirect(rq, "/federation", msg)
		return
	}
	doc.Generation = gen + 1
	if err := rq.api.do(rq.r.Context(), http.MethodPut, apiPrefix+"/federation", doc, nil); err != nil {
		if vdibroker.ErrorCode(err) == vdibroker.EConflict && vdibroker.ErrorField(err) == "generation" {
			// Another write since the read above (R-E13's race, told
			// by the generation).
			c.renderStale(rq, nothing, gen, gen+1)
			return
		}
		c.federationRefused(rq, f, err, nothing, geInput)
		return
	}
	c.showApplied(rq, msg, doc, st.Pod, c.sendToPeers(rq, doc, st.Pod), refine)
}

// podResult is one pod's answer to the document sent, as the page lists it.
type podResult struct {
	Pod, URL string
	// Result is applied, refused or unreachable.
	Result  string
	Message string
	// Again is when a pod that refused it for now (its Retry-After: a
	// pod takes a few writes a minute from one pod) takes it again; zero
	// when it did not say.
	Again time.Time
}

// sendToPeers sends doc to every pod it lists but self, all at once,
// through the signed pod-to-pod channel for the signed-in principal
// (never with the user's token, R-SEC); the answers, self's first (it
// took it already).
func (c *Console) sendToPeers(rq *request, doc *vdibroker.Federation, self string) []podResult {
	out := []podResult{{Pod: self, Result: "applied", Message: "this pod"}}
	var peers []vdibroker.Pod
	for _, p := range doc.Pods {
		if p.Name == self {
			out[0].URL = p.URL
			continue
		}
		peers = append(peers, p)
	}
	timeout := c.fed.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	// Not the request's context alone: a browser that goes away does not
	// stop the pods' writes half way.
	ctx := context.WithoutCancel(rq.r.Context())
	res := make([]podResult, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		res[i] = podResult{Pod: p.Name, URL: p.URL, Result: "applied"}
		if c.fed.Pods == nil {
			res[i].Result, res[i].Message = "unreachable", "this console has no pod-to-pod client"
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			_, err := c.fed.Pods.PutDocument(ctx, p, vdibroker.PodDocumentRequest{Document: *doc, Principal: rq.sess.Principal})
			var ue *url.Error
			var ve *vdibroker.Error
			switch {
			case err == nil:
			case errors.As(err, &ve):
				// A vdibroker pod's refusal: its code and the start of
				// its words (a peer's body is never shown whole, R-SEC).
				res[i].Result, res[i].Message = "refused", ve.Message
				if ve.Code != vdibroker.EInternal {
					res[i].Message = ve.Code + ": " + ve.Message
				}
				res[i].Message = vdibroker.Cut(res[i].Message, 200)
				if d := ve.RetryAfter; d > 0 {
					// Said after the cut: the peer's words may be long.
					// From when the answer came, not when it was sent:
					// the peer counts from its answer, and a slow one
					// would be sent to again too early.
					res[i].Again = c.now().Add(d)
					res[i].Message += " (send again " + againText(d, res[i].Again) + ")"
				}
			case errors.As(err, &ue):
				res[i].Result, res[i].Message = "unreachable", vdibroker.Cut(ue.Err.Error(), 300)
			default:
				// Not called: its URL is not one --federation-allow allows.
				res[i].Result, res[i].Message = "unreachable", vdibroker.Cut(err.Error(), 300)
			}
		})
	}
	wg.Wait()
	return append(out, res...)
}

// showApplied shows the page after a document was sent: every pod's
// answer, and when some did not take it, that the pods' documents now
// differ and what to do.
func (c *Console) showApplied(rq *request, msg string, doc *vdibroker.Federation, self string, results []podResult, refine refineFunc) {
	var missed []string
	newer := false
	var w wait
	for _, r := range results {
		if r.Result != "applied" {
			missed = append(missed, r.Pod)
			newer = newer || strings.HasPrefix(r.Message, vdibroker.EConflict+":")
			if !r.Again.IsZero() {
				w.pods = append(w.pods, r.Pod)
				w.until = max(w.until, r.Again.Sub(c.now()))
				if r.Again.After(w.at) {
					w.at = r.Again
				}
			}
		}
	}
	data := map[string]any{"Results": results, "ResultGeneration": doc.Generation}
	c.renderFederationLoaded(rq, http.StatusOK, data, nil, func(loads []fedEntitlement) {
		if refine != nil {
			msg = refine(msg, loads, missed)
		}
		appliedWords(data, msg, doc.Generation, missed, newer, w)
	})
}

// wait is what the pods that refused a document for now said of when
// they take it again: pods, the latest time (at) and how long from now
// (until).
type wait struct {
	pods  []string
	at    time.Time
	until time.Duration
}

// againText says when to send again: in d, after the clock time at.
func againText(d time.Duration, at time.Time) string {
	return "in " + durationText(d) + ", after " + at.Local().Format("15:04:05 MST")
}

// refineFunc tells a change's message again once the pods answered
// (missed: those that did not take it) and the page read the members'
// loads, which the change itself did not know.
type refineFunc func(msg string, loads []fedEntitlement, missed []string) string

// appliedWords sets the page's flash, or its warning when some pods
// (missed) did not take generation gen.
func appliedWords(data map[string]any, msg string, gen int64, missed []string, newer bool, w wait) {
	if len(missed) == 0 {
		data["Flash"] = fmt.Sprintf("%s Every pod of the federation holds generation %d.", msg, gen)
	} else {
		warn := fmt.Sprintf("%s This pod holds generation %d, but %s did not take it (below): the pods' federation documents now differ, and a user connecting through %s is placed by the document %s holds. ",
			msg, gen, andList(missed), andList(missed), map[bool]string{true: "they", false: "it"}[len(missed) > 1])
		if newer {
			warn += "A pod that refused it with Conflict holds a newer generation: read its document (vdibroker federation show --server its URL), make the change there, and apply the newest document to every pod (vdibroker federation apply -f). "
		}
		if len(w.pods) > 0 {
			// A peer's Retry-After (a pod takes a few writes a minute
			// from one pod, R-SEC): when, not only that, to send again.
			warn += fmt.Sprintf("%s refused it for now and %s it again %s: ", andList(w.pods), map[bool]string{true: "take", false: "takes"}[len(w.pods) > 1], againText(w.until, w.at))
			if len(w.pods) == len(missed) {
				warn += "send this document again then with the button below (or vdibroker federation apply -f)."
			} else {
				warn += "send this document again then with the button below (or vdibroker federation apply -f), once you fixed what the other pods said or they answer."
			}
		} else {
			warn += "Fix what a pod said, or wait until it answers, then send this document again with the button below (or vdibroker federation apply -f)."
		}
		data["Error"] = warn
		data["Flash"] = ""
		data["Differ"] = true // the page offers to send it again
	}
}

func andList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// apiGEField matches a document path the API names in a refusal of an
// entitlement's field: globalEntitlements[3].members[0].hostPool.
var apiGEField = regexp.MustCompile(`^globalEntitlements\[\d+\]\.(?:members\[\d+\]\.)?([A-Za-z]+)`)

// apiHomeSiteField matches a document path the API names in a refusal
// of a home site: homeSites[2].site, homeSites[2] (a second one).
var apiHomeSiteField = regexp.MustCompile(`^homeSites\[\d+\](?:\.([a-z]+))?$`)

// geInput is the form input an API field belongs to, or "" (the banner
// says it).
func geInput(field string) string {
	if m := apiGEField.FindStringSubmatch(field); m != nil {
		field = m[1]
	} else if m := apiHomeSiteField.FindStringSubmatch(field); m != nil {
		field = cmp.Or(m[1], "principal")
	} else {
		field, _, _ = strings.Cut(field, "[") // users[2]: the principal
	}
	switch field {
	case "users", "groups", "user", "group":
		return "principal"
	case "name", "kind", "application", "scope", "sessionDistribution", "pod", "hostPool", "principal", "entitle", "site":
		return field
	}
	return ""
}

// federationRefused answers a refusal of one of the page's forms (the
// API's, or the change's own): a token no longer accepted ends the
// sign-in; otherwise the page with the refusal's status, the form as
// typed, the words beside the field they name, or above.
func (c *Console) federationRefused(rq *request, f *publishForm, err error, nothing string, fieldOf func(string) string) {
	code := vdibroker.ErrorCode(err)
	if code == vdibroker.EUnauthenticated || code == vdibroker.EInternal {
		c.apiError(rq, err)
		return
	}
	status := vdibroker.HTTPStatus(code)
	if fieldOf != nil && f.Form != "" {
		if in := fieldOf(vdibroker.ErrorField(err)); in != "" {
			f.Errors[in] = vdibroker.ErrorMessage(err)
			c.renderFederationForm(rq, status, nothing+": the broker refused a value (see the field below).", f)
			return
		}
	}
	c.renderFederationForm(rq, status, nothing+": "+rq.describe(err), f)
}

// renderFederationForm shows the page with an error banner and one of
// its forms as posted (nil: none).
func (c *Console) renderFederationForm(rq *request, status int, banner string, f *publishForm) {
	c.renderFederation(rq, status, map[string]any{"Error": banner}, f)
}
