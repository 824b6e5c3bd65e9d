package vdibroker

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

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

// MaxGeneration and MaxGenerationStep bound a document's generation
// (R-G5, R-SEC). A pod takes only a higher generation than it holds, and
// a peer or a Contributor writes it: a generation of 2^63-1 would leave
// no higher one, and the pod would refuse every later document for good.
// So a generation is at most MaxGeneration (exact in every JSON reader),
// and at most MaxGenerationStep above the one the pod holds, far more
// than the changes a pod left behind misses, and 2^33 writes from the
// bound.
const (
	MaxGeneration     = 1<<53 - 1
	MaxGenerationStep = 1 << 20
)

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
// are placed among them (R-G1..R-G4), what it offers and to whom (R-E9).
type GlobalEntitlement struct {
	Name                string   `json:"name"`
	Scope               string   `json:"scope"`
	SessionDistribution string   `json:"sessionDistribution"`
	UseHomeSite         bool     `json:"useHomeSite"`
	Members             []Member `json:"members"`

	// Kind is KindDesktop (empty means Desktop) or KindApplication: a
	// global application entitlement opens Application, which each
	// member pool publishes in one of its RemoteApp groups (R-E9). The
	// new fields are left out when empty, so a document stored before
	// them reads, and compares (PutFederation's generation check), the
	// same.
	Kind        string `json:"kind,omitempty"`
	Application string `json:"application,omitempty"`
	// Users, Groups and AllUsers say who is entitled (R-E9). An
	// entitlement naming none of them entitles everyone, as before they
	// existed, with a warning (EveryoneWarning).
	Users    []string `json:"users,omitempty"`
	Groups   []string `json:"groups,omitempty"`
	AllUsers bool     `json:"allUsers,omitempty"`
}

// NamesNobody reports whether the entitlement names no users, no groups
// and not allUsers: it then entitles everyone (R-E9).
func (ge *GlobalEntitlement) NamesNobody() bool {
	return len(ge.Users) == 0 && len(ge.Groups) == 0 && !ge.AllUsers
}

// Grants is Assignments.Grants for a global entitlement (R-E9): the
// grant that entitles who, or nil; an entitlement naming nobody grants
// everyone.
func (ge *GlobalEntitlement) Grants(who UserIdentity) *Grant {
	if ge.NamesNobody() {
		return &Grant{GlobalEntitlement: ge.Name, Via: ViaEveryone}
	}
	a := Assignments{Users: ge.Users, Groups: ge.Groups, AllUsers: ge.AllUsers}
	g := a.Grants(who)
	if g != nil {
		g.GlobalEntitlement = ge.Name
	}
	return g
}

// EveryoneWarning is the warning of a global entitlement naming nobody
// (R-E9).
func EveryoneWarning(name string) string {
	return "global entitlement " + name + " names no users, groups or allUsers: everyone is entitled to it, as before entitlements had members; name its users or groups, or set allUsers: true"
}

// EveryoneWarnings are the warnings of f's global entitlements that name
// nobody, in document order.
func (f *Federation) EveryoneWarnings() []string {
	var out []string
	for i := range f.GlobalEntitlements {
		if ge := &f.GlobalEntitlements[i]; ge.NamesNobody() {
			out = append(out, EveryoneWarning(ge.Name))
		}
	}
	return out
}

