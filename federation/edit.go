package federation

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vdibroker/vdibroker"
)

// Edits of the federation document (R-E9, R-G1..R-G4), one change each:
// the console's Federation page makes a change with one of them to the
// document it read, then writes the whole document (PUT
// /api/v1/federation), where Validate checks it again.
//
// Each edit checks its arguments with the checks Validate makes of the
// fields they become, under the argument's own name (entitlement, name,
// kind, application, scope, sessionDistribution, pod, hostPool,
// principal, site; users or groups for a list grown too long), and what
// the document must hold for it (the entitlement, the pod, the site).
// changed false with no error: the document is so already. An edit
// changes doc only when it returns changed and no error, and then
// replaces the lists it changes, never writes through them: a copy of
// doc sharing them (the document it was read from, another edit's)
// stays as it was.
//
// The Check functions are an edit's argument checks alone, every field
// refused (errors.Join), for a form to mark each input before anything
// is read.

// Principal kinds: a user or a group is entitled, or has a home site.
const (
	PrincipalUser  = "user"
	PrincipalGroup = "group"
)

// CheckEntitlement checks a global entitlement to add: its name, kind
// and application, scope, session distribution, users and groups, its
// members (1..MaxMembers, none twice) and each one's pod and host pool
// (fields pod and hostPool), as Validate checks a document's. Whether it
// names anyone is not checked: one naming nobody entitles everyone
// (R-E9), which the API takes with a warning.
func CheckEntitlement(ge *vdibroker.GlobalEntitlement) error {
	errs := entitlementErrors("", ge)
	if len(ge.Members) == 0 || len(ge.Members) > MaxMembers {
		errs = append(errs, vdibroker.FieldError("members", "must list 1..%d member host pools, got %d", MaxMembers, len(ge.Members)))
	}
	seen := make(map[vdibroker.Member]bool, len(ge.Members))
	for _, m := range ge.Members {
		errs = append(errs, memberErrors(m)...)
		if seen[m] {
			errs = append(errs, vdibroker.FieldError("members", "lists member %s/%s twice", m.Pod, m.HostPool))
		}
		seen[m] = true
	}
	return errors.Join(errs...)
}

// documentMembers refuses n more member host pools in doc beyond
// MaxDocumentMembers in all (Validate), on field hostPool.
func documentMembers(doc *vdibroker.Federation, n int) error {
	total := n
	for _, ge := range doc.GlobalEntitlements {
		total += len(ge.Members)
	}
	if total > MaxDocumentMembers {
		return vdibroker.FieldError("hostPool", "the federation document would list %d member host pools in all, more than it holds (0..%d): remove a member first", total, MaxDocumentMembers)
	}
	return nil
}

// CheckMember checks a member's pod and host pool names.
func CheckMember(m vdibroker.Member) error {
	return errors.Join(memberErrors(m)...)
}

// memberErrors are CheckMember's refusals, one a field.
func memberErrors(m vdibroker.Member) []error {
	return []error{ValidatePodName("pod", m.Pod), vdibroker.ValidateName("hostPool", m.HostPool, vdibroker.MinPoolNameLen, vdibroker.MaxPoolNameLen)}
}

// CheckPrincipal checks a user or a group (kind) to entitle: kind user
// or group, and principal a user's name as the document's users and
// groups are checked.
func CheckPrincipal(kind, principal string) error {
	return checkPrincipal(kind, principal, "")
}

// CheckHomeSite checks the home site of a user or a group (kind) to
// add: principal as a document's homeSites[i].user or .group, and site
// as a site's name.
func CheckHomeSite(kind, principal, site string) error {
	return errors.Join(checkPrincipal(kind, principal, homeSiteWhy), ValidateSiteName("site", site))
}

// CheckHomeSiteOwner checks the user or group (kind) whose home site is
// removed, as CheckHomeSite does.
func CheckHomeSiteOwner(kind, principal string) error {
	return checkPrincipal(kind, principal, homeSiteWhy)
}

// homeSiteWhy ends a home site's refused kind.
const homeSiteWhy = ": a home site names exactly one of them"

// checkPrincipal is CheckPrincipal; why ends the kind's refusal.
func checkPrincipal(kind, principal, why string) error {
	if kind != PrincipalUser && kind != PrincipalGroup {
		return vdibroker.FieldError("kind", "must be %s or %s%s", PrincipalUser, PrincipalGroup, why)
	}
	return vdibroker.ValidateUser("principal", principal)
}

