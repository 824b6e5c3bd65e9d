package vdibroker

import (
	"context"
	"time"
)

// Token roles (R-SEC).
const (
	RoleReader      = "Reader"
	RoleContributor = "Contributor"
	RoleUser        = "User"
	// RoleAdmin is the admin token: a Contributor that may also issue tokens.
	RoleAdmin = "Admin"
	// RoleGateway is an RD gateway's credential: it may report tunnels
	// (ActionGatewayReport) and nothing else (R-GW4).
	RoleGateway = "Gateway"
	// RoleHelpdesk operates users' sessions (our addition, as AVD's
	// Desktop Virtualization User Session Operator and Horizon's Help
	// Desk Administrator): it reads what a Reader reads, and the audit
	// trail, and logs off, disconnects and messages sessions; it changes
	// no pool or host and sees no registration key.
	RoleHelpdesk = "Helpdesk"
)

// Token is an API token. The secret is never stored: only its SHA-256 hash.
type Token struct {
	ID         string     `json:"id"`
	Role       string     `json:"role"`
	Subject    string     `json:"subject"`
	Hash       string     `json:"-"`
	CreateTime time.Time  `json:"createTime"`
	ExpireTime *time.Time `json:"expirationTime,omitempty"`
	// HostPools scopes the token to these host pools: a Reader
	// sees only them, a Contributor changes only them, a User connects
	// only there. Empty is every pool.
	HostPools []string `json:"hostPools,omitempty"`
	// Groups are the groups of a User token's user (R-E2, R-E6): its
	// assignments through groups entitle it.
	Groups []string `json:"groups,omitempty"`
	// Gateway is the one RD gateway a Gateway token is for (R-GW4): the
	// broker records its reports under this name and refuses them under
	// another. Empty on a Gateway token issued before tokens had it,
	// whose gateway names itself in each report.
	Gateway string `json:"gateway,omitempty"`
	// RevokeTime is set on a token TokenByHash found among the revoked
	// ones (DeleteToken), which authenticates nobody; it has only ID and
	// Hash beside it.
	RevokeTime *time.Time `json:"-"`
}

// RegistrationToken lets agents register hosts into one pool until it expires.
type RegistrationToken struct {
	ID         string    `json:"id"`
	HostPool   string    `json:"hostPool"`
	Hash       string    `json:"-"`
	CreateTime time.Time `json:"createTime"`
	ExpireTime time.Time `json:"expirationTime"`
	// MaxHosts limits the token to that many new hosts (0: no limit; 1: a
	// one-use token). Re-keying a host with its own credential is not a use.
	MaxHosts int `json:"maxHosts"`
	// Hosts counts the new hosts the token registered.
	Hosts int `json:"hosts"`
	// SessionHost, when set, is the one session host the token
	// registers (R-SEC): the only kind that claims a host an admin
	// created and that never registered.
	SessionHost string `json:"sessionHost,omitempty"`
}

// SessionFilter selects user sessions. Empty fields match all; an empty
// State matches every open state (not LoggedOff), per SPEC §9.
type SessionFilter struct {
	HostPool string
	User     string
	// UserPrefix selects the users whose name starts with it, compared
	// case-insensitively (the database's lower()): a search, listed by
	// the folded name, then ID, instead of by ID. Not with User.
	UserPrefix  string
	State       string
	SessionHost string
	// After is the paging cursor: only sessions with ID > After; in a
	// UserPrefix search, the sessions after that one in its order.
	After string
	// Limit caps the number returned (0 = no cap).
	Limit int
}

// LateCommit is how long after its id was made (NewID) a session may be
// committed and still be found by the session directory's passes, which
// read the sessions with ids made since shortly before the pass before
// (R-G1). A session committed later, by its transaction's clock or by the
// clock after its commit, bumps the store's count of late session writes
// (FederationStore.LateSessionWrites), so every replica sends its whole
// list again.
const LateCommit = time.Second

