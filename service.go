package vdibroker

import (
	"context"
	"time"
)

// The broker's services: what the transports (the HTTP API, and through
// it the console and the CLI) and the pod-to-pod API call. Package broker
// implements them on a Store; cmd/vdibroker wires them into the HTTP
// server, which holds only these interfaces. Each method authorizes its
// caller, the Principal in its context (Authorize), where the target is
// one only the service sees; the HTTP layer has authorized the route's
// action on the route's pool before.

// Services are the broker's services, one field each.
type Services struct {
	Connect      ConnectService
	Hosts        HostService
	Sessions     SessionService
	Pools        PoolService
	ScalingPlans ScalingPlanService
	Tokens       TokenService
	Audit        AuditService
	Power        PowerService
	Health       HealthService
	// Gateway receives the RD gateways' tunnel reports (gateway.go).
	Gateway GatewayService
	// Federation is nil on a broker that is not a pod (SPEC §7).
	Federation FederationService
	// Entitlements keeps application groups and answers who may use what
	// (R-E1..R-E12).
	Entitlements EntitlementService
}

// ConnectService places users on session hosts (SPEC §4).
type ConnectService interface {
	// Connect places req.User in pool: their open session first (R-C1),
	// else a new Pending session on the host placement picks, made
	// durable by the store, which enforces the limit (R-C4) and one
	// session per user (R-C6) against every replica. A dry run decides
	// and stores nothing (R-C8). idempotencyKey, when set (the
	// Idempotency-Key header, 1..255 characters), makes a repeat of a
	// successful connect by the same caller for the same pool and user
	// get its answer.
	Connect(ctx context.Context, pool string, req ConnectRequest, idempotencyKey string) (*ConnectAnswer, error)
}

// ConnectAnswer is a connect's answer and whether it made a new session
// (HTTP 201) rather than answering an existing one or a dry run (200).
type ConnectAnswer struct {
	ConnectResponse
	Created bool
	// StartWait, when set, says the session's host is starting (start VM
	// on connect): a gateway holds the client this long for it (R-GW5).
	StartWait time.Duration
}

// HostService keeps the session hosts: the admin's changes, and the
// agents' registrations and heartbeats.
type HostService interface {
	// SessionHost reads one host with its read-time fields (status R-H1,
	// load index R-IDX, power state).
	SessionHost(ctx context.Context, pool, name string) (*SessionHost, error)
	// HostsPage returns up to limit+1 of the pool's hosts after after (by
	// name), with their read-time fields: one more than limit says that a
	// next page exists.
	HostsPage(ctx context.Context, pool, after string, limit int) ([]*SessionHost, error)
	// PutSessionHost creates or replaces a host's admin fields from req
	// (absent fields take their defaults; an absent address keeps the
	// registered one) and returns the host as stored and whether it was
	// created.
	PutSessionHost(ctx context.Context, pool, name string, req *SessionHostRequest) (*SessionHost, bool, error)
	// UpdateSessionHost changes the admin fields req names (drain,
	// assignment, standardFeatures, address) and returns the host as
	// stored; a drain records who drained it.
	UpdateSessionHost(ctx context.Context, pool, name string, req *SessionHostRequest) (*SessionHost, error)
	// DeleteSessionHost deletes a host and revokes its credential (refused
	// with Conflict while it has open sessions, unless force).
	DeleteSessionHost(ctx context.Context, pool, name string, force bool) error
	// ResetRegistration revokes a host's credential and lets the next
	// registration of its name take the host (a new machine behind it).
	ResetRegistration(ctx context.Context, pool, name string) error

	// RegisterHost creates the host req names in the pool of its
	// registration token, or re-keys it, and returns its new credential
	// (shown only in this answer). An unknown or expired token is
	// Unauthenticated.
	RegisterHost(ctx context.Context, req *RegisterRequest) (*RegisterResponse, error)
	// RegistrationCreatesHost reads, writing nothing, whether
	// RegisterHost would now create the host req names: its token's id
	// and pool when it would, "" when not (Store.RegistrationCreatesHost).
	RegistrationCreatesHost(ctx context.Context, req *RegisterRequest) (tokenID, pool string, err error)
	// HostByCredential returns the host a credential's hash belongs to
	// (Unauthenticated when none).
	HostByCredential(ctx context.Context, credentialHash string) (*SessionHost, error)
	// Heartbeat applies host's heartbeat (R-S2 reconciliation, R-S3, R-S5)
	// and returns the commands for its agent and its pool's settings.
	Heartbeat(ctx context.Context, host *SessionHost, hb *HeartbeatRequest) (*HeartbeatResult, error)
}

// SessionHostRequest is the body of PUT (all fields; absent ones take
// their defaults) and PATCH (only allowNewSession, assignedUsers,
// standardFeatures, address) of a session host. Nil means absent.
type SessionHostRequest struct {
	Name             *string   `json:"name,omitempty"`
	Address          *string   `json:"address,omitempty"`
	Protocols        *[]string `json:"protocols,omitempty"`
	StandardFeatures *bool     `json:"standardFeatures,omitempty"`
	AllowNewSession  *bool     `json:"allowNewSession,omitempty"`
	AssignedUsers    *[]string `json:"assignedUsers,omitempty"`
}

