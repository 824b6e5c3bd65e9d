package federation

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/vdibroker/vdibroker"
)

// Names of sites, pods and global entitlements: the alphabet of pool names
// (SPEC §2), 1..64 characters.
const (
	minNameLen = 1
	maxNameLen = 64
)

// MaxSites, MaxPods and MaxMembers bound a document (R-G1, R-G5). An
// unscoped Contributor writes it, and pods act on it at every call: a
// user's directory pod is hashed with every pod's name (R-G1), 10,000
// users of a peer's registration against a body's 26,000 pods took 6 s
// of CPU; a global connect reads each member pool of an entitlement here
// and asks each pod of its scope. Far beyond a real federation.
const (
	MaxSites   = 200
	MaxPods    = 200
	MaxMembers = 1000 // of one global entitlement
	// MaxDocumentMembers bounds the members of all global entitlements:
	// a pod reads each of its member pools for every peer's loads call.
	MaxDocumentMembers = 10000
)

// MinPodNameLen and MaxPodNameLen bound a pod's name, for the CLI's --pod.
const (
	MinPodNameLen = minNameLen
	MaxPodNameLen = maxNameLen
)

// ValidatePodName checks a pod's name where a caller gives one (the pod
// of /users/{user}/globalsessions/{pod}/{id}) as a document's pods[i].name
// is checked: InvalidArgument on field with the allowed range, the name
// itself not echoed.
func ValidatePodName(field, name string) error {
	return vdibroker.ValidateName(field, name, minNameLen, maxNameLen)
}

// ValidateEntitlementName checks a global entitlement's name where a
// caller gives one (the console's forms) as a document's
// globalEntitlements[i].name is checked: InvalidArgument on field with the
// allowed range, the name itself not echoed.
func ValidateEntitlementName(field, name string) error {
	return vdibroker.ValidateName(field, name, minNameLen, maxNameLen)
}

// ValidateSiteName checks a site's name where a caller gives one (the
// console's home site form) as a document's sites[i].name is checked:
// InvalidArgument on field with the allowed range, the name itself not
// echoed.
func ValidateSiteName(field, name string) error {
	return vdibroker.ValidateName(field, name, minNameLen, maxNameLen)
}

// ValidateSessionRef checks a session a caller names (a global connect's
// session, GlobalConnectRequest.Session) under field: its pod as a pod's
// name (may be empty: the pod asked), its host pool as a pool's name, its
// id 1..MaxSessionIDLen characters of text; InvalidArgument naming the
// part (field.pod, field.hostPool, field.id) with the allowed range.
func ValidateSessionRef(field string, r *vdibroker.SessionRef) error {
	if r.Pod != "" {
		if err := ValidatePodName(field+".pod", r.Pod); err != nil {
			return err
		}
	}
	if err := vdibroker.ValidateName(field+".hostPool", r.HostPool, vdibroker.MinPoolNameLen, vdibroker.MaxPoolNameLen); err != nil {
		return err
	}
	if r.ID == "" {
		return vdibroker.FieldError(field+".id", "is required (1..%d characters)", vdibroker.MaxSessionIDLen)
	}
	return vdibroker.ValidateText(field+".id", r.ID, vdibroker.MaxSessionIDLen)
}

// Scopes and Distributions are the allowed values, defaults first.
var (
	Scopes        = []string{vdibroker.ScopeAllSites, vdibroker.ScopeWithinSite, vdibroker.ScopeWithinPod}
	Distributions = []string{vdibroker.DistributionNone, vdibroker.DistributionLoadIndex, vdibroker.DistributionSessionCount}
)

// Self is who validates a document: this pod's --pod-name, and its --site
// and --external-url when set ("" skips those checks), and the policy its
// peers' URLs must pass (nil: any http(s) URL).
type Self struct {
	Pod, Site, URL string
	Peers          *PeerPolicy
}

