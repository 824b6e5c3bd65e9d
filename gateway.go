package vdibroker

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RD gateways (docs/gateway.md, R-GW1..R-GW6): when a pool's users reach
// their hosts through an RD gateway, each connect answer's .rdp names the
// gateway and carries an access token the broker signs (package
// gatewaytoken); the gateway reports each tunnel back (GatewayService), and
// those reports move the session (R-GW2, R-GW3).

// A pool's gatewayUsage: whether its connects go through an RD gateway.
const (
	// GatewayUsageGateway: through the pool's gatewayHostName or, when it
	// is empty, the server's gateway (serve --gateway-hostname), as an RD
	// Gateway is a deployment's setting in RDS that a collection may
	// override; straight to the host when neither is set. The default.
	GatewayUsageGateway = "Gateway"
	// GatewayUsageDirect: straight to the host, even when the server has
	// a gateway.
	GatewayUsageDirect = "Direct"
)

// GatewayHostFor returns the gateway a pool's connects go through, given
// the server's (empty: none): "" means straight to the host (R-GW1).
func GatewayHostFor(p *HostPool, server string) string {
	switch {
	case p.GatewayUsage == GatewayUsageDirect:
		return ""
	case p.GatewayHostName != "":
		return p.GatewayHostName
	}
	return server
}

// DefaultGatewayTokenTTL is how long a connect's RD gateway access token
// may open its one tunnel when serve --gateway-token-ttl is not given
// (R-GW1): the broker signs for it, and the portal's launch page says a
// file that carries one connects once, within it (R-U4). One value, so
// the page never says another than the token holds.
const DefaultGatewayTokenTTL = 5 * time.Minute

// SameGateway reports whether two RD gateway names name one gateway:
// they compare as host names do (HostNameKey), ignoring the case of ASCII
// letters and one trailing dot, as a gateway's name is its machine's, by
// default its host name (RDGW-1 and rdgw-1. are rdgw-1). The broker
// takes a Gateway token's reports and checks under it (R-GW4) and finds
// the tunnels admitted through a gateway by it, so a token rotated to
// one naming the gateway in other case keeps its tunnels; the gateway
// compares by it too, and warns of no rename then.
func SameGateway(a, b string) bool { return HostNameKey(a) == HostNameKey(b) }

// PrincipalGateway is the audit principal kind of a gateway's report
// (its ID is the gateway's name).
const PrincipalGateway = "gateway"

// Tunnel report kinds.
const (
	TunnelOpen    = "open"    // the gateway checked the token and asks to open a tunnel
	TunnelChannel = "channel" // the tunnel reached its host
	TunnelClose   = "close"   // the tunnel ended
)

// TunnelReport is one report of an RD gateway about one tunnel: the
// claims of the token it checked, and what happened.
type TunnelReport struct {
	TokenID string    `json:"tokenId"`
	User    string    `json:"user"`
	Session string    `json:"sessionId"`
	Pool    string    `json:"hostPool"`
	Host    string    `json:"host"`          // the token's host:port
	Client  string    `json:"clientAddress"` // the client's IP address as the gateway saw it
	Gateway string    `json:"gateway"`       // the gateway's name
	At      time.Time `json:"at"`
	Expiry  time.Time `json:"tokenExpiry"`
	// Set by a close.
	BytesToHost   int64  `json:"bytesToHost,omitempty"`
	BytesToClient int64  `json:"bytesToClient,omitempty"`
	Reason        string `json:"reason,omitempty"`
	Reached       bool   `json:"reached,omitempty"`
	// SentAt is when the gateway sent this report of a close, on its
	// clock as At is (R-GW3): SentAt - At says how late it is whatever
	// the gateway's clock is to the broker's.
	SentAt time.Time `json:"sentAt,omitzero"`
}