// SessionService reads user sessions and queues commands for them (R-S4).
type SessionService interface {
	// ListSessions lists the sessions f selects in f.HostPool (open ones
	// unless f.State says otherwise), by id; NotFound for a pool that does
	// not exist.
	ListSessions(ctx context.Context, f SessionFilter) ([]*UserSession, error)
	Session(ctx context.Context, pool, id string) (*UserSession, error)
	// Placement returns a session's decision record (R-C7) as JSON.
	Placement(ctx context.Context, pool, id string) ([]byte, error)
	// Logoff queues a Logoff for the session's agent; a Pending session
	// the agent has not reported ends at once. Ended sessions are a
	// Conflict, for every command. An end user logs off and disconnects
	// only its own sessions (ActionOwnSession, R-U3).
	Logoff(ctx context.Context, pool, id string) (*Command, error)
	// Disconnect queues a Disconnect of an Active session.
	Disconnect(ctx context.Context, pool, id string) (*Command, error)
	// SendMessage queues a message shown in the session (1..MaxMessageLen
	// characters, no control characters but line breaks and tabs).
	SendMessage(ctx context.Context, pool, id, message string) (*Command, error)
	// SendHostMessage queues message, as SendMessage would, for each
	// Active and Disconnected session of a host (a maintenance notice):
	// one command a session, one audit entry for the host.
	SendHostMessage(ctx context.Context, pool, host, message string) (*HostMessage, error)
	// UserSessions lists user's open sessions in every pool the caller
	// sees, by id (R-U3): an end user asks about itself only.
	UserSessions(ctx context.Context, user string) ([]*UserSession, error)
}

// PoolService keeps the host pools (SPEC §2).
type PoolService interface {
	// ListPools lists the pools the caller sees, by name.
	ListPools(ctx context.Context) ([]*HostPool, error)
	Pool(ctx context.Context, name string) (*HostPool, error)
	// PutPool creates or replaces pool name with p, whose absent fields
	// hold their defaults; pre (the PUT's If-Match or If-None-Match,
	// R-E13) is checked in the write's transaction. Invalid settings
	// change nothing (R-P4); the type of a pool never changes (R-P1). It
	// returns the pool as stored and whether it was created.
	PutPool(ctx context.Context, name string, p *HostPool, pre Precondition) (*HostPool, bool, error)
	// UpdatePool changes pool name with change, given a copy of the
	// stored pool (a PATCH body decoded onto it), applied and checked
	// against pre (the PATCH's If-Match, R-E13) in the store's write
	// transaction, so change may run more than once and must not block.
	UpdatePool(ctx context.Context, name string, change func(*HostPool) error, pre Precondition) (*HostPool, error)
	// DeletePool deletes a pool with its hosts and sessions and returns
	// what went; refused with Conflict, naming what would go, while the
	// pool has hosts or open sessions, unless force.
	// pre is the DELETE's If-Match (R-E13).
	DeletePool(ctx context.Context, name string, force bool, pre Precondition) (*PoolDeletion, error)
	// Summary is the pool's hosts by status, drained hosts and open
	// sessions.
	Summary(ctx context.Context, p *HostPool) (*PoolSummary, error)
}

// ScalingPlanService keeps the scaling plans (SPEC §8) and the
// autoscaler's record of applying them. A principal scoped to host pools
// sees and writes plans by their pools (R-SP5).
type ScalingPlanService interface {
	// ListScalingPlans lists the plans the caller sees, by name.
	ListScalingPlans(ctx context.Context) ([]*ScalingPlan, error)
	ScalingPlan(ctx context.Context, name string) (*ScalingPlan, error)
	// PutScalingPlan creates or replaces plan name with p (defaults
	// filled, validated R-SP1..R-SP3, the pools checked R-SP4) and returns
	// it as stored and whether it was created; pre is the PUT's If-Match
	// or If-None-Match (R-E13).
	PutScalingPlan(ctx context.Context, name string, p *ScalingPlan, pre Precondition) (*ScalingPlan, bool, error)
	// DeleteScalingPlan deletes plan name; pre is the DELETE's If-Match
	// (R-E13).
	DeleteScalingPlan(ctx context.Context, name string, pre Precondition) error
	// AutoscaleEvaluations lists the autoscaler's evaluations of pool,
	// newest first, older than seq before (0: from the newest), at most
	// limit.
	AutoscaleEvaluations(ctx context.Context, pool string, before int64, limit int) ([]*AutoscaleEvaluation, error)
}

