package vdibroker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"time"
	"unicode/utf8"
)

// The audit trail: who changed what, from where, and what it was
// before and after. The HTTP layer starts an entry for every audited request
// and puts it in the request's context (WithAudit); the store writes it in
// the transaction of the change (AuditFrom), filling in Before and After,
// so a change is never committed without its entry. A refused request is
// recorded alone (AppendAudit) with Outcome AuditRefused.

// Audit outcomes.
const (
	AuditOK      = "ok"
	AuditRefused = "refused"
)

// Principal kinds in an audit entry.
const (
	PrincipalAdmin        = "admin"        // the admin token
	PrincipalToken        = "token"        // a vdibroker API token (ID is its id)
	PrincipalOIDC         = "oidc"         // an OpenID Connect identity (ID is its subject)
	PrincipalRegistration = "registration" // an agent presenting a registration token
	PrincipalHost         = "host"         // an agent presenting its host credential
	PrincipalAnonymous    = "anonymous"    // no or an invalid credential
	// PrincipalPod is a peer pod of the federation, by its verified
	// signature (R-G5): ID is the pod's name, Name the user it acted for
	// (a logoff or disconnect of her session, R-U3) or the principal whose
	// federation document its console sent (federation.put).
	PrincipalPod = "pod"
	// PrincipalLocal is a command run on the broker's machine against its
	// data dir, not through the API (vdibroker restore); ID is the
	// operating system's user.
	PrincipalLocal = "local"
)

// HoldsAPICredential reports whether p proved a valid API credential
// (the admin token, an API token, an OpenID Connect identity): its
// refusals name a credential to revoke, and are counted per principal
// (PrincipalRefusalsPerWindow) rather than per address.
func (p AuditPrincipal) HoldsAPICredential() bool {
	switch p.Kind {
	case PrincipalAdmin, PrincipalToken, PrincipalOIDC:
		return true
	}
	return false
}

// AuditPrincipal is who did it.
type AuditPrincipal struct {
	Kind string `json:"kind"`
	// ID is the token id, the OIDC subject or the host; empty when unknown.
	ID string `json:"id,omitempty"`
	// Name is the token's subject (the user a User token connects).
	Name string `json:"name,omitempty"`
	Role string `json:"role,omitempty"`
	// HostPools is the principal's scope; empty is every pool.
	HostPools []string `json:"hostPools,omitempty"`
}

