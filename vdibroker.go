// Package vdibroker holds the domain of the vdibroker connection broker: host
// pools, session hosts, user sessions, the agent protocol, the one error
// type, the one access checker (access.go) and the contracts: the Store the
// engines implement (store.go) and the services the broker implements and
// the transports call (service.go, federation.go). The rules cited as R-…
// and the sections cited as SPEC §n are in docs/behaviour.md.
package vdibroker

import (
	"fmt"
	"strings"
	"time"
)

// Host pool types (SPEC §2).
const (
	Pooled   = "Pooled"
	Personal = "Personal"
)

// Load balancer types (SPEC §2, §4).
const (
	BreadthFirst       = "BreadthFirst"
	DepthFirst         = "DepthFirst"
	LoadIndex          = "LoadIndex"
	Persistent         = "Persistent"
	MultiplePersistent = "MultiplePersistent"
)

// Personal desktop assignment types (R-PE1, R-PE2).
const (
	Automatic = "Automatic"
	Direct    = "Direct"
)

// Session host statuses (R-H1).
const (
	StatusAvailable       = "Available"
	StatusUnavailable     = "Unavailable"
	StatusShutdown        = "Shutdown"
	StatusNeedsAssistance = "NeedsAssistance"
)

// User session states (SPEC §1).
const (
	StatePending      = "Pending"
	StateActive       = "Active"
	StateDisconnected = "Disconnected"
	StateLoggedOff    = "LoggedOff"
)

// Reasons a user session ended (UserSession.EndReason), so the store, the
// server and the views name them alike.
const (
	// EndPendingTimeout: a Pending session the agent never reported within
	// pendingTimeoutSeconds (R-S3).
	EndPendingTimeout = "PendingTimeout"
	// EndNotReported: the agent no longer reports the session (R-S2).
	EndNotReported = "NotReported"
	// EndHostUnavailable: the session's host became Unavailable or
	// Shutdown and a reconnect placed the user anew (R-C1).
	EndHostUnavailable = "HostUnavailable"
	// EndHostDeleted: the host was deleted with ?force=true.
	EndHostDeleted = "HostDeleted"
	// EndLoggedOffByAdmin: an admin logged the session off (R-S4).
	EndLoggedOffByAdmin = "LoggedOffByAdmin"
	// EndDisconnectedTimeout: the broker logged the session off after
	// disconnectedSessionTimeoutMinutes (R-S5).
	EndDisconnectedTimeout = "DisconnectedTimeout"
)

// NoSessionLimit is the default maxSessionLimit: "no limit" (SPEC §2).
const NoSessionLimit = 999999

// LoadBalancing is the pool's load-index and logon-storm settings (SPEC §6).
type LoadBalancing struct {
	UseCustomScript                bool    `json:"useCustomScript"`
	IncludeSessionCount            bool    `json:"includeSessionCount"`
	CPUThreshold                   float64 `json:"cpuThreshold"`
	MemoryThreshold                float64 `json:"memoryThreshold"`
	DiskQueueLengthThreshold       float64 `json:"diskQueueLengthThreshold"`
	DiskReadLatencyThreshold       float64 `json:"diskReadLatencyThreshold"`
	DiskWriteLatencyThreshold      float64 `json:"diskWriteLatencyThreshold"`
	LoadIndexThreshold             int     `json:"loadIndexThreshold"`
	ConnectingSessionThreshold     int     `json:"connectingSessionThreshold"`
	MinServersInQueue              int     `json:"minServersInQueue"`
	HostLoadIndexThreshold         int     `json:"hostLoadIndexThreshold"`
	HostConnectingSessionThreshold int     `json:"hostConnectingSessionThreshold"`
	SampleIntervalSeconds          int     `json:"sampleIntervalSeconds"`
}

// DefaultLoadBalancing returns the §6 defaults, as PoolFields has them.
func DefaultLoadBalancing() LoadBalancing {
	return NewHostPool("").LoadBalancing
}

