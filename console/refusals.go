package console

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
)

// AuditRefusals is a Refusals that writes to an audit store within a
// budget: in each Window, the first refusal of an address is a row of its
// own (for at most Budget addresses); the others are counted, and written
// as one row once the window has passed (with the next refusal after it).
// So a window writes at most Budget+1 rows, whatever arrives, and a row's
// detail is what the caller cut. Rows are also logged as "audit" lines.
type AuditRefusals struct {
	Store  vdibroker.AuditStore
	Logger *slog.Logger
	// Now is the clock windows are measured by (nil: time.Now).
	Now func() time.Time
	// Window (0: a minute) and Budget (0: 100).
	Window time.Duration
	Budget int

	mu     sync.Mutex
	start  time.Time           // the window's
	seen   map[string]struct{} // addresses with a row in the window
	more   int                 // refusals counted, not written
	others map[string]struct{} // their addresses (up to Budget)
	kind   string
}

// Refused implements Refusals.
func (a *AuditRefusals) Refused(ctx context.Context, kind, addr, detail string) {
	now := time.Now()
	if a.Now != nil {
		now = a.Now()
	}
	window, budget := a.Window, a.Budget
	if window <= 0 {
		window = time.Minute
	}
	if budget <= 0 {
		budget = 100
	}
	a.mu.Lock()
	var rows []*vdibroker.AuditEntry
	if a.seen == nil || !now.Before(a.start.Add(window)) {
		if a.more > 0 {
			rows = append(rows, a.entry(a.start, a.kind, "", fmt.Sprintf("%d more refusals from %d or more addresses between %s and %s",
				a.more, len(a.others), a.start.UTC().Format(time.RFC3339), a.start.Add(window).UTC().Format(time.RFC3339))))
		}
		a.start, a.seen, a.more, a.others = now, map[string]struct{}{}, 0, map[string]struct{}{}
	}
	_, dup := a.seen[addr]
	switch {
	case !dup && len(a.seen) < budget:
		a.seen[addr] = struct{}{}
		rows = append(rows, a.entry(now, kind, addr, detail))
	default:
		a.more++
		a.kind = kind
		if len(a.others) < budget {
			a.others[addr] = struct{}{}
		}
	}
	a.mu.Unlock()
	for _, ev := range rows {
		if err := a.Store.AppendAudit(ctx, ev); err != nil {
			if a.Logger != nil {
				a.Logger.Error("console: cannot record a refused sign-in", "err", err)
			}
			continue
		}
		if a.Logger != nil {
			a.Logger.Info("audit", "audit", ev)
		}
	}
}

func (a *AuditRefusals) entry(t time.Time, kind, addr, detail string) *vdibroker.AuditEntry {
	return &vdibroker.AuditEntry{Time: t.UTC(), Principal: vdibroker.AuditPrincipal{Kind: vdibroker.PrincipalAnonymous},
		RemoteAddr: addr, Action: "signin", Target: kind, Outcome: vdibroker.AuditRefused, Error: detail}
}
