package autoscale

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/vdibroker/vdibroker"
)

// Actions is what the autoscaler does to pools and hosts: the broker
// service (*broker.Service) in serve, an in-memory pool in unit tests.
type Actions interface {
	// SessionHosts returns a pool and its hosts with their session counts.
	SessionHosts(ctx context.Context, pool string) (*vdibroker.HostPool, []*vdibroker.SessionHost, error)
	// SetLoadBalancer sets the pool's load balancer type to to while it
	// is from, on the pool as the write reads it, changing nothing else
	// (R-A2, R-E13): an administrator's change that lands after the
	// autoscaler read the pool is kept. It returns the pool as stored and
	// whether it was set; not set (nil, false, nil) means the load
	// balancer is no longer from.
	SetLoadBalancer(ctx context.Context, pool, from, to string) (*vdibroker.HostPool, bool, error)
	// StartHost asks the pool's power driver to start the host (R-A4).
	StartHost(ctx context.Context, pool, host, by string) error
	// StopHost asks the driver to stop it: Conflict while it has sessions
	// unless force.
	StopHost(ctx context.Context, pool, host string, force bool, by string) error
	// SetAutoscaleDrain sets or clears the host's autoscale drain, never
	// its allowNewSession (R-A3).
	SetAutoscaleDrain(ctx context.Context, pool, host string, on bool) error
}

// Store is the autoscaler's part of vdibroker.Store.
type Store interface {
	ListScalingPlans(ctx context.Context) ([]*vdibroker.ScalingPlan, error)
	// ListUserSessions lists a host's open sessions (SessionHost set).
	ListUserSessions(ctx context.Context, f vdibroker.SessionFilter) ([]*vdibroker.UserSession, error)
	// QueueCommand queues SendMessage and Logoff for an agent (R-S4).
	QueueCommand(ctx context.Context, c *vdibroker.Command) error
	vdibroker.AutoscaleStore
}

// Config configures an Autoscaler. Store and Actions are required.
type Config struct {
	Store   Store
	Actions Actions
	// Interval between evaluations (0: a minute, serve
	// --autoscale-interval). The lease lasts two intervals.
	Interval time.Duration
	// Holder names this replica in the lease and the records ("": a
	// random id).
	Holder string
	// Clock is the autoscaler's time and the ticker of Run (nil = the
	// real clock).
	Clock clock.WithTicker
	// Now, when set, is the time instead of Clock's (a test's).
	Now    func() time.Time
	Logger *slog.Logger // nil discards
	// Observe, when set, is called with every evaluation recorded (for
	// example metrics.ObserveAutoscale).
	Observe func(e *vdibroker.AutoscaleEvaluation)
	// StartTimeout is how long a host the autoscaler started may stay
	// Starting and still count as capacity to come (0: 10 minutes, the
	// power service's start timeout).
	StartTimeout time.Duration
	// HeardSince, when set, is since when the broker has heard its
	// hosts (outage.Health.HeardSince: its start or the end of its last
	// store outage; serve sets it); nil: always (a test's). Until a
	// pool's heartbeat timeout has passed since then, a host whose agent
	// is silent may just not have reported yet, and the pool's hosts are
	// not started (Host.Unheard).
	HeardSince func() time.Time
	// Minute is how long a minute of the plan's waits lasts
	// (rampDownWaitTimeMinutes, stopHostAfter*Minutes); 0: a minute.
	// Only end-to-end tests shorten it (serve's hidden --autoscale-minute).
	Minute time.Duration
}

// By is who the autoscaler's power actions are by, in logs and audit.
const By = "autoscale"

// DefaultNotificationMessage is sent when a plan forces logoff without a
// rampDownNotificationMessage; %s is the wait, "1 minute", "15 minutes".
const DefaultNotificationMessage = "This session host is shutting down in %s. Save your work and sign out; you can sign in again at once."

// Autoscaler evaluates every pool of every scaling plan at an interval
// while it holds the lease.
type Autoscaler struct {
	store    Store
	act      Actions
	interval time.Duration
	holder   string
	clock    clock.WithTicker
	now      func() time.Time
	log      *slog.Logger
	observe  func(*vdibroker.AutoscaleEvaluation)
	startTO  time.Duration
	minute   time.Duration
	heard    func() time.Time
}