// ClockTolerance is how far a replica's clock may be from its database
// server's: two replicas within it of the database are within LateCommit
// of each other, as the session directory's passes need (R-G1), and well
// under the intervals that heartbeat ages (R-H1) and the autoscale lease
// compare across replicas. A replica checks its clock against the
// database's (Store.DatabaseTime) and says when it is beyond.
const ClockTolerance = LateCommit / 2

// PlacementCommit is one decided placement to make durable (R-D2, R-D3).
type PlacementCommit struct {
	// Session is the new session (ID chosen by the caller, state Pending).
	Session *UserSession
	// MaxSessionLimit is the pool's limit: the commit fails with ErrHostFull
	// when the host's session count is already at or above it (R-C4).
	MaxSessionLimit int
	// Pooled enforces one open session per user and pool (R-C6): the commit
	// fails with ErrUserHasSession when one exists.
	Pooled bool
	// IgnoreAdopted leaves the user's adopted sessions out of R-C6: the
	// connect found none of them answerable (placement.AnswersAdopted,
	// R-S2), so the user is placed as if they were not there, and they
	// stay facts of their hosts.
	IgnoreAdopted bool
	// Assign assigns the host to the user (R-PE1); the commit fails with
	// ErrHostTaken when the host already has an assigned user.
	Assign bool
	// EndSessionID, when set, is the user's old session on an Unavailable or
	// Shutdown host, ended (LoggedOff, reason HostUnavailable) in the same
	// transaction (R-C1).
	EndSessionID string
	// Record is the decision record (R-C7) as JSON.
	Record []byte
	// OutagePlacement says the session was placed during a store outage
	// (R-OUT3) and is written now that the store is back: the commit
	// bumps the store's count of late session writes (FederationStore.
	// LateSessionWrites) in its transaction, as for any session committed
	// LateCommit or more after its id was made, so every replica's
	// session directory pass learns that sessions older than it looks
	// back were written (R-G1).
	OutagePlacement bool
	// PoolUpdateTime, when set, is the updateTime of the pool settings the
	// decision was made with: the commit fails with ErrPoolChanged when the
	// stored pool has another, so a replica that has not yet heard of a
	// settings change made on another decides again with them (R-P1: the
	// change applies to the next placement).
	PoolUpdateTime time.Time
	// RoundRobinHost, when set, is recorded as the pool's R-LI4
	// round-robin cursor (the host last chosen in bucket 1) in the same
	// transaction, if the commit succeeds; it must be Session's host. The
	// last commit wins (within one group-commit transaction, the last
	// queued). It does not move the pool's updateTime.
	RoundRobinHost string
	// OnCommitted, when set, is called once the session is committed, with
	// the commit's sequence number (see HeartbeatResult.Seq), and before
	// any other write of the same transaction is answered (a heartbeat of
	// the same group commit, say). A caller's in-memory view can then tell,
	// for any heartbeat result, whether its counts include this session.
	// It is not called when the commit fails or is refused. It runs on the
	// store's committer: it must be quick and must not call the store.
	OnCommitted func(seq int64)
}

// OpenSessionCounts is a pool's open sessions by state (R-S1).
type OpenSessionCounts struct {
	Pending, Active, Disconnected int
}

// HeartbeatResult is what applying one heartbeat produced.
type HeartbeatResult struct {
	Host     *SessionHost
	Pool     *HostPool
	Commands []Command
	// Results are the heartbeat's command results that were this host's
	// commands (R-S4), as recorded; a result naming no command of the
	// host is not among them.
	Results []CommandResult
	// Seq orders this store handle's writes as they were committed: Host's
	// counts include exactly the placements on this host whose OnCommitted
	// seq is lower. Of two results for one host, the higher Seq is the
	// newer. Every write numbered below a seq a caller has seen (a
	// result's or an OnCommitted's) has committed, on any host.
	Seq int64
}

