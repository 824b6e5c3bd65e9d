package metrics

import (
	"context"
	"time"

	"github.com/vdibroker/vdibroker"
)

// InstrumentStore returns st with every operation timed into
// vdibroker_store_tx_duration_seconds{op} and internal errors counted in
// vdibroker_store_tx_errors_total{op}. Methods added to vdibroker.Store later
// pass through untimed until listed here.
func InstrumentStore(st vdibroker.Store) vdibroker.Store {
	return &instrumented{Store: st}
}

type instrumented struct{ vdibroker.Store }

// observe records op's duration since start and counts internal errors
// (user errors such as NotFound or Conflict are answers, not failures).
func observe(op string, start time.Time, err error) {
	ObserveStoreTx(op, time.Since(start))
	if err != nil && vdibroker.ErrorCode(err) == vdibroker.EInternal {
		storeTxErrors.WithLabelValues(op).Inc()
	}
}

func (s *instrumented) Ping(ctx context.Context) (err error) {
	defer func(t time.Time) { observe("Ping", t, err) }(time.Now())
	return s.Store.Ping(ctx)
}

func (s *instrumented) PutHostPool(ctx context.Context, p *vdibroker.HostPool) (created bool, err error) {
	defer func(t time.Time) { observe("PutHostPool", t, err) }(time.Now())
	return s.Store.PutHostPool(ctx, p)
}

func (s *instrumented) GetHostPool(ctx context.Context, name string) (p *vdibroker.HostPool, err error) {
	defer func(t time.Time) { observe("GetHostPool", t, err) }(time.Now())
	return s.Store.GetHostPool(ctx, name)
}

func (s *instrumented) ListHostPools(ctx context.Context) (ps []*vdibroker.HostPool, err error) {
	defer func(t time.Time) { observe("ListHostPools", t, err) }(time.Now())
	return s.Store.ListHostPools(ctx)
}

func (s *instrumented) DeleteHostPool(ctx context.Context, name string, force bool) (err error) {
	defer func(t time.Time) { observe("DeleteHostPool", t, err) }(time.Now())
	return s.Store.DeleteHostPool(ctx, name, force)
}

func (s *instrumented) PutSessionHost(ctx context.Context, h *vdibroker.SessionHost) (created bool, err error) {
	defer func(t time.Time) { observe("PutSessionHost", t, err) }(time.Now())
	return s.Store.PutSessionHost(ctx, h)
}

func (s *instrumented) UpdateSessionHost(ctx context.Context, pool, name string, fn func(*vdibroker.SessionHost) error) (h *vdibroker.SessionHost, err error) {
	defer func(t time.Time) { observe("UpdateSessionHost", t, err) }(time.Now())
	return s.Store.UpdateSessionHost(ctx, pool, name, fn)
}

func (s *instrumented) GetSessionHost(ctx context.Context, pool, name string) (h *vdibroker.SessionHost, err error) {
	defer func(t time.Time) { observe("GetSessionHost", t, err) }(time.Now())
	return s.Store.GetSessionHost(ctx, pool, name)
}

func (s *instrumented) ListSessionHosts(ctx context.Context, pool string) (hs []*vdibroker.SessionHost, err error) {
	defer func(t time.Time) { observe("ListSessionHosts", t, err) }(time.Now())
	return s.Store.ListSessionHosts(ctx, pool)
}

func (s *instrumented) DeleteSessionHost(ctx context.Context, pool, name string, force bool) (err error) {
	defer func(t time.Time) { observe("DeleteSessionHost", t, err) }(time.Now())
	return s.Store.DeleteSessionHost(ctx, pool, name, force)
}

func (s *instrumented) CommitPlacement(ctx context.Context, c *vdibroker.PlacementCommit) (err error) {
	defer func(t time.Time) { observe("CommitPlacement", t, err) }(time.Now())
	return s.Store.CommitPlacement(ctx, c)
}

func (s *instrumented) GetPlacement(ctx context.Context, pool, sessionID string) (b []byte, err error) {
	defer func(t time.Time) { observe("GetPlacement", t, err) }(time.Now())
	return s.Store.GetPlacement(ctx, pool, sessionID)
}

