package outage

import (
	"context"
	"errors"
	"time"

	"github.com/vdibroker/vdibroker"
)

// guardedStore is the store as the service and its transports use it: every
// call runs under the store timeout, so a paused or unreachable database
// answers within it instead of hanging (R-OUT1), and every failure goes
// through Health, which turns an outage into StoreUnavailable. During an
// outage calls fail at once; the prober alone asks the store whether it
// is back.
type guardedStore struct {
	vdibroker.Store
	timeout time.Duration
	health  *Health
}

var _ vdibroker.Store = (*guardedStore)(nil)

// Guard returns st as the broker uses it: every call bounded by timeout,
// and every failure checked by h, which turns an outage into
// StoreUnavailable.
func Guard(st vdibroker.Store, timeout time.Duration, h *Health) vdibroker.Store {
	return &guardedStore{Store: st, timeout: timeout, health: h}
}

// errDown is the cause of a call refused during an outage.
var errDown = errors.New("the store is down; waiting for it to answer a ping")

// begin returns the call's context under the store timeout, or the
// outage's error.
func (g *guardedStore) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if g.health.Down() {
		return nil, nil, unavailable(errDown)
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	return ctx, cancel, nil
}

// Ping asks the store; a failure is confirmed like any other (a caller
// that hangs up, or one slow ping, does not start an outage).
func (g *guardedStore) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	err := g.Store.Ping(ctx)
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	return g.health.check(err)
}

func (g *guardedStore) PutHostPool(ctx context.Context, p *vdibroker.HostPool) (v bool, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.PutHostPool(ctx, p)
	return v, g.health.check(err)
}

func (g *guardedStore) CreateHostPool(ctx context.Context, p *vdibroker.HostPool) error {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	return g.health.check(g.Store.CreateHostPool(ctx, p))
}

func (g *guardedStore) GetHostPool(ctx context.Context, name string) (v *vdibroker.HostPool, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.GetHostPool(ctx, name)
	return v, g.health.check(err)
}

func (g *guardedStore) ListHostPools(ctx context.Context) (v []*vdibroker.HostPool, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.ListHostPools(ctx)
	return v, g.health.check(err)
}

func (g *guardedStore) DeleteHostPool(ctx context.Context, name string, force bool) error {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	return g.health.check(g.Store.DeleteHostPool(ctx, name, force))
}

func (g *guardedStore) PutSessionHost(ctx context.Context, h *vdibroker.SessionHost) (v bool, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.PutSessionHost(ctx, h)
	return v, g.health.check(err)
}

func (g *guardedStore) UpdateSessionHost(ctx context.Context, pool, name string, fn func(*vdibroker.SessionHost) error) (v *vdibroker.SessionHost, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.UpdateSessionHost(ctx, pool, name, fn)
	return v, g.health.check(err)
}

// SetPowerState and SetAutoscaleDrain are the PowerStore (R-A4).
func (g *guardedStore) SetPowerState(ctx context.Context, pool, host, state string, now time.Time, from ...string) (v *vdibroker.SessionHost, changed bool, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, changed, err
	}
	defer cancel()
	v, changed, err = g.Store.SetPowerState(ctx, pool, host, state, now, from...)
	return v, changed, g.health.check(err)
}

func (g *guardedStore) SetAutoscaleDrain(ctx context.Context, pool, host string, on bool) (v *vdibroker.SessionHost, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.SetAutoscaleDrain(ctx, pool, host, on)
	return v, g.health.check(err)
}

func (g *guardedStore) GetSessionHost(ctx context.Context, pool, name string) (v *vdibroker.SessionHost, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.GetSessionHost(ctx, pool, name)
	return v, g.health.check(err)
}

func (g *guardedStore) ListSessionHosts(ctx context.Context, pool string) (v []*vdibroker.SessionHost, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.ListSessionHosts(ctx, pool)
	return v, g.health.check(err)
}

func (g *guardedStore) ListHostStates(ctx context.Context, pool string) (v []*vdibroker.SessionHost, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.ListHostStates(ctx, pool)
	return v, g.health.check(err)
}

func (g *guardedStore) DeleteSessionHost(ctx context.Context, pool, name string, force bool) error {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	return g.health.check(g.Store.DeleteSessionHost(ctx, pool, name, force))
}