// Store is the broker's durable state (SPEC §10). Both engines (SQLite and
// PostgreSQL) satisfy it and pass one contract test suite. Every method is
// atomic: a call that fails has changed nothing. Errors are *Error values
// with the codes of error.go (NotFound, Conflict, InvalidArgument...);
// anything else is internal.
type Store interface {
	Close() error
	Ping(ctx context.Context) error
	// DatabaseTime reads the database server's clock: PostgreSQL's
	// clock_timestamp(), or SQLite's (this machine's) to the millisecond.
	// Replicas compare their clocks with it (ClockTolerance).
	DatabaseTime(ctx context.Context) (time.Time, error)

	// PutHostPool creates (created=true) or replaces a pool. Replacing with
	// another hostPoolType is refused with InvalidArgument on field
	// hostPoolType (R-P1). CreateTime is kept on replace. pre (the PUT's
	// If-Match or If-None-Match) is checked in the same transaction
	// (PreconditionFailed, R-E13): two creates with If-None-Match never
	// replace each other.
	PutHostPool(ctx context.Context, p *HostPool, pre Precondition) (created bool, err error)
	// UpdateHostPool reads pool name, checks pre (a PATCH's If-Match,
	// R-E13), calls fn on a copy and writes the copy back, in one
	// transaction: a PATCH loses no other write's change. fn may run more
	// than once.
	UpdateHostPool(ctx context.Context, name string, fn func(*HostPool) error, pre Precondition) (*HostPool, error)
	GetHostPool(ctx context.Context, name string) (*HostPool, error)
	// ListHostPools lists pools by name.
	ListHostPools(ctx context.Context) ([]*HostPool, error)
	// DeleteHostPool deletes a pool with its hosts, sessions and tokens,
	// and takes it out of its scaling plan (audited as that plan's change),
	// and returns what went. It is refused with Conflict, naming what
	// would go, while the pool has hosts or open sessions, unless force.
	// pre is the DELETE's If-Match, checked in the same transaction
	// (R-E13).
	DeleteHostPool(ctx context.Context, name string, force bool, pre Precondition) (*PoolDeletion, error)

	// PutSessionHost creates or replaces a host's admin fields (address,
	// protocols, standardFeatures, allowNewSession, assignedUsers); runtime
	// fields (heartbeat, metrics, counts) are kept on replace.
	PutSessionHost(ctx context.Context, h *SessionHost) (created bool, err error)
	// UpdateSessionHost reads the host, calls fn, and writes the admin fields
	// back, in one transaction. Status is a read-time field (R-H1) the
	// store does not evaluate: fn may set it from the host as read, and
	// the audit entry's before and after, and the host answered, carry it
	// (the admin fields do not change it).
	UpdateSessionHost(ctx context.Context, pool, name string, fn func(*SessionHost) error) (*SessionHost, error)
	GetSessionHost(ctx context.Context, pool, name string) (*SessionHost, error)
	// ListSessionHosts lists a pool's hosts in query order (name, byte-wise),
	// with current Sessions and ConnectingSessions (R-S1). Status is left for
	// the caller to evaluate (HostStatus).
	ListSessionHosts(ctx context.Context, pool string) ([]*SessionHost, error)
	// ListHostStates returns a pool's hosts, by name, with only what
	// HostStatus and a PoolSummary read filled in (name, drains, last
	// heartbeat, counts, shutting down, health error, power state): a
	// large pool's summary without decoding every host.
	ListHostStates(ctx context.Context, pool string) ([]*SessionHost, error)
	// ListSharedHosts returns a pool's hosts whose assignedUsers hold more
	// than one entry, by name, with only HostPool, Name and AssignedUsers
	// filled: what the warning of a change to Persistent counts (R-P1),
	// without reading every host of a 10,000-host pool in full. The
	// entries are as stored; one user in two spellings is two entries
	// (the caller folds them). NotFound when the pool does not exist.
	ListSharedHosts(ctx context.Context, pool string) ([]*SessionHost, error)
	// PoolsWithoutRemoteApps returns, of pools, those that have hosts and
	// whose hosts all say they cannot run RemoteApps (R-E12), by name; a
	// pool without hosts, one with a host that can or did not say
	// (Unknown), and a pool that does not exist are left out. One
	// statement for them all, whose cost does not grow with a pool's
	// hosts unless they all say No: what a feed reads (R-U5).
	PoolsWithoutRemoteApps(ctx context.Context, pools []string) ([]string, error)
	// ListSessionHostsPage is ListSessionHosts from the host after after
	// (by name), at most limit hosts: one page of a pool of 10,000.
	ListSessionHostsPage(ctx context.Context, pool, after string, limit int) ([]*SessionHost, error)
	// DeleteSessionHost deletes a host and revokes its credential; refused
	// with Conflict while it has open sessions unless force (then they end).
	DeleteSessionHost(ctx context.Context, pool, name string, force bool) error

	// CommitPlacement makes one placement durable, enforcing R-C4 and R-C6 in
	// the database. Concurrent calls may be batched into one transaction
	// (group commit); each call still succeeds or fails on its own.
	CommitPlacement(ctx context.Context, c *PlacementCommit) error
	// RoundRobinHost returns the pool's R-LI4 round-robin cursor, the
	// RoundRobinHost of its last commit that had one; empty when none.
	// Shared by every replica and kept over restarts.
	RoundRobinHost(ctx context.Context, pool string) (string, error)
	// GetPlacement returns a session's decision record (R-C7).
	GetPlacement(ctx context.Context, pool, sessionID string) ([]byte, error)
	GetUserSession(ctx context.Context, pool, id string) (*UserSession, error)
	// ListUserSessions lists sessions by ID ascending.
	ListUserSessions(ctx context.Context, f SessionFilter) ([]*UserSession, error)
	// CountOpenSessions returns every pool's open sessions by state, in one
	// read of an index of open sessions: neither history nor the sessions'
	// rows are read (/metrics at 250,000 sessions). A pool without open
	// sessions is absent.
	CountOpenSessions(ctx context.Context) (map[string]OpenSessionCounts, error)
	// EndSession marks a session LoggedOff with reason (no-op if ended).
	EndSession(ctx context.Context, pool, id, reason string, now time.Time) error
	// ExpirePending ends Pending sessions older than their pool's
	// pendingTimeoutSeconds (R-S3) and returns how many ended.
	ExpirePending(ctx context.Context, now time.Time) (int, error)

	// QueueCommand stores a command for a host's agent (R-S4).
	QueueCommand(ctx context.Context, c *Command) error
	// QueueHostMessage queues a SendMessage of message for each Active and
	// Disconnected session of host (R-S4), created at now, in one
	// transaction with one audit entry for the host, and returns how many
	// sessions will show it (queued) and how many of them had the same
	// message queued already, not queued again; NotFound when the host
	// does not exist.
	QueueHostMessage(ctx context.Context, pool, host, message string, now time.Time) (queued, already int, err error)

	// RegisterHost checks a registration token hash (valid, not expired,
	// under its MaxHosts), creates the host named by req in the token's
	// pool with credentialHash, or re-keys it when req carries the host's
	// current credential or its registration was reset (else Conflict: a
	// token cannot take over a registered host), and returns the host. A
	// host deleted after the token was issued is refused (Conflict). A
	// host it would create is admitted by req.AdmitNewHost, when set,
	// last in the transaction, once the host's rows are written (one
	// that loses its name to a concurrent writer is not asked); its
	// error refuses the registration, rolling them back.
	RegisterHost(ctx context.Context, tokenHash string, req *RegisterRequest, credentialHash string, now time.Time) (*SessionHost, error)
	// RegistrationCreatesHost reads, opening no write transaction,
	// whether RegisterHost would now create the host req names with the
	// token of tokenHash, asking req.AdmitNewHost (not asked here): the
	// token's id and pool when it would, "" when it would re-key or claim
	// a host or refuse the registration. A read's answer, which a
	// concurrent write may change: RegisterHost decides (R-SEC).
	RegistrationCreatesHost(ctx context.Context, tokenHash string, req *RegisterRequest, now time.Time) (tokenID, pool string, err error)
	// HostByCredential finds the host a credential hash belongs to
	// (Unauthenticated when none).
	HostByCredential(ctx context.Context, credentialHash string) (*SessionHost, error)
	// ApplyHeartbeat records a heartbeat in one transaction: heartbeat time,
	// metrics and MetricsSessions by R-LI6's rule (Resample: a sample not
	// newer than the stored one changes neither; a new one's
	// MetricsSessions counts the open sessions that are not Pending and
	// were on the host at or before its sampledAt), policy, shutdown and
	// health flags; command results; the steps of Reconcile: R-S2
	// (Pending seen -> Active, reported disconnected -> Disconnected, not
	// reported -> LoggedOff, unknown -> adopted), R-S3 pending timeout,
	// R-S5 logoff commands for sessions disconnected too long. It returns
	// the host after the changes and the commands to deliver now (marked
	// Delivered).
	ApplyHeartbeat(ctx context.Context, pool, host string, hb *HeartbeatRequest, now time.Time) (*HeartbeatResult, error)

	CreateToken(ctx context.Context, t *Token) error
	// TokenByHash finds an API token by the hash of its secret, or one
	// DeleteToken revoked, within the history's retention, with its
	// RevokeTime set (for the refusal to say so, R-SEC); Unauthenticated
	// when none.
	TokenByHash(ctx context.Context, hash string) (*Token, error)
	ListTokens(ctx context.Context) ([]*Token, error)
	// DeleteToken revokes an API token: it goes from the list, and its
	// hash is kept among the revoked ones until PruneHistory passes its
	// time (NotFound when absent).
	DeleteToken(ctx context.Context, id string) error
	CreateRegistrationToken(ctx context.Context, t *RegistrationToken) error
	// ListRegistrationTokens lists a pool's registration tokens, expired
	// ones included, by creation time (no secrets: Hash is empty).
	ListRegistrationTokens(ctx context.Context, pool string) ([]*RegistrationToken, error)
	// DeleteRegistrationToken revokes one (NotFound when absent).
	DeleteRegistrationToken(ctx context.Context, pool, id string) error
	// ResetRegistration revokes a host's credential and lets the next
	// registration of its name (with a valid token) take it: an admin's
	// leave to replace the machine behind a host name.
	ResetRegistration(ctx context.Context, pool, host string) error
	// PruneHistory deletes what is older than before: ended sessions,
	// commands no longer queued, expired tokens, audit entries and
	// autoscale evaluations (serve --retention; nothing else deletes audit
	// entries). It returns how many sessions it deleted.
	PruneHistory(ctx context.Context, before time.Time) (int, error)

	AuditStore // audit.go

	FederationStore // federation.go

	PowerStore // power.go

	ScalingStore // scaling.go

	AutoscaleStore // scaling.go

	EscrowStore // outage.go

	GatewayStore // gateway.go

	WebSessionStore // websession.go

	SharedStore // websession.go

	PortalLaunchStore // portallaunch.go

	EntitlementStore // entitlement.go
}

// Sentinel errors of CommitPlacement. The server retries ErrHostFull,
// ErrHostTaken and ErrPoolChanged with a fresh view and answers
// ErrUserHasSession with the user's existing session.
var (
	ErrHostFull       = &Error{Code: EConflict, Message: "session host is at maxSessionLimit"}
	ErrUserHasSession = &Error{Code: EConflict, Message: "user already has a session in this host pool"}
	ErrHostTaken      = &Error{Code: EConflict, Message: "session host is already assigned"}
	ErrPoolChanged    = &Error{Code: EConflict, Message: "host pool settings changed since the decision"}
)