// HostPool is a set of session hosts users are placed on (SPEC §2).
type HostPool struct {
	Name                              string        `json:"name"`
	HostPoolType                      string        `json:"hostPoolType"`
	LoadBalancerType                  string        `json:"loadBalancerType"`
	MaxSessionLimit                   int           `json:"maxSessionLimit"`
	PersonalDesktopAssignmentType     string        `json:"personalDesktopAssignmentType"`
	LoadBalancing                     LoadBalancing `json:"loadBalancing"`
	HeartbeatTimeoutSeconds           int           `json:"heartbeatTimeoutSeconds"`
	PendingTimeoutSeconds             int           `json:"pendingTimeoutSeconds"`
	DisconnectedSessionTimeoutMinutes int           `json:"disconnectedSessionTimeoutMinutes"`
	Description                       string        `json:"description"`
	FriendlyName                      string        `json:"friendlyName"`
	// PowerDriver names a driver of serve --power-config (R-A4);
	// empty: the pool's hosts are not power-managed.
	PowerDriver string `json:"powerDriver"`
	// StartVMOnConnect starts a stopped host (else an Unknown one whose
	// agent is silent) when a connect finds no capacity (R-A4), answering
	// 503 HostStarting with Retry-After.
	StartVMOnConnect bool `json:"startVMOnConnect"`
	// GatewayUsage says whether connects reach the pool's hosts through
	// an RD gateway (R-GW1): Gateway (GatewayHostName, or the server's
	// when it is empty) or Direct.
	GatewayUsage    string `json:"gatewayUsage"`
	GatewayHostName string `json:"gatewayHostName"`
	// IdleSessionLimitMinutes and ActiveSessionLimitMinutes close a
	// tunnel through a gateway that carried nothing for that long, or
	// that has been open that long (0: the gateway's own limits; R-GW1).
	IdleSessionLimitMinutes   int       `json:"idleSessionLimitMinutes"`
	ActiveSessionLimitMinutes int       `json:"activeSessionLimitMinutes"`
	CreateTime                time.Time `json:"createTime"`
	UpdateTime                time.Time `json:"updateTime"`

	// CustomRdpProperty is the pool's own .rdp properties (AVD's name,
	// R-E8): "name:type:value" separated by ";" or line breaks, checked
	// as serve --rdp-defaults is and merged over it.
	CustomRdpProperty string `json:"customRdpProperty"`

	// WriteWarning is the warning of the write that answered this pool
	// and only of it (R-P1: a change to Persistent that leaves hosts with
	// several users), beside the ValidateHostPool warnings every read has
	// (R-P3); empty when none. Never stored, never read from a body: the
	// API answers it among the pool's "warnings". A string, not a list,
	// so that pools stay comparable with ==.
	WriteWarning string `json:"-"`
}

// HeartbeatTimeout is heartbeatTimeoutSeconds as a duration: a host
// without a heartbeat for longer is Unavailable (R-H1).
func (p *HostPool) HeartbeatTimeout() time.Duration {
	return time.Duration(p.HeartbeatTimeoutSeconds) * time.Second
}

// PendingTimeout is pendingTimeoutSeconds as a duration: a Pending session
// the agent has not reported for longer ends (R-S3).
func (p *HostPool) PendingTimeout() time.Duration {
	return time.Duration(p.PendingTimeoutSeconds) * time.Second
}

// Metrics is a host's last metrics sample (SPEC §3). CustomLoadValue is nil
// when the host reports no valid custom script value (R-IDX3).
type Metrics struct {
	CPUPercent         float64   `json:"cpuPercent"`
	MemoryPercent      float64   `json:"memoryPercent"`
	DiskQueueLength    float64   `json:"diskQueueLength"`
	DiskReadLatencyMs  float64   `json:"diskReadLatencyMs"`
	DiskWriteLatencyMs float64   `json:"diskWriteLatencyMs"`
	CustomLoadValue    *int      `json:"customLoadValue,omitempty"`
	SampledAt          time.Time `json:"sampledAt"`
}

// HostPolicy is a host's own thresholds (R-LI5); nil pointers are "not set",
// and a set value wins over the pool's.
type HostPolicy struct {
	HostLoadIndexThreshold         *int `json:"hostLoadIndexThreshold,omitempty"`
	HostConnectingSessionThreshold *int `json:"hostConnectingSessionThreshold,omitempty"`
}

