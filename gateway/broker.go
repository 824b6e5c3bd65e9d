package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Broker is what the gateway tells the broker about each tunnel. The broker
// is the one place stateless gateway replicas share, so it is the one that
// admits each token id once.
type Broker interface {
	// TunnelOpen asks to open the tunnel of a verified token for a client
	// at an address. It answers nil for the first request of a token id and
	// ErrTokenUsed for every later one; any other error refuses the tunnel
	// too (the broker cannot be asked, so the token's single use cannot be
	// checked).
	TunnelOpen(ctx context.Context, ev TunnelEvent) error
	// ChannelOpen reports that the tunnel reached its host: the client's
	// RDP stream flows from now on.
	ChannelOpen(ctx context.Context, ev TunnelEvent) error
	// TunnelClose reports the end of a tunnel TunnelOpen admitted. An
	// error that is a refusal (ErrRefused, ErrNotAdmitted, ErrTokenUsed)
	// is final; any other (the broker unreachable, its store down) is
	// tried again later (the gateway's close reports, R-GW3).
	TunnelClose(ctx context.Context, ev TunnelEvent) error
	// CheckTunnels asks which of the gateway's open tunnels (each
	// described as its open was, at most vdibroker.MaxTunnelCheck) may go
	// on, as RD Gateway re-authorizes at its session timeout: it answers
	// their token ids, and the gateway closes the others (their session
	// ended). An error means the broker did not answer: the tunnels stay.
	CheckTunnels(ctx context.Context, gateway string, tunnels []TunnelEvent) ([]string, error)
}

// The broker's refusals of a TunnelOpen.
var (
	// ErrTokenUsed is the broker's answer to a token id it admitted before.
	ErrTokenUsed = errors.New("gateway access token already used")
	// ErrUserLimit: the user holds the most tunnels the broker allows,
	// counted across every gateway.
	ErrUserLimit = errors.New("the user holds the most tunnels the broker allows")
	// ErrNotAdmitted: the broker did not issue the token, or its session
	// has ended.
	ErrNotAdmitted = errors.New("the broker does not admit this tunnel")
	// ErrRefused: the broker refused a report for another reason of the
	// report's or the gateway's own (an HTTP 4xx other than those above:
	// a malformed report, a revoked Gateway token); sending it again
	// would be refused again.
	ErrRefused = errors.New("the broker refused the report")
	// ErrCredentialRefused: of ErrRefused, the broker's 401 or 403, a
	// refusal of the gateway's credential (R-GW4): a deleted token,
	// another gateway's, a role that may not report. It wraps
	// ErrRefused.
	ErrCredentialRefused = fmt.Errorf("%w: the broker refused this gateway's credential", ErrRefused)
)

// TunnelEvent is one report about a tunnel.
type TunnelEvent struct {
	TokenID string    `json:"tokenId"`
	User    string    `json:"user"`
	Session string    `json:"sessionId"`
	Pool    string    `json:"hostPool"`
	Host    string    `json:"host"`
	Client  string    `json:"clientAddress"` // the client's IP address as the gateway saw it
	Gateway string    `json:"gateway"`       // this gateway's name
	At      time.Time `json:"at"`
	// Expiry is the token's expiry: after it the broker may forget the id.
	Expiry time.Time `json:"tokenExpiry"`
	// Set on TunnelClose.
	BytesToHost   int64  `json:"bytesToHost,omitempty"`
	BytesToClient int64  `json:"bytesToClient,omitempty"`
	Reason        string `json:"reason,omitempty"` // why it closed
	Reached       bool   `json:"reached,omitempty"`
	// SentAt is when this report of the close was sent, on this
	// gateway's clock as At is: the broker tells a close sent again
	// after an outage by SentAt - At, whatever its own clock says of
	// this gateway's (R-GW3).
	SentAt time.Time `json:"sentAt,omitzero"`
}

// MemoryBroker is a Broker in memory, for one gateway on its own and for
// tests: it admits each token id once while the token is valid and
// remembers ids until their tokens expire, at most MaxTokens at once.
type MemoryBroker struct {
	// MaxTokens bounds the ids remembered (0: 100,000). When full, ids of
	// expired tokens are dropped first; if none is, the tunnel is refused.
	MaxTokens int
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	mu     sync.Mutex
	used   map[string]time.Time // token id -> expiry
	events []TunnelEvent
	ended  map[string]bool // sessions EndSession ended
}

var _ Broker = (*MemoryBroker)(nil)

// maxMemoryEvents bounds the events a MemoryBroker keeps for Events.
const maxMemoryEvents = 1000

func (b *MemoryBroker) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

func (b *MemoryBroker) TunnelOpen(_ context.Context, ev TunnelEvent) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used == nil {
		b.used = map[string]time.Time{}
	}
	if _, ok := b.used[ev.TokenID]; ok {
		return ErrTokenUsed
	}
	limit := b.MaxTokens
	if limit <= 0 {
		limit = 100_000
	}
	if len(b.used) >= limit {
		now := b.now()
		for id, exp := range b.used {
			if now.After(exp.Add(time.Minute)) {
				delete(b.used, id)
			}
		}
		if len(b.used) >= limit {
			return fmt.Errorf("memory broker: %d token ids in use, at most %d", len(b.used), limit)
		}
	}
	b.used[ev.TokenID] = ev.Expiry
	b.record(ev, "open")
	return nil
}

func (b *MemoryBroker) ChannelOpen(_ context.Context, ev TunnelEvent) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record(ev, "channel")
	return nil
}

func (b *MemoryBroker) TunnelClose(_ context.Context, ev TunnelEvent) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record(ev, "close")
	return nil
}

// record keeps ev (its Reason prefixed by kind) for Events, bounded.
func (b *MemoryBroker) record(ev TunnelEvent, kind string) {
	ev.Reason = kind + ":" + ev.Reason
	if len(b.events) >= maxMemoryEvents {
		b.events = b.events[1:]
	}
	b.events = append(b.events, ev)
}

// Events returns the reports received, oldest first: their Reason starts
// with "open:", "channel:" or "close:".
func (b *MemoryBroker) Events() []TunnelEvent {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]TunnelEvent(nil), b.events...)
}

// EndSession makes CheckTunnels leave out the tunnels of session from now
// on, as the broker does once a session ended (a MemoryBroker knows no
// sessions otherwise: every other tunnel goes on).
func (b *MemoryBroker) EndSession(session string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended == nil {
		b.ended = map[string]bool{}
	}
	b.ended[session] = true
}

func (b *MemoryBroker) CheckTunnels(_ context.Context, _ string, tunnels []TunnelEvent) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var open []string
	for _, t := range tunnels {
		if !b.ended[t.Session] {
			open = append(open, t.TokenID)
		}
	}
	return open, nil
}