func (s *instrumented) GetUserSession(ctx context.Context, pool, id string) (u *vdibroker.UserSession, err error) {
	defer func(t time.Time) { observe("GetUserSession", t, err) }(time.Now())
	return s.Store.GetUserSession(ctx, pool, id)
}

func (s *instrumented) ListUserSessions(ctx context.Context, f vdibroker.SessionFilter) (us []*vdibroker.UserSession, err error) {
	defer func(t time.Time) { observe("ListUserSessions", t, err) }(time.Now())
	return s.Store.ListUserSessions(ctx, f)
}

func (s *instrumented) CountOpenSessions(ctx context.Context) (m map[string]vdibroker.OpenSessionCounts, err error) {
	defer func(t time.Time) { observe("CountOpenSessions", t, err) }(time.Now())
	return s.Store.CountOpenSessions(ctx)
}

func (s *instrumented) RoundRobinHost(ctx context.Context, pool string) (h string, err error) {
	defer func(t time.Time) { observe("RoundRobinHost", t, err) }(time.Now())
	return s.Store.RoundRobinHost(ctx, pool)
}

func (s *instrumented) EndSession(ctx context.Context, pool, id, reason string, now time.Time) (err error) {
	defer func(t time.Time) { observe("EndSession", t, err) }(time.Now())
	return s.Store.EndSession(ctx, pool, id, reason, now)
}

func (s *instrumented) ExpirePending(ctx context.Context, now time.Time) (n int, err error) {
	defer func(t time.Time) { observe("ExpirePending", t, err) }(time.Now())
	return s.Store.ExpirePending(ctx, now)
}

func (s *instrumented) QueueCommand(ctx context.Context, c *vdibroker.Command) (err error) {
	defer func(t time.Time) { observe("QueueCommand", t, err) }(time.Now())
	return s.Store.QueueCommand(ctx, c)
}

func (s *instrumented) RegisterHost(ctx context.Context, tokenHash string, req *vdibroker.RegisterRequest, credentialHash string, now time.Time) (h *vdibroker.SessionHost, err error) {
	defer func(t time.Time) { observe("RegisterHost", t, err) }(time.Now())
	return s.Store.RegisterHost(ctx, tokenHash, req, credentialHash, now)
}

func (s *instrumented) HostByCredential(ctx context.Context, credentialHash string) (h *vdibroker.SessionHost, err error) {
	defer func(t time.Time) { observe("HostByCredential", t, err) }(time.Now())
	return s.Store.HostByCredential(ctx, credentialHash)
}

func (s *instrumented) ApplyHeartbeat(ctx context.Context, pool, host string, hb *vdibroker.HeartbeatRequest, now time.Time) (r *vdibroker.HeartbeatResult, err error) {
	defer func(t time.Time) { observe("ApplyHeartbeat", t, err) }(time.Now())
	return s.Store.ApplyHeartbeat(ctx, pool, host, hb, now)
}

func (s *instrumented) CreateToken(ctx context.Context, tok *vdibroker.Token) (err error) {
	defer func(t time.Time) { observe("CreateToken", t, err) }(time.Now())
	return s.Store.CreateToken(ctx, tok)
}

func (s *instrumented) TokenByHash(ctx context.Context, hash string) (tok *vdibroker.Token, err error) {
	defer func(t time.Time) { observe("TokenByHash", t, err) }(time.Now())
	return s.Store.TokenByHash(ctx, hash)
}

func (s *instrumented) ListTokens(ctx context.Context) (ts []*vdibroker.Token, err error) {
	defer func(t time.Time) { observe("ListTokens", t, err) }(time.Now())
	return s.Store.ListTokens(ctx)
}

func (s *instrumented) DeleteToken(ctx context.Context, id string) (err error) {
	defer func(t time.Time) { observe("DeleteToken", t, err) }(time.Now())
	return s.Store.DeleteToken(ctx, id)
}

func (s *instrumented) CreateRegistrationToken(ctx context.Context, tok *vdibroker.RegistrationToken) (err error) {
	defer func(t time.Time) { observe("CreateRegistrationToken", t, err) }(time.Now())
	return s.Store.CreateRegistrationToken(ctx, tok)
}
