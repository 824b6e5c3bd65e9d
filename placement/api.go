package placement

import (
	"time"

	"github.com/vdibroker/vdibroker"
)

// Pool is what a decision needs of a host pool's settings (SPEC §2, §6).
type Pool struct {
	Name             string
	HostPoolType     string // vdibroker.Pooled or vdibroker.Personal
	LoadBalancerType string // BreadthFirst, DepthFirst, LoadIndex, Persistent, MultiplePersistent
	MaxSessionLimit  int
	// AssignmentType is the personalDesktopAssignmentType (Automatic, Direct).
	AssignmentType          string
	LoadBalancing           vdibroker.LoadBalancing
	HeartbeatTimeoutSeconds int
}

// PoolFrom converts the domain pool.
func PoolFrom(p *vdibroker.HostPool) Pool {
	return Pool{
		Name:                    p.Name,
		HostPoolType:            p.HostPoolType,
		LoadBalancerType:        p.LoadBalancerType,
		MaxSessionLimit:         p.MaxSessionLimit,
		AssignmentType:          p.PersonalDesktopAssignmentType,
		LoadBalancing:           p.LoadBalancing,
		HeartbeatTimeoutSeconds: p.HeartbeatTimeoutSeconds,
	}
}

// Host is what a decision needs of one session host. Status is evaluated by
// the engine at decision time from LastHeartBeat, ShuttingDown, PowerStopped
// and HealthError with vdibroker.HostStatus (R-H1), so a host that fell silent
// is never placed on even if nobody touched it since.
type Host struct {
	Name             string
	AllowNewSession  bool
	StandardFeatures bool
	LastHeartBeat    *time.Time
	ShuttingDown     bool
	// PowerStopped: the host's power driver stopped it or is stopping it
	// (R-A4), which makes it Shutdown (R-H1). Flags beside ShuttingDown, in its padding:
	// an entry must stay within three cache lines (btree_test.go).
	PowerStopped bool
	// AutoscaleDrain keeps new sessions off like AllowNewSession false
	// (R-A3), as a reason of its own.
	AutoscaleDrain bool
	// NoRemoteApps: the host's agent said it cannot run RemoteApps
	// (R-E12), so an application connect leaves it out; also in the
	// padding above.
	NoRemoteApps bool
	HealthError  string
	Sessions     int // Pending + Active + Disconnected (R-S1)
	Connecting   int // Pending
	// Metrics is the last sample, never changed once given to a Placer:
	// a new sample is a new *Metrics (the engine keeps figures of the
	// sample it saw by this pointer).
	Metrics         *vdibroker.Metrics
	MetricsSessions int // sessions at Metrics.SampledAt (R-LI6)
	Policy          vdibroker.HostPolicy
	AssignedUsers   []string
}

// HostFrom converts the domain host.
func HostFrom(h *vdibroker.SessionHost) Host {
	return Host{
		Name:             h.Name,
		AllowNewSession:  h.AllowNewSession,
		StandardFeatures: h.StandardFeatures,
		LastHeartBeat:    h.LastHeartBeat,
		ShuttingDown:     h.ShuttingDown,
		HealthError:      h.HealthError,
		PowerStopped:     h.PowerState == vdibroker.PowerStopped || h.PowerState == vdibroker.PowerStopping,
		AutoscaleDrain:   h.AutoscaleDrain,
		NoRemoteApps:     h.CannotRunRemoteApps(),
		Sessions:         h.Sessions,
		Connecting:       h.ConnectingSessions,
		Metrics:          h.Metrics,
		MetricsSessions:  h.MetricsSessions,
		Policy:           h.Policy,
		AssignedUsers:    h.AssignedUsers,
	}
}

// Existing is the user's open session in the pool, if any (R-C1).
type Existing struct {
	SessionID string
	Host      string
	State     string
}

// Request asks where one user's session goes.
type Request struct {
	User string
	// SessionHost is the host the user asked for (R-PE3, MultiplePersistent).
	SessionHost string
	// Existing is the user's open session in this pool, nil when none.
	Existing *Existing
	// RemoteApp: the connect opens an application (R-E7), so hosts that
	// cannot run RemoteApps are left out (R-E12).
	RemoteApp bool
}

// Decision is the outcome of one placement.
type Decision struct {
	// Host is the chosen session host.
	Host string
	// Reconnect is true when the answer is the user's existing session (R-C1).
	Reconnect bool
	// EndExisting is true when the existing session's host is Unavailable or
	// Shutdown: the caller ends that session and makes the new one (R-C1).
	EndExisting bool
	// Assign is true when the caller must assign Host to the user
	// permanently (R-PE1, Persistent + Automatic first connect).
	Assign bool
	// Explain is the decision record (R-C7), also filled on NoCapacity.
	Explain Explain
	// e is the indexed engine's entry for Host, so Apply need not look it
	// up by name (nil from the reference engine or on a reconnect).
	e *entry
}