// IsApplication reports whether the entitlement opens an application.
func (ge *GlobalEntitlement) IsApplication() bool { return ge.Kind == KindApplication }

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
	// OpenSessionsOfUsers returns the users' open sessions (not LoggedOff)
	// in each of pools, user by user and pool by pool. It reads only
	// those users' sessions, so a global connect's lookup of the user in
	// every pod (R-G1) stays cheap however many sessions the pools hold;
	// the look-ups a peer sends together are one call.
	OpenSessionsOfUsers(ctx context.Context, users, pools []string) ([]*UserSession, error)
	// UseNonces records the nonces of verified pod-to-pod calls until
	// expires, now being the time of the calls, in one transaction (one
	// commit for the calls a pod verifies at once). refused[i] is nil
	// when uses[i]'s nonce is recorded; Unauthenticated (ErrReplayed)
	// when it was recorded before, on any replica, or earlier in uses (a
	// replay, R-G5); TooManyRequests when its pod's budget would pass
	// MaxNoncesPerMinute in now's minute, for every use of that pod in
	// the call, which records none of them and counts them not. Other
	// pods' uses are not refused for it. Expired nonces are forgotten: the
	// table holds a bounded number for each budget. err is the store's
	// failure, which records nothing.
	UseNonces(ctx context.Context, uses []NonceUse, expires, now time.Time) (refused []error, err error)

	// The session directory (R-G1): this pod keeps, for the users it is
	// the directory pod of, which pods hold their open sessions.

	// RegisterDirectory records, at now, that users (folded names) have
	// open sessions on pod, as pod's document of generation gen sees its
	// member pools. With full, users are part of pod's whole list; last
	// ends that list: pod's entries it did not refresh since now less
	// DirectoryFullMargin are dropped, and pod is recorded complete at
	// gen. More than MaxDirectoryEntriesPerPod entries of one pod is
	// TooManyRequests, and nothing of the call is written.
	RegisterDirectory(ctx context.Context, pod string, gen int64, users []string, full, last bool, now time.Time) error
	// LookupDirectory returns the pods holding user's (folded) entries,
	// and the pods whose whole list is recorded since since, with the
	// generation it was made at.
	LookupDirectory(ctx context.Context, user string, since time.Time) (pods []string, complete map[string]int64, err error)
	// OpenSessionUsers returns the users (folded names) with open
	// sessions in pools, each once, and the largest session id read;
	// after, when set, reads only the sessions with a larger id (ids
	// sort by their creation, NewID).
	OpenSessionUsers(ctx context.Context, pools []string, after string) (users []string, last string, err error)
	// LateSessionWrites returns how many sessions any replica wrote
	// late: placed during a store outage (PlacementCommit.
	// OutagePlacement), or committed LateCommit or more after their id
	// was made (a commit that waited on a slow store). Their ids may be
	// older than OpenSessionUsers' after of a pass, so a pass that sees
	// the count change reads them all.
	LateSessionWrites(ctx context.Context) (int64, error)
	// DropDirectoryPods drops the session directory entries of every pod
	// not in pods (the pods of this pod's document: those removed from it
	// register no more), and returns the pods dropped.
	DropDirectoryPods(ctx context.Context, pods []string) (dropped []string, err error)
}

// MaxDirectoryUsers bounds the users of one PodDirectoryRequest.
const MaxDirectoryUsers = 10000

// MaxDirectoryBytes bounds the users of one PodDirectoryRequest a pod
// sends, JSON-encoded: a part of a whole list stays well inside the
// 1 MiB body of a pod-to-pod call, however long its users' names.
const MaxDirectoryBytes = 512 << 10

// MaxDirectoryEntriesPerPod bounds the directory entries one pod keeps
// for another: a pod at Horizon's limit carries 250,000 sessions.
const MaxDirectoryEntriesPerPod = 300000

// DirectoryFullMargin is how much older than a whole list's last part an
// entry must be for that list to drop it: a session registered while the
// list was being read and sent stays.
const DirectoryFullMargin = time.Minute

// MaxNoncesPerMinute bounds the pod-to-pod calls a pod takes a minute
// from one calling pod (1,000 a second), and so the nonces it keeps of
// each: a caller past it (one holding the secret and signing as a pod,
// buggy or hostile) is refused, the other pods' calls are not. The
// callers are the pods of the document (others are refused before their
// nonce is recorded), or, while a pod holds no document and cannot tell
// a pod from any name, every caller in one budget (NoDocumentBudget).
const MaxNoncesPerMinute = 60000

// NoDocumentBudget is the budget (NonceUse.Pod, CallNonce.Pod) of the
// calls a pod takes while it holds no federation document: any name is
// taken then, so the calls share one budget, whatever pod each names.
const NoDocumentBudget = ""

