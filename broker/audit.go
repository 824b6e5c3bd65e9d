package broker

import (
	"context"

	"github.com/vdibroker/vdibroker"
)

// The audit service (vdibroker.AuditService). The store writes an entry
// in the transaction of the change it records (vdibroker.WithAudit); what
// has no change of its own (a refusal, a sign-in) is appended alone.

var _ vdibroker.AuditService = (*Service)(nil)

// AppendAudit writes one entry in a transaction of its own.
func (s *Service) AppendAudit(ctx context.Context, e *vdibroker.AuditEntry) error {
	return s.store.AppendAudit(ctx, e)
}

// ListAudit lists the entries f selects; a caller scoped to host pools
// sees the entries of its pools.
func (s *Service) ListAudit(ctx context.Context, f vdibroker.AuditFilter) ([]*vdibroker.AuditEntry, error) {
	if p := vdibroker.PrincipalFrom(ctx); p != nil {
		f.HostPools = p.HostPools
	}
	return s.store.ListAudit(ctx, f)
}