// GatewayService is the broker's side of its RD gateways: the reports they
// send (an HTTP route each, or in-process from serve --gateway-listen) and
// the public keys they verify access tokens with.
type GatewayService interface {
	// TunnelOpen admits the tunnel of a token the broker issued, once per
	// token id across every replica (R-GW4): Conflict for a token id
	// admitted before, TooManyRequests when the user holds the most
	// tunnels allowed, NotFound when the session the token names has
	// ended or the token is not the broker's.
	TunnelOpen(ctx context.Context, r *TunnelReport) error
	// TunnelChannel records that the tunnel reached its host: the session
	// turns Active (R-GW2).
	TunnelChannel(ctx context.Context, r *TunnelReport) error
	// TunnelClose records the tunnel's end: a session it had turned Active
	// turns Disconnected (R-GW3).
	TunnelClose(ctx context.Context, r *TunnelReport) error
	// CheckTunnels answers a gateway's periodic question about its open
	// tunnels (R-GW4): the token ids of those that may go on, the
	// broker's tunnels of open sessions; the gateway closes the others.
	// A tunnel the caller may not report for, or of a token the broker
	// did not issue, is left out like one whose session ended.
	CheckTunnels(ctx context.Context, c *TunnelCheck) (*TunnelCheckAnswer, error)
	// GatewayKeys returns the JWKS document of the public keys gateways
	// verify access tokens with: the signing key and the ones before and
	// after it (R-GW6).
	GatewayKeys(ctx context.Context) ([]byte, error)
	// RotateGatewayKey adds a new signing key now; it signs once
	// gateways had time to read it (R-GW6). With revoke it signs at once
	// and every other key is dropped: none signs or is published again,
	// and the tunnels their tokens opened are closed at their gateway's
	// next check (a key that leaked).
	RotateGatewayKey(ctx context.Context, revoke bool) error
}

// TunnelCheck is a gateway's periodic question about its open tunnels
// (R-GW4): each one's token claims, as its reports name them, at most
// MaxTunnelCheck in one question.
type TunnelCheck struct {
	Gateway string         `json:"gateway"` // the gateway's name
	Tunnels []TunnelReport `json:"tunnels"`
}

// TunnelCheckAnswer is the broker's answer to a TunnelCheck.
type TunnelCheckAnswer struct {
	// Open holds the token ids of the tunnels that may go on; the
	// gateway closes every other tunnel it asked about.
	Open []string `json:"open"`
	// Gateway is the name the broker takes the caller's reports under:
	// its Gateway token's gateway (R-GW4), else the name it gave.
	Gateway string `json:"gateway,omitempty"`
	// Warnings say what is amiss with the caller's credential (the admin
	// token, a Gateway token for no gateway in particular): the gateway
	// logs them at start.
	Warnings []string `json:"warnings,omitempty"`
}

// MaxTunnelCheck bounds the tunnels of one TunnelCheck: a gateway with
// more asks in several.
const MaxTunnelCheck = 500

// ValidateTunnelCheck checks a gateway's question.
func ValidateTunnelCheck(c *TunnelCheck) error {
	if err := ValidateText("gateway", c.Gateway, MaxTunnelReportText); err != nil {
		return err
	}
	if len(c.Tunnels) > MaxTunnelCheck {
		return FieldError("tunnels", "at most %d tunnels in one check, got %d: ask in several", MaxTunnelCheck, len(c.Tunnels))
	}
	for i := range c.Tunnels {
		if err := ValidateTunnelReport(&c.Tunnels[i]); err != nil {
			var e *Error
			if errors.As(err, &e) && e.Field != "" {
				return &Error{Code: EInvalid, Field: fmt.Sprintf("tunnels[%d].%s", i, e.Field), Message: fmt.Sprintf("tunnels[%d].%s", i, e.Message)}
			}
			return err
		}
	}
	return nil
}

// GatewayKey is one Ed25519 key the broker signs gateway access tokens
// with, shared by every replica through the store.
type GatewayKey struct {
	ID string
	// Seed is the Ed25519 private key's 32-byte seed.
	Seed       []byte
	CreateTime time.Time
}

// GatewayTunnel is the store's record of one admitted tunnel: it keeps
// its token id used (R-GW4) until the token expired and the tunnel is
// over.
type GatewayTunnel struct {
	TokenID  string
	User     string
	HostPool string
	Session  string
	Gateway  string
	Open     time.Time
	// Expiry is the token's: until then the id must stay refused.
	Expiry time.Time
	// LiveUntil is the longest the tunnel may be open (its lifetime): a
	// tunnel whose close never came counts for its user until then.
	LiveUntil time.Time
}