// Normalize fills the defaults of a document: scope AllSites and
// sessionDistribution None (as in Horizon), and empty lists as [] so the
// stored and answered document reads the same.
func Normalize(f *vdibroker.Federation) {
	for i := range f.GlobalEntitlements {
		ge := &f.GlobalEntitlements[i]
		if ge.Scope == "" {
			ge.Scope = vdibroker.ScopeAllSites
		}
		if ge.SessionDistribution == "" {
			ge.SessionDistribution = vdibroker.DistributionNone
		}
		if ge.Members == nil {
			ge.Members = []vdibroker.Member{}
		}
	}
	if f.Sites == nil {
		f.Sites = []vdibroker.Site{}
	}
	if f.Pods == nil {
		f.Pods = []vdibroker.Pod{}
	}
	if f.GlobalEntitlements == nil {
		f.GlobalEntitlements = []vdibroker.GlobalEntitlement{}
	}
}

// Validate checks a (normalized) document as self would store it. The
// error is InvalidArgument naming the field by its JSON path
// (pods[1].site, globalEntitlements[0].members[2].pod) and the allowed
// values.
func Validate(f *vdibroker.Federation, self Self) error {
	if f.Generation < 1 || f.Generation > vdibroker.MaxGeneration {
		return vdibroker.FieldError("generation", "must be 1..%d, got %d", vdibroker.MaxGeneration, f.Generation)
	}
	if len(f.Sites) == 0 || len(f.Sites) > MaxSites {
		return vdibroker.FieldError("sites", "must list 1..%d sites, got %d", MaxSites, len(f.Sites))
	}
	if len(f.Pods) > MaxPods {
		return vdibroker.FieldError("pods", "must list 1..%d pods, got %d", MaxPods, len(f.Pods))
	}
	sites := map[string]bool{}
	for i, s := range f.Sites {
		field := fmt.Sprintf("sites[%d].name", i)
		if err := vdibroker.ValidateName(field, s.Name, minNameLen, maxNameLen); err != nil {
			return err
		}
		if sites[s.Name] {
			return vdibroker.FieldError(field, "duplicate site name %q", s.Name)
		}
		sites[s.Name] = true
	}
	pods := map[string]bool{}
	for i, p := range f.Pods {
		field := fmt.Sprintf("pods[%d]", i)
		if err := vdibroker.ValidateName(field+".name", p.Name, minNameLen, maxNameLen); err != nil {
			return err
		}
		if pods[p.Name] {
			return vdibroker.FieldError(field+".name", "duplicate pod name %q", p.Name)
		}
		pods[p.Name] = true
		if p.Site == "" {
			return vdibroker.FieldError(field+".site", "is required: every pod is in a site (one of %s)", names(f.Sites))
		}
		if !sites[p.Site] {
			return vdibroker.FieldError(field+".site", "unknown site %q; sites are %s", p.Site, names(f.Sites))
		}
		if err := validURL(field+".url", p.URL); err != nil {
			return err
		}
	}
	me := f.Pod(self.Pod)
	if me == nil {
		return vdibroker.FieldError("pods", "does not list this pod %q (serve --pod-name): a pod stores only a document it is part of", self.Pod)
	}
	i := slices.IndexFunc(f.Pods, func(p vdibroker.Pod) bool { return p.Name == self.Pod })
	if self.Site != "" && me.Site != self.Site {
		return vdibroker.FieldError(fmt.Sprintf("pods[%d].site", i), "this pod runs with --site %q, the document says %q", self.Site, me.Site)
	}
	if self.URL != "" && strings.TrimRight(me.URL, "/") != strings.TrimRight(self.URL, "/") {
		return vdibroker.FieldError(fmt.Sprintf("pods[%d].url", i), "this pod runs with --external-url %q, the document says %q", self.URL, me.URL)
	}
	if self.Peers != nil {
		if err := self.Peers.checkPeerURLs(f, self.Pod); err != nil {
			return err
		}
	}
	total := 0
	for _, ge := range f.GlobalEntitlements {
		total += len(ge.Members)
	}
	if total > MaxDocumentMembers {
		return vdibroker.FieldError("globalEntitlements", "must list 0..%d member host pools in all, got %d", MaxDocumentMembers, total)
	}
	ges := map[string]bool{}
	for i, ge := range f.GlobalEntitlements {
		field := fmt.Sprintf("globalEntitlements[%d]", i)
		// Its own fields, as an edit of one checks them (edit.go).
		if errs := entitlementErrors(field, &ge); len(errs) > 0 {
			return errs[0]
		}
		if ges[ge.Name] {
			return vdibroker.FieldError(field+".name", "duplicate global entitlement name %q", ge.Name)
		}
		ges[ge.Name] = true
		if len(ge.Members) == 0 || len(ge.Members) > MaxMembers {
			return vdibroker.FieldError(field+".members", "must list 1..%d member host pools, got %d", MaxMembers, len(ge.Members))
		}
		// Repeats found by a set, not by comparing each member with
		// every one before it (a body's 30,000 members took 6 s).
		members := make(map[vdibroker.Member]bool, len(ge.Members))
		for j, m := range ge.Members {
			mf := fmt.Sprintf("%s.members[%d]", field, j)
			if !pods[m.Pod] {
				return vdibroker.FieldError(mf+".pod", "unknown pod %q; pods are %s", m.Pod, podNames(f.Pods))
			}
			if err := vdibroker.ValidateName(mf+".hostPool", m.HostPool, vdibroker.MinPoolNameLen, vdibroker.MaxPoolNameLen); err != nil {
				return err
			}
			if members[m] {
				return vdibroker.FieldError(mf, "duplicate member %s/%s", m.Pod, m.HostPool)
			}
			members[m] = true
		}
	}
	seen := map[string]bool{}
	for i, h := range f.HomeSites {
		field := fmt.Sprintf("homeSites[%d]", i)
		var key string
		switch {
		case (h.User == "") == (h.Group == ""):
			return vdibroker.FieldError(field, "must name exactly one of user and group")
		case h.User != "":
			if err := vdibroker.ValidateUser(field+".user", h.User); err != nil {
				return err
			}
			key = "user\x00" + vdibroker.FoldUser(h.User) // Alice is alice (R-E5)
		default:
			if err := vdibroker.ValidateUser(field+".group", h.Group); err != nil {
				return err
			}
			key = "group\x00" + vdibroker.FoldUser(h.Group)
		}
		if seen[key] {
			return vdibroker.FieldError(field, "a second home site for the same %s", strings.Split(key, "\x00")[0])
		}
		seen[key] = true
		if !sites[h.Site] {
			return vdibroker.FieldError(field+".site", "unknown site %q; sites are %s", h.Site, names(f.Sites))
		}
	}
	return nil
}

