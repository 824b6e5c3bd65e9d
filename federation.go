package vdibroker

import "context"

// Global entitlement scopes (SPEC §7, R-G3).
const (
	ScopeAllSites   = "AllSites"
	ScopeWithinSite = "WithinSite"
	ScopeWithinPod  = "WithinPod"
)

// Session distribution policies of a global entitlement (SPEC §7, R-G2,
// R-G4). DistributionNone is the default, as in Horizon.
const (
	DistributionNone         = "None"
	DistributionLoadIndex    = "LoadIndex"
	DistributionSessionCount = "SessionCount"
)

// Federation is the federation document (SPEC §7): the sites, the pods, the
// global entitlements and the home sites of users and groups. It is
// declarative and the same on every pod; each pod stores its own copy, so no
// pod depends on another to know the configuration. Generation orders the
// versions: a pod refuses a document older than the one it holds.
type Federation struct {
	Generation         int64               `json:"generation"`
	Sites              []Site              `json:"sites"`
	Pods               []Pod               `json:"pods"`
	GlobalEntitlements []GlobalEntitlement `json:"globalEntitlements"`
	HomeSites          []HomeSite          `json:"homeSites,omitempty"`
}

// Site groups pods (SPEC §7).
type Site struct {
	Name string `json:"name"`
}

// Pod is one vdibroker deployment (one database, any number of replicas):
// its name (serve --pod-name), its site and the URL peers reach it at
// (serve --external-url).
type Pod struct {
	Name string `json:"name"`
	Site string `json:"site"`
	URL  string `json:"url"`
}

// GlobalEntitlement names member host pools in several pods and how users
// are placed among them (R-G1..R-G4).
type GlobalEntitlement struct {
	Name                string   `json:"name"`
	Scope               string   `json:"scope"`
	SessionDistribution string   `json:"sessionDistribution"`
	UseHomeSite         bool     `json:"useHomeSite"`
	Members             []Member `json:"members"`
}

// Member is one host pool of one pod in a global entitlement.
type Member struct {
	Pod      string `json:"pod"`
	HostPool string `json:"hostPool"`
}

// HomeSite is the home site of a user or of a group (exactly one of User
// and Group is set). A user's own home site wins over a group's (R-G3).
type HomeSite struct {
	User  string `json:"user,omitempty"`
	Group string `json:"group,omitempty"`
	Site  string `json:"site"`
}

// Pod returns the pod named name, or nil.
func (f *Federation) Pod(name string) *Pod {
	for i := range f.Pods {
		if f.Pods[i].Name == name {
			return &f.Pods[i]
		}
	}
	return nil
}

// Entitlement returns the global entitlement named name, or nil.
func (f *Federation) Entitlement(name string) *GlobalEntitlement {
	for i := range f.GlobalEntitlements {
		if f.GlobalEntitlements[i].Name == name {
			return &f.GlobalEntitlements[i]
		}
	}
	return nil
}

// FederationStore keeps this pod's copy of the federation document. It is
// embedded in Store, so each engine stores it in the pod's own database.
type FederationStore interface {
	// GetFederation returns the stored document: NotFound when none was
	// ever stored.
	GetFederation(ctx context.Context) (*Federation, error)
	// PutFederation stores f in one transaction with its generation check:
	// a generation lower than the stored one is refused with Conflict, and
	// so is the stored generation with other content (a changed document
	// needs a new generation); the stored generation with the same content
	// changes nothing. created reports that no document was stored before.
	PutFederation(ctx context.Context, f *Federation) (created bool, err error)
	// OpenSessionsOfUser returns user's open sessions (not LoggedOff) in
	// each of pools, pool by pool. It reads only the user's sessions, so a
	// global connect's lookup of the user in every pod (R-G1) stays cheap
	// however many sessions the pools hold.
	OpenSessionsOfUser(ctx context.Context, user string, pools []string) ([]*UserSession, error)
}