// AuditEntry is one row of the audit trail.
type AuditEntry struct {
	Seq        int64          `json:"seq"`
	Time       time.Time      `json:"time"`
	Principal  AuditPrincipal `json:"principal"`
	RemoteAddr string         `json:"remoteAddress"`
	RequestID  string         `json:"requestId"`
	// Action is what was done: hostpool.put, sessionhost.update,
	// usersession.logoff, token.create, sessionhost.register, signin...
	Action string `json:"action"`
	// Target is what it was done to, as an API path below /api/v1:
	// hostpools/p1/sessionhosts/h1, tokens/abc...
	Target string `json:"target"`
	// HostPool is the target's pool ("" for none): scoped principals see
	// the entries of their pools.
	HostPool string `json:"hostPool,omitempty"`
	Outcome  string `json:"outcome"`
	// Error is why a refused request was refused (code: message).
	Error  string          `json:"error,omitempty"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// String is the entry as its JSON: a text log line (serve --log-format
// text) shows the entry as a JSON log line does, before and after as
// documents rather than lists of bytes.
func (e *AuditEntry) String() string {
	b, err := json.Marshal(e)
	if err != nil {
		return "audit entry: " + err.Error()
	}
	return string(b)
}

// AuditFilter selects audit entries; empty fields match all.
type AuditFilter struct {
	Target string // exact, or a prefix ending in "/"
	// Principal matches the principal's ID or Name.
	Principal string
	Action    string
	// RequestID matches the entry's request id: the reference the user
	// portal shows a user beside a refusal, which she gives her helpdesk.
	RequestID string
	// Since and Until bound the entries' time: Since <= Time < Until
	// (zero: unbounded).
	Since, Until time.Time
	// HostPools, when set, keeps only entries of these pools (a scoped
	// principal's view).
	HostPools []string
	// Newest lists newest first (by Seq descending), else oldest first.
	Newest bool
	// After is the paging cursor: entries after the one with Seq After in
	// the listing's order (Seq > After oldest first, Seq < After newest
	// first); 0 is from the start.
	After int64
	Limit int
}

// AuditStore is the audit trail's part of Store.
type AuditStore interface {
	// AppendAudit writes one entry in a transaction of its own (a refusal,
	// a sign-in): it sets e.Seq.
	AppendAudit(ctx context.Context, e *AuditEntry) error
	// ListAudit lists entries by Seq, ascending or (f.Newest) descending.
	ListAudit(ctx context.Context, f AuditFilter) ([]*AuditEntry, error)
}

type auditKey struct{}

type requestIDKey struct{}

// WithRequestID returns ctx carrying the id of the HTTP request it is for
// (its X-Request-Id): an entry recorded without the API's audit (a refused
// sign-in of the console or the portal) names the request by it, as the
// reference the portal shows beside the refusal does.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDFrom returns the id of WithRequestID, or "".
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// WithAudit returns ctx carrying e: the store's next write in ctx records e
// in its transaction (and sets e.Seq).
func WithAudit(ctx context.Context, e *AuditEntry) context.Context {
	return context.WithValue(ctx, auditKey{}, e)
}

// AuditFrom returns the entry of WithAudit, or nil.
func AuditFrom(ctx context.Context) *AuditEntry {
	e, _ := ctx.Value(auditKey{}).(*AuditEntry)
	return e
}

// InScope reports whether a principal scoped to pools (empty: every pool)
// may act on pool. It is the one test of a host-pool scope.
func InScope(pools []string, pool string) bool {
	return len(pools) == 0 || slices.Contains(pools, pool)
}

// MaxAuditField is the most bytes an audit entry, and a log line, keeps of
// a text its caller chose (a path, a pool name, an error naming either):
// every write an unauthenticated caller can cause is bounded (R-SEC).
const MaxAuditField = 512

// Cut returns s when it has at most n bytes; else its first whole UTF-8
// characters, then "…sha256:" and 16 hex digits of the hash of the whole,
// n bytes in all (n at least 32): two long texts that differ after the
// cut still read differently.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	tail := "…sha256:" + hex.EncodeToString(sum[:8])
	keep := max(n-len(tail), 0)
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + tail
}

// Bound cuts every text of e a caller may have chosen to MaxAuditField
// (Cut). HTTP cuts an entry when it starts it; the store cuts again what
// it writes.
func (e *AuditEntry) Bound() {
	for _, f := range []*string{&e.Principal.ID, &e.Principal.Name, &e.Principal.Role, &e.RemoteAddr, &e.RequestID,
		&e.Action, &e.Target, &e.HostPool, &e.Outcome, &e.Error} {
		*f = Cut(*f, MaxAuditField)
	}
}

// Refused audit entries of callers without a valid API credential are
// counted rather than written one by one (AuditService.RecordRefusal):
// per RefusalWindow, the first refusal of each address (and credential
// kind and id) is written whole while the window's budget of
// RefusalsPerWindow lasts; the others are counted, and each address's
// count is written as one summary entry (action RefusalSummaryAction)
// when the window closes, while a second budget of RefusalsPerWindow
// lasts; what is left over is one entry for all other addresses.
//
// Those of a caller with a valid API credential
// (AuditPrincipal.HoldsAPICredential) are counted per principal: the first
// PrincipalRefusalsPerWindow of each window are written whole, the rest
// are one summary entry per principal when the window closes.
const (
	RefusalWindow              = 5 * time.Minute
	RefusalsPerWindow          = 20
	PrincipalRefusalsPerWindow = 20
	RefusalSummaryAction       = "refused.summary"
)