// validateEntitled checks what a global entitlement offers and to whom
// (R-E9): its kind, the application of an Application entitlement, its
// users and groups (none twice, in any case).
func validateEntitled(field string, ge *vdibroker.GlobalEntitlement) error {
	if ge.Kind != "" {
		if err := validKind(sub(field, "kind"), ge.Kind); err != nil {
			return err
		}
	}
	app := sub(field, "application")
	switch {
	case !ge.IsApplication() && ge.Application != "":
		return vdibroker.FieldError(app, "is only for kind Application (a global application entitlement); this one is a Desktop entitlement")
	case ge.IsApplication() && ge.Application == "":
		return vdibroker.FieldError(app, "must be %d..%d characters for kind Application: the application each member pool publishes in a RemoteApp group", vdibroker.MinAppNameLen, vdibroker.MaxAppNameLen)
	case ge.IsApplication():
		if err := vdibroker.ValidateName(app, ge.Application, vdibroker.MinAppNameLen, vdibroker.MaxAppNameLen); err != nil {
			return err
		}
	}
	return vdibroker.ValidateAssignments(field, &vdibroker.Assignments{Users: ge.Users, Groups: ge.Groups})
}

// validKind refuses a global entitlement's kind under field unless it
// is Desktop or Application (empty, the document's default Desktop, is
// the caller's to allow).
func validKind(field, kind string) error {
	if kind != vdibroker.KindDesktop && kind != vdibroker.KindApplication {
		return vdibroker.FieldError(field, "must be %s or %s, got %q", vdibroker.KindDesktop, vdibroker.KindApplication, kind)
	}
	return nil
}

func validURL(field, s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return vdibroker.FieldError(field, "must be an http:// or https:// URL peers reach the pod at, got %q", s)
	}
	return nil
}

func names(sites []vdibroker.Site) string {
	out := make([]string, len(sites))
	for i, s := range sites {
		out[i] = s.Name
	}
	return strings.Join(out, ", ")
}

func podNames(pods []vdibroker.Pod) string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return strings.Join(out, ", ")
}
