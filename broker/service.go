package broker

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/utils/clock"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker/outage"
	"github.com/vdibroker/vdibroker/broker/poolview"
	"github.com/vdibroker/vdibroker/internal/keyed"
	"github.com/vdibroker/vdibroker/power"
	"github.com/vdibroker/vdibroker/rdp"
)

// Config is what a Service needs. Store is required; the rest has defaults.
type Config struct {
	Store  vdibroker.Store
	Logger *slog.Logger // nil discards logs
	// Clock is the service's time: Now for status (R-H1), expiry and
	// placement decisions, and the tickers of its loops (maintenance, the
	// store's health, the escrow, the power poll). nil = the real clock;
	// tests step a fake one.
	Clock clock.WithTicker
	// Rand returns a uniform integer in [0, n) for placement draws (nil =
	// math/rand/v2).
	Rand func(n int) int
	// MaintenanceInterval is how often the background loop ends expired
	// Pending sessions (R-S3), reads again from the store the pool views
	// used since the last tick (so changes made by other replicas are
	// seen; an idle view is only marked stale, and its next connect reads
	// it), learns the sessions opened since (for reconnects during an
	// outage), and prunes the history when due. 0 = 5s.
	MaintenanceInterval time.Duration
	// ObservePlacement, when set, is called with the pool's load balancer
	// type and the engine's decision time of every connect (for example
	// metrics.ObservePlacement).
	ObservePlacement func(algorithm string, d time.Duration)
	// Retention is how long ended sessions, delivered commands and expired
	// tokens are kept; the maintenance loop prunes older ones once an hour
	// (serve --retention). 0 keeps them forever.
	Retention time.Duration
	// StoreTimeout bounds every store call (0 = 5s): a database that does
	// not answer in time is treated as down (R-OUT1), so no request
	// waits longer than this for it.
	StoreTimeout time.Duration
	// RDPProperties are the admin's extra .rdp properties, from
	// rdp.ParseProperties, in every connect's rdpFile (AVD's
	// customRdpProperty).
	RDPProperties []rdp.Property
	// PowerDrivers are the drivers of serve --power-config (R-A4); a
	// pool's powerDriver must name one of them.
	PowerDrivers power.Set
	// PowerPollInterval is how often the status of stopping hosts is asked
	// of their drivers (0 = 30s).
	PowerPollInterval time.Duration
	// OutagePlacement lets the service place new users during a store
	// outage within an escrow it holds while the store is up (R-OUT2,
	// R-OUT3; package outage).
	OutagePlacement outage.Placement
	// Gateway is the RD gateway side (gateway.go): the server's gateway,
	// token lifetime, key rotation, tunnels per user.
	Gateway GatewayConfig
	// MaxConnectWait bounds how long a connect is held for a starting
	// host (R-U4, serve --max-connect-wait); 0 = DefaultMaxConnectWait.
	// The start timeout bounds it too.
	MaxConnectWait time.Duration
	// MaxConnectWaiters bounds the connects held at once (R-U4); 0 =
	// DefaultMaxWaiters.
	MaxConnectWaiters int
	// AfterTick, when set, is called at the end of each maintenance tick:
	// tests of the loop, here and through a server (internal/testserver),
	// wait for a tick to have ended before they act, instead of sleeping.
	AfterTick func()
}