// SessionHost is a machine that runs user sessions (SPEC §3).
type SessionHost struct {
	HostPool           string     `json:"hostPool"`
	Name               string     `json:"name"`
	Address            string     `json:"address"`
	Protocols          []string   `json:"protocols"`
	StandardFeatures   bool       `json:"standardFeatures"`
	AllowNewSession    bool       `json:"allowNewSession"`
	AssignedUsers      []string   `json:"assignedUsers"`
	Status             string     `json:"status"`
	LastHeartBeat      *time.Time `json:"lastHeartBeat,omitempty"`
	Sessions           int        `json:"sessions"`
	ConnectingSessions int        `json:"connectingSessions"`
	LoadIndex          int        `json:"loadIndex"`
	Metrics            *Metrics   `json:"metrics,omitempty"`
	// MetricsSessions is the host's session count when Metrics was sampled,
	// the base of the stale-metric compensation of R-LI6.
	MetricsSessions int        `json:"-"`
	Policy          HostPolicy `json:"policy"`
	// ShuttingDown is set when the agent said it is stopping (R-H1 Shutdown).
	ShuttingDown bool `json:"-"`
	// HealthError is the failed non-fatal health check the agent reported
	// (R-H1 NeedsAssistance); empty when healthy.
	HealthError string    `json:"healthError,omitempty"`
	CreateTime  time.Time `json:"createTime"`
	// DrainedBy and DrainTime say who drained the host (allowNewSession
	// false) through the API and when; empty when the host is not drained
	// or the drain was not recorded (set at creation, or before 00010).
	DrainedBy string     `json:"drainedBy,omitempty"`
	DrainTime *time.Time `json:"drainTime,omitempty"`
	// PowerState is one of the Power* constants (R-A4).
	PowerState string `json:"powerState"`
	// PowerStateTime is when PowerState was last set by the broker or its
	// driver; nil when never (the state is then read from the heartbeat).
	PowerStateTime *time.Time `json:"powerStateTime,omitempty"`
	// AutoscaleDrain is set while the autoscaler drains the host to stop
	// it (R-A3). It keeps new sessions off like allowNewSession false, but
	// is a separate flag: the autoscaler sets and clears only this one,
	// never an admin's drain, and an admin's undrain does not clear it.
	AutoscaleDrain bool `json:"autoscaleDrain"`
	// RemoteApps says whether the host can run RemoteApps (R-E12), as its
	// agent reported: RemoteAppsYes, RemoteAppsNo, or RemoteAppsUnknown
	// when no agent said (one older than the report).
	RemoteApps string `json:"remoteApps"`
}

// Values of SessionHost.RemoteApps (R-E12).
const (
	RemoteAppsUnknown = "Unknown"
	RemoteAppsYes     = "Yes"
	RemoteAppsNo      = "No"
)

// RemoteAppsFrom is what a host's RemoteApps becomes when its agent
// reports said (registration or heartbeat, R-E12): nil, an agent that says
// nothing (older than the report), keeps what the host had (was), and
// an empty was is RemoteAppsUnknown.
func RemoteAppsFrom(said *bool, was string) string {
	switch {
	case said == nil && was == "":
		return RemoteAppsUnknown
	case said == nil:
		return was
	case *said:
		return RemoteAppsYes
	}
	return RemoteAppsNo
}

// CannotRunRemoteApps reports whether h's agent said it cannot run
// RemoteApps: only then is h left out of an application connect's
// placement (R-E12); an unknown host is used as before.
func (h *SessionHost) CannotRunRemoteApps() bool { return h.RemoteApps == RemoteAppsNo }

// UserSession is one user's session on one host (SPEC §1, §9).
type UserSession struct {
	ID          string    `json:"id"`
	User        string    `json:"user"`
	HostPool    string    `json:"hostPool"`
	SessionHost string    `json:"sessionHost"`
	State       string    `json:"state"`
	CreateTime  time.Time `json:"createTime"`
	StateTime   time.Time `json:"stateTime"`
	// AgentSessionID is the host's own id for the session, once the agent
	// reported it (R-S2).
	AgentSessionID string `json:"agentSessionId,omitempty"`
	// EndReason says why a LoggedOff session ended: one of the End*
	// constants (for example EndPendingTimeout).
	EndReason string `json:"endReason,omitempty"`
	// Adopted marks a session the broker did not place: its host reported
	// it (R-S2, a user who logged on directly).
	Adopted bool `json:"adopted,omitempty"`
	// Gateway and GatewayTime say through which RD gateway the user last
	// reached the host, and when; nil GatewayTime: no gateway ever did.
	// A session a gateway reached is confirmed: the broker's own token
	// brought the user there, not only a host's report (R-GW2).
	Gateway     string     `json:"gateway,omitempty"`
	GatewayTime *time.Time `json:"gatewayTime,omitempty"`
}