// Settings are a global entitlement's settings an administrator
// changes (ChangeSettings).
type Settings struct {
	// Kind, when set, must be the entitlement's: it does not change.
	Kind string
	// Application is an Application entitlement's application (required
	// there), empty for a Desktop one.
	Application         string
	Scope               string
	SessionDistribution string
	UseHomeSite         bool
}

// CheckSettings checks settings' values as Validate checks an
// entitlement's: scope, sessionDistribution, application (when set) and
// kind (when set).
func CheckSettings(s Settings) error {
	var errs []error
	errs = append(errs, oneOf("scope", s.Scope, Scopes), oneOf("sessionDistribution", s.SessionDistribution, Distributions))
	if s.Application != "" {
		errs = append(errs, vdibroker.ValidateName("application", s.Application, vdibroker.MinAppNameLen, vdibroker.MaxAppNameLen))
	}
	if s.Kind != "" {
		errs = append(errs, validKind("kind", s.Kind))
	}
	return errors.Join(errs...)
}

// AddEntitlement adds ge to doc: refused when CheckEntitlement refuses
// it, a member's pod is not one of doc's, doc has an entitlement of
// that name, or its members would pass MaxDocumentMembers in all. A
// Desktop entitlement is stored with kind empty, the document's default.
func AddEntitlement(doc *vdibroker.Federation, ge vdibroker.GlobalEntitlement) error {
	if err := CheckEntitlement(&ge); err != nil {
		return err
	}
	for _, m := range ge.Members {
		if doc.Pod(m.Pod) == nil {
			return vdibroker.FieldError("pod", "is not a pod of the federation document; its pods are %s", podNames(doc.Pods))
		}
	}
	if doc.Entitlement(ge.Name) != nil {
		return vdibroker.FieldError("name", "a global entitlement %q exists already: choose another name, or change that one", ge.Name)
	}
	if err := documentMembers(doc, len(ge.Members)); err != nil {
		return err
	}
	if ge.Kind == vdibroker.KindDesktop {
		ge.Kind = ""
	}
	ge.Members = slices.Clone(ge.Members)
	ge.Users, ge.Groups = slices.Clone(ge.Users), slices.Clone(ge.Groups)
	doc.GlobalEntitlements = append(slices.Clip(doc.GlobalEntitlements), ge)
	return nil
}

// DeleteEntitlement deletes doc's entitlement name (NotFound when none).
func DeleteEntitlement(doc *vdibroker.Federation, name string) error {
	if _, err := entitlementOf(doc, name); err != nil {
		return err
	}
	doc.GlobalEntitlements = slices.DeleteFunc(slices.Clone(doc.GlobalEntitlements), func(g vdibroker.GlobalEntitlement) bool { return g.Name == name })
	return nil
}

// AddMember makes m a member of entitlement name; m's pod must be one
// of doc's, and neither the entitlement's members (MaxMembers) nor the
// document's (MaxDocumentMembers) be full.
func AddMember(doc *vdibroker.Federation, name string, m vdibroker.Member) (changed bool, err error) {
	if err := CheckMember(m); err != nil {
		return false, err
	}
	return editEntitlement(doc, name, func(ge *vdibroker.GlobalEntitlement) (bool, error) {
		if slices.Contains(ge.Members, m) {
			return false, nil
		}
		if doc.Pod(m.Pod) == nil {
			return false, vdibroker.FieldError("pod", "is not a pod of the federation document; its pods are %s", podNames(doc.Pods))
		}
		if len(ge.Members) >= MaxMembers {
			return false, vdibroker.FieldError("hostPool", "%s has %d member host pools, the most one holds (1..%d)", name, len(ge.Members), MaxMembers)
		}
		if err := documentMembers(doc, 1); err != nil {
			return false, err
		}
		ge.Members = append(ge.Members, m)
		return true, nil
	})
}

