package console

import (
	"context"
	"log/slog"
	"strings"

	"github.com/vdibroker/vdibroker"
)

// RefusalRecorder is the broker's bounded refusal audit
// (vdibroker.AuditService.RecordRefusal).
type RefusalRecorder interface {
	RecordRefusal(ctx context.Context, e *vdibroker.AuditEntry) (written bool, err error)
}

// AuditRefusals is the Refusals of a broker: each refused sign-in goes to
// the broker's refusal audit, which writes the first of an address in a
// window whole while its budget lasts and counts the rest (R-SEC), as it
// does for the API's refused anonymous requests; an entry written is also
// logged as an "audit" line.
type AuditRefusals struct {
	Audit  RefusalRecorder
	Logger *slog.Logger
}

// Refused implements Refusals: a refused sign-in is action "signin"; a
// signed-in form refused by its CSRF or same-site check (a kind ending
// "/csrf", the user portal's) is action "form". The entry names the
// request (vdibroker.RequestIDFrom): the reference the portal shows beside
// a refused single sign-on, by which her helpdesk finds why.
func (a *AuditRefusals) Refused(ctx context.Context, kind, addr, detail string) {
	action := "signin"
	if strings.HasSuffix(kind, "/csrf") {
		action = "form"
	}
	e := &vdibroker.AuditEntry{Principal: vdibroker.AuditPrincipal{Kind: vdibroker.PrincipalAnonymous},
		RemoteAddr: addr, RequestID: vdibroker.RequestIDFrom(ctx), Action: action, Target: kind, Outcome: vdibroker.AuditRefused, Error: detail}
	written, err := a.Audit.RecordRefusal(ctx, e)
	switch {
	case err != nil && a.Logger != nil:
		a.Logger.Error("console: cannot record a refused sign-in", "err", err)
	case written && a.Logger != nil:
		a.Logger.Info("audit", "audit", e)
	}
}
