package power

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/keyed"
)

// The power service (R-A4). The drivers come from serve
// --power-config only: a pool names one (powerDriver), and no API call can
// add or change a driver, so no API caller can make the broker run a
// command or call a URL of their choosing.
//
// A start is recorded (Starting) before the driver is asked, in a write
// that succeeds only from a state a start makes sense from: concurrent
// connects, the autoscaler and admins on any replica start a host once.
// The host becomes Running when its agent heartbeats (store: the
// heartbeat's write). A stop is recorded (Stopping), then Stopped when the
// driver accepted it (a driver without a status action) or when its status
// says so (pollPower).

// StartRetryAfter is the Retry-After of a connect answered HostStarting: a
// host takes about this long to boot and its agent to heartbeat.
const StartRetryAfter = 30 * time.Second

// MaxWaitingUsers bounds the users one pool's start VM on connect
// remembers as waiting (R-SEC). Whoever may connect for any user (a
// Contributor, the admin token, a federation peer's pod-to-pod connect:
// up to vdibroker.MaxNoncesPerMinute calls a minute) names a new user at
// each connect, each remembered StartTimeout: unbounded, a peer held
// 600,000 names of up to 1 KiB in one pool's map, and every connect to
// it walked them all. Past the bound a new user is counted for its own
// connect (one more than those kept) but not kept, so the pool still
// starts hosts for the users it keeps and one more; each is kept by a
// SHA-256 of its folded name (32 bytes, whatever its length), so a pool
// holds at most about 1 MiB of them.
const MaxWaitingUsers = 10000

// waiter is a waiting user's key: the SHA-256 of its folded name.
type waiter [sha256.Size]byte

// waitingUsers are one pool's users answered HostStarting within
// StartTimeout, at most MaxWaitingUsers, with when each was; sweep is
// when the oldest of them is due to be forgotten.
type waitingUsers struct {
	m     map[waiter]time.Time
	sweep time.Time
}

// StartTimeout is how long a started host may take to heartbeat; after
// it, start VM on connect no longer counts on it and may start another.
const StartTimeout = vdibroker.HostStartTimeout

// DriverTimeout bounds a driver call the broker makes in the background
// (start VM on connect); each driver has its own timeout inside it too.
const DriverTimeout = 5 * time.Minute

// PrincipalBroker is the audit principal kind of a power action the
// broker took itself: its ID says why ("connect", "autoscale").
const PrincipalBroker = "broker"

// Store is what the power service reads and writes of the broker's store.
type Store interface {
	GetHostPool(ctx context.Context, name string) (*vdibroker.HostPool, error)
	ListHostPools(ctx context.Context) ([]*vdibroker.HostPool, error)
	GetSessionHost(ctx context.Context, pool, name string) (*vdibroker.SessionHost, error)
	ListSessionHosts(ctx context.Context, pool string) ([]*vdibroker.SessionHost, error)
	vdibroker.PowerStore
}

// ServiceConfig is what a Service needs. Store is required.
type ServiceConfig struct {
	// Store is the broker's store (bounded by its timeout, outage-aware).
	Store Store
	// Drivers are serve --power-config's; a pool's powerDriver names one.
	Drivers Set
	// Refresh, when set, re-reads a host whose power state or drain
	// changed into the broker's placement view, so the next connect sees
	// it.
	Refresh func(ctx context.Context, pool, host string)
	// Clock is the service's time and the ticker of its poll (nil = the
	// real clock).
	Clock  clock.WithTicker
	Logger *slog.Logger // nil discards logs
	// PollInterval is how often the status of stopping hosts is asked of
	// their drivers (0 = 30s).
	PollInterval time.Duration
	// Down, when set, reports a store outage: the poll waits it out.
	Down func() bool
	// HeardSince, when set, is since when the broker has heard its hosts
	// (outage.Health.HeardSince: its start or the end of its last store
	// outage); nil: since NewService. Start VM on connect takes a host's
	// agent for silent only once this is older than the heartbeat
	// timeout (vdibroker.AgentSilent).
	HeardSince func() time.Time
}

// Service is the power service (vdibroker.PowerService): the loaded
// drivers, the hosts' starts and stops, and, per pool, the users waiting
// for a started host (start VM on connect). Close stops its poll.
type Service struct {
	store   Store
	drivers Set
	refresh func(ctx context.Context, pool, host string)
	clock   clock.WithTicker
	now     func() time.Time // clock.Now
	heard   func() time.Time // ServiceConfig.HeardSince
	log     *slog.Logger

	mu      sync.Mutex
	waiting map[string]*waitingUsers // by pool
	starts  keyed.Mutex              // one start-on-connect decision per pool at a time
	bg      sync.WaitGroup

	stop      chan struct{}
	pollDone  chan struct{} // nil without drivers
	closeOnce sync.Once
}

var _ vdibroker.PowerService = (*Service)(nil)

// NewService returns a power service and, with drivers, starts polling the
// stopping hosts' status.
func NewService(cfg ServiceConfig) *Service {
	s := &Service{store: cfg.Store, drivers: cfg.Drivers, refresh: cfg.Refresh, clock: cfg.Clock, log: cfg.Logger,
		stop: make(chan struct{})}
	if s.refresh == nil {
		s.refresh = func(context.Context, string, string) {}
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	s.now = s.clock.Now
	s.heard = cfg.HeardSince
	if s.heard == nil {
		made := s.now()
		s.heard = func() time.Time { return made }
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if len(cfg.Drivers) > 0 {
		poll := cfg.PollInterval
		if poll <= 0 {
			poll = 30 * time.Second
		}
		down := cfg.Down
		if down == nil {
			down = func() bool { return false }
		}
		s.pollDone = make(chan struct{})
		go s.pollEvery(s.clock.NewTicker(poll), poll, down)
	}
	return s
}

// Close stops the poll and waits for the starts under way in the
// background. It may be called more than once.
func (s *Service) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		if s.pollDone != nil {
			<-s.pollDone
		}
		s.bg.Wait()
	})
	return nil
}