func (g *guardedStore) CommitPlacement(ctx context.Context, c *vdibroker.PlacementCommit) error {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	return g.health.check(g.Store.CommitPlacement(ctx, c))
}

func (g *guardedStore) RoundRobinHost(ctx context.Context, pool string) (v string, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.RoundRobinHost(ctx, pool)
	return v, g.health.check(err)
}

func (g *guardedStore) GetPlacement(ctx context.Context, pool, sessionID string) (v []byte, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.GetPlacement(ctx, pool, sessionID)
	return v, g.health.check(err)
}

func (g *guardedStore) GetUserSession(ctx context.Context, pool, id string) (v *vdibroker.UserSession, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.GetUserSession(ctx, pool, id)
	return v, g.health.check(err)
}

func (g *guardedStore) ListUserSessions(ctx context.Context, f vdibroker.SessionFilter) (v []*vdibroker.UserSession, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.ListUserSessions(ctx, f)
	return v, g.health.check(err)
}

func (g *guardedStore) CountOpenSessions(ctx context.Context) (v map[string]vdibroker.OpenSessionCounts, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.CountOpenSessions(ctx)
	return v, g.health.check(err)
}

func (g *guardedStore) EndSession(ctx context.Context, pool, id, reason string, now time.Time) error {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	return g.health.check(g.Store.EndSession(ctx, pool, id, reason, now))
}

func (g *guardedStore) ExpirePending(ctx context.Context, now time.Time) (v int, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.ExpirePending(ctx, now)
	return v, g.health.check(err)
}

func (g *guardedStore) QueueCommand(ctx context.Context, c *vdibroker.Command) error {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	return g.health.check(g.Store.QueueCommand(ctx, c))
}

func (g *guardedStore) RegisterHost(ctx context.Context, tokenHash string, req *vdibroker.RegisterRequest, credentialHash string, now time.Time) (v *vdibroker.SessionHost, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.RegisterHost(ctx, tokenHash, req, credentialHash, now)
	return v, g.health.check(err)
}

func (g *guardedStore) HostByCredential(ctx context.Context, credentialHash string) (v *vdibroker.SessionHost, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.HostByCredential(ctx, credentialHash)
	return v, g.health.check(err)
}

func (g *guardedStore) ApplyHeartbeat(ctx context.Context, pool, host string, hb *vdibroker.HeartbeatRequest, now time.Time) (v *vdibroker.HeartbeatResult, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.ApplyHeartbeat(ctx, pool, host, hb, now)
	return v, g.health.check(err)
}

func (g *guardedStore) CreateToken(ctx context.Context, t *vdibroker.Token) error {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	return g.health.check(g.Store.CreateToken(ctx, t))
}

func (g *guardedStore) TokenByHash(ctx context.Context, hash string) (v *vdibroker.Token, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.TokenByHash(ctx, hash)
	return v, g.health.check(err)
}

func (g *guardedStore) ListTokens(ctx context.Context) (v []*vdibroker.Token, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.ListTokens(ctx)
	return v, g.health.check(err)
}

func (g *guardedStore) DeleteToken(ctx context.Context, id string) error {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	return g.health.check(g.Store.DeleteToken(ctx, id))
}

func (g *guardedStore) CreateRegistrationToken(ctx context.Context, t *vdibroker.RegistrationToken) error {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	return g.health.check(g.Store.CreateRegistrationToken(ctx, t))
}

func (g *guardedStore) ListRegistrationTokens(ctx context.Context, pool string) (v []*vdibroker.RegistrationToken, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.ListRegistrationTokens(ctx, pool)
	return v, g.health.check(err)
}

func (g *guardedStore) DeleteRegistrationToken(ctx context.Context, pool, id string) error {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	return g.health.check(g.Store.DeleteRegistrationToken(ctx, pool, id))
}

func (g *guardedStore) ResetRegistration(ctx context.Context, pool, host string) error {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	return g.health.check(g.Store.ResetRegistration(ctx, pool, host))
}

// PruneHistory deletes in many short batches (store.PruneHistory); the
// whole of it may take longer than one store timeout, so it runs under its
// caller's deadline. It still fails at once during an outage.
func (g *guardedStore) PruneHistory(ctx context.Context, before time.Time) (v int, err error) {
	if g.health.Down() {
		return 0, unavailable(errDown)
	}
	v, err = g.Store.PruneHistory(ctx, before)
	return v, g.health.check(err)
}

