package vdibroker

import (
	"context"
	"time"
)

// PortalLaunch is an opening of a resource in the user portal (R-U7) as
// the database keeps it, so that every replica answers its status and
// hands its file: a browser behind a load balancer polls wherever it is
// sent. Neither the launch's id nor its file is stored in clear.
type PortalLaunch struct {
	// IDHash is HashSecret of the launch's id (the secret in its page's
	// URL).
	IDHash string
	// Owner is HashSecret of the sign-in's cookie: the only browser the
	// launch answers.
	Owner string
	// Name is the resource's friendly name.
	Name string
	// State is "waiting", "ready" or "failed".
	State string
	// Starting: the connect is held while Host starts, until Until.
	Starting bool
	Host     string
	Until    time.Time
	// Sealed is the .rdp file, encrypted and authenticated with a key
	// derived from the launch's id (empty until ready).
	Sealed []byte
	// Message is why it failed.
	Message    string
	CreateTime time.Time
	ExpireTime time.Time
}

// PortalLaunchStore keeps the user portal's launches (part of Store).
type PortalLaunchStore interface {
	// CreatePortalLaunch deletes the launches expired at or before now and
	// the owner's failed ones but the perOwner-1 that ended last (by
	// their expiry), and stores l,
	// unless its owner has perOwner unexpired launches that did not fail
	// (under way, or ready and not taken) or the pod has max
	// (TooManyRequests). Creations are serialised, so concurrent ones on
	// any replica never exceed a bound.
	CreatePortalLaunch(ctx context.Context, l *PortalLaunch, perOwner, max int, now time.Time) error
	// PortalLaunch returns launch idHash if owner made it and it expires
	// after now; NotFound otherwise.
	PortalLaunch(ctx context.Context, idHash, owner string, now time.Time) (*PortalLaunch, error)
	// UpdatePortalLaunch stores l's state, progress, file, message and
	// expiry (nothing when the launch is gone).
	UpdatePortalLaunch(ctx context.Context, l *PortalLaunch) error
	// TakePortalLaunch deletes and returns launch idHash if owner made it,
	// it is ready and it expires after now: of callers on any replica, one
	// gets it; the others NotFound.
	TakePortalLaunch(ctx context.Context, idHash, owner string, now time.Time) (*PortalLaunch, error)
}