// Wait waits for the driver calls under way in the background (the starts
// of start VM on connect).
func (s *Service) Wait() { s.bg.Wait() }

// pollEvery runs pollPower every interval until Close, but while the
// store is down.
func (s *Service) pollEvery(t clock.Ticker, interval time.Duration, down func() bool) {
	defer close(s.pollDone)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C():
		}
		if down() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), interval)
		s.pollPower(ctx)
		cancel()
	}
}

// PowerDrivers returns the names of the loaded power drivers.
func (s *Service) PowerDrivers() []string { return s.drivers.Names() }

// Validate checks a pool's power settings against the loaded
// drivers (R-P4: a 400 naming the field).
func (s *Service) Validate(p *vdibroker.HostPool) error {
	if p.PowerDriver != "" && s.drivers[p.PowerDriver] == nil {
		names := s.PowerDrivers()
		if len(names) == 0 {
			return vdibroker.FieldError("powerDriver", "must be empty: this broker has no power drivers (serve --power-config), got %q", p.PowerDriver)
		}
		return vdibroker.FieldError("powerDriver", "must be empty or one of the drivers of serve --power-config (%s), got %q", strings.Join(names, ", "), p.PowerDriver)
	}
	if p.StartVMOnConnect && p.PowerDriver == "" {
		return vdibroker.FieldError("startVMOnConnect", "needs a powerDriver to start hosts with")
	}
	return nil
}

// driverOf returns pool's driver; Conflict when it has none.
func (s *Service) driverOf(p *vdibroker.HostPool) (Driver, error) {
	if p.PowerDriver == "" {
		return nil, vdibroker.Errorf(vdibroker.EConflict, "host pool %q has no powerDriver; set one of the drivers of serve --power-config", p.Name)
	}
	d := s.drivers[p.PowerDriver]
	if d == nil {
		// A driver removed from the file since the pool named it.
		return nil, vdibroker.Errorf(vdibroker.EConflict, "host pool %q names power driver %q, which this broker has not loaded (serve --power-config)", p.Name, p.PowerDriver)
	}
	return d, nil
}

// powerAudit returns ctx with an audit entry for a power action the broker
// takes itself (by: "connect", "autoscale"); a request's own entry (an
// admin's start or stop through the API) is kept as it is.
func (s *Service) powerAudit(ctx context.Context, action, pool, host, by string) context.Context {
	if vdibroker.AuditFrom(ctx) != nil {
		return ctx
	}
	return vdibroker.WithAudit(ctx, &vdibroker.AuditEntry{
		Time: s.now().UTC(), Principal: vdibroker.AuditPrincipal{Kind: PrincipalBroker, ID: by},
		// The target an API call of the same action has.
		Action: action, Target: "hostpools/" + pool + "/sessionhosts/" + host + "/" + strings.TrimPrefix(action, "sessionhost."), HostPool: pool,
	})
}

// startable are the states a start is recorded from: not while the host
// starts, runs or stops already.
var startable = []string{vdibroker.PowerStopped, vdibroker.PowerUnknown}

// FailedStartBackoff is how long start VM on connect leaves alone a host
// whose driver failed (a start or a stop that failed records it Unknown,
// at the time of the failure): a broken driver or machine is asked again
// by connects once in this time, not on every connect. An admin's start
// (POST .../start) and the autoscaler are not held back by it.
const FailedStartBackoff = 10 * time.Minute

// StartHost asks the pool's power driver to start the host (R-A4) and records
// PowerState Starting: an admin's start, by is the admin's id (audit). A
// host whose start timed out is started again (vdibroker.StartTimedOut).
func (s *Service) StartHost(ctx context.Context, pool, host, by string) error {
	return s.start(ctx, pool, host, by, byAdmin)
}

// AutoscaleStart is StartHost for the autoscaler (R-A2), by its name
// ("autoscale"): a Stopped or Unknown host, never a Starting one, timed
// out or not. Its plan never picks one; this refuses it too, so that a
// host whose start timed out is started again by an admin only (R-A4).
func (s *Service) AutoscaleStart(ctx context.Context, pool, host, by string) error {
	return s.start(ctx, pool, host, by, byAutoscaler)
}

func (s *Service) start(ctx context.Context, pool, host, by string, who starter) error {
	d, h, err := s.claimStart(ctx, pool, host, by, who)
	if err != nil {
		return err
	}
	return s.driveStart(ctx, d, h)
}

// starter is who asks a start, which decides what claimStart takes.
type starter int

const (
	byAdmin      starter = iota // Stopped, Unknown, or a start timed out
	byAutoscaler                // Stopped or Unknown
	onConnect                   // startableOnConnect only
)

// The order in which start VM on connect (and the autoscaler, R-A2)
// takes the hosts it may start, each by name within its rank.
const (
	rankStopped = iota // the driver stopped it
	rankUnknown        // never seen running, or its driver failed
	// rankSilentRunning: recorded Running, its agent silent (turned off
	// outside the broker, or a crashed agent on a running machine: a
	// start of that gives no capacity, so it comes last).
	rankSilentRunning
)

// startableOnConnect reports whether start VM on connect may start h
// (R-A4), and its rank: Stopped, or Unknown by PowerStateOf (which
// includes a host recorded Running whose agent is silent) whose agent is
// silent (vdibroker.AgentSilent: no heartbeat within the pool's heartbeat
// timeout, while the broker, up since heard, could hear it) and without a
// driver failure recorded within FailedStartBackoff. A host never
// recorded ("") has no failure. Drains are the caller's to check.
func startableOnConnect(h *vdibroker.SessionHost, timeout time.Duration, heard, now time.Time) (ok bool, rank int) {
	switch vdibroker.PowerStateOf(h, timeout, now) {
	case vdibroker.PowerStopped:
		return true, rankStopped
	case vdibroker.PowerUnknown:
		if !vdibroker.AgentSilent(h, timeout, heard, now) {
			// Its agent heartbeats (and says it shuts down), or the
			// broker started (or its store came back) too lately to
			// know: its next heartbeat may not have landed yet.
			return false, rankUnknown
		}
		if h.PowerState == vdibroker.PowerUnknown && h.PowerStateTime != nil && now.Sub(*h.PowerStateTime) < FailedStartBackoff {
			return false, rankUnknown // its driver failed a moment ago
		}
		if vdibroker.SilentRunning(h, timeout, now) {
			return true, rankSilentRunning
		}
		return true, rankUnknown
	}
	return false, rankUnknown
}