// TokenService issues and checks API tokens and registration tokens
// (R-SEC). Secrets are answered once and stored as their hashes
// (HashSecret).
type TokenService interface {
	// Authenticate returns the principal of the API token whose secret
	// hashes to hash: Unauthenticated when none, or when it expired.
	Authenticate(ctx context.Context, hash string) (*Principal, error)
	CreateToken(ctx context.Context, req TokenRequest) (*TokenResponse, error)
	// ListTokens lists the API tokens by id, without secrets.
	ListTokens(ctx context.Context) ([]*Token, error)
	DeleteToken(ctx context.Context, id string) error

	CreateRegistrationToken(ctx context.Context, pool string, req RegistrationTokenRequest) (*RegistrationTokenResponse, error)
	// ListRegistrationTokens lists a pool's registration tokens, expired
	// ones included, without secrets.
	ListRegistrationTokens(ctx context.Context, pool string) ([]*RegistrationToken, error)
	DeleteRegistrationToken(ctx context.Context, pool, id string) error
}

// TokenRequest is the body of POST /tokens.
type TokenRequest struct {
	Role    string `json:"role"` // Reader, Contributor or User
	Subject string `json:"subject"`
	// ExpiresInSeconds is 60..315360000, or 0 for a token that never expires.
	ExpiresInSeconds int `json:"expiresInSeconds,omitempty"`
	// HostPools scopes the token to these host pools; absent is every pool.
	HostPools []string `json:"hostPools,omitempty"`
	// Groups are a User token's user's groups (R-E6): at most MaxGroups;
	// refused for the other roles.
	Groups []string `json:"groups,omitempty"`
	// Gateway is the name of the one RD gateway a Gateway token is for
	// (R-GW4); absent, the subject. Refused for the other roles.
	Gateway string `json:"gateway,omitempty"`
}

// TokenResponse is a new API token; the secret is shown only here.
type TokenResponse struct {
	Token
	Secret string `json:"token"`
	// Warnings name what the token was issued with that may be a
	// mistake: a host pool of its scope that does not exist.
	Warnings []string `json:"warnings,omitempty"`
}

// RegistrationTokenRequest is the body of POST /hostpools/{pool}/registrationtoken.
type RegistrationTokenRequest struct {
	// ExpiresInSeconds is 3600..2332800 (1 hour..27 days); absent = 3600.
	ExpiresInSeconds int `json:"expiresInSeconds"`
	// MaxHosts limits the token to that many new hosts: 1 is a one-use
	// token; 0 (absent) is no limit.
	MaxHosts int `json:"maxHosts,omitempty"`
	// SessionHost, when set, makes a token for that one session host: it
	// registers no other name, and it is the only kind that claims a
	// host an admin created (PUT) that never registered (R-SEC).
	SessionHost string `json:"sessionHost,omitempty"`
}

// RegistrationTokenResponse is a new registration token; the secret is
// shown only here.
type RegistrationTokenResponse struct {
	ID             string    `json:"id"`
	HostPool       string    `json:"hostPool"`
	Token          string    `json:"token"`
	ExpirationTime time.Time `json:"expirationTime"`
	MaxHosts       int       `json:"maxHosts,omitempty"`
	SessionHost    string    `json:"sessionHost,omitempty"`
}

// AuditService is the audit trail's service: who changed what.
type AuditService interface {
	// AppendAudit writes one entry on its own (a refusal, a sign-in).
	AppendAudit(ctx context.Context, e *AuditEntry) error
	// RecordRefusal records a refused request within a bound. Of a
	// caller that holds no valid API credential (anonymous, a bad or
	// throttled credential, a registration token or a host's
	// credential): per address and RefusalWindow the first is written
	// whole (e.Seq set, written true) while the window's global budget
	// lasts, the others are counted and written as one summary entry per
	// address when the window closes. Of one that holds one
	// (AuditPrincipal.HoldsAPICredential): per principal and window the
	// first PrincipalRefusalsPerWindow are written whole, the others are
	// one summary entry. Its texts are cut (AuditEntry.Bound). Every
	// refused request goes through it.
	RecordRefusal(ctx context.Context, e *AuditEntry) (written bool, err error)
	// ListAudit lists the entries f selects, by seq, of the pools the
	// caller sees when it is scoped to host pools.
	ListAudit(ctx context.Context, f AuditFilter) ([]*AuditEntry, error)
}

// PowerService starts and stops session hosts through their pool's power
// driver (R-A4); the drivers come from serve --power-config only.
type PowerService interface {
	// StartHost asks the driver to start the host and records Starting;
	// by names who asked, for the logs.
	StartHost(ctx context.Context, pool, host, by string) error
	// StopHost asks the driver to stop the host and records Stopping;
	// Conflict while it has open sessions, unless force.
	StopHost(ctx context.Context, pool, host string, force bool, by string) error
	// PowerDrivers names the loaded drivers.
	PowerDrivers() []string
}

// HealthService says whether the broker's store answers (GET /healthz).
type HealthService interface {
	// Health pings the store, unless an outage is under way already, and
	// returns its health.
	Health(ctx context.Context) HealthStatus
}

// HealthStatus is what the broker knows of its store: up, or down since
// when and why.
type HealthStatus struct {
	Up bool `json:"up"`
	// Since is when the current outage began (zero while up).
	Since time.Time `json:"since,omitzero"`
	// Reason says why the store is down (empty while up).
	Reason string `json:"reason,omitempty"`
	// OutageSeconds is the total time the store was down since start,
	// the current outage included.
	OutageSeconds float64 `json:"outageSeconds"`
}