// ConfirmedByGateway reports whether an RD gateway reached the session's
// host with a token the broker issued for it (R-GW2).
func (s *UserSession) ConfirmedByGateway() bool { return s.GatewayTime != nil }

// AwaitingAgent reports whether the session is open and its host's agent
// has not reported it yet: Pending, or turned Active or Disconnected by a
// gateway's report before the agent's (R-GW2). Such a session counts as
// connecting (R-LI2, R-LI3) and is outside a metrics sample (R-LI6).
func (s *UserSession) AwaitingAgent() bool { return s.Open() && s.AgentSessionID == "" }

// Open reports whether the session still counts toward its host (R-S1).
func (s *UserSession) Open() bool { return s.State != StateLoggedOff }

// HostStatus evaluates R-H1 at now: Shutdown when the agent said so or
// the host's power driver stopped it,
// Unavailable without a heartbeat within timeout, NeedsAssistance when a
// health check failed, else Available. Evaluated when read and when placing,
// so no background job has to run first.
func HostStatus(h *SessionHost, timeout time.Duration, now time.Time) string {
	switch {
	case h.ShuttingDown, h.PowerState == PowerStopped, h.PowerState == PowerStopping:
		// A host its power driver stopped, or is stopping, is Shutdown
		// (R-H1), even before its last heartbeat times out: a stop
		// the driver accepted may leave the machine up for a while.
		return StatusShutdown
	case h.LastHeartBeat == nil || now.Sub(*h.LastHeartBeat) > timeout:
		return StatusUnavailable
	case h.HealthError != "":
		return StatusNeedsAssistance
	default:
		return StatusAvailable
	}
}

// CommandWarning is the warning answered with an admin's command queued
// for h (R-S4) while h cannot carry it out: Unavailable (no heartbeat
// within timeout) or Shutdown (its agent said it is stopping, or its power
// driver stopped it). The command stays queued, and the host gets it when
// its agent reports again; the warning says so, so that nobody believes it
// happened. what names the command ("the logoff", "the 3 messages"). ""
// while h is Available or NeedsAssistance: a drained host runs commands.
func CommandWarning(h *SessionHost, what string, timeout time.Duration, now time.Time) string {
	last := "never"
	if h.LastHeartBeat != nil {
		last = h.LastHeartBeat.UTC().Format(time.RFC3339)
	}
	switch HostStatus(h, timeout, now) {
	case StatusShutdown:
		if h.PowerState == PowerStopped || h.PowerState == PowerStopping {
			since := ""
			if h.PowerStateTime != nil {
				since = " since " + h.PowerStateTime.UTC().Format(time.RFC3339)
			}
			return fmt.Sprintf("session host %s is Shutdown (power state %s%s, last heartbeat %s): queued, the host gets %s when it is started and its agent reports again",
				h.Name, h.PowerState, since, last, what)
		}
		return fmt.Sprintf("session host %s is Shutdown (its agent said it is stopping, last heartbeat %s): queued, the host gets %s when its agent reports again",
			h.Name, last, what)
	case StatusUnavailable:
		if h.LastHeartBeat == nil {
			return fmt.Sprintf("session host %s is Unavailable (its agent never reported): queued, the host gets %s when its agent reports", h.Name, what)
		}
		return fmt.Sprintf("session host %s is Unavailable since %s (last heartbeat %s): queued, the host gets %s when its agent reports again",
			h.Name, h.LastHeartBeat.Add(timeout).UTC().Format(time.RFC3339), last, what)
	}
	return ""
}

// Placeable reports whether a host in this status may take new sessions (R-H1).
func Placeable(status string) bool {
	return status == StatusAvailable || status == StatusNeedsAssistance
}

// PoolSummary is a host pool's state at a glance: its hosts by status
// (R-H1), how many are drained, and its open sessions (R-S1). The console's
// overview shows it for every pool without listing every host.
type PoolSummary struct {
	Hosts int `json:"hosts"`
	// Available counts the hosts whose status is placeable (Available,
	// NeedsAssistance), drained or not.
	Available int `json:"available"`
	// TakingSessions counts the hosts that take a new session now: a
	// placeable status and neither drain (R-C2, R-C3, R-A3). A drained
	// host is available and takes none.
	TakingSessions int            `json:"takingSessions"`
	Drained        int            `json:"drained"`
	Sessions       int            `json:"sessions"`
	ByStatus       map[string]int `json:"byStatus"`
	// CannotRunRemoteApps counts the hosts whose agents say they cannot
	// run RemoteApps (remoteApps No, R-E12): when it is Hosts, the pool's
	// applications are all refused.
	CannotRunRemoteApps int `json:"cannotRunRemoteApps"`
}