// RemoveMember removes member m from entitlement name. Its only member
// is not removed: an entitlement has at least one (Validate).
func RemoveMember(doc *vdibroker.Federation, name string, m vdibroker.Member) (changed bool, err error) {
	if err := CheckMember(m); err != nil {
		return false, err
	}
	return editEntitlement(doc, name, func(ge *vdibroker.GlobalEntitlement) (bool, error) {
		if !slices.Contains(ge.Members, m) {
			return false, nil
		}
		if len(ge.Members) == 1 {
			return false, vdibroker.Errorf(vdibroker.EInvalid,
				"%s/%s is %s's only member, and a global entitlement has at least one: add another first, or delete the entitlement", m.Pod, m.HostPool, name)
		}
		ge.Members = slices.DeleteFunc(ge.Members, func(x vdibroker.Member) bool { return x == m })
		return true, nil
	})
}

// Entitle entitles a user or a group (kind) to entitlement name (R-E9);
// one named already, in any case (R-E5), changes nothing.
func Entitle(doc *vdibroker.Federation, name, kind, principal string) (changed bool, err error) {
	if err := CheckPrincipal(kind, principal); err != nil {
		return false, err
	}
	return editEntitlement(doc, name, func(ge *vdibroker.GlobalEntitlement) (bool, error) {
		list := principals(ge, kind)
		if vdibroker.ContainsUser(*list, principal) {
			return false, nil
		}
		*list = vdibroker.EditUsers(*list, []string{principal}, nil)
		return true, nil
	})
}

// Unentitle stops entitling a user or a group (kind) to entitlement
// name. The last one named by an entitlement without allUsers is not
// removed: it would then name nobody, which entitles everyone (R-E9).
func Unentitle(doc *vdibroker.Federation, name, kind, principal string) (changed bool, err error) {
	if err := CheckPrincipal(kind, principal); err != nil {
		return false, err
	}
	return editEntitlement(doc, name, func(ge *vdibroker.GlobalEntitlement) (bool, error) {
		list := principals(ge, kind)
		if !vdibroker.ContainsUser(*list, principal) {
			return false, nil
		}
		*list = vdibroker.EditUsers(*list, nil, []string{principal})
		if ge.NamesNobody() {
			return false, vdibroker.FieldError("principal", "%s is the last %s entitled to %s: without it the entitlement would name nobody, which entitles everyone (R-E9); entitle another first, or delete the entitlement", principal, kind, name)
		}
		return true, nil
	})
}

// SetAllUsers entitles all users to entitlement name, or stops (R-E9);
// stopping is refused when the entitlement names no user or group, as it
// would then entitle everyone.
func SetAllUsers(doc *vdibroker.Federation, name string, on bool) (changed bool, err error) {
	return editEntitlement(doc, name, func(ge *vdibroker.GlobalEntitlement) (bool, error) {
		if ge.AllUsers == on {
			return false, nil
		}
		ge.AllUsers = on
		if ge.NamesNobody() {
			return false, vdibroker.Errorf(vdibroker.EInvalid, "%s names no user or group: without all users it would name nobody, which entitles everyone (R-E9); entitle a user or a group first", name)
		}
		return true, nil
	})
}

// ChangeSettings sets entitlement name's settings (R-G3, R-G4, R-E9);
// before is the entitlement as it was. Its kind does not change: a
// Desktop entitlement and an Application one open different things from
// their member pools, so s.Kind, when set, must be its kind. An
// Application entitlement's application is required; a Desktop one has
// none.
func ChangeSettings(doc *vdibroker.Federation, name string, s Settings) (before vdibroker.GlobalEntitlement, changed bool, err error) {
	if err := CheckSettings(s); err != nil {
		return before, false, err
	}
	changed, err = editEntitlement(doc, name, func(ge *vdibroker.GlobalEntitlement) (bool, error) {
		before = *ge
		kind := vdibroker.KindDesktop
		if ge.IsApplication() {
			kind = vdibroker.KindApplication
		}
		if s.Kind != "" && s.Kind != kind {
			return false, vdibroker.FieldError("kind", "%s is a %s entitlement, and its kind does not change: a %s entitlement opens other things from its member pools. "+
				"Create a new %s entitlement and delete this one (R-E9)", name, kind, s.Kind, s.Kind)
		}
		switch {
		case ge.IsApplication() && s.Application == "":
			return false, vdibroker.FieldError("application", "must be %d..%d characters: an Application entitlement opens one application (R-E9)", vdibroker.MinAppNameLen, vdibroker.MaxAppNameLen)
		case ge.IsApplication():
			ge.Application = s.Application
		case s.Application != "":
			return false, vdibroker.FieldError("application", "is only for an Application entitlement; %s opens desktops, and its kind does not change: create an Application entitlement instead (R-E9)", name)
		}
		ge.Scope, ge.SessionDistribution, ge.UseHomeSite = s.Scope, s.SessionDistribution, s.UseHomeSite
		return ge.Application != before.Application || ge.Scope != before.Scope ||
			ge.SessionDistribution != before.SessionDistribution || ge.UseHomeSite != before.UseHomeSite, nil
	})
	return before, changed, err
}

