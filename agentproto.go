package vdibroker

import "time"

// Command types the broker queues for a host's agent (R-S4, R-S5).
const (
	CommandLogoff      = "Logoff"
	CommandDisconnect  = "Disconnect"
	CommandSendMessage = "SendMessage"
)

// Command states.
const (
	CommandQueued    = "Queued"
	CommandDelivered = "Delivered"
	CommandSucceeded = "Succeeded"
	CommandFailed    = "Failed"
)

// Command is work for a host's agent, delivered in a heartbeat answer.
type Command struct {
	ID          string `json:"id"`
	HostPool    string `json:"hostPool,omitempty"`
	SessionHost string `json:"sessionHost,omitempty"`
	Type        string `json:"type"`
	// SessionID is the broker's user session id; AgentSessionID the host's
	// own id for it (empty if the agent never reported the session).
	SessionID      string    `json:"sessionId,omitempty"`
	AgentSessionID string    `json:"agentSessionId,omitempty"`
	User           string    `json:"user,omitempty"`
	Message        string    `json:"message,omitempty"`
	State          string    `json:"state,omitempty"`
	Result         string    `json:"result,omitempty"`
	CreateTime     time.Time `json:"createTime"`
	// Warnings are an admin's answer's (CommandWarning: the host cannot
	// carry it out now), never stored nor sent to an agent.
	Warnings []string `json:"warnings,omitempty"`
	// SessionEnded is an admin's answer's too, never stored nor sent to
	// an agent: the logoff ended the session at once, a Pending session
	// its agent never reported (R-S4), and the Logoff is queued only in
	// case its logon is under way.
	SessionEnded bool `json:"sessionEnded,omitempty"`
}

// HostMessage is the answer of a message to every user session of a host
// (SessionService.SendHostMessage): how many SendMessage commands were
// queued, one an Active or Disconnected session, and the warnings of a
// host that cannot show them now (CommandWarning) or has no such session.
type HostMessage struct {
	HostPool    string `json:"hostPool"`
	SessionHost string `json:"sessionHost"`
	Queued      int    `json:"queued"`
	// AlreadyQueued is how many of Queued had the same message queued
	// already and were not queued it again (R-S4).
	AlreadyQueued int      `json:"alreadyQueued"`
	Warnings      []string `json:"warnings,omitempty"`
}

// CommandResult is the agent's report of one command, sent on the next
// heartbeat after it ran.
type CommandResult struct {
	ID      string `json:"id"`
	Success bool   `json:"success"`
	Message string `json:"message,omitempty"`
}

// AgentSession is one real session the agent found on its host (R-S2). State
// is Active or Disconnected.
type AgentSession struct {
	ID    string `json:"id"`
	User  string `json:"user"`
	State string `json:"state"`
	// LogonTime is when the user logged on, as the host's session manager
	// says (WTS's logon time, utmp's login time); absent when it does not
	// say. A session the broker did not place is recorded as created then
	// (R-S2), within the bounds of AdoptedCreateTime: it is the host's
	// word, shown, never acted on.
	LogonTime *time.Time `json:"logonTime,omitempty"`
}

// RegisterRequest is the body of POST /api/v1/agent/register.
type RegisterRequest struct {
	Token            string      `json:"token"`
	HostName         string      `json:"hostName"`
	Address          string      `json:"address"`
	Protocols        []string    `json:"protocols"`
	StandardFeatures *bool       `json:"standardFeatures"`
	Policy           *HostPolicy `json:"policy"`
	// RemoteApps says whether the host can run RemoteApps (R-E12): true
	// on a Windows session host, false where the session manager only
	// gives whole desktops (xrdp); absent from an older agent (unknown).
	RemoteApps *bool `json:"remoteApps,omitempty"`
	// CurrentCredentialHash is the hash of the credential the request
	// carried (Authorization: Bearer), set by the server: registering a
	// name that is registered already re-keys it only with that host's
	// current credential, or after an admin reset its registration
	// (R-SEC: a registration token cannot take over a host).
	CurrentCredentialHash string `json:"-"`
	// AdmitNewHost, set by the server, is asked by the store within the
	// registration's transaction when the registration would create a
	// host (a name new to the token's pool, within the token's
	// maxHosts), with the token's id; an error refuses the registration
	// and nothing is written (R-SEC: the new hosts a token registers are
	// bounded by rate). It is asked last, once the host's rows are
	// written, so a registration that loses the name to a concurrent
	// writer is not asked. A retried transaction may ask it again. A
	// re-key, a claim of a host an admin created and a registration
	// after an admin's reset create no host and never ask it.
	AdmitNewHost func(tokenID string) error `json:"-"`
}

// RegisterResponse answers a registration: the host credential is shown once.
type RegisterResponse struct {
	HostPool   string `json:"hostPool"`
	HostName   string `json:"hostName"`
	Credential string `json:"credential"`
}

// HeartbeatRequest is the body of POST /api/v1/agent/heartbeat.
type HeartbeatRequest struct {
	Metrics  *Metrics        `json:"metrics"`
	Sessions []AgentSession  `json:"sessions"`
	Policy   *HostPolicy     `json:"policy"`
	Results  []CommandResult `json:"results"`
	// ShuttingDown is the agent's last heartbeat on SIGTERM (R-H1 Shutdown).
	ShuttingDown bool `json:"shuttingDown,omitempty"`
	// HealthError is a failed non-fatal health check (R-H1 NeedsAssistance).
	HealthError string `json:"healthError,omitempty"`
	// SessionsUnknown says the agent could not list the host's sessions
	// and has no earlier list to send: Sessions is not the host's word,
	// and the broker changes none of its sessions (R-S2).
	SessionsUnknown bool `json:"sessionsUnknown,omitempty"`
	// RemoteApps is RegisterRequest.RemoteApps again, so a host whose
	// agent was updated or reconfigured tells the broker without
	// registering again (R-E12); absent keeps what the host had.
	RemoteApps *bool `json:"remoteApps,omitempty"`
	// CredentialHash is the hash of the credential the heartbeat came
	// with, set by the server and never read from the agent's JSON. When
	// set, the store applies the heartbeat only while it is still the
	// host's credential, checked under the host's lock: the server may
	// have taken the host from memory, and the host may have been deleted
	// or re-keyed since, on any replica.
	CredentialHash string `json:"-"`
}

// HeartbeatResponse answers a heartbeat with the commands to run and the
// settings the agent follows.
type HeartbeatResponse struct {
	Commands []Command     `json:"commands"`
	Settings AgentSettings `json:"settings"`
}

// AgentSettings are the pool settings an agent needs.
type AgentSettings struct {
	SampleIntervalSeconds   int  `json:"sampleIntervalSeconds"`
	HeartbeatTimeoutSeconds int  `json:"heartbeatTimeoutSeconds"`
	UseCustomScript         bool `json:"useCustomScript"`
}
