package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/loadindex"
)

var (
	descStoreUp = prometheus.NewDesc(Namespace+"_store_up",
		"1 when the scrape could read the store and the broker does not count it as down, else 0.", nil, nil)
	descPoolLimit = prometheus.NewDesc(Namespace+"_pool_max_session_limit",
		"The host pool's maxSessionLimit (999999 means no limit).",
		[]string{"pool", "load_balancer_type"}, nil)
	descSessions = prometheus.NewDesc(Namespace+"_sessions",
		"Open user sessions by host pool and state (Pending, Active, Disconnected).",
		[]string{"pool", "state"}, nil)
	descHosts = prometheus.NewDesc(Namespace+"_hosts",
		"Session hosts by host pool and status (R-H1).",
		[]string{"pool", "status"}, nil)
	descHostsDrained = prometheus.NewDesc(Namespace+"_hosts_drained",
		"Session hosts in drain mode (allowNewSession=false) by host pool.",
		[]string{"pool"}, nil)
	descHostSessions = prometheus.NewDesc(Namespace+"_host_sessions",
		"Session count of a host (Pending + Active + Disconnected, R-S1).",
		[]string{"pool", "host"}, nil)
	descLoadIndex = prometheus.NewDesc(Namespace+"_host_load_index",
		"Load index of a host, 0..100, or -1 when load balancing is off (SPEC §6).",
		[]string{"pool", "host"}, nil)
	descHeartbeatAge = prometheus.NewDesc(Namespace+"_host_heartbeat_age_seconds",
		"Seconds since the host's last heartbeat; absent for hosts that never sent one.",
		[]string{"pool", "host"}, nil)
)

var (
	statuses = []string{vdibroker.StatusAvailable, vdibroker.StatusNeedsAssistance, vdibroker.StatusUnavailable, vdibroker.StatusShutdown}
)

// StoreReader is what the collector reads of a vdibroker.Store.
type StoreReader interface {
	ListHostPools(ctx context.Context) ([]*vdibroker.HostPool, error)
	ListSessionHosts(ctx context.Context, pool string) ([]*vdibroker.SessionHost, error)
	CountOpenSessions(ctx context.Context) (map[string]vdibroker.OpenSessionCounts, error)
}

// StoreCollector reads the broker's current state from a Store on every
// scrape, so the gauges are as fresh as the database (and correct across
// replicas sharing one PostgreSQL). A scrape reads the pools, each pool's
// hosts, and one count of open sessions by pool and state: never the
// sessions themselves (250,000 at a full pod).
type StoreCollector struct {
	store   StoreReader
	outage  func() (down bool, seconds float64)
	now     func() time.Time
	timeout time.Duration
}

var _ prometheus.Collector = (*StoreCollector)(nil)

// NewStoreCollector returns a collector reading st. now evaluates host status
// and heartbeat age (nil is time.Now); timeout bounds one scrape's reads (0
// is 5s).
func NewStoreCollector(st StoreReader, now func() time.Time, timeout time.Duration) *StoreCollector {
	if now == nil {
		now = time.Now
	}
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &StoreCollector{store: st, now: now, timeout: timeout}
}

// Describe implements prometheus.Collector.
func (c *StoreCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStoreUp, descPoolLimit, descSessions, descHosts, descHostsDrained, descHostSessions, descLoadIndex, descHeartbeatAge} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A store error reports
// vdibroker_store_up 0 and leaves the other gauges out of this scrape, so
// the runtime metrics still arrive.
func (c *StoreCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	var buf []prometheus.Metric
	err := c.collect(ctx, func(m prometheus.Metric) { buf = append(buf, m) })
	up := 1.0
	if err != nil {
		up, buf = 0, nil
	}
	if c.outage != nil {
		if down, _ := c.outage(); down {
			up = 0
		}
	}
	ch <- prometheus.MustNewConstMetric(descStoreUp, prometheus.GaugeValue, up)
	for _, m := range buf {
		ch <- m
	}
}

func (c *StoreCollector) collect(ctx context.Context, emit func(prometheus.Metric)) error {
	now := c.now()
	pools, err := c.store.ListHostPools(ctx)
	if err != nil {
		return err
	}
	open, err := c.store.CountOpenSessions(ctx)
	if err != nil {
		return err
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		emit(prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...))
	}
	initPoolCounters(pools)
	for _, p := range pools {
		gauge(descPoolLimit, float64(p.MaxSessionLimit), p.Name, p.LoadBalancerType)
		hosts, err := c.store.ListSessionHosts(ctx, p.Name)
		if err != nil {
			return err
		}
		// Status and load index as the API shows them (R-H1, SPEC §6).
		loadindex.Present(p, hosts, now)
		byStatus := map[string]int{}
		drained := 0
		for _, h := range hosts {
			byStatus[h.Status]++
			if !h.AllowNewSession {
				drained++
			}
			gauge(descHostSessions, float64(h.Sessions), p.Name, h.Name)
			gauge(descLoadIndex, float64(h.LoadIndex), p.Name, h.Name)
			if h.LastHeartBeat != nil {
				gauge(descHeartbeatAge, now.Sub(*h.LastHeartBeat).Seconds(), p.Name, h.Name)
			}
		}
		for _, s := range statuses {
			gauge(descHosts, float64(byStatus[s]), p.Name, s)
		}
		gauge(descHostsDrained, float64(drained), p.Name)

		n := open[p.Name]
		gauge(descSessions, float64(n.Pending), p.Name, vdibroker.StatePending)
		gauge(descSessions, float64(n.Active), p.Name, vdibroker.StateActive)
		gauge(descSessions, float64(n.Disconnected), p.Name, vdibroker.StateDisconnected)
	}
	return nil
}

// poolConnectCodes are the result codes of a connect to a pool that exists
// (InstrumentAPI's poolKnown): the label sets of
// vdibroker_connects_total each pool has from the start.
var poolConnectCodes = []string{CodeOK, CodeReconnect, CodeDryRun,
	vdibroker.ENoCapacity, vdibroker.EHostStarting, vdibroker.ENotAssigned, vdibroker.EConflict}

// initPoolCounters gives each pool its vdibroker_connects_total series of
// every connect code, at 0, from the first scrape that sees the pool on:
// rate() and increase() see a counter's first increment only after a
// sample from before it, so without a 0 the first NoCapacity refusal of a
// pool would never show in a rate. (A counter first incremented before
// any scrape saw its pool still starts at 1.) Creating a child that
// exists is a map lookup. The registry gathers collectors concurrently,
// so the series appear in this scrape or the next.
func initPoolCounters(pools []*vdibroker.HostPool) {
	for _, p := range pools {
		for _, code := range poolConnectCodes {
			connects.WithLabelValues(p.Name, code)
		}
	}
}