// AddHomeSite gives a user or a group (kind) home site site (R-G3). A
// user or a group has one home site, names compared in any case (R-E5,
// as Validate compares them): a second is refused, not replaced unseen
// (ChangeHomeSite changes it). site must be one of doc's.
func AddHomeSite(doc *vdibroker.Federation, kind, principal, site string) error {
	if err := CheckHomeSite(kind, principal, site); err != nil {
		return err
	}
	if i := homeSiteOf(doc, kind, principal); i >= 0 {
		h := doc.HomeSites[i]
		return vdibroker.FieldError("principal", "the %s %s has home site %s already (a %s has one home site, in any case): change it where it is listed",
			kind, h.User+h.Group, h.Site, kind)
	}
	if !slices.ContainsFunc(doc.Sites, func(s vdibroker.Site) bool { return s.Name == site }) {
		return vdibroker.FieldError("site", "is not a site of the federation document; its sites are %s", names(doc.Sites))
	}
	h := vdibroker.HomeSite{Site: site}
	if kind == PrincipalUser {
		h.User = principal
	} else {
		h.Group = principal
	}
	doc.HomeSites = append(slices.Clip(doc.HomeSites), h)
	return nil
}

// RemoveHomeSite removes the home site of a user or a group (kind),
// named in any case; removed is the one it was (changed false: none).
func RemoveHomeSite(doc *vdibroker.Federation, kind, principal string) (removed vdibroker.HomeSite, changed bool, err error) {
	if err := checkPrincipal(kind, principal, homeSiteWhy); err != nil {
		return removed, false, err
	}
	i := homeSiteOf(doc, kind, principal)
	if i < 0 {
		return removed, false, nil
	}
	removed = doc.HomeSites[i]
	doc.HomeSites = slices.Delete(slices.Clone(doc.HomeSites), i, i+1)
	return removed, true, nil
}

// ChangeHomeSite gives the user or group (kind) that has a home site,
// named in any case, site instead, in its place in doc's list: a user in
// several groups with home sites starts at the first listed (R-G3), so
// a change that removed it and added it again, last, could change
// where such a user starts. before is its home site as it was; changed
// false when it is site already. NotFound when it has none; site must be
// one of doc's.
func ChangeHomeSite(doc *vdibroker.Federation, kind, principal, site string) (before vdibroker.HomeSite, changed bool, err error) {
	if err := CheckHomeSite(kind, principal, site); err != nil {
		return before, false, err
	}
	i, err := homeSiteIndex(doc, kind, principal)
	if err != nil {
		return before, false, err
	}
	if !slices.ContainsFunc(doc.Sites, func(s vdibroker.Site) bool { return s.Name == site }) {
		return before, false, vdibroker.FieldError("site", "is not a site of the federation document; its sites are %s", names(doc.Sites))
	}
	before = doc.HomeSites[i]
	if before.Site == site {
		return before, false, nil
	}
	doc.HomeSites = slices.Clone(doc.HomeSites)
	doc.HomeSites[i].Site = site
	return before, true, nil
}

// MoveHomeSite moves the home site of the user or group (kind), named in
// any case, one place up (towards the first, which wins for a user in
// several groups, R-G3) or down in doc's list. at is its place after,
// from 1; changed false when it is first (up) or last (down) already.
// NotFound when it has none.
func MoveHomeSite(doc *vdibroker.Federation, kind, principal string, up bool) (at int, changed bool, err error) {
	if err := CheckHomeSiteOwner(kind, principal); err != nil {
		return 0, false, err
	}
	i, err := homeSiteIndex(doc, kind, principal)
	if err != nil {
		return 0, false, err
	}
	j := i + 1
	if up {
		j = i - 1
	}
	if j < 0 || j >= len(doc.HomeSites) {
		return i + 1, false, nil
	}
	doc.HomeSites = slices.Clone(doc.HomeSites)
	doc.HomeSites[i], doc.HomeSites[j] = doc.HomeSites[j], doc.HomeSites[i]
	return j + 1, true, nil
}