// NonceBudgetName names budget pod in a message: "pod fra1", or the
// callers of a pod that holds no document (NoDocumentBudget).
func NonceBudgetName(pod string) string {
	if pod == NoDocumentBudget {
		return "the callers of this pod while it holds no federation document"
	}
	return fmt.Sprintf("pod %s", pod)
}

// NonceUse is a verified pod-to-pod call's nonce (R-G5) and the budget it
// spends (MaxNoncesPerMinute): its calling pod's, or NoDocumentBudget.
type NonceUse struct {
	Pod   string
	Nonce string
}

// CallNonce is a verified pod-to-pod connect's nonce (R-G5) that is not
// recorded yet. The placement that connect commits records it in the
// same transaction (WithCallNonce), so a connect that makes a session
// waits for one synced commit, not two; a connect that commits no
// placement (a reconnect, a dry run, a refusal) has it recorded on its
// own (FederationService.UseNonce) before it is answered. Either way a
// replay is refused, and a replayed connect never makes a session.
type CallNonce struct {
	// Pod is the budget the nonce spends (NonceUse.Pod).
	Pod     string
	Nonce   string
	Expires time.Time // when it may be forgotten
	At      time.Time // when the call was verified (its minute, MaxNoncesPerMinute)
	// RecordBy is the latest a commit may record it (zero: any time): a
	// later one may come after a commit that forgot the expired nonces
	// at its own time forgot the nonce of a call this one replays, so it
	// is refused (ErrRecordedLate), with nothing done.
	RecordBy time.Time

	recorded atomic.Bool
}

// Recorded reports whether a committed placement recorded n.
func (n *CallNonce) Recorded() bool { return n.recorded.Load() }

// MarkRecorded says that a committed placement recorded n (the store
// calls it).
func (n *CallNonce) MarkRecorded() { n.recorded.Store(true) }

type callNonceKey struct{}

// WithCallNonce returns ctx carrying n: the store's next placement commit
// in ctx (PlacementCommit) records n's nonce in its transaction, unless n
// is recorded already, and a nonce recorded before refuses the placement
// (Unauthenticated) with nothing written.
func WithCallNonce(ctx context.Context, n *CallNonce) context.Context {
	return context.WithValue(ctx, callNonceKey{}, n)
}

// CallNonceFrom returns ctx's nonce of WithCallNonce if it is not
// recorded yet, else nil.
func CallNonceFrom(ctx context.Context) *CallNonce {
	n, _ := ctx.Value(callNonceKey{}).(*CallNonce)
	if n == nil || n.Recorded() {
		return nil
	}
	return n
}

// ErrReplayed is a pod-to-pod call whose nonce was recorded before
// (R-G5).
func ErrReplayed() error {
	return Errorf(EUnauthenticated, "pod-to-pod call replayed (nonce seen before)")
}