// MaxDeletionNames bounds the host names a PoolDeletion lists: the count
// says how many there are.
const MaxDeletionNames = 20

// PoolDeletion is what deleting a host pool removes, or, refused, would
// remove (SPEC §9): its session hosts, whose agents' credentials are
// revoked with them; its open sessions, ended; its registration tokens;
// and its place in a scaling plan, which stays without it (R-SP4).
type PoolDeletion struct {
	HostPool string `json:"hostPool"`
	// SessionHosts counts the pool's hosts; HostNames names the first
	// MaxDeletionNames of them by name.
	SessionHosts int      `json:"sessionHosts"`
	HostNames    []string `json:"hostNames,omitempty"`
	// OpenSessions counts the open (Pending, Active, Disconnected)
	// sessions.
	OpenSessions int `json:"openSessions"`
	// RegistrationTokens counts the tokens that could still register a
	// host (not expired, not used up).
	RegistrationTokens int `json:"registrationTokens"`
	// ScalingPlan names the plan the pool is taken out of ("" for none).
	ScalingPlan string `json:"scalingPlan,omitempty"`
}

// Blocks reports whether the deletion must be forced: the pool has hosts
// or open sessions (SPEC §9).
func (d *PoolDeletion) Blocks() bool { return d.SessionHosts > 0 || d.OpenSessions > 0 }

// hostList is "2 session hosts (h1, h2)", naming at most HostNames.
func (d *PoolDeletion) hostList() string {
	names := strings.Join(d.HostNames, ", ")
	if n := d.SessionHosts - len(d.HostNames); n > 0 {
		names += fmt.Sprintf(" and %d more", n)
	}
	return fmt.Sprintf("%s (%s)", Plural(d.SessionHosts, "session host"), names)
}

// Refusal is the Conflict of a delete without force: what the pool has and
// what deleting it would do, and how to delete it anyway.
func (d *PoolDeletion) Refusal() string {
	var has, would []string
	if d.SessionHosts > 0 {
		has = append(has, d.hostList())
		would = append(would, "delete the hosts and revoke their agents' credentials")
	}
	if d.OpenSessions > 0 {
		has = append(has, Plural(d.OpenSessions, "open session"))
		would = append(would, "end the sessions")
	}
	if d.RegistrationTokens > 0 {
		has = append(has, Plural(d.RegistrationTokens, "registration token"))
		would = append(would, "revoke the registration tokens")
	}
	msg := fmt.Sprintf("host pool %q has %s", d.HostPool, join(has))
	if d.ScalingPlan != "" {
		msg += fmt.Sprintf(" and is in scaling plan %q", d.ScalingPlan)
		would = append(would, fmt.Sprintf("take it out of scaling plan %q", d.ScalingPlan))
	}
	return msg + "; deleting it would " + join(would) + ". Delete with force (?force=true, vdibroker hostpool delete --force) to do so"
}

// Text says what a deletion removed: "2 session hosts (h1, h2) deleted and
// their agents' credentials revoked; 3 open sessions ended; 1 registration
// token revoked; taken out of scaling plan "office", which keeps its other
// pools".
func (d *PoolDeletion) Text() string {
	var parts []string
	if d.SessionHosts > 0 {
		parts = append(parts, d.hostList()+" deleted and their agents' credentials revoked")
	}
	if d.OpenSessions > 0 {
		parts = append(parts, Plural(d.OpenSessions, "open session")+" ended")
	}
	if d.RegistrationTokens > 0 {
		parts = append(parts, Plural(d.RegistrationTokens, "registration token")+" revoked")
	}
	if d.ScalingPlan != "" {
		parts = append(parts, fmt.Sprintf("taken out of scaling plan %q, which keeps its other pools", d.ScalingPlan))
	}
	if len(parts) == 0 {
		return "it had no hosts, sessions, registration tokens or scaling plan"
	}
	return strings.Join(parts, "; ")
}

// join is "a", "a and b", "a, b and c".
func join(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// Plural is n and noun, "1 host" or "2 hosts": the messages of the CLI
// and the broker say counts in English, where 1 is singular.
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
