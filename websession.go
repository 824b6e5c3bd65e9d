package vdibroker

import (
	"context"
	"fmt"
	"time"
)

// WebSession is a signed-in browser's session as the database keeps it,
// so that every replica serves it and a restart keeps it (R-SEC, "Web
// sessions"). The cookie's value is never stored: the row is found by its
// hash, and the API token the session acts with is sealed with a key
// derived from the cookie's value, so the table alone signs nobody in.
type WebSession struct {
	// IDHash is HashSecret of the cookie's value.
	IDHash string
	// Area is the part of the site the session is for ("console"; the
	// user portal's later): limits count per area.
	Area string
	// Principal is who signed in: "admin", "token:<id>" or
	// "oidc:<subject>"; the per-principal limit counts these.
	Principal string
	// Role is the principal's role when it signed in.
	Role string
	// Sealed is the API token (an OpenID Connect ID token for "oidc:"),
	// encrypted and authenticated with the cookie's key.
	Sealed []byte
	// Flash is a one-shot message for the session's next page.
	Flash      string
	CreateTime time.Time
	ExpireTime time.Time
}

// WebSessionLimits bound the sessions of an area (R-SEC): they are what a
// holder of any valid credential can make the broker store.
type WebSessionLimits struct {
	// PerPrincipal is how many sessions one principal keeps: a new one
	// replaces its oldest.
	PerPrincipal int
	// Window: a principal whose PerPrincipal sessions all began within
	// it is refused a new one (TooManyRequests), so a script cannot sign
	// in (and write an audit row) at will.
	Window time.Duration
	// PerArea is how many unexpired sessions the area holds: beyond it a
	// new sign-in is refused (TooManyRequests) until sessions end, and no
	// one is signed out for it.
	PerArea int
}

// AreaFull is the refusal of a sign-in into an area holding its
// WebSessionLimits.PerArea sessions: a TooManyRequests *Error (Err) that
// errors.As tells apart from one user's too many sign-ins, since the
// administrator, not the user, can change it.
type AreaFull struct {
	Area string
	Max  int
	Err  *Error
}

// NewAreaFull returns the refusal of a sign-in into area, full at max.
func NewAreaFull(area string, max int) *AreaFull {
	return &AreaFull{Area: area, Max: max, Err: &Error{Code: ETooManyRequests, RetryAfter: time.Minute,
		Message: fmt.Sprintf("the %s has its %d signed-in sessions; sign-ins are refused until some end", area, max)}}
}

func (e *AreaFull) Error() string { return e.Err.Error() }
func (e *AreaFull) Unwrap() error { return e.Err }

// WebSessionStore keeps web sessions (part of Store).
type WebSessionStore interface {
	// CreateWebSession stores ws under lim, in one transaction with the
	// deletion of the principal's oldest sessions it replaces; sign-ins
	// of one area are serialised, so concurrent ones (on any replica)
	// never exceed a limit.
	CreateWebSession(ctx context.Context, ws *WebSession, lim WebSessionLimits, now time.Time) error
	// WebSession returns the session whose IDHash is idHash, NotFound when
	// there is none or it expired at or before now.
	WebSession(ctx context.Context, idHash string, now time.Time) (*WebSession, error)
	// DeleteWebSession ends a session (no error when there is none).
	DeleteWebSession(ctx context.Context, idHash string) error
	// SetWebSessionFlash sets (or, with "", clears) a session's flash.
	SetWebSessionFlash(ctx context.Context, idHash, flash string) error
	// DeleteExpiredWebSessions deletes the sessions expired at or before
	// now and returns how many.
	DeleteExpiredWebSessions(ctx context.Context, now time.Time) (int, error)
}

// SharedStore holds the few values every replica must agree on and no
// replica may make alone: the admin token's hash, and the key that seals
// the OpenID Connect sign-in's state cookie (a sign-in started on one
// replica may come back to another). Part of Store.
type SharedStore interface {
	// SharedValue returns the value stored under name, NotFound when none.
	SharedValue(ctx context.Context, name string) (string, error)
	// InitSharedValue stores value under name unless a value is stored,
	// and returns the stored one: of replicas racing to make the first,
	// every one gets the winner's.
	InitSharedValue(ctx context.Context, name, value string, now time.Time) (string, error)
	// SetSharedValue stores value under name, replacing any.
	SetSharedValue(ctx context.Context, name, value string, now time.Time) error
}

// Names of shared values.
const (
	// SharedAdminTokenHash is HashSecret of the admin token.
	SharedAdminTokenHash = "admin-token-hash"
	// SharedSigninKey is the hex key sealing sign-in state cookies.
	SharedSigninKey = "signin-state-key"
)