// GatewayStore is the store's part of the RD gateways.
type GatewayStore interface {
	// GatewayKeys returns the signing keys, newest first.
	GatewayKeys(ctx context.Context) ([]GatewayKey, error)
	// AddGatewayKey adds k unless a key created after notBefore exists
	// (so that of replicas rotating at once one adds a key; the zero
	// notBefore adds it always), then deletes all but k and the newest
	// keep-1 others (k whatever its create time: keep 1 leaves k alone).
	// It says whether k was added.
	AddGatewayKey(ctx context.Context, k GatewayKey, notBefore time.Time, keep int) (bool, error)
	// AdmitGatewayTunnel records t's token id, in one transaction with
	// the audit entry of ctx (WithAudit): Conflict when the id was
	// admitted before (ErrTokenUsed), TooManyRequests when maxPerUser > 0
	// and the user holds that many tunnels open at now (not closed, not
	// past their LiveUntil), NotFound when t.Session is not an open
	// session of t.User in t.HostPool. Records no longer needed at now
	// are deleted on the way (PruneGatewayTunnels).
	AdmitGatewayTunnel(ctx context.Context, t *GatewayTunnel, maxPerUser int, now time.Time) error
	// GatewayReached records that the tunnel of token reached the host
	// of session through gateway at at: a Pending or Disconnected session
	// turns Active (R-GW2), and the session is confirmed (UserSession's
	// GatewayTime). It returns the session as it is after; an ended one
	// is unchanged. NotFound unless token was admitted for session through
	// gateway (R-GW4).
	GatewayReached(ctx context.Context, pool, session, token, gateway string, at time.Time) (*UserSession, error)
	// GatewayClosed records the end of token's tunnel, admitted through
	// gateway (NotFound otherwise, R-GW4), at at: when that
	// tunnel is the last one that reached the session and it is Active,
	// it turns Disconnected (R-GW3), unless the close is late (reported
	// long after it happened, a gateway's report sent again: the agent's
	// reports since are fresher than it). The tunnel's record is closed
	// either way. It returns the session as it is after.
	GatewayClosed(ctx context.Context, pool, session, token, gateway string, at time.Time, late bool) (*UserSession, error)
	// PruneGatewayTunnels deletes up to limit records whose token expired
	// and whose tunnel is closed or past its LiveUntil at now, and
	// returns how many it deleted.
	PruneGatewayTunnels(ctx context.Context, now time.Time, limit int) (int, error)
	// LiveGatewayTunnels returns the token ids of tunnels (each its
	// TokenID, User, HostPool, Session) that may go on (R-GW4): admitted
	// through gateway for that session of that pool, not closed, the
	// session open and the user's. Those whose LiveUntil is before
	// renewBefore get liveUntil, so a tunnel its gateway holds open is
	// neither pruned nor forgotten by the user's tunnel limit. Token ids
	// with no record are not returned.
	LiveGatewayTunnels(ctx context.Context, gateway string, tunnels []GatewayTunnel, renewBefore, liveUntil time.Time) ([]string, error)
}

// ErrTokenUsed is the store's answer to a gateway access token id admitted
// before (R-GW4).
var ErrTokenUsed = &Error{Code: EConflict, Message: "gateway access token already used: a token opens one tunnel; connect again for a new one"}

// MaxTunnelReportText bounds the free strings of a tunnel report (the
// gateway's name, the client's address, the close reason).
const MaxTunnelReportText = 256

// ValidateTunnelReport checks a gateway's report; the error names the
// field and what is allowed.
func ValidateTunnelReport(r *TunnelReport) error {
	for _, f := range []struct{ name, v string }{{"tokenId", r.TokenID}, {"sessionId", r.Session}} {
		if err := agentID(f.name, f.v); err != nil {
			return err
		}
	}
	if err := ValidateUser("user", r.User); err != nil {
		return err
	}
	if err := ValidateName("hostPool", r.Pool, MinPoolNameLen, MaxPoolNameLen); err != nil {
		return err
	}
	if r.Host == "" {
		return FieldError("host", "is required: the token's host:port")
	}
	if err := ValidateAddress("host", r.Host); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"gateway", r.Gateway}, {"clientAddress", r.Client}, {"reason", r.Reason}} {
		if err := ValidateText(f.name, f.v, MaxTunnelReportText); err != nil {
			return err
		}
	}
	if r.Expiry.IsZero() {
		return FieldError("tokenExpiry", "is required: the token's expiry")
	}
	if r.BytesToHost < 0 || r.BytesToClient < 0 {
		return FieldError("bytesToHost", "bytesToHost and bytesToClient must be 0 or more")
	}
	return nil
}