// Service is the broker service on a vdibroker.Store.
type Service struct {
	afterTick func() // Config.AfterTick
	store     vdibroker.Store
	log       *slog.Logger
	clock     clock.WithTicker
	now       func() time.Time // clock.Now
	rand      func(n int) int
	rdp       []rdp.Property

	health    *outage.Health
	pings     singleflight.Group // Health's store pings, shared by the calls that overlap
	outage    *outage.Mode
	creds     credentials
	figures   poolFigures
	views     *poolview.Views
	userLocks keyed.Mutex
	hostLocks keyed.Mutex // one host's heartbeats, one at a time
	idem      *idempotency
	power     *power.Service
	gw        *gatewaySide
	refusals  refusals // the bounded refusal audit (refusals.go)
	// principalRefusals counts those of callers with a valid API
	// credential, per principal (refusals.go).
	principalRefusals refusals
	waits             *waits // the connects held for a starting host (wait.go)
	maxWait           time.Duration

	retention  time.Duration
	lastPrune  time.Time  // maintenance loop only
	clockCheck clockCheck // the clock against the database's (clock.go)

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// New returns a Service and starts its maintenance loop; Close stops it.
func New(cfg Config) *Service {
	s := &Service{
		afterTick: cfg.AfterTick,
		store:     cfg.Store,
		log:       cfg.Logger,
		clock:     cfg.Clock,
		rand:      cfg.Rand,
		retention: cfg.Retention,
		rdp:       cfg.RDPProperties,
		gw:        newGatewaySide(cfg.Gateway),
		waits:     newWaits(cfg.MaxConnectWaiters),
		maxWait:   cfg.MaxConnectWait,
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	s.principalRefusals.byPrincipal = true
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	s.now = s.clock.Now
	if s.rand == nil {
		s.rand = rand.IntN
	}
	if s.maxWait <= 0 {
		s.maxWait = DefaultMaxConnectWait
	}
	timeout := cfg.StoreTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	interval := cfg.MaintenanceInterval
	if interval <= 0 {
		interval = 5 * time.Second
	}
	// Every store call goes through the guard: bounded by the store
	// timeout, and StoreUnavailable while the health says it is down.
	s.health = outage.NewHealth(outage.HealthConfig{Ping: cfg.Store.Ping, Timeout: timeout, Logger: s.log, Clock: s.clock, Stop: s.stop})
	s.store = outage.Guard(cfg.Store, timeout, s.health)
	s.views = poolview.New(poolview.Config{Store: s.store, Logger: s.log, Now: s.now, Rand: s.rand,
		Observe: cfg.ObservePlacement, Credit: s.health.Credit,
		HeldByOthers: func(ctx context.Context, pool string) (map[string]int, error) {
			return s.outage.HeldByOthers(ctx, pool)
		},
		Unwritten: func(pool, host string) int { return s.outage.Unwritten(pool, host) },
		Turned:    s.waits.signal, Waiting: s.waits.watching,
		// A host another replica deleted or made again takes its
		// report here too once a read of its pool shows it (R-SEC), and
		// its credential: the old machine's heartbeat is not taken from
		// memory during a later outage here.
		HostsRead: func(pool string, hosts []*vdibroker.SessionHost, begun time.Time) {
			s.creds.forgetHosts(pool, s.outage.HostsRead(pool, hosts, begun))
		}})
	s.outage = outage.New(outage.Config{Health: s.health, Store: s.store, Views: s.views, Answer: s.answer, Logger: s.log,
		Clock: s.clock, Placement: cfg.OutagePlacement, MaintenanceInterval: interval})
	// When the store is back: the outage's sessions are written before
	// the held heartbeats are applied, which would adopt them.
	s.health.OnUp(s.outage.WriteOutagePlacements, s.applyHeld, s.views.MarkAllStale)
	s.idem = newIdempotency(s.now)
	s.outage.Run(s.stop)
	go s.maintain(s.clock.NewTicker(interval), interval)
	// A host's power state changed: its view is read again, and connects
	// held in its pool are decided again (R-U4).
	refresh := func(ctx context.Context, pool, host string) {
		s.views.RefreshHost(ctx, pool, host)
		s.waits.signal(pool)
	}
	s.power = power.NewService(power.ServiceConfig{Store: s.store, Drivers: cfg.PowerDrivers, Refresh: refresh,
		Clock: s.clock, Logger: s.log, PollInterval: cfg.PowerPollInterval, Down: s.health.Down,
		HeardSince: s.health.HeardSince})
	s.health.Watch()
	return s
}

// Store returns the store the service works on, for reads that need no
// business rule (lists of sessions, tokens): every call is bounded by the
// store timeout and answers StoreUnavailable during an outage.
func (s *Service) Store() vdibroker.Store { return s.store }

// StoreHealth returns what the service knows of its store.
func (s *Service) StoreHealth() *outage.Health { return s.health }

// OutagePlacementsWaiting is outage.Mode.OutagePlacementsWaiting of this
// replica.
func (s *Service) OutagePlacementsWaiting() bool {
	return s.outage.OutagePlacementsWaiting()
}

// OutageState is the size of what this replica holds of its hosts'
// reports for an outage (outage.Mode.State).
func (s *Service) OutageState() outage.State { return s.outage.State() }

var _ vdibroker.HealthService = (*Service)(nil)

// Health pings the store, unless an outage is known already, and returns
// its health: within the store timeout either way. The calls that overlap
// share one ping: /healthz needs no credential, and a caller's flood of
// probes must not take the store's connections (R-SEC).
func (s *Service) Health(ctx context.Context) vdibroker.HealthStatus {
	if !s.health.Down() {
		ch := s.pings.DoChan("", func() (any, error) {
			// The ping is every waiting caller's: not cut short when
			// the first hangs up.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			if err := s.store.Ping(ctx); err != nil {
				s.log.ErrorContext(ctx, "health: store ping", "err", err)
			}
			return nil, nil
		})
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
	return s.health.Status()
}

// Power returns the power service: start and stop hosts (R-A4).
func (s *Service) Power() *power.Service { return s.power }

// Now returns the service's current time.
func (s *Service) Now() time.Time { return s.now() }

// Close stops the maintenance loop. It does not close the store. It may be
// called more than once.
func (s *Service) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.done
		s.views.Wait() // background reads of idle views
		s.power.Close()
		s.outage.Wait() // gives the escrows back
		if !s.health.Down() {
			// The open window's counts, so a restart loses none.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			s.writeSummaries(ctx, s.refusals.roll(s.now(), true))
			s.writeSummaries(ctx, s.principalRefusals.roll(s.now(), true))
			cancel()
		}
	})
	return nil
}