// claimStart records that host starts, from Stopped or Unknown, or, by an
// admin, from Starting once its start timed out (vdibroker.StartTimedOut);
// a host in another state is a Conflict, and an error changes nothing.
// Start VM on connect (onConnect) takes only a host startableOnConnect,
// and neither it nor the autoscaler ever a Starting one.
func (s *Service) claimStart(ctx context.Context, pool, host, by string, who starter) (Driver, *vdibroker.SessionHost, error) {
	p, err := s.store.GetHostPool(ctx, pool)
	if err != nil {
		return nil, nil, err
	}
	d, err := s.driverOf(p)
	if err != nil {
		return nil, nil, err
	}
	cur, err := s.store.GetSessionHost(ctx, pool, host)
	if err != nil {
		return nil, nil, err
	}
	now := s.now()
	if st := vdibroker.PowerStateOf(cur, p.HeartbeatTimeout(), now); st == vdibroker.PowerRunning {
		// Its agent heartbeats: it runs.
		return nil, nil, vdibroker.Errorf(vdibroker.EConflict, "session host %q is Running (its agent heartbeats); only a Stopped or Unknown host is started", host)
	}
	from := startable
	if vdibroker.SilentRunning(cur, p.HeartbeatTimeout(), now) {
		// Recorded Running, its agent silent: it reads Unknown. A
		// heartbeat between this read and the write below makes the
		// start one of a running machine (a no-op for a driver), and the
		// next heartbeat records it Running again.
		from = append(slices.Clip(startable), vdibroker.PowerRunning)
	}
	if ok, _ := startableOnConnect(cur, p.HeartbeatTimeout(), s.heard(), now); who == onConnect && !ok {
		// Read again under the pool's start lock: started, heartbeating
		// or failed since the connect listed the hosts.
		return nil, nil, vdibroker.Errorf(vdibroker.EConflict, "session host %q is not started on connect: it is %s, heartbeating (or not silent for long enough since the broker started), or its driver failed within %s",
			host, vdibroker.PowerStateOf(cur, p.HeartbeatTimeout(), now), FailedStartBackoff)
	}
	if who == byAutoscaler && cur.PowerState == vdibroker.PowerStarting && cur.PowerStateTime != nil {
		return nil, nil, vdibroker.Errorf(vdibroker.EConflict, "session host %q is Starting since %s; the autoscaler never starts a Starting host again: only an admin does, once its start timed out (R-A4)",
			host, cur.PowerStateTime.UTC().Format(time.RFC3339))
	}
	restart := who == byAdmin && vdibroker.StartTimedOut(cur, now)
	if restart && vdibroker.ShuttingDownAfterStart(cur, p.HeartbeatTimeout(), now) {
		return nil, nil, shuttingDownConflict(cur, host, p.HeartbeatTimeout(), now)
	}
	if cur.PowerState == vdibroker.PowerStarting && !restart {
		return nil, nil, startingConflict(cur, host, p.HeartbeatTimeout(), now)
	}
	ctx = s.powerAudit(ctx, "sessionhost.start", pool, host, by)
	var h *vdibroker.SessionHost
	var changed bool
	if restart {
		// Its agent never heartbeated after its start (R-A4): an admin
		// starts it again. The write holds only while it is Starting
		// since the start timeout, so of two admins (or replicas) one
		// starts it, and the other finds it Starting since now; nor
		// once its agent said it shuts down.
		at := s.now().UTC()
		h, changed, err = s.store.RestartStart(ctx, pool, host, at.Add(-StartTimeout), at.Add(-p.HeartbeatTimeout()), at)
	} else {
		h, changed, err = s.store.SetPowerState(ctx, pool, host, vdibroker.PowerStarting, s.now().UTC(), from...)
	}
	if err != nil {
		return nil, nil, err
	}
	if !changed {
		if h.PowerState == vdibroker.PowerStarting && !vdibroker.StartTimedOut(h, s.now()) {
			return nil, nil, startingConflict(h, host, p.HeartbeatTimeout(), s.now())
		}
		if vdibroker.ShuttingDownAfterStart(h, p.HeartbeatTimeout(), s.now()) {
			return nil, nil, shuttingDownConflict(h, host, p.HeartbeatTimeout(), s.now())
		}
		return nil, nil, vdibroker.Errorf(vdibroker.EConflict, "session host %q is %s; only a Stopped or Unknown host is started, or one Starting for %d minutes without its agent heartbeating", host, vdibroker.PowerStateOf(h, p.HeartbeatTimeout(), s.now()), int(StartTimeout/time.Minute))
	}
	s.refresh(context.WithoutCancel(ctx), pool, host)
	s.log.Info("starting session host", "pool", pool, "host", host, "by", by, "driver", p.PowerDriver)
	return d, h, nil
}