// Explain is the decision record of R-C7: JSON the server stores per
// placement and returns from GET .../usersessions/{id}/placement.
type Explain struct {
	Pool      string    `json:"hostPool"`
	User      string    `json:"user"`
	Algorithm string    `json:"algorithm"`
	Time      time.Time `json:"time"`
	Reconnect bool      `json:"reconnect,omitempty"`
	// Candidates are the first ExplainLimit hosts that could take the
	// session, in the algorithm's rank order (for LoadIndex bucket 1: round
	// robin order from the winner); CandidateCount counts them all. A
	// LoadIndex record lists the winning bucket's hosts and, in a pool of
	// at most ExplainLimit hosts, the later buckets' after them (each with
	// its bucket), so every candidate of a small pool is in the record.
	Candidates     []Candidate `json:"candidates"`
	CandidateCount int         `json:"candidateCount"`
	// Excluded are the first ExplainLimit excluded hosts in query order;
	// ExcludedCounts counts every excluded host per reason.
	Excluded         []Exclusion    `json:"excluded"`
	ExcludedCounts   map[string]int `json:"excludedCounts,omitempty"`
	Chosen           string         `json:"chosen,omitempty"`
	Bucket           int            `json:"bucket,omitempty"` // LoadIndex: 1, 2 or 3
	Rank             int            `json:"rank,omitempty"`   // 1-based position of the winner in the ranked candidates
	Draw             *Draw          `json:"draw,omitempty"`   // BreadthFirst random draw
	RaisedThreshold  int            `json:"raisedThreshold,omitempty"`
	RoundRobinAfter  string         `json:"roundRobinAfter,omitempty"`
	NoCapacityReason string         `json:"noCapacityReason,omitempty"`
	Note             string         `json:"note,omitempty"`
	// OutageMode marks a placement a replica made while its store was
	// down, within its own escrow (R-OUT3), and wrote when the
	// store was back.
	OutageMode bool `json:"outageMode,omitempty"`
	// StartedOnConnect marks a session placed, when no host could take
	// it, on the host start VM on connect started for the user (R-A4): the
	// client waits for it at the gateway (R-GW5). Chosen is that host;
	// NoCapacityReason says why no running host could take the session.
	StartedOnConnect bool `json:"startedOnConnect,omitempty"`
	// Gateway, when set, says the user reached the chosen host through
	// an RD gateway, with the broker's token (R-GW2): not stored with the
	// record, but added from the session when the record is read.
	Gateway *GatewayReach `json:"gateway,omitempty"`
}

// GatewayReach is the RD gateway through which a session's user last
// reached its host, and when.
type GatewayReach struct {
	Name string    `json:"name"`
	Time time.Time `json:"time"`
}

// Candidate is a host that could take the session.
type Candidate struct {
	Host       string `json:"host"`
	Sessions   int    `json:"sessions"`
	Connecting int    `json:"connecting"`
	LoadIndex  int    `json:"loadIndex"`
	Bucket     int    `json:"bucket,omitempty"`
}

// Exclusion is a host that could not take the session, and why.
type Exclusion struct {
	Host   string `json:"host"`
	Reason string `json:"reason"` // one of the Reason* constants
	Detail string `json:"detail,omitempty"`
}

// Draw is the random draw of a BreadthFirst decision: Value in [0, Of).
type Draw struct {
	Of    int `json:"of"`
	Value int `json:"value"`
}

// Named exclusion reasons (R-C7).
const (
	ReasonDrained = "Drained"
	// ReasonAutoscaleDrained: the autoscaler drains the host to stop it (R-A3).
	ReasonAutoscaleDrained = "AutoscaleDrained"
	ReasonUnavailable      = "Unavailable"
	ReasonShutdown         = "Shutdown"
	ReasonAtLimit          = "AtLimit"
	ReasonHostThreshold    = "OverHostThreshold"
	ReasonNotAssigned      = "NotAssigned"
	ReasonAssignedToOthers = "AssignedToOthers"
	// ReasonNoRemoteApps: an application connect, and the host's agent
	// said it cannot run RemoteApps (R-E12).
	ReasonNoRemoteApps = "RemoteAppUnsupported"
)

// Placer decides placements for one pool. Both the indexed engine and the
// reference implementation satisfy it, so tests and benchmarks can compare
// them. A Placer is not safe for concurrent use; the caller serialises.
type Placer interface {
	// Place decides where req goes without changing any count: a dry run is
	// Place alone (R-C8). On no capacity it returns the Decision with its
	// Explain and a *vdibroker.Error with code NoCapacity (R-C5),
	// NotAssigned (R-PE2) or, for an application no host of the pool can
	// run, RemoteAppUnsupported (R-E12).
	Place(req Request) (Decision, error)
	// Apply records a decision the caller committed: the host's session and
	// connecting counts go up by one and round-robin state advances (R-S1:
	// the reservation is atomic with the choice).
	Apply(d Decision)
	// Upsert adds or replaces a host (counts, metrics, drain, heartbeat...).
	// A metrics sample is immutable: a new sample is a new *Metrics (the
	// engine keeps figures per sample and compares the pointers).
	Upsert(h Host)
	// Remove forgets a host.
	Remove(name string)
	// SetPool changes the pool's settings (R-P1: applies to the next Place).
	SetPool(p Pool)
	// SetRoundRobin sets the R-LI4 cursor: bucket 1's round robin goes on
	// from the host after host in query order (a host of any name, known
	// or not; "" starts at the first). The cursor is shared through the
	// store, so that replicas and a restarted broker go on where the pool
	// left off.
	SetRoundRobin(host string)
	// RoundRobin returns the R-LI4 cursor: the host last chosen in bucket 1.
	RoundRobin() string
	// Host returns the engine's current view of a host. Its Metrics is
	// the engine's own sample: read it, never change it.
	Host(name string) (Host, bool)
}

// Options inject randomness and time so decisions replay exactly.
type Options struct {
	// Rand returns a uniform integer in [0, n). Nil uses math/rand/v2.
	Rand func(n int) int
	// Now returns the current time. Nil uses time.Now.
	Now func() time.Time
}