// maintain runs the background work: pending timeout (R-S3) and refreshing
// the placement views.
func (s *Service) maintain(t clock.Ticker, interval time.Duration) {
	defer close(s.done)
	defer t.Stop()
	// Close cancels work in progress, so it never waits for a slow store.
	base, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		select {
		case <-s.stop:
			stop()
		case <-base.Done():
		}
	}()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C():
		}
		if !s.health.Down() {
			// During an outage the store refuses it, and the outage
			// is logged once (Health), not once per tick.
			s.expirePending(base, interval)
		}
		// Another replica may have placed, or heartbeats may have arrived
		// there: each loaded pool view is read again from the store, here,
		// while connects go on with the view they have (the database checks
		// every commit, R-D3). A connect that found its view marked stale
		// read it itself, and every connect of the pool waited for that
		// read: a quarter of a second for a 10,000-host pool on PostgreSQL
		// under a full pod's load, every tick (connect p99, BENCHMARKS.md).
		// During an outage the store cannot be read: the next connect
		// re-reads once it is back.
		if s.health.Down() {
			s.views.MarkAllStale()
		}
		if !s.health.Down() {
			ctx, cancel := context.WithTimeout(base, max(interval, 30*time.Second))
			s.views.RefreshAll(ctx)
			s.views.CatchUpAll(ctx)
			s.gatewayMaintain(ctx)
			s.flushRefusals(ctx)
			s.checkClockIfDue(ctx)
			cancel()
			s.pruneIfDue(base)
		}
		if s.afterTick != nil {
			s.afterTick()
		}
	}
}

// expirePending ends the Pending sessions past their timeout (R-S3).
func (s *Service) expirePending(base context.Context, interval time.Duration) {
	ctx, cancel := context.WithTimeout(base, max(interval, 30*time.Second))
	defer cancel()
	n, err := s.store.ExpirePending(ctx, s.now())
	switch {
	case err != nil && base.Err() == nil && !outage.IsStoreDown(err):
		s.log.Error("expire pending sessions", "err", err)
	case n > 0:
		s.log.Info("ended pending sessions never seen by their agent", "count", n, "reason", vdibroker.EndPendingTimeout)
	}
}

// pruneEvery is how often the maintenance loop prunes the history.
const pruneEvery = time.Hour

// pruneIfDue deletes what is older than the retention, at most once every
// pruneEvery (the first tick after start included).
func (s *Service) pruneIfDue(base context.Context) {
	now := s.now()
	if s.retention <= 0 || (!s.lastPrune.IsZero() && now.Sub(s.lastPrune) < pruneEvery) {
		return
	}
	s.lastPrune = now
	ctx, cancel := context.WithTimeout(base, 10*time.Minute)
	defer cancel()
	n, err := s.store.PruneHistory(ctx, now.Add(-s.retention))
	switch {
	case err != nil && base.Err() == nil:
		s.log.Error("prune the history", "err", err)
	case n > 0:
		s.log.Info("pruned the history", "sessions", n, "olderThan", s.retention)
	}
}

// Services returns the service as the vdibroker.Services it is (a pod adds
// its Federation).
func (s *Service) Services() vdibroker.Services {
	return vdibroker.Services{Connect: s, Hosts: s, Sessions: s, Pools: s, ScalingPlans: s,
		Tokens: s, Audit: s, Power: s.power, Health: s, Gateway: s}
}