// New returns an Autoscaler; Run starts it.
func New(cfg Config) *Autoscaler {
	a := &Autoscaler{store: cfg.Store, act: cfg.Actions, interval: cfg.Interval, holder: cfg.Holder,
		clock: cfg.Clock, now: cfg.Now, log: cfg.Logger, observe: cfg.Observe, startTO: cfg.StartTimeout, minute: cfg.Minute,
		heard: cfg.HeardSince}
	if a.minute <= 0 {
		a.minute = time.Minute
	}
	if a.startTO <= 0 {
		a.startTO = 10 * time.Minute
	}
	if a.interval <= 0 {
		a.interval = time.Minute
	}
	if a.holder == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		a.holder = hex.EncodeToString(b[:])
	}
	if a.clock == nil {
		a.clock = clock.RealClock{}
	}
	if a.now == nil {
		a.now = a.clock.Now
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.heard == nil {
		a.heard = func() time.Time { return time.Time{} }
	}
	return a
}

// Holder returns the replica's lease holder id.
func (a *Autoscaler) Holder() string { return a.holder }

// Run evaluates at once and then every interval until ctx ends, then
// releases the lease so that another replica takes over at its next
// evaluation. A replica that dies without releasing it is replaced once
// the lease expires, within two intervals.
func (a *Autoscaler) Run(ctx context.Context) error {
	t := a.clock.NewTicker(a.interval)
	defer t.Stop()
	for {
		if _, err := a.Evaluate(ctx); err != nil && ctx.Err() == nil {
			a.log.Error("autoscale evaluation", "err", err)
		}
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := a.store.ReleaseAutoscaleLease(rctx, a.holder); err != nil {
				a.log.Warn("release the autoscale lease", "err", err)
			}
			return ctx.Err()
		case <-t.C():
		}
	}
}