func (g *guardedStore) GetFederation(ctx context.Context) (v *vdibroker.Federation, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.GetFederation(ctx)
	return v, g.health.check(err)
}

func (g *guardedStore) PutFederation(ctx context.Context, f *vdibroker.Federation) (v bool, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.PutFederation(ctx, f)
	return v, g.health.check(err)
}

func (g *guardedStore) OpenSessionsOfUser(ctx context.Context, user string, pools []string) (v []*vdibroker.UserSession, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.OpenSessionsOfUser(ctx, user, pools)
	return v, g.health.check(err)
}

func (g *guardedStore) ListSessionHostsPage(ctx context.Context, pool, after string, limit int) (v []*vdibroker.SessionHost, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.ListSessionHostsPage(ctx, pool, after, limit)
	return v, g.health.check(err)
}

func (g *guardedStore) AppendAudit(ctx context.Context, e *vdibroker.AuditEntry) error {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	return g.health.check(g.Store.AppendAudit(ctx, e))
}

func (g *guardedStore) ListAudit(ctx context.Context, f vdibroker.AuditFilter) (v []*vdibroker.AuditEntry, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.ListAudit(ctx, f)
	return v, g.health.check(err)
}

func (g *guardedStore) PutScalingPlan(ctx context.Context, p *vdibroker.ScalingPlan) (v bool, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.PutScalingPlan(ctx, p)
	return v, g.health.check(err)
}

func (g *guardedStore) GetScalingPlan(ctx context.Context, name string) (v *vdibroker.ScalingPlan, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.GetScalingPlan(ctx, name)
	return v, g.health.check(err)
}

func (g *guardedStore) ListScalingPlans(ctx context.Context) (v []*vdibroker.ScalingPlan, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.ListScalingPlans(ctx)
	return v, g.health.check(err)
}

func (g *guardedStore) DeleteScalingPlan(ctx context.Context, name string) error {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	return g.health.check(g.Store.DeleteScalingPlan(ctx, name))
}

func (g *guardedStore) ScalingPlanForPool(ctx context.Context, pool string) (v *vdibroker.ScalingPlan, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.ScalingPlanForPool(ctx, pool)
	return v, g.health.check(err)
}

func (g *guardedStore) AcquireAutoscaleLease(ctx context.Context, holder string, now time.Time, ttl time.Duration) (v bool, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.AcquireAutoscaleLease(ctx, holder, now, ttl)
	return v, g.health.check(err)
}

func (g *guardedStore) ReleaseAutoscaleLease(ctx context.Context, holder string) error {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	return g.health.check(g.Store.ReleaseAutoscaleLease(ctx, holder))
}

func (g *guardedStore) AppendAutoscaleEvaluation(ctx context.Context, e *vdibroker.AutoscaleEvaluation) error {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	return g.health.check(g.Store.AppendAutoscaleEvaluation(ctx, e))
}

func (g *guardedStore) ListAutoscaleEvaluations(ctx context.Context, pool string, before int64, limit int) (v []*vdibroker.AutoscaleEvaluation, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.ListAutoscaleEvaluations(ctx, pool, before, limit)
	return v, g.health.check(err)
}

func (g *guardedStore) ListAutoscaleStates(ctx context.Context) (v []*vdibroker.AutoscaleState, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.ListAutoscaleStates(ctx)
	return v, g.health.check(err)
}

func (g *guardedStore) PutAutoscaleState(ctx context.Context, st *vdibroker.AutoscaleState) error {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	return g.health.check(g.Store.PutAutoscaleState(ctx, st))
}

func (g *guardedStore) DeleteAutoscaleState(ctx context.Context, pool string) error {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	return g.health.check(g.Store.DeleteAutoscaleState(ctx, pool))
}

func (g *guardedStore) PutEscrows(ctx context.Context, replica string, want []vdibroker.Escrow, now time.Time) (v []vdibroker.Escrow, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.PutEscrows(ctx, replica, want, now)
	return v, g.health.check(err)
}

func (g *guardedStore) ListEscrows(ctx context.Context, pool string, now time.Time) (v []vdibroker.Escrow, err error) {
	ctx, cancel, err := g.begin(ctx)
	if err != nil {
		return v, err
	}
	defer cancel()
	v, err = g.Store.ListEscrows(ctx, pool, now)
	return v, g.health.check(err)
}