// startingConflict is the Conflict of a start of h, Starting within the
// start timeout at now: since when, and from when a start is accepted
// again, each as a UTC time and how long ago or from now, so an admin
// reads both the instant and how long to wait. When its agent said since
// the start that it shuts down (vdibroker.ShuttingDownAfterStart), it
// says so, and the start is accepted once that is timeout old too.
func startingConflict(h *vdibroker.SessionHost, host string, timeout time.Duration, now time.Time) error {
	if h.PowerStateTime == nil {
		return vdibroker.Errorf(vdibroker.EConflict, "session host %q is Starting; a start is accepted again once it has been Starting for %d minutes without its agent heartbeating", host, int(StartTimeout/time.Minute))
	}
	at, again := h.PowerStateTime.UTC(), h.PowerStateTime.Add(StartTimeout).UTC()
	heard, silent := "its agent has not heartbeated yet", ""
	if vdibroker.ShuttingDownAfterStart(h, timeout, now) {
		said := h.LastHeartBeat.UTC()
		heard = fmt.Sprintf("its agent said at %s (%s ago) only that it is shutting down", said.Format(time.RFC3339), relative(now.Sub(said), false))
		silent = fmt.Sprintf(" and its agent silent for longer than the pool's heartbeat timeout (%d seconds)", int(timeout/time.Second))
		again = later(again, vdibroker.StartAfterShutdownFrom(h, timeout))
	}
	// From when, shown at the whole second at or after it (a time cut to
	// the second would name one at which the start is still refused); the
	// wait, rounded up, from the instant itself.
	return vdibroker.Errorf(vdibroker.EConflict, "session host %q is Starting since %s (%s ago) and %s; a start is accepted again from %s (in %s; the start timeout is %d minutes), if it is still Starting then%s",
		host, at.Format(time.RFC3339), relative(now.Sub(at), false), heard, ceilSecond(again).Format(time.RFC3339), relative(again.Sub(now), true), int(StartTimeout/time.Minute), silent)
}

