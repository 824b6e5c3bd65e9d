package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sync/singleflight"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/ratelimit"
)

// Namespace prefixes every vdibroker metric name.
const Namespace = "vdibroker"

// Latency buckets in seconds: placement is sub-millisecond in memory, a
// connect includes a durable commit (R-D2), so the range spans 50µs..5s.
var latencyBuckets = []float64{
	0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
	0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
}

var (
	connects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "connects_total",
		Help:      "Connect requests by host pool and result code (OK, Reconnect, DryRun, or an error code such as NoCapacity).",
	}, []string{"pool", "code"})

	connectDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace,
		Name:      "connect_duration_seconds",
		Help:      "Time to answer a connect, from request to durable commit, by result code.",
		Buckets:   latencyBuckets,
	}, []string{"code"})

	placementDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace,
		Name:      "placement_duration_seconds",
		Help:      "Time the placement engine took to decide one connect, by load balancer type.",
		Buckets:   latencyBuckets,
	}, []string{"algorithm"})

	storeTxDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace,
		Name:      "store_tx_duration_seconds",
		Help:      "Time of one store operation (transaction), by operation.",
		Buckets:   latencyBuckets,
	}, []string{"op"})

	storeTxErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "store_tx_errors_total",
		Help:      "Store operations that returned an internal error, by operation.",
	}, []string{"op"})

	heartbeats = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "heartbeats_total",
		Help:      "Agent heartbeats received, by result code (OK or an error code such as Unauthenticated).",
	}, []string{"code"})

	heartbeatDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace,
		Name:      "heartbeat_duration_seconds",
		Help:      "Time to answer an agent heartbeat, from its request to its answer (the store's commit and the broker's views included), by result code.",
		Buckets:   latencyBuckets,
	}, []string{"code"})
)

// Connect result codes that are not errors.
const (
	CodeOK        = "OK"
	CodeReconnect = "Reconnect"
	CodeDryRun    = "DryRun"
)

// ObserveConnect records one connect to pool answered with code (CodeOK,
// CodeReconnect, CodeDryRun, or a vdibroker error code such as
// vdibroker.ENoCapacity) after d.
func ObserveConnect(pool, code string, d time.Duration) {
	connects.WithLabelValues(pool, code).Inc()
	connectDuration.WithLabelValues(code).Observe(d.Seconds())
}

// ConnectCode returns the result code to record for a connect that ended
// with err (nil for success): CodeOK, or the error's code.
func ConnectCode(err error, reconnect, dryRun bool) string {
	switch {
	case err != nil:
		return vdibroker.ErrorCode(err)
	case dryRun:
		return CodeDryRun
	case reconnect:
		return CodeReconnect
	default:
		return CodeOK
	}
}

// ObservePlacement records the placement engine's decision time for one
// connect in a pool with the given load balancer type.
func ObservePlacement(algorithm string, d time.Duration) {
	placementDuration.WithLabelValues(algorithm).Observe(d.Seconds())
}

// ObserveStoreTx records one store operation op (a Store method name such
// as "CommitPlacement") that took d.
func ObserveStoreTx(op string, d time.Duration) {
	storeTxDuration.WithLabelValues(op).Observe(d.Seconds())
}

// ObserveHeartbeat records one agent heartbeat answered with code (CodeOK
// or an error code) after d. InstrumentAPI calls it.
func ObserveHeartbeat(code string, d time.Duration) {
	heartbeats.WithLabelValues(code).Inc()
	heartbeatDuration.WithLabelValues(code).Observe(d.Seconds())
}

// Config configures a registry.
type Config struct {
	// Store is read on every scrape for the current gauges; nil leaves them
	// out.
	Store vdibroker.Store
	// Now evaluates host status and heartbeat age (R-H1); nil is time.Now.
	Now func() time.Time
	// ScrapeTimeout bounds the store reads of one scrape; 0 is 5s.
	ScrapeTimeout time.Duration
	// Outage, when set, says whether the broker counts its store as down
	// and for how long it has been down in all since start (R-OUT1):
	// vdibroker_store_up is 0 while it is, and
	// vdibroker_store_outage_seconds_total counts the seconds.
	Outage func() (down bool, seconds float64)
	// ClockOffset, when set, is this replica's clock minus the database
	// server's at its last comparison that could tell within the
	// tolerance from beyond (broker.Service.ClockOffset):
	// vdibroker_clock_offset_seconds, absent before the first.
	ClockOffset func() (offset time.Duration, ok bool)
}

// NewRegistry returns a registry with the event metrics, the store gauges
// (when cfg.Store is set), and the Go runtime and process collectors.
func NewRegistry(cfg Config) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		connects, connectDuration, placementDuration, storeTxDuration, storeTxErrors, heartbeats, heartbeatDuration,
		autoscaleEvaluations, autoscaleActions, autoscaleRunning, autoscaleUsed, // autoscale.go
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	initEventSeries()
	if cfg.Store != nil {
		c := NewStoreCollector(cfg.Store, cfg.Now, cfg.ScrapeTimeout)
		c.outage = cfg.Outage
		reg.MustRegister(c)
	}
	if cfg.Outage != nil {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: Namespace, Name: "store_outage_seconds_total",
			Help: "Seconds the broker has counted its store as down since it started.",
		}, func() float64 { _, s := cfg.Outage(); return s }))
	}
	if cfg.ClockOffset != nil {
		reg.MustRegister(clockCollector(cfg.ClockOffset))
	}
	return reg
}