// ErrRecordedLate is a pod-to-pod call whose held nonce (CallNonce) was
// to be committed at now, past its RecordBy: nothing was done (R-G5).
func ErrRecordedLate(n *CallNonce, now time.Time) error {
	return Errorf(EUnauthenticated, "pod-to-pod call verified at %s: nonce committed at %s, too late to tell it from a replay (a slow commit here): nothing done, send again",
		n.At.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
}

// The Cloud Pod Architecture service's contract (SPEC §7): the federation
// document, global entitlements and their connect, and the pod-to-pod
// calls (R-G5), with what they exchange. The pure rules (validation, the
// plan of a global connect, the loads) are package federation's.

// FederationService is the federation service of one pod.
type FederationService interface {
	// Document returns the stored federation document (NotFound when
	// none). Callers must not change it.
	Document(ctx context.Context) (*Federation, error)
	// PutDocument validates f as this pod sees it and stores it; created
	// reports that none was stored before. A generation older than the
	// stored one is refused (Conflict).
	PutDocument(ctx context.Context, f *Federation) (created bool, err error)
	// Status is the document, this pod, and what it knows of each peer,
	// having asked the peers whose health is not fresh when askPeers,
	// waiting for them at most wait (0: each until it answers or the
	// pod timeout passes). A peer asked that has not answered by then
	// has AskedAt set; its call goes on, within the pod timeout, for
	// the next read.
	Status(ctx context.Context, askPeers bool, wait time.Duration) (*FederationStatus, error)
	// Entitlements returns every global entitlement (or the one named,
	// when name is not empty: NotFound when there is none) with its
	// members' loads, waiting for the peers at most wait as Status
	// does: a member of a peer that has not answered by then has an
	// Error saying so (NoAnswer).
	Entitlements(ctx context.Context, name string, wait time.Duration) ([]EntitlementView, error)
	// Connect connects a user through global entitlement name: their
	// existing session in scope first (R-G1), else a new one in the
	// member pool R-G2..R-G4 choose, made by the chosen pod's own connect.
	Connect(ctx context.Context, name string, req GlobalConnectRequest) (*GlobalAnswer, error)
	// UserSessions is the user's open sessions in the member pools of
	// the other pods (R-U3 across the federation), asked as a global
	// connect asks for them (R-G1); the pods that did not answer are
	// named with why. This pod's own are the SessionService's.
	UserSessions(ctx context.Context, user string) (*GlobalSessions, error)
	// GlobalSessionCommand logs off (CommandLogoff) or disconnects
	// (CommandDisconnect) the user's session id in another pod's member
	// pool, which that pod does as its own API's logoff or disconnect
	// (PodSessionCommand, R-U3 across the federation): an end user her
	// own, in the member pools of the global entitlements that grant
	// her (R-E9); a principal scoped to host pools none; any other that
	// may log off sessions, any user's. A pod that does not answer is
	// PodUnavailable.
	GlobalSessionCommand(ctx context.Context, user, pod, id, command string) (*Command, error)
	// Pod is this pod's name.
	Pod() string

	// The pod side of the pod-to-pod API, for peers whose signature was
	// checked.

	// PodLoads is this pod's member pools' facts.
	PodLoads(ctx context.Context) (*PodLoads, error)
	// PodSessions is the user's open sessions in those of the named pools
	// that are members of this pod.
	PodSessions(ctx context.Context, req PodSessionsRequest) (*PodSessions, error)
	// PodConnect connects a user into one of this pod's member pools.
	PodConnect(ctx context.Context, req PodConnectRequest) (*ConnectAnswer, error)
	// PodSessionCommand logs off or disconnects one of the user's open
	// sessions in those of the named pools that are members of this pod,
	// for peer pod (the caller's verified name), as this pod's own API
	// does (the command queued, a logoff already queued the answer, a
	// host that cannot carry it out now warned of). A session that is
	// not the user's open one in those pools is NotFound, whatever it is.
	PodSessionCommand(ctx context.Context, pod string, req PodSessionCommandRequest) (*Command, error)
	// UseNonce records a verified pod-to-pod call's nonce until expires
	// where every replica of this pod sees it, spending pod's budget
	// (NonceUse): fresh is false for a replay (FederationStore.UseNonces,
	// whose commit it shares with the calls verified at the same time);
	// a budget spent is TooManyRequests.
	UseNonce(ctx context.Context, pod, nonce string, expires time.Time) (fresh bool, err error)
	// PodRegister records a peer's users with open sessions (pod is the
	// caller's verified name), for the users this pod is the directory
	// pod of (R-G1).
	PodRegister(ctx context.Context, pod string, req PodDirectoryRequest) error
	// PodLookup answers which pods hold a user's open sessions, as far
	// as this pod's directory knows.
	PodLookup(ctx context.Context, req PodLookupRequest) (*PodLookup, error)
}

// PodClient calls a peer pod over the signed pod-to-pod API (R-G5). The
// http package implements it; every call is bounded by the ctx it gets.
type PodClient interface {
	Loads(ctx context.Context, pod Pod) (*PodLoads, error)
	Sessions(ctx context.Context, pod Pod, req PodSessionsRequest) ([]*UserSession, error)
	Connect(ctx context.Context, pod Pod, req PodConnectRequest) (*ConnectAnswer, error)
	Register(ctx context.Context, pod Pod, req PodDirectoryRequest) error
	Lookup(ctx context.Context, pod Pod, req PodLookupRequest) (*PodLookup, error)
	SessionCommand(ctx context.Context, pod Pod, req PodSessionCommandRequest) (*Command, error)
}

// GlobalSession is one of a user's open sessions in another pod's member
// pool, as that pod answered it, with the global entitlements of the
// document whose member the pool is.
type GlobalSession struct {
	UserSession
	Pod string `json:"pod"`
	// Site is the site of Pod, as the document of the pod asked says.
	Site               string   `json:"site"`
	GlobalEntitlements []string `json:"globalEntitlements"`
	// Reconnect names those of GlobalEntitlements whose global connect
	// at the pod asked looks for the session: its pod is in the
	// entitlement's scope from there (R-G1). Through another, a connect
	// there makes a new session instead of reaching this one.
	Reconnect []string `json:"reconnect"`
}

// GlobalSessions is GET /users/{user}/globalsessions: the user's sessions
// in the other pods (at most MaxGlobalSessions, by pod and id), and the
// pods asked that did not answer, each with why.
type GlobalSessions struct {
	Value      []*GlobalSession  `json:"value"`
	Unanswered map[string]string `json:"unanswered,omitempty"`
	// Site is the site of the pod asked: a session of the same site is
	// in another pod nearby, one of another site elsewhere (R-U3).
	Site string `json:"site,omitempty"`
}

// MaxGlobalSessions bounds the sessions a GlobalSessions answer lists.
const MaxGlobalSessions = 100

// GlobalConnectRequest is the body of POST
// /globalentitlements/{name}/connect.
type GlobalConnectRequest struct {
	User   string   `json:"user"`
	Groups []string `json:"groups,omitempty"`
	DryRun bool     `json:"dryRun,omitempty"`
	// Session, when set, names the user's session the connect should
	// reconnect when she has several in the entitlement's scope (R-G1):
	// taken if it is her open one in a member pool of a pod in scope,
	// else the connect answers as without it. The user portal's
	// Reconnect of one row of "My sessions" sends it (R-U3).
	Session *SessionRef `json:"session,omitempty"`
}

// SessionRef names one user session in a federation: its pod (empty:
// the pod asked), host pool and id.
type SessionRef struct {
	Pod      string `json:"pod,omitempty"`
	HostPool string `json:"hostPool"`
	ID       string `json:"id"`
}

// GlobalAnswer is a pool connect's answer plus the pod and site that
// answered and the decision (R-C7 for global entitlements).
type GlobalAnswer struct {
	ConnectResponse
	Pod      string          `json:"pod"`
	Site     string          `json:"site"`
	Decision *GlobalDecision `json:"decision"`
	Created  bool            `json:"-"`
}

// FederationStatus is GET /federation: the document, this pod, and what
// it knows of each peer.
type FederationStatus struct {
	Pod      string       `json:"pod"`
	Site     string       `json:"site"`
	Document *Federation  `json:"document"`
	Peers    []PeerStatus `json:"peers"`
	// Warnings name the global entitlements that entitle everyone for
	// naming nobody (R-E9).
	Warnings []string `json:"warnings,omitempty"`
	// Directory is this pod's registration of its sessions at their
	// directory pods (R-G1).
	Directory DirectoryStatus `json:"directory"`
}

// DirectoryStatus says whether every pod holds this pod's whole list of
// users with open sessions at the document's generation (Behind false),
// and when it was last sent.
type DirectoryStatus struct {
	Behind   bool       `json:"behind"`
	LastFull *time.Time `json:"lastFull,omitempty"`
}

// PeerStatus is what this pod knows of a peer from its last calls.
type PeerStatus struct {
	Pod         string     `json:"pod"`
	Site        string     `json:"site"`
	URL         string     `json:"url"`
	LastContact *time.Time `json:"lastContact,omitempty"`
	// Health is "ok", or why the last call failed.
	Health string `json:"health"`
	// Generation is the federation generation the peer holds (0: none).
	Generation int64 `json:"generation"`
	// GenerationMismatch flags a peer on another generation than this pod.
	GenerationMismatch bool `json:"generationMismatch,omitempty"`
	// LatencyMs is the duration of the last call.
	LatencyMs float64 `json:"latencyMs"`
	// AskedAt is when a call to the peer began that had not been
	// answered when the status was made: a read that waits for the
	// peers at most a while (GET /federation?peerWait=) stopped waiting
	// for it. Health, LastContact and Generation are then the calls'
	// before it. nil when no call was under way.
	AskedAt *time.Time `json:"askedAt,omitempty"`
}

// NoAnswer is why a read that waits for the peers at most Wait (GET
// /federation and /globalentitlements with peerWait) says nothing of a
// peer's pools: it had not answered by then. Its call is not cut: it
// goes on within the pod timeout, and its answer is cached for the next
// read.
type NoAnswer struct{ Wait time.Duration }

func (e *NoAnswer) Error() string {
	return fmt.Sprintf("not answering: no answer within %s", e.Wait)
}

// EntitlementView is a global entitlement with its members' facts and
// loads (GET /globalentitlements).
type EntitlementView struct {
	GlobalEntitlement
	Members []MemberView `json:"members"`
	// Warnings: EveryoneWarning when it names nobody (R-E9).
	Warnings []string `json:"warnings,omitempty"`
}

// MemberView is one member with what its pod last said of it.
type MemberView struct {
	Member
	Site string `json:"site"`
	// Load is R-G2 under the entitlement's policy (absent under None or
	// when unknown).
	Load  *float64   `json:"load,omitempty"`
	Facts *PoolFacts `json:"facts,omitempty"`
	// Error says why the member's pod could not be asked.
	Error string `json:"error,omitempty"`
}

// PoolFacts is what a pod tells about one of its member pools: what R-G2's
// loads and the capacity check need, nothing about users. Pods exchange it
// over the pod-to-pod API.
type PoolFacts struct {
	HostPool string `json:"hostPool"`
	// Found is false when the pool does not exist on the pod.
	Found            bool   `json:"found"`
	LoadBalancerType string `json:"loadBalancerType,omitempty"`
	MaxSessionLimit  int    `json:"maxSessionLimit,omitempty"`

	// HostPoolType tells a desktop pool (Personal; one user per host)
	// from a farm of multi-session hosts (R-G2). A peer of an older
	// version sends none.
	HostPoolType string `json:"hostPoolType,omitempty"`

	// Hosts is every session host of the pool, whatever its status (the
	// size of the pool, as Horizon counts VMs).
	Hosts int `json:"hosts"`
	// Sessions is the pool's open sessions: Pending, Active and
	// Disconnected all count (R-G2).
	Sessions int `json:"sessions"`
	// LoadIndexes are the load indexes (0..100) of the placeable hosts
	// that report one, for LoadIndex pools (RDS farms); -1 (load
	// balancing off) is left out.
	LoadIndexes []int `json:"loadIndexes,omitempty"`
	// HasCapacity: some host could take a new session now (placeable, not
	// drained, under the limit). The pool's own connect has the last word.
	HasCapacity bool `json:"hasCapacity"`
}

// PodLoads is a pod's summary of its member pools.
type PodLoads struct {
	Pod        string      `json:"pod"`
	Site       string      `json:"site"`
	Generation int64       `json:"generation"`
	Pools      []PoolFacts `json:"pools"`
	// DirectoryBehind: some of this pod's sessions may be missing from
	// their directory pods (a registration failed, no whole list was
	// sent yet at Generation, this replica holds outage placements not
	// yet written, or sessions were written late, by any replica, since
	// the answering replica's last whole list was read: FederationStore.
	// LateSessionWrites): a global connect asks this pod itself.
	DirectoryBehind bool `json:"directoryBehind,omitempty"`
}

// PodDirectoryRequest registers users with open sessions on the calling
// pod at their directory pod (R-G1): those its pools made, or part of its
// whole list (Full, Last on the list's last part).
type PodDirectoryRequest struct {
	Generation int64    `json:"generation"`
	Users      []string `json:"users"`
	Full       bool     `json:"full,omitempty"`
	Last       bool     `json:"last,omitempty"`
}

// PodLookupRequest asks a directory pod where a user has open sessions.
type PodLookupRequest struct {
	User string `json:"user"`
	// Register names the pod the caller will ask to place a new session
	// for the user if the answer names no pod (R-G1): the directory pod
	// then registers the user there before it answers (PodLookup.
	// Registered), so the placing pod need not. A pod of an older
	// version refuses the field (400 naming it, before it does
	// anything): the caller then asks again without it.
	Register string `json:"register,omitempty"`
}

// PodLookup is a directory pod's answer: the pods holding the user's
// entries, and the pods whose whole list it holds, fresh, with that
// list's generation. A pod missing from Complete must be asked itself.
type PodLookup struct {
	Pods     []string         `json:"pods"`
	Complete map[string]int64 `json:"complete"`
	// Registered: the user was registered at PodLookupRequest.Register
	// (the answer names no pod); absent when nothing was registered
	// (the user has entries, this pod is not the user's directory pod in
	// its document, the pod is not in it, or its bound of entries is
	// reached).
	Registered bool `json:"registered,omitempty"`
}

// PodSessionsRequest asks for a user's open sessions in some pools, or
// for several users' at once (Users, at most MaxPodSessionUsers): a pod
// asked by many global connects at the same time sends one call for the
// users queued while its last call to that peer was under way.
type PodSessionsRequest struct {
	User      string   `json:"user,omitempty"`
	Users     []string `json:"users,omitempty"`
	HostPools []string `json:"hostPools"`
}

// MaxPodSessionUsers bounds the users of one PodSessionsRequest.
const MaxPodSessionUsers = 64

// MaxPodSessionPools bounds the host pools of one PodSessionsRequest: a
// peer asks for the member pools of one global entitlement on the pod it
// calls, in as many calls as that takes (a pod reads each user in each of
// its own pools named, one statement each).
const MaxPodSessionPools = 256

// PodSessions lists them.
type PodSessions struct {
	Sessions []*UserSession `json:"sessions"`
}

// PodSessionCommandRequest asks a pod to log off or disconnect one of a
// user's open sessions (R-U3 across the federation): ID in one of
// HostPools (the calling pod's word of the pools the caller may act in:
// for an end user, the member pools of the global entitlements that
// grant her, R-E9; the receiving pod keeps only its own member pools of
// them), Command CommandLogoff or CommandDisconnect.
type PodSessionCommandRequest struct {
	User      string   `json:"user"`
	ID        string   `json:"id"`
	HostPools []string `json:"hostPools"`
	Command   string   `json:"command"`
}

// PodDocumentRequest gives a pod the federation document a peer's
// console wrote there (R-G5): Principal is who wrote it at the calling
// pod, whose API took it first (its own check of who may write it); the
// receiving pod stores it as its own PUT /api/v1/federation does. The
// console sends it through the signed pod-to-pod channel, not with the
// signed-in user's token: the document names the URLs it goes to, and a
// Contributor writes it (R-SEC).
type PodDocumentRequest struct {
	Document  Federation `json:"document"`
	Principal string     `json:"principal"`
}

// PodConnectRequest asks a pod to connect a user into one of its pools on
// behalf of a global entitlement.
type PodConnectRequest struct {
	GlobalEntitlement string `json:"globalEntitlement"`
	HostPool          string `json:"hostPool"`
	User              string `json:"user"`
	DryRun            bool   `json:"dryRun,omitempty"`
	// Application, for a global application entitlement, is the
	// application the pool publishes (R-E9).
	Application string `json:"application,omitempty"`
	// Existing: the connect is for the user's session the caller found
	// in that pool (R-G1); a new session is registered at the user's
	// directory pod only once it is made.
	Existing bool `json:"existing,omitempty"`
	// SessionID is the session of the user's the caller wants
	// reconnected (GlobalConnectRequest.Session), for the pool's connect
	// (ConnectRequest.SessionID). A pod of an older version refuses the
	// field (400 naming it, before it does anything): the caller then
	// asks again without it.
	SessionID string `json:"sessionId,omitempty"`
	// RegisteredAt names the directory pod whose look-up registered the
	// user for this pod (PodLookup.Registered): a new session needs no
	// registration of its own (R-G1) when that pod is the user's
	// directory pod in this pod's document too. Else (this pod holds
	// another generation of the document, federation apply on its way,
	// whose directory pod for the user is another) it registers the
	// session there as without the look-up's. A pod of an older version
	// refuses the field (400 naming it, before it does anything): the
	// caller then asks again without it, and that pod registers the
	// session itself.
	RegisteredAt string `json:"registeredAt,omitempty"`
}

// GlobalDecision is the record of a global connect (the "decision" of its
// answer): where it started, and per pod considered, its site, its load,
// and why it was skipped if it was; per member pool likewise.
type GlobalDecision struct {
	GlobalEntitlement   string `json:"globalEntitlement"`
	Scope               string `json:"scope"`
	SessionDistribution string `json:"sessionDistribution"`
	ConnectedPod        string `json:"connectedPod"`
	StartSite           string `json:"startSite"`
	// HomeSite says where the start site came from: "user", "group" or ""
	// (the site of the connected pod).
	HomeSite string `json:"homeSite,omitempty"`
	// ExistingSession is set when the user's existing session was found
	// (R-G1): the answer reconnects it.
	ExistingSession *MemberCandidate `json:"existingSession,omitempty"`
	// Sites lists the sites in the order they were considered, with their
	// loads (not under None).
	Sites []SiteDecision `json:"sites"`
	Pods  []PodDecision  `json:"pods"`
}

// SiteDecision is one site's line in a decision.
type SiteDecision struct {
	Site string   `json:"site"`
	Load *float64 `json:"load,omitempty"`
}

// PodDecision is one pod's line in a decision.
type PodDecision struct {
	Pod     string         `json:"pod"`
	Site    string         `json:"site"`
	Load    *float64       `json:"load,omitempty"`
	Skipped string         `json:"skipped,omitempty"`
	Chosen  bool           `json:"chosen,omitempty"`
	Pools   []PoolDecision `json:"pools,omitempty"`
}

// PoolDecision is one member pool's line in a decision.
type PoolDecision struct {
	HostPool string   `json:"hostPool"`
	Load     *float64 `json:"load,omitempty"`
	Skipped  string   `json:"skipped,omitempty"`
	Chosen   bool     `json:"chosen,omitempty"`
}

// MemberCandidate is a member pool to try, in a pod.
type MemberCandidate struct {
	Pod      string `json:"pod"`
	HostPool string `json:"hostPool"`
}

// Skip records that a candidate's pool refused (reason
// federation.SkipNoCapacity,
// say) and, when no pool of its pod is left untried, that the pod is
// skipped for the same reason.
func (d *GlobalDecision) Skip(c MemberCandidate, reason string) {
	for i := range d.Pods {
		pd := &d.Pods[i]
		if pd.Pod != c.Pod {
			continue
		}
		left := false
		for j := range pd.Pools {
			if pd.Pools[j].HostPool == c.HostPool {
				pd.Pools[j].Skipped = reason
			}
			if pd.Pools[j].Skipped == "" {
				left = true
			}
		}
		if !left && pd.Skipped == "" {
			pd.Skipped = reason
		}
	}
}

// SkipPod records that a pod could not be reached while trying it: the
// pod is skipped with reason and its remaining pools are dropped from
// cands, which is returned.
func (d *GlobalDecision) SkipPod(pod, reason string, cands []MemberCandidate) []MemberCandidate {
	for i := range d.Pods {
		if d.Pods[i].Pod == pod {
			d.Pods[i].Skipped = reason
		}
	}
	return slices.DeleteFunc(cands, func(c MemberCandidate) bool { return c.Pod == pod })
}

// Choose records the member pool that took the session.
func (d *GlobalDecision) Choose(c MemberCandidate) {
	for i := range d.Pods {
		pd := &d.Pods[i]
		if pd.Pod != c.Pod {
			continue
		}
		pd.Chosen = true
		for j := range pd.Pools {
			if pd.Pools[j].HostPool == c.HostPool {
				pd.Pools[j].Chosen = true
			}
		}
	}
}