// ceilSecond is t rounded up to a whole second.
func ceilSecond(t time.Time) time.Time {
	if c := t.Truncate(time.Second); !c.Equal(t) {
		return c.Add(time.Second)
	}
	return t
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// shuttingDownConflict is the Conflict of an admin's start of h, whose
// start timed out but whose agent said it shuts down since, within the
// pool's heartbeat timeout of now (vdibroker.ShuttingDownAfterStart): when
// it said so, from when a start is accepted if it stays silent
// (vdibroker.StartAfterShutdownFrom), and what to do if it does not
// (R-A4).
func shuttingDownConflict(h *vdibroker.SessionHost, host string, timeout time.Duration, now time.Time) error {
	said := h.LastHeartBeat.UTC()
	again := vdibroker.StartAfterShutdownFrom(h, timeout)
	return vdibroker.Errorf(vdibroker.EConflict, "session host %q is Starting since %s, and its agent said at %s (%s ago) that it is shutting down: its machine is going down, and a start now would reach it shutting down; a start is accepted from %s (in %s), once its agent has been silent for longer than the pool's heartbeat timeout (%d seconds); if it keeps saying it shuts down, stop the host, then start it",
		host, h.PowerStateTime.UTC().Format(time.RFC3339), said.Format(time.RFC3339), relative(now.Sub(said), false),
		again.Format(time.RFC3339), relative(again.Sub(now), true), int(timeout/time.Second))
}

// relative says d for a message: whole minutes, or whole seconds under a
// minute; up rounds up (a wait to come: 4m10s is "5 minutes", so a retry
// then is accepted), else down (9m50s ago is "9 minutes").
func relative(d time.Duration, up bool) string {
	d = max(d, 0)
	unit, name := time.Minute, "minute"
	if d < time.Minute {
		unit, name = time.Second, "second"
	}
	n := int(d / unit)
	if up && d%unit != 0 {
		n++
	}
	if n != 1 {
		name += "s"
	}
	return fmt.Sprintf("%d %s", n, name)
}

// driveStart asks the driver to start h, recorded Starting. When the
// driver fails, the host is Unknown: whether it runs is for its agent's
// heartbeat (or an admin) to say.
func (s *Service) driveStart(ctx context.Context, d Driver, h *vdibroker.SessionHost) error {
	err := d.Start(ctx, Target{Pool: h.HostPool, Host: h.Name, Address: h.Address})
	if err == nil {
		return nil
	}
	s.log.Error("power driver failed to start a session host", "pool", h.HostPool, "host", h.Name, "err", err)
	bg := context.WithoutCancel(ctx)
	if _, _, serr := s.store.SetPowerState(bg, h.HostPool, h.Name, vdibroker.PowerUnknown, s.now().UTC(), vdibroker.PowerStarting); serr != nil {
		s.log.Error("record a failed start", "pool", h.HostPool, "host", h.Name, "err", serr)
	}
	s.refresh(bg, h.HostPool, h.Name)
	return driverError("start", h, err)
}

func driverError(action string, h *vdibroker.SessionHost, err error) error {
	return &vdibroker.Error{Code: vdibroker.EInternal, Message: fmt.Sprintf("the power driver could not %s session host %q: %v", action, h.Name, err)}
}

// StopHost asks the driver to stop the host and records Stopping, then Stopped
// when the driver (or status polling) confirms; refused with Conflict (409)
// while the host has open sessions unless force.
func (s *Service) StopHost(ctx context.Context, pool, host string, force bool, by string) error {
	p, err := s.store.GetHostPool(ctx, pool)
	if err != nil {
		return err
	}
	d, err := s.driverOf(p)
	if err != nil {
		return err
	}
	h, err := s.store.GetSessionHost(ctx, pool, host)
	if err != nil {
		return err
	}
	if h.Sessions > 0 && !force {
		return vdibroker.Errorf(vdibroker.EConflict, "session host %q has %d open sessions; stop with force to stop it anyway (its users lose their sessions)", host, h.Sessions)
	}
	ctx = s.powerAudit(ctx, "sessionhost.stop", pool, host, by)
	now := s.now().UTC()
	// Restored when the stop is refused: the recorded state (a silent
	// host recorded Running stays so), else the one read.
	was := cmp.Or(h.PowerState, vdibroker.PowerStateOf(h, p.HeartbeatTimeout(), now))
	// Stopping takes no new session from the moment it is written (the
	// connect's commit checks it under the host's lock), so the count it
	// returns is final: a connect that committed since the read above is
	// in it, and the stop is refused rather than taking that user down.
	if h, _, err = s.store.SetPowerState(ctx, pool, host, vdibroker.PowerStopping, now); err != nil {
		return err
	}
	s.refresh(context.WithoutCancel(ctx), pool, host)
	if h.Sessions > 0 && !force {
		s.setPower(context.WithoutCancel(ctx), pool, host, was, vdibroker.PowerStopping)
		return vdibroker.Errorf(vdibroker.EConflict, "session host %q has %d open sessions; stop with force to stop it anyway (its users lose their sessions)", host, h.Sessions)
	}
	s.log.Info("stopping session host", "pool", pool, "host", host, "by", by, "force", force, "driver", p.PowerDriver)
	t := Target{Pool: pool, Host: host, Address: h.Address}
	if err := d.Stop(ctx, t); err != nil {
		s.log.Error("power driver failed to stop a session host", "pool", pool, "host", host, "err", err)
		s.setPower(context.WithoutCancel(ctx), pool, host, vdibroker.PowerUnknown, vdibroker.PowerStopping)
		return driverError("stop", h, err)
	}
	// Confirmed now when the driver can tell, or has no way to (it
	// accepted the stop); else pollPower confirms it later.
	st, err := d.Status(ctx, t)
	if err == ErrNoStatus || (err == nil && st == vdibroker.PowerStopped) {
		s.setPower(context.WithoutCancel(ctx), pool, host, vdibroker.PowerStopped, vdibroker.PowerStopping)
	}
	return nil
}

// setPower records state when the host is in one of from, and refreshes
// the pool's view; failures are logged (the caller's action stands).
func (s *Service) setPower(ctx context.Context, pool, host, state string, from ...string) {
	if _, _, err := s.store.SetPowerState(ctx, pool, host, state, s.now().UTC(), from...); err != nil {
		s.log.Error("record power state", "pool", pool, "host", host, "state", state, "err", err)
		return
	}
	s.refresh(ctx, pool, host)
}

// SetAutoscaleDrain sets or clears the host's autoscale drain (R-A3), never
// touching allowNewSession (an admin's drain).
func (s *Service) SetAutoscaleDrain(ctx context.Context, pool, host string, on bool) error {
	if _, err := s.store.SetAutoscaleDrain(ctx, pool, host, on); err != nil {
		return err
	}
	s.refresh(ctx, pool, host)
	return nil
}

// pollPower asks the drivers for the state of the hosts recorded Stopping
// and records Stopped when they say so. Starting hosts are not polled: an
// agent's heartbeat is what says a started host can take sessions.
func (s *Service) pollPower(ctx context.Context) {
	if len(s.drivers) == 0 {
		return
	}
	pools, err := s.store.ListHostPools(ctx)
	if err != nil {
		return
	}
	for _, p := range pools {
		d := s.drivers[p.PowerDriver]
		if d == nil {
			continue
		}
		hosts, err := s.store.ListSessionHosts(ctx, p.Name)
		if err != nil {
			continue
		}
		for _, h := range hosts {
			if h.PowerState != vdibroker.PowerStopping {
				continue
			}
			st, err := d.Status(ctx, Target{Pool: p.Name, Host: h.Name, Address: h.Address})
			if err == nil && st == vdibroker.PowerStopped {
				s.setPower(ctx, p.Name, h.Name, vdibroker.PowerStopped, vdibroker.PowerStopping)
			}
		}
	}
}

// StartOnConnect is start VM on connect (R-A4), for a connect the pool
// answered NoCapacity: when the pool starts hosts on connect and one
// host it may start can take the user, it starts one (the first Stopped
// by name, else the first Unknown whose agent is silent and whose driver
// has not failed within FailedStartBackoff, else the first recorded
// Running whose agent is silent, or the user's own in a Personal pool;
// never one drained by an admin or the autoscaler) and
// answers HostStarting with Retry-After. Hosts that are starting already are counted first: N
// waiting users need ceil(N / maxSessionLimit) hosts, so a connect while
// enough hosts start for those waiting starts none and answers
// HostStarting too. A host Starting whose agent said since its start that
// it shuts down (vdibroker.ShuttingDownAfterStart) is not counted: its
// machine is going down; a Personal user whose own host it is is told so
// (desktopShuttingDown). It returns nil when it has nothing to offer (the
// NoCapacity stands). For an application's connect (remoteApp) the hosts
// whose agents say they cannot run RemoteApps are neither started nor
// counted as starting for it: placement would not give it to them
// (R-E12).
func (s *Service) StartOnConnect(ctx context.Context, pool *vdibroker.HostPool, user string, remoteApp bool) error {
	if !pool.StartVMOnConnect || pool.PowerDriver == "" {
		return nil
	}
	d, err := s.driverOf(pool)
	if err != nil {
		return nil
	}
	unlock := s.starts.Lock(pool.Name)
	defer unlock()
	hosts, err := s.store.ListSessionHosts(ctx, pool.Name)
	if err != nil {
		return err
	}
	now := s.now()
	personal := pool.HostPoolType == vdibroker.Personal
	var mine *vdibroker.SessionHost
	limit := pool.MaxSessionLimit
	if personal || limit <= 0 {
		limit = 1
	}
	// starting hosts, and the users they will take: their limit less the
	// sessions placed on them already (users who wait at a gateway, R-GW5).
	starting, room := 0, 0
	// The hosts it may start, by rank (startableOnConnect): Stopped ones
	// first, then Unknown ones whose agents are silent (never seen
	// running, turned off outside the broker, a driver without status),
	// then those recorded Running whose agents are silent, each in name
	// order (ListSessionHosts), as the autoscaler starts them (R-A2).
	var ranked [rankSilentRunning + 1][]*vdibroker.SessionHost
	timeout, heard := pool.HeartbeatTimeout(), s.heard()
	// first is the first starting host with room: named in the answer, so
	// the user reads which host they wait for.
	first := ""
	for _, h := range hosts {
		if remoteApp && h.CannotRunRemoteApps() {
			continue // R-E12
		}
		assigned := len(h.AssignedUsers) > 0
		if personal && slices.Contains(h.AssignedUsers, user) {
			mine = h
		}
		switch {
		case personal && assigned:
			// Someone's own host: started for its user only.
		case h.PowerState == vdibroker.PowerStarting && h.PowerStateTime != nil && now.Sub(*h.PowerStateTime) < StartTimeout &&
			!vdibroker.ShuttingDownAfterStart(h, timeout, now) && h.AllowNewSession && !h.AutoscaleDrain:
			// Capacity to come, unless its agent said since the start
			// that it shuts down: its machine is going down, and the
			// users are not told to wait for it; another host is
			// started for them (it is not startable itself).
			starting++
			room += max(limit-h.Sessions, 0)
			if first == "" && h.Sessions < limit {
				first = h.Name
			}
		case h.AllowNewSession && !h.AutoscaleDrain:
			if ok, rank := startableOnConnect(h, timeout, heard, now); ok {
				ranked[rank] = append(ranked[rank], h)
			}
		}
	}
	waiting := s.wait(pool.Name, user, now)
	if personal && mine != nil {
		// The user's own host (R-PE1): started for them, drained or not.
		if ok, _ := startableOnConnect(mine, timeout, heard, now); ok {
			return s.startForConnect(ctx, d, pool, mine, user)
		}
		if vdibroker.ShuttingDownAfterStart(mine, timeout, now) {
			// Her desktop is going down: she is told so and when to
			// try again, not to wait for it, and nothing else is
			// started (it is her desktop she connects to).
			s.Unwait(pool.Name, user)
			return desktopShuttingDown(mine, user, timeout, now)
		}
		if mine.PowerState == vdibroker.PowerStarting && !vdibroker.StartTimedOut(mine, now) {
			err := hostStarting(pool.Name, mine.Name, ownStartRetryAfter(mine, now))
			if mine.PowerStateTime != nil {
				err.timesOut = mine.PowerStateTime.Add(StartTimeout)
			}
			return err
		}
		s.Unwait(pool.Name, user)
		if mine.PowerState == vdibroker.PowerStarting {
			// Its start timed out: she is not told to wait for ever
			// (connects never start it again; an admin may), nor to
			// try again: her helpdesk is who can help.
			return &vdibroker.Error{Code: vdibroker.ENoCapacity, Reason: vdibroker.ReasonStartByAdministrator,
				Message: fmt.Sprintf("session host %q, assigned to %s, was started %s ago and %s; an administrator can start it again (vdibroker sessionhost start) once they have looked at the machine",
					mine.Name, user, now.Sub(*mine.PowerStateTime).Round(time.Minute), silentSince(mine))}
		}
		if goingDown(mine, timeout, now) {
			// Shut down or restarted from within (the broker's stop
			// records Stopping): a reboot brings it back by itself.
			return desktopGoingDown(mine, user, timeout, now)
		}
		return nil
	}
	if personal && pool.PersonalDesktopAssignmentType == vdibroker.Direct {
		s.Unwait(pool.Name, user)
		return nil // no host of their own, and none is given on connect (R-PE2)
	}
	// N waiting users need ceil(N / limit) hosts: no more start while
	// the starting ones have room for them.
	if room >= waiting {
		if starting > 0 {
			return hostStarting(pool.Name, first, StartRetryAfter)
		}
		s.Unwait(pool.Name, user)
		return nil
	}
	for _, h := range slices.Concat(ranked[:]...) {
		err := s.startForConnect(ctx, d, pool, h, user)
		if vdibroker.ErrorCode(err) == vdibroker.EHostStarting {
			return err
		}
		// Started meanwhile by another replica or an admin: the next one.
	}
	if starting > 0 {
		return hostStarting(pool.Name, first, StartRetryAfter)
	}
	s.Unwait(pool.Name, user)
	return nil
}

// desktopShuttingDown is the answer to user's connect in a Personal pool
// whose own host h is Starting but whose agent said since the start that
// it shuts down (vdibroker.ShuttingDownAfterStart, R-A4): NoCapacity
// saying that her desktop is shutting down, since when, and from when it
// is down (vdibroker.StartAfterShutdownFrom, in UTC): once its agent has
// been silent for the pool's heartbeat timeout its machine is taken for
// down, and her connect then lands on it if it came back up (a reboot,
// or the start carried out once it was down), or says what to wait for.
// The wait from now, at most StartRetryAfter (downRetryAfter), is its
// Retry-After alone, which every reader shows in its own form (the
// CLI's " (try again in 30 s)" follows the time),
// as for HostStarting. The broker cannot tell a reboot, which brings the
// machine back by itself within that timeout, from a shutdown (its agent
// says the same), and a host recorded Starting was last started, not
// stopped, by the broker: so the answer always has that Retry-After, also
// when its start will have timed out by the time her retry comes. It
// then says so, and that an administrator can start it again from that
// time or the whole second its start times out at, the later (the
// admin's 409 says the same), if it is down; her retry is answered
// for an administrator then (ReasonStartByAdministrator), unless it came
// back. Telling her at once to ask her helpdesk would be false for a
// machine that reboots; so would the placement's "no capacity": its
// reason is ReasonDesktopGoingDown, which the portal says in her words.
func desktopShuttingDown(h *vdibroker.SessionHost, user string, timeout time.Duration, now time.Time) error {
	said, again := h.LastHeartBeat.UTC(), vdibroker.StartAfterShutdownFrom(h, timeout)
	e := &vdibroker.Error{Code: vdibroker.ENoCapacity, Reason: vdibroker.ReasonDesktopGoingDown, RetryAfter: downRetryAfter(h, timeout, now)}
	down := "it is down from " + again.Format(time.RFC3339)
	// Her retry that finds it down comes the wait until again after now,
	// in whole seconds rounded up (writeError's header; the capped
	// Retry-After's retries before it add whole seconds): up to a second
	// after again when now is not on a whole second, and her start may
	// time out in between.
	if vdibroker.StartTimedOut(h, now.Add(ceilSeconds(again.Sub(now)))) {
		// Connects never start it again (R-A4): if it is down then,
		// an administrator's start brings it back, accepted once it is
		// down and its start has timed out (the later, at a whole
		// second: the admin's 409 names the same).
		from := later(again, ceilSecond(h.PowerStateTime.Add(StartTimeout).UTC()))
		when := "then"
		if from.After(again) {
			when = "from " + from.Format(time.RFC3339)
		}
		down = "unless it comes back by itself (a reboot), " + down + " and, its start timed out by then (connects do not start it again), needs an administrator, who can start it again (vdibroker sessionhost start) " + when
	}
	e.Message = fmt.Sprintf("session host %q, assigned to %s, is shutting down: it was started at %s, and its agent said at %s (%s ago) that its machine is going down; no other host is started for you. After the pool's heartbeat timeout (%d seconds) of silence from its agent, %s",
		h.Name, user, h.PowerStateTime.UTC().Format(time.RFC3339), said.Format(time.RFC3339), relative(now.Sub(said), false),
		int(timeout/time.Second), down)
	return e
}

// goingDown reports whether h, recorded Running (or never recorded by
// the broker), is Shutdown because its agent said within timeout of now
// that its machine is going down (R-H1): shut down or restarted from
// within the machine, not by the broker (whose stop records Stopping).
func goingDown(h *vdibroker.SessionHost, timeout time.Duration, now time.Time) bool {
	return h.ShuttingDown && h.LastHeartBeat != nil && now.Sub(*h.LastHeartBeat) <= timeout &&
		(h.PowerState == vdibroker.PowerRunning || h.PowerState == "")
}

// desktopGoingDown is the answer to user's connect in a Personal pool
// that starts hosts on connect, whose own host h is goingDown (R-A4): a
// restart brings it back by itself, a shutdown does not, and its agent
// says the same for both. NoCapacity saying so, with the Retry-After of
// desktopShuttingDown (downRetryAfter, at most StartRetryAfter): until
// the first whole second after its agent has been silent for the pool's
// heartbeat timeout (vdibroker.StartAfterShutdownFrom), when it is either back (her retry
// lands on it) or taken for down, and her retry then starts it (start VM
// on connect of a host whose agent is silent). Not the placement's
// refusal, which has no Retry-After and tells an administrator to start
// the host, while her own connect will. Its reason is
// ReasonDesktopGoingDown, as desktopShuttingDown's.
func desktopGoingDown(h *vdibroker.SessionHost, user string, timeout time.Duration, now time.Time) error {
	said, again := h.LastHeartBeat.UTC(), vdibroker.StartAfterShutdownFrom(h, timeout)
	return &vdibroker.Error{Code: vdibroker.ENoCapacity, Reason: vdibroker.ReasonDesktopGoingDown, RetryAfter: downRetryAfter(h, timeout, now),
		Message: fmt.Sprintf("session host %q, assigned to %s, is shutting down or restarting: its agent said at %s (%s ago) that its machine is going down; no other host is started for you. If it restarts, your connect lands on it once its agent reports again; if not, your connect starts it once its agent has been silent for the pool's heartbeat timeout (%d seconds), from %s",
			h.Name, user, said.Format(time.RFC3339), relative(now.Sub(said), false), int(timeout/time.Second), again.Format(time.RFC3339))}
}

// downRetryAfter is the Retry-After of an answer that her own desktop h
// is going down (desktopShuttingDown, desktopGoingDown; R-A4): the wait
// until it is taken for down (vdibroker.StartAfterShutdownFrom), but at
// most StartRetryAfter, as for HostStarting. The heartbeat timeout may
// be up to an hour (vdibroker.MaxHeartbeatTimeoutSeconds), and a
// rebooting machine is back in about a boot's time: she is not sent away
// for as long as the timeout; each retry before it is down is answered
// the same, with the wait as of then. A shortened wait is whole seconds
// that bring her retry back while its agent's word still holds (its last
// heartbeat plus timeout, up to a second before that first whole second,
// so 29 s rather than 30 s when 30 s would land in between): her retries
// then come back at whole seconds from her first, and the one that finds
// it down comes when a single wait until then would have brought it,
// which is the moment desktopShuttingDown's words are decided for.
func downRetryAfter(h *vdibroker.SessionHost, timeout time.Duration, now time.Time) time.Duration {
	if d := vdibroker.StartAfterShutdownFrom(h, timeout).Sub(now); d <= StartRetryAfter {
		return d
	}
	return min(StartRetryAfter, h.LastHeartBeat.Add(timeout).Sub(now).Truncate(time.Second))
}

// ownStartRetryAfter is the Retry-After of a Personal user's
// HostStarting for her own host h, Starting within the start timeout at
// now (R-A4): StartRetryAfter, or, when its start times out sooner, the
// wait until then in whole seconds, rounded up (at least 1 s). Her retry
// comes when the Retry-After says, in whole seconds (writeError's header,
// as desktopShuttingDown reckons it), so at or after the timeout: her
// desktop is up then and she lands on it, or its start has timed out and
// she is told that it needs an administrator (ReasonStartByAdministrator).
// She is never sent past the timeout by a wait that said her desktop was
// starting.
func ownStartRetryAfter(h *vdibroker.SessionHost, now time.Time) time.Duration {
	if h.PowerStateTime == nil {
		return StartRetryAfter // a start that never times out (vdibroker.StartTimedOut)
	}
	return min(StartRetryAfter, max(ceilSeconds(h.PowerStateTime.Add(StartTimeout).Sub(now)), time.Second))
}

// ceilSeconds is d rounded up to whole seconds, as a Retry-After header
// says it (writeError).
func ceilSeconds(d time.Duration) time.Duration {
	return (d + time.Second - 1) / time.Second * time.Second
}

// silentSince says what h's agent said since its start, which timed out:
// nothing, or, once, that its machine was going down (longer than the
// pool's heartbeat timeout ago, or ShuttingDownAfterStart would hold).
func silentSince(h *vdibroker.SessionHost) string {
	if h.LastHeartBeat != nil && h.PowerStateTime != nil && h.LastHeartBeat.After(*h.PowerStateTime) {
		return fmt.Sprintf("its agent said at %s only that its machine was going down, and has not reported since", h.LastHeartBeat.UTC().Format(time.RFC3339))
	}
	return "its agent has not reported since"
}

// startForConnect claims h's start and asks the driver in the background
// (a driver may take a minute; the user is answered now).
func (s *Service) startForConnect(ctx context.Context, d Driver, pool *vdibroker.HostPool, h *vdibroker.SessionHost, user string) error {
	// Counted before the claim is stored: a Wait (Close, a test) that
	// follows the host reading Starting waits for its driver call too.
	s.bg.Add(1)
	_, claimed, err := s.claimStart(ctx, pool.Name, h.Name, "connect", onConnect)
	if err != nil {
		s.bg.Done()
		return err
	}
	go func() {
		defer s.bg.Done()
		bctx, cancel := context.WithTimeout(context.Background(), DriverTimeout)
		defer cancel()
		s.driveStart(bctx, d, claimed)
	}()
	s.log.Info("start VM on connect", "pool", pool.Name, "host", h.Name, "user", user)
	return hostStarting(pool.Name, h.Name, StartRetryAfter)
}

// hostStarting is the HostStarting answer (R-A4) for pool: what is
// happening, in words; when to try again is its Retry-After (retry:
// StartRetryAfter, or ownStartRetryAfter for a Personal user's own host)
// alone, which every reader shows in its own form (the CLI's " (try again
// in 30 s)", the portal's own words), so the line an administrator reads
// says the wait once.
func hostStarting(pool, host string, retry time.Duration) *startingError {
	msg := fmt.Sprintf("host pool %q has no capacity now; a session host is starting", pool)
	if host != "" {
		msg = fmt.Sprintf("host pool %q has no capacity now; session host %q is starting", pool, host)
	}
	return &startingError{err: &vdibroker.Error{Code: vdibroker.EHostStarting, Message: msg, RetryAfter: retry}, host: host}
}

// startingError is StartOnConnect's HostStarting, naming the host it
// started for the user (or the user's own, starting), if one, and, for a
// Personal user's own host, when its start times out.
type startingError struct {
	err      *vdibroker.Error
	host     string
	timesOut time.Time
}

func (e *startingError) Error() string { return e.err.Error() }
func (e *startingError) Unwrap() error { return e.err }

// StartingHost returns the host a HostStarting error of StartOnConnect
// started for the connecting user, or the user's own host that is
// starting: "" when it names none (other hosts start for the users who
// wait). Through a gateway the user may wait for that host (R-GW5).
func StartingHost(err error) string {
	var e *startingError
	if errors.As(err, &e) {
		return e.host
	}
	return ""
}

// StartTimesOut returns when the start of the Personal user's own host
// that a HostStarting error of StartOnConnect waits for times out (R-A4):
// from then her connect is answered otherwise (her desktop, or that it
// needs an administrator), so a connect held for it (R-U4) is decided
// again then. Zero for any other answer.
func StartTimesOut(err error) time.Time {
	var e *startingError
	if errors.As(err, &e) {
		return e.timesOut
	}
	return time.Time{}
}

// wait records that user waits for a host in pool and returns how many
// users wait there (those answered HostStarting within StartTimeout).
// A pool keeps at most MaxWaitingUsers: past it, user is counted for this
// connect without being kept. The users are swept when the oldest is
// due, at most once a second (a flood of new users would otherwise make
// every connect walk them all), so one forgotten within the last second
// may still be counted.
func (s *Service) wait(pool, user string, now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiting == nil {
		s.waiting = map[string]*waitingUsers{}
	}
	w := s.waiting[pool]
	if w == nil {
		w = &waitingUsers{m: map[waiter]time.Time{}}
		s.waiting[pool] = w
	}
	if !now.Before(w.sweep) {
		var oldest time.Time
		for u, at := range w.m {
			switch {
			case now.Sub(at) > StartTimeout:
				delete(w.m, u)
			case oldest.IsZero() || at.Before(oldest):
				oldest = at
			}
		}
		w.sweep = now.Add(time.Second)
		if !oldest.IsZero() {
			w.sweep = later(w.sweep, oldest.Add(StartTimeout+time.Nanosecond))
		}
	}
	k := waiterKey(user)
	if at, ok := w.m[k]; ok {
		if now.Sub(at) > StartTimeout {
			// Kept past StartTimeout and not yet swept: she waits anew
			// from now, as if the sweep had forgotten her first, rather
			// than being forgotten at the next sweep while she waits.
			w.m[k] = now
		}
		return len(w.m)
	}
	if len(w.m) >= MaxWaitingUsers {
		return len(w.m) + 1
	}
	if len(w.m) == 0 {
		w.sweep = later(now.Add(time.Second), now.Add(StartTimeout+time.Nanosecond))
	}
	w.m[k] = now
	return len(w.m)
}

// waiterKey is user's key among the waiting: Alice and alice wait once
// (R-E5), in 32 bytes whatever the name's length (R-SEC).
func waiterKey(user string) waiter { return sha256.Sum256([]byte(vdibroker.FoldUser(user))) }

// Unwait forgets that user waits in pool: placed, or nothing to wait for.
func (s *Service) Unwait(pool, user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.waiting[pool]; w != nil {
		delete(w.m, waiterKey(user))
		if len(w.m) == 0 {
			delete(s.waiting, pool)
		}
	}
}
