package gateway

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Close reports the broker did not take (R-GW3). A tunnel's close is
// reported once, when it ends; a broker that cannot take it then (all its
// replicas restarting, its store down) would count the tunnel for its
// user until the broker's own bound (a day) and never record its end. The
// gateway keeps such reports and sends them again every closeRetryEvery,
// oldest first, until the broker takes or refuses each:
//   - a refusal (ErrRefused, ErrNotAdmitted, ErrTokenUsed) is final: sent
//     again it would be refused again;
//   - a round ends at the first report the broker does not take: one call
//     per round to a broker that is down, not one per report;
//   - a report older than closeRetryFor is dropped (the broker no longer
//     counts its tunnel), as is the oldest when maxCloseRetries are kept:
//     what a broker's long outage leaves costs bounded memory.
//
// They are kept in this process's memory only: a gateway that stops
// first loses them, and the broker's bound applies.
const (
	closeRetryEvery = 15 * time.Second
	closeRetryFor   = 24 * time.Hour
	maxCloseRetries = 10_000
)

// closeRetries holds the close reports to send again, oldest first.
type closeRetries struct {
	mu     sync.Mutex
	events []TunnelEvent
	// running: the loop that sends them again is started, at the first
	// report kept (a gateway whose broker always takes them has no timer
	// of it, nor a test's fake clock a waiter).
	running bool
}

// finalRefusal reports whether err is the broker's refusal of a report,
// which sending it again would not change.
func finalRefusal(err error) bool {
	return errors.Is(err, ErrRefused) || errors.Is(err, ErrNotAdmitted) || errors.Is(err, ErrTokenUsed)
}

// keepClose keeps ev, whose report the broker did not take, to send again
// every closeRetryEvery from now on.
func (g *Gateway) keepClose(ev TunnelEvent) {
	c := &g.closes
	c.mu.Lock()
	if len(c.events) >= maxCloseRetries {
		c.events = c.events[1:]
		g.m.closeReports.WithLabelValues("dropped").Inc()
	}
	c.events = append(c.events, ev)
	g.m.closesPending.Set(float64(len(c.events)))
	if !c.running {
		// From a tunnel's finish, which g.wg counts: the Add is not
		// one after Close's Wait began.
		c.running = true
		tk := g.cfg.Clock.NewTicker(closeRetryEvery)
		g.wg.Add(1)
		go g.tickLoop(tk, g.retryCloses)
	}
	c.mu.Unlock()
}

// retryCloses sends the kept close reports again, oldest first, until
// the broker does not take one.
func (g *Gateway) retryCloses() {
	c := &g.closes
	now := g.cfg.Clock.Now()
	for g.ctx.Err() == nil {
		c.mu.Lock()
		for len(c.events) > 0 && now.Sub(c.events[0].At) > closeRetryFor {
			c.events = c.events[1:]
			g.m.closeReports.WithLabelValues("dropped").Inc()
		}
		g.m.closesPending.Set(float64(len(c.events)))
		if len(c.events) == 0 {
			c.events = nil // the array a long outage grew goes too
			c.mu.Unlock()
			return
		}
		ev := c.events[0]
		c.mu.Unlock()
		// Sent now, At long ago: the broker records the tunnel's end
		// but leaves its session to the agent (R-GW3).
		ev.SentAt = g.cfg.Clock.Now()

		ctx, cancel := context.WithTimeout(g.ctx, brokerTimeout)
		err := g.cfg.Broker.TunnelClose(ctx, ev)
		cancel()
		if err != nil && !finalRefusal(err) {
			if g.ctx.Err() == nil {
				g.cfg.Logger.Warn("report of tunnel closes to the broker failed again; tried again later", "pending", g.pendingCloses(), "err", cut(err.Error(), 200))
			}
			return
		}
		c.mu.Lock()
		// keepClose drops only the oldest, so ev is first still unless
		// it was dropped meanwhile.
		if len(c.events) > 0 && c.events[0].TokenID == ev.TokenID {
			c.events = c.events[1:]
		}
		g.m.closesPending.Set(float64(len(c.events)))
		c.mu.Unlock()
		if err != nil {
			g.m.closeReports.WithLabelValues("refused").Inc()
			g.cfg.Logger.Warn("the broker refused a tunnel's close report sent again; dropped", "tokenId", ev.TokenID, "err", cut(err.Error(), 200))
			continue
		}
		g.m.closeReports.WithLabelValues("delivered").Inc()
		g.cfg.Logger.Info("tunnel close reported to the broker after a failure", "tokenId", ev.TokenID, "user", ev.User,
			"session", ev.Session, "closedAt", ev.At.UTC().Format(time.RFC3339))
	}
}

// pendingCloses is how many close reports are kept to send again.
func (g *Gateway) pendingCloses() int {
	g.closes.mu.Lock()
	defer g.closes.mu.Unlock()
	return len(g.closes.events)
}