var descClockOffset = prometheus.NewDesc(Namespace+"_clock_offset_seconds",
	"This replica's clock minus the database server's, compared once a minute; keep it within ±0.5 s on every replica (vdibroker.ClockTolerance).", nil, nil)

// clockCollector emits vdibroker_clock_offset_seconds once the clocks
// were compared.
type clockCollector func() (time.Duration, bool)

func (c clockCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descClockOffset }

func (c clockCollector) Collect(ch chan<- prometheus.Metric) {
	if offset, ok := c(); ok {
		ch <- prometheus.MustNewConstMetric(descClockOffset, prometheus.GaugeValue, offset.Seconds())
	}
}

// initEventSeries gives the event metrics whose labels are known in
// advance their series at 0 from the start, so the first events show in a
// rate() (initPoolCounters does the same for each pool's connect
// counters): heartbeats by their common outcomes, connect latency by the
// codes of a pool that exists, decision latency by load balancer type.
// vdibroker_store_tx_duration_seconds is left out: its operations are the
// store's method names, known to the store's instrumentation.
func initEventSeries() {
	for _, code := range []string{CodeOK, vdibroker.EUnauthenticated} {
		heartbeats.WithLabelValues(code)
		heartbeatDuration.WithLabelValues(code)
	}
	for _, code := range poolConnectCodes {
		connectDuration.WithLabelValues(code)
	}
	lbt, _ := vdibroker.PoolField("loadBalancerType")
	for _, lb := range lbt.Values("") {
		placementDuration.WithLabelValues(lb)
	}
}

// The bounds of the scrapes Handler serves. /metrics needs no token
// unless serve is given one, and a scrape of a full pod reads the store
// and builds tens of thousands of series: unbounded, an anonymous
// caller's concurrent scrapes would take every core and as much memory
// as it liked. At most MaxScrapesInFlight are served at once; the next
// wait for a slot, in their order, up to MaxScrapesWaiting of them; and
// one address (an IPv6 /64) has at most MaxScrapesPerAddress under way,
// served or waiting. Past these, 503 at once. So a caller, however many
// scrapes it sends, leaves slots to the others: a Prometheus server
// scrapes one at a time, an HA pair two, from two addresses.
const (
	MaxScrapesInFlight   = 4
	MaxScrapesWaiting    = 60
	MaxScrapesPerAddress = 2
)

// Handler serves reg in the Prometheus text format (GET /metrics) within
// the bounds above, and scrapes that overlap share one gathering (one
// store read): a scrape that comes while another's gathering runs waits
// for it and is answered its result.
func Handler(reg *prometheus.Registry) http.Handler {
	return &scrapeLimiter{
		next:   promhttp.HandlerFor(&sharedGatherer{g: reg}, promhttp.HandlerOpts{Registry: reg}),
		slots:  make(chan struct{}, MaxScrapesInFlight),
		byAddr: map[string]int{},
	}
}

// scrapeLimiter serves next within the bounds of the scrapes.
type scrapeLimiter struct {
	next  http.Handler
	slots chan struct{} // one per scrape served

	mu       sync.Mutex
	admitted int            // scrapes served or waiting
	byAddr   map[string]int // of admitted, per address
}

func (l *scrapeLimiter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	addr := ratelimit.ClientAddr(r)
	l.mu.Lock()
	if l.admitted >= MaxScrapesInFlight+MaxScrapesWaiting || l.byAddr[addr] >= MaxScrapesPerAddress {
		l.mu.Unlock()
		http.Error(w, "too many scrapes at once, try again later", http.StatusServiceUnavailable)
		return
	}
	l.admitted++
	l.byAddr[addr]++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.admitted--
		if l.byAddr[addr]--; l.byAddr[addr] == 0 {
			delete(l.byAddr, addr)
		}
	}()
	select {
	case l.slots <- struct{}{}:
		defer func() { <-l.slots }()
	case <-r.Context().Done():
		return // the caller hung up
	}
	l.next.ServeHTTP(w, r)
}

// sharedGatherer lets the scrapes that overlap share one Gather of g.
type sharedGatherer struct {
	g     prometheus.Gatherer
	calls singleflight.Group
}

// gathered is one Gather's result.
type gathered struct {
	families []*dto.MetricFamily
	err      error
}

// Gather implements prometheus.Gatherer. The families are shared by the
// scrapes that overlapped, which only read them.
func (s *sharedGatherer) Gather() ([]*dto.MetricFamily, error) {
	v, _, _ := s.calls.Do("", func() (any, error) {
		families, err := s.g.Gather()
		return gathered{families, err}, nil
	})
	r := v.(gathered)
	return r.families, r.err
}