// homeSiteIndex is homeSiteOf, NotFound when kind's principal has no
// home site in doc.
func homeSiteIndex(doc *vdibroker.Federation, kind, principal string) (int, error) {
	if i := homeSiteOf(doc, kind, principal); i >= 0 {
		return i, nil
	}
	return -1, vdibroker.Errorf(vdibroker.ENotFound, "the %s %s has no home site: add one", kind, principal)
}

// homeSiteOf is the index of the home site of kind's principal in doc,
// or -1.
func homeSiteOf(doc *vdibroker.Federation, kind, principal string) int {
	return slices.IndexFunc(doc.HomeSites, func(h vdibroker.HomeSite) bool {
		if kind == PrincipalUser {
			return h.User != "" && vdibroker.SameUser(h.User, principal)
		}
		return h.Group != "" && vdibroker.SameUser(h.Group, principal)
	})
}

// editEntitlement runs edit on a copy of doc's entitlement name and, when
// it changed it and the copy passes Validate's checks of an entitlement,
// puts the copy in its place in a copy of doc's entitlements.
func editEntitlement(doc *vdibroker.Federation, name string, edit func(*vdibroker.GlobalEntitlement) (bool, error)) (bool, error) {
	ge, err := entitlementOf(doc, name)
	if err != nil {
		return false, err
	}
	c := *ge
	c.Members, c.Users, c.Groups = slices.Clone(ge.Members), slices.Clone(ge.Users), slices.Clone(ge.Groups)
	changed, err := edit(&c)
	if err != nil || !changed {
		return false, err
	}
	if err := errors.Join(entitlementErrors("", &c)...); err != nil {
		return false, err
	}
	ges := slices.Clone(doc.GlobalEntitlements)
	ges[slices.IndexFunc(ges, func(g vdibroker.GlobalEntitlement) bool { return g.Name == name })] = c
	doc.GlobalEntitlements = ges
	return true, nil
}

// entitlementOf is doc's entitlement name: InvalidArgument on field
// entitlement when name is not a valid one, NotFound when doc has none.
func entitlementOf(doc *vdibroker.Federation, name string) (*vdibroker.GlobalEntitlement, error) {
	if err := ValidateEntitlementName("entitlement", name); err != nil {
		return nil, err
	}
	if ge := doc.Entitlement(name); ge != nil {
		return ge, nil
	}
	return nil, vdibroker.Errorf(vdibroker.ENotFound, "the federation document has no global entitlement %q", name)
}

// principals is ge's list of kind: its users or its groups.
func principals(ge *vdibroker.GlobalEntitlement, kind string) *[]string {
	if kind == PrincipalGroup {
		return &ge.Groups
	}
	return &ge.Users
}

// entitlementErrors are Validate's refusals of ge's own fields (not its
// members, which name the document's pods), each under field's path:
// name, scope, sessionDistribution, kind, application, users, groups.
func entitlementErrors(field string, ge *vdibroker.GlobalEntitlement) []error {
	errs := []error{
		vdibroker.ValidateName(sub(field, "name"), ge.Name, minNameLen, maxNameLen),
		oneOf(sub(field, "scope"), ge.Scope, Scopes),
		oneOf(sub(field, "sessionDistribution"), ge.SessionDistribution, Distributions),
		validateEntitled(field, ge),
	}
	return slices.DeleteFunc(errs, func(err error) bool { return err == nil })
}

// oneOf refuses v under field unless it is one of allowed.
func oneOf(field, v string, allowed []string) error {
	if !slices.Contains(allowed, v) {
		return vdibroker.FieldError(field, "must be one of %s, got %q", strings.Join(allowed, ", "), v)
	}
	return nil
}

// sub is the path of part name of field: field.name, or name alone for
// an edit's argument (field empty).
func sub(field, name string) string {
	if field == "" {
		return name
	}
	return fmt.Sprintf("%s.%s", field, name)
}