// Evaluate takes or renews the lease and, if this replica holds it,
// evaluates every pool of every plan, and every pool a plan no longer
// covers that the autoscaler had changed. It reports whether it held the
// lease. One pool's failure does not stop the others.
func (a *Autoscaler) Evaluate(ctx context.Context) (bool, error) {
	now := a.now()
	ok, err := a.store.AcquireAutoscaleLease(ctx, a.holder, now, 2*a.interval)
	if err != nil || !ok {
		return false, err
	}
	plans, err := a.store.ListScalingPlans(ctx)
	if err != nil {
		return true, fmt.Errorf("list scaling plans: %w", err)
	}
	states, err := a.store.ListAutoscaleStates(ctx)
	if err != nil {
		return true, fmt.Errorf("list autoscale states: %w", err)
	}
	byPool := map[string]*vdibroker.AutoscaleState{}
	for _, st := range states {
		byPool[st.HostPool] = st
	}
	covered := map[string]bool{}
	var errs []error
	renewed := now
	// keep renews the lease during a long evaluation (every half
	// interval), so that it never expires while this replica acts; false
	// when another replica has it.
	keep := func() bool {
		t := a.now()
		if t.Sub(renewed) < a.interval/2 {
			return true
		}
		ok, err := a.store.AcquireAutoscaleLease(ctx, a.holder, t, 2*a.interval)
		if err != nil || !ok {
			errs = append(errs, fmt.Errorf("autoscale lease lost during the evaluation: %w", err))
			return false
		}
		renewed = t
		return true
	}
	for _, plan := range plans {
		for _, pool := range plan.HostPools {
			if covered[pool] {
				continue // a pool is in one plan (ScalingStore refuses a second)
			}
			covered[pool] = true
			if !keep() {
				return true, errors.Join(errs...)
			}
			if err := a.evaluatePool(ctx, plan, pool, byPool[pool], now); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, st := range states {
		if !covered[st.HostPool] {
			if !keep() {
				return true, errors.Join(errs...)
			}
			if err := a.release(ctx, st, now); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return true, errors.Join(errs...)
}

// eval is one pool's evaluation in progress.
type eval struct {
	a    *Autoscaler
	rec  *vdibroker.AutoscaleEvaluation
	st   *vdibroker.AutoscaleState
	pool *vdibroker.HostPool
	sc   *vdibroker.ScalingSchedule
	now  time.Time
	// heard is since when the broker has heard its hosts (Config.HeardSince).
	heard time.Time
	// notes are said in the record when nothing was done.
	notes []string
	// stored: the store has a state for the pool.
	stored bool
}

func (e *eval) did(action, host, reason string, err error) {
	a := vdibroker.AutoscaleAction{Action: action, Host: host, Reason: reason}
	if err != nil {
		a.Error = err.Error()
		e.a.log.Warn("autoscale action failed", "pool", e.rec.HostPool, "action", action, "host", host, "err", err)
	} else {
		e.a.log.Info("autoscale", "pool", e.rec.HostPool, "action", action, "host", host, "reason", reason)
	}
	e.rec.Actions = append(e.rec.Actions, a)
}

func (a *Autoscaler) evaluatePool(ctx context.Context, plan *vdibroker.ScalingPlan, poolName string, st *vdibroker.AutoscaleState, now time.Time) error {
	e := &eval{a: a, now: now, heard: a.heard(), stored: st != nil, rec: &vdibroker.AutoscaleEvaluation{HostPool: poolName, Time: now.UTC(), Holder: a.holder, Plan: plan.Name}}
	if st == nil {
		st = &vdibroker.AutoscaleState{HostPool: poolName}
	}
	e.st = st
	err := e.run(ctx, plan)
	if err != nil {
		e.notes = append(e.notes, "evaluation failed: "+err.Error())
	}
	return errors.Join(err, a.finish(ctx, e))
}

// finish stores the state and the record.
func (a *Autoscaler) finish(ctx context.Context, e *eval) error {
	if len(e.rec.Actions) == 0 || len(e.notes) > 0 {
		e.rec.Note = strings.Join(e.notes, "; ")
	}
	var errs []error
	switch {
	case e.st.OriginalLoadBalancer == "" && e.st.AppliedLoadBalancer == "" && len(e.st.Hosts) == 0:
		if e.stored {
			errs = append(errs, a.store.DeleteAutoscaleState(ctx, e.st.HostPool))
		}
	default:
		e.st.UpdateTime = e.now.UTC()
		errs = append(errs, a.store.PutAutoscaleState(ctx, e.st))
	}
	errs = append(errs, a.store.AppendAutoscaleEvaluation(ctx, e.rec))
	if a.observe != nil {
		a.observe(e.rec)
	}
	return errors.Join(errs...)
}

func (e *eval) run(ctx context.Context, plan *vdibroker.ScalingPlan) error {
	where, ok, err := PhaseAt(plan, e.now)
	if err != nil {
		return err
	}
	if !ok {
		e.notes = append(e.notes, "no schedule applies: the plan has no schedule with a day of the week")
		return nil
	}
	e.sc = where.Schedule
	e.rec.Schedule, e.rec.Phase, e.rec.LocalTime = where.Schedule.Name, where.Phase, where.Local.Format("Mon 2006-01-02 15:04 MST")
	pool, all, err := e.a.act.SessionHosts(ctx, e.rec.HostPool)
	if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
		e.notes = append(e.notes, "the host pool does not exist")
		e.st.Hosts = nil
		return nil
	}
	if err != nil {
		return err
	}
	e.pool = pool
	if pool.HostPoolType == vdibroker.Personal {
		return e.personal(ctx, all)
	}
	e.loadBalancer(ctx, where.Phase)

	in := Input{Phase: where.Phase, Schedule: where.Schedule, MaxSessionLimit: pool.MaxSessionLimit}
	for _, h := range all {
		in.Hosts = append(in.Hosts, e.host(h))
	}
	d := Plan(in)
	e.rec.Hosts, e.rec.RunningHosts, e.rec.StartingHosts, e.rec.Sessions = d.Hosts, d.Running, d.Starting, d.Sessions
	e.rec.AvailableCapacity, e.rec.UsedCapacityPct, e.rec.ThresholdPct = d.Available, d.UsedPct, d.ThresholdPct
	e.rec.MinimumHosts, e.rec.MaximumHosts = d.MinimumHosts, d.MaximumHosts
	if d.Note != "" {
		e.notes = append(e.notes, d.Note)
	}
	if pool.PowerDriver == "" {
		e.notes = append(e.notes, "the pool has no powerDriver: the autoscaler starts and stops nothing")
		return nil
	}
	undrained := map[string]bool{}
	for _, s := range d.Undrain {
		undrained[s.Host] = true
		e.undrain(ctx, s.Host, s.Reason)
	}
	for _, s := range d.Start {
		err := e.a.act.StartHost(ctx, pool.Name, s.Host, By)
		e.did(vdibroker.ActionStart, s.Host, s.Reason, err)
		if err == nil {
			t := e.now.UTC()
			e.hostState(s.Host).StartTime = &t
			for _, h := range all {
				if h.Name == s.Host {
					h.PowerState = vdibroker.PowerStarting // as the power service recorded it
				}
			}
		}
	}
	defer e.forget(all)
	if !stops(where.Phase) {
		return nil
	}
	for _, s := range d.Drain {
		err := e.a.act.SetAutoscaleDrain(ctx, pool.Name, s.Host, true)
		e.did(vdibroker.ActionDrain, s.Host, s.Reason, err)
		if err != nil {
			continue
		}
		for _, h := range all {
			if h.Name == s.Host {
				h.AutoscaleDrain = true
			}
		}
	}
	// Carry every drain on: notify, wait, log off, stop (R-A3).
	for _, h := range all {
		if h.AutoscaleDrain && !undrained[h.Name] {
			if err := e.drain(ctx, h); err != nil {
				e.did(vdibroker.ActionStop, h.Name, "draining", err)
			}
		}
	}
	return nil
}

// forget drops what is kept of hosts neither drained nor starting
// (deleted, stopped, up, or undrained by hand or in this evaluation).
func (e *eval) forget(all []*vdibroker.SessionHost) {
	for name, hs := range e.st.Hosts {
		i := slices.IndexFunc(all, func(h *vdibroker.SessionHost) bool { return h.Name == name })
		if i < 0 {
			delete(e.st.Hosts, name)
			continue
		}
		if all[i].PowerState != vdibroker.PowerStarting {
			hs.StartTime = nil // up, or failed: the start is over
		}
		if !all[i].AutoscaleDrain {
			hs.DrainTime, hs.MinSessions, hs.Notified, hs.LoggedOff = nil, 0, false, false
		}
		if hs.StartTime == nil && hs.DrainTime == nil {
			delete(e.st.Hosts, name)
		}
	}
}

// hostState returns the state kept for host, creating it.
func (e *eval) hostState(host string) *vdibroker.AutoscaleHostState {
	if e.st.Hosts == nil {
		e.st.Hosts = map[string]*vdibroker.AutoscaleHostState{}
	}
	hs := e.st.Hosts[host]
	if hs == nil {
		hs = &vdibroker.AutoscaleHostState{}
		e.st.Hosts[host] = hs
	}
	return hs
}

// host is a store host as the arithmetic sees it. Its power state is
// PowerStateOf's, as the API shows it: one never recorded (a pool without
// a driver, or a host no driver has told of) is Running while the agent
// heartbeats and Unknown otherwise, and so is one recorded Running (its
// agent silent: turned off outside the broker, started after the other
// Unknown ones, R-A4). A host still Starting after the start timeout is
// PowerStartTimedOut: its latest start, the autoscaler's or the one its
// Starting record's time says (a connect's or an admin's), is that old.
// One whose agent said since its start, within the heartbeat timeout,
// that it shuts down is PowerStartShuttingDown (vdibroker.
// ShuttingDownAfterStart, as the admin's 409 of a start reads it). A host
// Unknown whose agent is silent is Unheard while the broker has not heard
// its hosts for the heartbeat timeout (vdibroker.AgentSilent).
func (e *eval) host(h *vdibroker.SessionHost) Host {
	timeout := e.pool.HeartbeatTimeout()
	status := vdibroker.HostStatus(h, timeout, e.now)
	power := vdibroker.PowerStateOf(h, timeout, e.now)
	unheard := power == vdibroker.PowerUnknown && status == vdibroker.StatusUnavailable &&
		!vdibroker.AgentSilent(h, timeout, e.heard, e.now)
	if power == vdibroker.PowerStarting {
		// The latest start counts: an admin's start of a host whose
		// start timed out records Starting anew (R-A4), and the host is
		// capacity to come again for the start timeout, though the
		// autoscaler's own start of it is older.
		last := h.PowerStateTime
		if hs := e.st.Hosts[h.Name]; hs != nil && hs.StartTime != nil && (last == nil || hs.StartTime.After(*last)) {
			last = hs.StartTime
		}
		switch {
		case last != nil && e.now.Sub(*last) >= e.a.startTO:
			power = PowerStartTimedOut
		case vdibroker.ShuttingDownAfterStart(h, timeout, e.now):
			// Its agent said since the start that it shuts down: not
			// capacity to come (R-A2, R-A4).
			power = PowerStartShuttingDown
		}
	}
	return Host{
		Name: h.Name, Placeable: vdibroker.Placeable(status), Power: power,
		SilentRunning: vdibroker.SilentRunning(h, timeout, e.now), Unheard: unheard,
		AdminDrained: !h.AllowNewSession, AutoscaleDrained: h.AutoscaleDrain,
		Sessions: h.Sessions, Active: h.Sessions,
	}
}

// loadBalancer applies the phase's load balancer to the pool. The admin's
// own is kept to restore when no plan covers the pool any more; an admin
// who changes it while the plan covers the pool changes what is restored,
// and the plan's phase sets its own again.
func (e *eval) loadBalancer(ctx context.Context, phase string) {
	want := map[string]string{
		vdibroker.PhaseRampUp: e.sc.RampUpLoadBalancingAlgorithm, vdibroker.PhasePeak: e.sc.PeakLoadBalancingAlgorithm,
		vdibroker.PhaseRampDown: e.sc.RampDownLoadBalancingAlgorithm, vdibroker.PhaseOffPeak: e.sc.OffPeakLoadBalancingAlgorithm,
	}[phase]
	if want == "" || e.pool.LoadBalancerType == want {
		return
	}
	// Only the load balancer, and only while it is the one read: an
	// admin's change since is kept, and the next evaluation sets the
	// phase's over what the admin set, recorded as the one to restore.
	was := e.pool.LoadBalancerType
	stored, set, err := e.a.act.SetLoadBalancer(ctx, e.pool.Name, was, want)
	if err == nil && !set {
		e.notes = append(e.notes, fmt.Sprintf("the load balancer changed since it was read (was %s): the %s one, %s, is set at the next evaluation", was, phase, want))
		return
	}
	e.did(vdibroker.ActionSetLoadBalancer, "", fmt.Sprintf("%s load balancer %s (was %s)", phase, want, was), err)
	if err == nil {
		if e.st.AppliedLoadBalancer == "" || was != e.st.AppliedLoadBalancer {
			e.st.OriginalLoadBalancer = was
		}
		e.st.AppliedLoadBalancer = want
		e.pool = stored
	}
}

func (e *eval) undrain(ctx context.Context, host, reason string) {
	err := e.a.act.SetAutoscaleDrain(ctx, e.pool.Name, host, false)
	e.did(vdibroker.ActionUndrain, host, reason, err)
	if err == nil {
		delete(e.st.Hosts, host)
	}
}

// counted is how many of open count for rampDownStopHostsWhen.
func (e *eval) counted(open []*vdibroker.UserSession) int {
	if e.sc.RampDownStopHostsWhen != vdibroker.StopWhenZeroActiveSessions {
		return len(open)
	}
	n := 0
	for _, s := range open {
		if s.State != vdibroker.StateDisconnected {
			n++ // Pending will be Active
		}
	}
	return n
}

func (e *eval) openSessions(ctx context.Context, host string) ([]*vdibroker.UserSession, error) {
	return e.a.store.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: e.pool.Name, SessionHost: host})
}

// drain carries one autoscale-drained host on (R-A3): the wait counts
// from the drain's start, kept in the store across evaluations.
func (e *eval) drain(ctx context.Context, h *vdibroker.SessionHost) error {
	if h.PowerState == vdibroker.PowerStopped || h.PowerState == vdibroker.PowerStopping {
		// Stopped meanwhile (by an admin, or our stop of an earlier
		// evaluation): its drain is no longer ours to keep.
		e.undrain(ctx, h.Name, "the host is "+h.PowerState+": its autoscale drain is lifted")
		return nil
	}
	open, err := e.openSessions(ctx, h.Name)
	if err != nil {
		return err
	}
	n := e.counted(open)
	if e.st.Hosts == nil {
		e.st.Hosts = map[string]*vdibroker.AutoscaleHostState{}
	}
	hs := e.hostState(h.Name)
	if hs.DrainTime == nil {
		t := e.now.UTC()
		hs.DrainTime, hs.MinSessions = &t, n
	}
	if n > hs.MinSessions {
		e.undrain(ctx, h.Name, fmt.Sprintf("got a session while draining (%d, was %d): kept running (R-A3)", n, hs.MinSessions))
		return nil
	}
	hs.MinSessions = n
	force := e.sc.RampDownForceLogoffUsers
	wait := time.Duration(e.sc.RampDownWaitTimeMinutes) * e.a.minute
	if force && !hs.Notified && len(open) > 0 {
		msg := e.sc.RampDownNotificationMessage
		if msg == "" {
			msg = fmt.Sprintf(DefaultNotificationMessage, vdibroker.Plural(e.sc.RampDownWaitTimeMinutes, "minute"))
		}
		e.did(vdibroker.ActionNotify, h.Name, fmt.Sprintf("%s told to sign out within %s", vdibroker.Plural(len(open), "session"), vdibroker.Plural(e.sc.RampDownWaitTimeMinutes, "minute")),
			e.queue(ctx, open, vdibroker.CommandSendMessage, msg))
		hs.Notified = true
	}
	if n == 0 {
		return e.stop(ctx, h, hs)
	}
	if force && !hs.LoggedOff && !e.now.Before(hs.DrainTime.Add(wait)) {
		e.did(vdibroker.ActionLogoff, h.Name, fmt.Sprintf("rampDownForceLogoffUsers: %s logged off after %s", vdibroker.Plural(len(open), "session"), vdibroker.Plural(e.sc.RampDownWaitTimeMinutes, "minute")),
			e.queue(ctx, open, vdibroker.CommandLogoff, ""))
		hs.LoggedOff = true
		return nil
	}
	e.notes = append(e.notes, fmt.Sprintf("%s drained since %s: %s left", h.Name, hs.DrainTime.Format(time.RFC3339), vdibroker.Plural(n, "session")))
	return nil
}

// stop stops a drained host with no sessions left to wait for. Its
// sessions are read again right before: a host that got one meanwhile is
// kept (R-A3). With ZeroSessions the stop is not forced, so the power
// service refuses it if a session arrives between that read and the stop.
func (e *eval) stop(ctx context.Context, h *vdibroker.SessionHost, hs *vdibroker.AutoscaleHostState) error {
	open, err := e.openSessions(ctx, h.Name)
	if err != nil {
		return err
	}
	if n := e.counted(open); n > 0 {
		e.undrain(ctx, h.Name, fmt.Sprintf("got a session right before the stop (%d): kept running (R-A3)", n))
		return nil
	}
	force := len(open) > 0 // ZeroActiveSessions: disconnected ones end with the host
	err = e.a.act.StopHost(ctx, e.pool.Name, h.Name, force, By)
	if vdibroker.ErrorCode(err) == vdibroker.EConflict {
		e.undrain(ctx, h.Name, "the stop was refused, the host has sessions: kept running (R-A3)")
		return nil
	}
	why := "no sessions left"
	if force {
		why = fmt.Sprintf("no active sessions left (%d disconnected, rampDownStopHostsWhen ZeroActiveSessions)", len(open))
	}
	e.did(vdibroker.ActionStop, h.Name, why, err)
	if err != nil {
		return nil
	}
	// Stopping: no longer placeable by its power state; the drain was ours.
	e.undrain(ctx, h.Name, "stopped: its autoscale drain is lifted")
	return nil
}

func (e *eval) queue(ctx context.Context, open []*vdibroker.UserSession, typ, msg string) error {
	var errs []error
	for _, s := range open {
		errs = append(errs, e.a.store.QueueCommand(ctx, &vdibroker.Command{
			ID: vdibroker.NewID(), HostPool: s.HostPool, SessionHost: s.SessionHost, Type: typ, SessionID: s.ID,
			AgentSessionID: s.AgentSessionID, User: s.User, Message: msg, State: vdibroker.CommandQueued, CreateTime: e.now.UTC(),
		}))
	}
	return errors.Join(errs...)
}

// personal evaluates a personal pool: a host whose user logged off (no
// sessions) for stopHostAfterLogoffMinutes, or whose sessions are all
// disconnected for stopHostAfterDisconnectMinutes, is stopped. Start is on
// connect (R-A4). A logoff's time is when an evaluation first saw the
// host without sessions (at most an interval late).
func (e *eval) personal(ctx context.Context, all []*vdibroker.SessionHost) error {
	e.rec.Hosts = len(all)
	if e.pool.PowerDriver == "" {
		e.notes = append(e.notes, "the pool has no powerDriver: the autoscaler stops nothing")
		return nil
	}
	if e.st.Hosts == nil {
		e.st.Hosts = map[string]*vdibroker.AutoscaleHostState{}
	}
	seen := map[string]bool{}
	for _, h := range all {
		hh := e.host(h)
		if hh.AdminDrained || !hh.Placeable || h.PowerState == vdibroker.PowerStopped || h.PowerState == vdibroker.PowerStopping || h.PowerState == vdibroker.PowerStarting {
			continue
		}
		e.rec.RunningHosts++
		e.rec.Sessions += h.Sessions
		open, err := e.openSessions(ctx, h.Name)
		if err != nil {
			return err
		}
		if len(open) == 0 {
			seen[h.Name] = true
			hs := e.st.Hosts[h.Name]
			if hs == nil || hs.IdleSince == nil {
				t := e.now.UTC()
				hs = &vdibroker.AutoscaleHostState{IdleSince: &t}
				e.st.Hosts[h.Name] = hs
			}
			after := time.Duration(e.sc.StopHostAfterLogoffMinutes) * e.a.minute
			if after > 0 && !e.now.Before(hs.IdleSince.Add(after)) {
				err := e.a.act.StopHost(ctx, e.pool.Name, h.Name, false, By)
				e.did(vdibroker.ActionStop, h.Name, fmt.Sprintf("no session for %s (stopHostAfterLogoffMinutes)", vdibroker.Plural(e.sc.StopHostAfterLogoffMinutes, "minute")), err)
				if err == nil {
					delete(e.st.Hosts, h.Name)
				}
			}
			continue
		}
		var since time.Time
		for _, s := range open {
			if s.State != vdibroker.StateDisconnected {
				since = time.Time{}
				break
			}
			if s.StateTime.After(since) {
				since = s.StateTime
			}
		}
		after := time.Duration(e.sc.StopHostAfterDisconnectMinutes) * e.a.minute
		if !since.IsZero() && after > 0 && !e.now.Before(since.Add(after)) {
			e.did(vdibroker.ActionStop, h.Name, fmt.Sprintf("user disconnected for %s (stopHostAfterDisconnectMinutes)", vdibroker.Plural(e.sc.StopHostAfterDisconnectMinutes, "minute")),
				e.a.act.StopHost(ctx, e.pool.Name, h.Name, true, By))
		}
	}
	for name := range e.st.Hosts {
		if !seen[name] {
			delete(e.st.Hosts, name)
		}
	}
	return nil
}

// release undoes what the autoscaler changed in a pool no plan covers any
// more: its autoscale drains are lifted, and the admin's load balancer is
// restored unless an admin changed it meanwhile.
func (a *Autoscaler) release(ctx context.Context, st *vdibroker.AutoscaleState, now time.Time) error {
	e := &eval{a: a, now: now, st: st, stored: true, rec: &vdibroker.AutoscaleEvaluation{HostPool: st.HostPool, Time: now.UTC(), Holder: a.holder}}
	e.notes = append(e.notes, "no scaling plan covers the pool any more")
	pool, all, err := a.act.SessionHosts(ctx, st.HostPool)
	if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
		return a.store.DeleteAutoscaleState(ctx, st.HostPool)
	}
	if err != nil {
		return err
	}
	e.pool = pool
	for _, h := range all {
		if h.AutoscaleDrain {
			e.undrain(ctx, h.Name, "the plan no longer covers the pool")
		}
	}
	st.Hosts = nil
	if st.OriginalLoadBalancer != "" && pool.LoadBalancerType == st.AppliedLoadBalancer {
		// Only while it is still the plan's: one an admin set after the
		// read is kept (R-E13).
		_, set, err := a.act.SetLoadBalancer(ctx, pool.Name, st.AppliedLoadBalancer, st.OriginalLoadBalancer)
		if err == nil && !set {
			e.notes = append(e.notes, "the load balancer changed since it was read: the admin's is kept")
		} else {
			e.did(vdibroker.ActionSetLoadBalancer, "", "restored the admin's load balancer "+st.OriginalLoadBalancer, err)
		}
	}
	st.OriginalLoadBalancer, st.AppliedLoadBalancer = "", ""
	return a.finish(ctx, e)
}
