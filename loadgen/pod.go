package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vdibroker/vdibroker"
)

// PodBroker starts and stops the broker the pod bench loads. The bench
// stops it once, between seeding the open sessions and loading the
// history (which it writes into the database directly), and starts it
// again to measure. Start returns the broker's base URL and its process id
// (read in /proc for its memory); phase is "seed" or "measure".
type PodBroker struct {
	Start func(ctx context.Context, phase string) (baseURL string, pid int, err error)
	Stop  func() error
}

// PodConfig is one pod bench run. The zero values of the sizes are a
// full pod.
type PodConfig struct {
	Broker PodBroker
	Token  string // the broker's admin token
	// Database is the broker's store: "" for SQLite in DataDir, or a
	// postgres:// DSN. The history is bulk-loaded into it.
	Database string
	DataDir  string

	Hosts           int // hosts of the large pool (default 10,000)
	SmallHosts      int // hosts of the small pool (default 100)
	SessionsPerHost int // open sessions per host (default 25)
	// HistoryDays and LogonsPerSeatDay size the LoggedOff history: each
	// pool gets hosts × sessions per host × days × logons rows (default
	// 7 days, 1.5 logons a seat a day).
	HistoryDays      int
	LogonsPerSeatDay float64

	Interval time.Duration // each agent's heartbeat interval (default 10s)
	// Rounds of the four measured phases (dry runs large, dry runs small,
	// connects large, connects small), each lasting Phase (default 2
	// rounds of 10 s).
	Rounds      int
	Phase       time.Duration
	Concurrency int // connect and dry-run workers (default 16)
	// AgentConcurrency bounds the seeding's registrations, connects and
	// first round of heartbeats in flight (default 64).
	AgentConcurrency int
	// HeartbeatConcurrency bounds the heartbeats in flight after the
	// first round, seeding and measuring (default 1000). A pod's agents do not wait for each other: each
	// sends when its interval is up, so heartbeats in flight are the rate
	// times the broker's latency (Little's law). A small bound turns the
	// broker's latency into the generator's lateness: with 64, a mean
	// round trip above 63 ms at 1,010/s leaves heartbeats queued in the
	// generator until they are skipped (see docs/benchmarks-history.md,
	// bench pod).
	HeartbeatConcurrency int
	// Every how often the readers beside the load run (defaults 100ms,
	// 5s, 2s): a ?user= listing, a /metrics scrape, the console overview
	// and the large pool's console page.
	ListEvery, MetricsEvery, ConsoleEvery time.Duration
	// SeedTimeout bounds the whole seeding (default 15 min).
	SeedTimeout time.Duration
	Timeout     time.Duration // per request (default 30s)
	// Progress, when set, is told what the bench is doing.
	Progress func(format string, args ...any)
}

// Pool names and name prefixes of the pod bench.
const (
	PodLargePool = "pod-large"
	PodSmallPool = "pod-small"
)

func (c *PodConfig) defaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Hosts, 10_000)
	def(&c.SmallHosts, 100)
	def(&c.SessionsPerHost, 25)
	def(&c.HistoryDays, 7)
	def(&c.Rounds, 2)
	def(&c.Concurrency, 16)
	def(&c.AgentConcurrency, 64)
	def(&c.HeartbeatConcurrency, 1000)
	if c.LogonsPerSeatDay == 0 {
		c.LogonsPerSeatDay = 1.5
	}
	durDef := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	durDef(&c.Interval, 10*time.Second)
	durDef(&c.Phase, 10*time.Second)
	durDef(&c.ListEvery, 100*time.Millisecond)
	durDef(&c.MetricsEvery, 5*time.Second)
	durDef(&c.ConsoleEvery, 2*time.Second)
	durDef(&c.SeedTimeout, 15*time.Minute)
	durDef(&c.Timeout, 30*time.Second)
	if c.Progress == nil {
		c.Progress = func(string, ...any) {}
	}
}

// Validate checks the configuration (after defaults) before anything runs.
func (c *PodConfig) Validate() error {
	switch {
	case c.Broker.Start == nil || c.Broker.Stop == nil:
		return errors.New("pod bench: no broker to start")
	case c.Hosts < 1 || c.Hosts > 100_000:
		return vdibroker.FieldError("hosts", "must be 1..100000")
	case c.SmallHosts < 1 || c.SmallHosts > 100_000:
		return vdibroker.FieldError("smallHosts", "must be 1..100000")
	case c.SessionsPerHost < 1 || c.SessionsPerHost > 100:
		return vdibroker.FieldError("sessionsPerHost", "must be 1..100")
	case c.HistoryDays < 0 || c.HistoryDays > 90:
		return vdibroker.FieldError("historyDays", "must be 0..90")
	case c.LogonsPerSeatDay < 0 || c.LogonsPerSeatDay > 20:
		return vdibroker.FieldError("logonsPerSeatDay", "must be 0..20")
	case c.Interval < time.Second || c.Interval > 10*time.Minute:
		return vdibroker.FieldError("interval", "must be 1s..10m")
	case c.Rounds < 1 || c.Rounds > 20:
		return vdibroker.FieldError("rounds", "must be 1..20")
	case c.Phase < 500*time.Millisecond || c.Phase > 10*time.Minute:
		return vdibroker.FieldError("phase", "must be 500ms..10m")
	case c.Concurrency < 1 || c.Concurrency > 1000:
		return vdibroker.FieldError("concurrency", "must be 1..1000")
	case c.AgentConcurrency < 1 || c.AgentConcurrency > 1000:
		return vdibroker.FieldError("agentConcurrency", "must be 1..1000")
	case c.HeartbeatConcurrency < 1 || c.HeartbeatConcurrency > 10_000:
		return vdibroker.FieldError("heartbeatConcurrency", "must be 1..10000")
	case c.DataDir == "" && c.Database == "":
		return vdibroker.FieldError("dataDir", "required for SQLite (the history is loaded into its file)")
	}
	return nil
}

// podPool is one pool of the bench: its hosts and how its users are named.
// Users 1..seats are placed while seeding (they are logged on); users
// seats+1..2×seats have history only, and the measured dry runs ask for
// them (returning users, logging on in the morning); measured connects
// are for users from 2×seats+1 on (new users).
type podPool struct {
	name       string
	hostPrefix string
	userPrefix string
	hostCount  int
	hosts      []*podHost
	byName     map[string]*podHost
	seats      int
	nextUser   atomic.Int64 // measured connects: next user number - 2×seats - 1
}

func (p *podPool) user(n int) string {
	return fmt.Sprintf("%s%0*d", p.userPrefix, len(fmt.Sprint(2*p.seats)), n)
}

// PodResult is what one pod bench measured.
type PodResult struct {
	Store string `json:"store"` // sqlite or postgres
	// PostgresSettings are the PostgreSQL server's settings that shape
	// its writes and caches (postgresSettingNames), as SHOW gives them.
	PostgresSettings map[string]string `json:"postgresSettings,omitempty"`
	Hosts            int               `json:"hosts"`
	SmallHosts       int               `json:"smallHosts"`
	SessionsPerHost  int               `json:"sessionsPerHost"`
	// HeartbeatConcurrency is the bound on measured heartbeats in flight.
	HeartbeatConcurrency int            `json:"heartbeatConcurrency"`
	Seed                 PodSeed        `json:"seed"`
	Rounds               []PodRound     `json:"rounds"`
	DryRunLarge          PhaseStats     `json:"dryRunLarge"`
	DryRunSmall          PhaseStats     `json:"dryRunSmall"`
	ConnectLarge         PhaseStats     `json:"connectLarge"`
	ConnectSmall         PhaseStats     `json:"connectSmall"`
	DryRunRatio          float64        `json:"dryRunRatio"`  // large rate / small rate
	ConnectRatio         float64        `json:"connectRatio"` // large rate / small rate
	Heartbeats           HeartbeatStats `json:"heartbeats"`
	UserListings         ReaderStats    `json:"userListings"`
	MetricsScrapes       ReaderStats    `json:"metricsScrapes"`
	ConsoleOverview      ReaderStats    `json:"consoleOverview"`
	ConsolePool          ReaderStats    `json:"consolePool"`
	// PortalHome is the user portal's first page of PortalUser, entitled
	// to PortalResources resources (R-U1).
	PortalHome ReaderStats `json:"portalHome"`
	BrokerRSS  int64       `json:"brokerRssBytes"` // peak seen while measuring
	BrokerHWM  int64       `json:"brokerHwmBytes"` // VmHWM of the measured process at the end
	BrokerCPU  float64     `json:"brokerCores"`    // mean cores while measuring
	// BrokerGoHeap and BrokerGoSys are the largest Go heap in use and Go
	// runtime memory its /metrics reported (0 when it reports none): the
	// rest of its RSS is memory outside Go's, SQLite's page caches.
	BrokerGoHeap int64 `json:"brokerGoHeapInuseBytes"`
	BrokerGoSys  int64 `json:"brokerGoSysBytes"`
	// MetricsStoreDown is how many scrapes answered vdibroker_store_up 0:
	// the store collector gave up at its timeout, so the scrape's time is
	// that timeout and the pool, host and session gauges are missing.
	MetricsStoreDown int           `json:"metricsStoreDown"`
	Measured         time.Duration `json:"measured"`
	// LoadAverage is /proc/loadavg before and after measuring: the
	// machine's other work, beside the figures.
	LoadAverage [2]string   `json:"loadAverage"`
	Targets     []PodTarget `json:"targets"`
	Pass        bool        `json:"pass"`
}

// PodSeed is how the state was built and how long each step took.
type PodSeed struct {
	RegisterElapsed time.Duration `json:"registerElapsed"`
	OpenSessions    int           `json:"openSessions"` // placed by connects, then reported Active
	ConnectElapsed  time.Duration `json:"connectElapsed"`
	ConnectErrors   []ErrorCount  `json:"connectErrors"`
	PendingLeft     int           `json:"pendingLeft"` // Pending after the agents reported (want 0)
	HistoryRows     int           `json:"historyRows"`
	HistoryElapsed  time.Duration `json:"historyElapsed"`
	Elapsed         time.Duration `json:"elapsed"` // the whole seeding, restarts included
}

// PodRound is one round's four phases.
type PodRound struct {
	DryRunLarge  PhaseStats `json:"dryRunLarge"`
	DryRunSmall  PhaseStats `json:"dryRunSmall"`
	ConnectLarge PhaseStats `json:"connectLarge"`
	ConnectSmall PhaseStats `json:"connectSmall"`
}

// PhaseStats is one kind of request against one pool: requests, the rate
// of answered ones (200 or 201) per second of the phase, latency of all,
// errors.
type PhaseStats struct {
	Requests int           `json:"requests"`
	OK       int           `json:"ok"`
	Elapsed  time.Duration `json:"elapsed"`
	Rate     float64       `json:"rate"`
	P50      time.Duration `json:"p50"`
	P99      time.Duration `json:"p99"`
	Max      time.Duration `json:"max"`
	Errors   []ErrorCount  `json:"errors"`
	lat      []time.Duration
	outs     []outcome
}

// ReaderStats is one reader beside the load (listings, scrapes, pages).
type ReaderStats struct {
	Requests int           `json:"requests"`
	OK       int           `json:"ok"`
	P50      time.Duration `json:"p50"`
	P99      time.Duration `json:"p99"`
	Max      time.Duration `json:"max"`
	Bytes    int           `json:"meanBytes"`
	Errors   []ErrorCount  `json:"errors"`
	// MaxByPhase is the slowest request by the phase it started in.
	MaxByPhase map[string]time.Duration `json:"maxByPhase"`
}

// RunPod seeds a broker with a pod's state and measures it under a pod's
// load; see BENCHMARKS.md "bench pod targets".
func RunPod(ctx context.Context, cfg PodConfig) (*PodResult, error) {
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	res := &PodResult{Store: "sqlite", Hosts: cfg.Hosts, SmallHosts: cfg.SmallHosts, SessionsPerHost: cfg.SessionsPerHost,
		HeartbeatConcurrency: cfg.HeartbeatConcurrency}
	if cfg.Database != "" {
		res.Store = "postgres"
	}
	large := &podPool{name: PodLargePool, hostPrefix: "pl", userPrefix: "pl-u", hostCount: cfg.Hosts, seats: cfg.Hosts * cfg.SessionsPerHost}
	small := &podPool{name: PodSmallPool, hostPrefix: "ps", userPrefix: "ps-u", hostCount: cfg.SmallHosts, seats: cfg.SmallHosts * cfg.SessionsPerHost}
	pools := []*podPool{large, small}

	seedStart := time.Now()
	seedCtx, cancel := context.WithTimeout(ctx, cfg.SeedTimeout)
	defer cancel()
	if err := seedOpen(seedCtx, cfg, res, pools); err != nil {
		return nil, fmt.Errorf("seed open sessions: %w", err)
	}
	if err := cfg.Broker.Stop(); err != nil {
		return nil, fmt.Errorf("stop the broker for the history load: %w", err)
	}
	cfg.Progress("loading the history into the database (broker stopped)")
	specs := []historySpec{}
	for i, p := range pools {
		specs = append(specs, historySpec{
			pool: p.name, hostPrefix: p.hostPrefix, hosts: len(p.hosts),
			userPrefix: p.userPrefix, users: 2 * p.seats, days: cfg.HistoryDays,
			rows: int(float64(p.seats) * float64(cfg.HistoryDays) * cfg.LogonsPerSeatDay),
			tag:  int64(i+1) << 56,
		})
	}
	t := time.Now()
	n, err := loadHistory(seedCtx, cfg.Database, cfg.DataDir, specs, time.Now())
	res.Seed.HistoryRows, res.Seed.HistoryElapsed = n, time.Since(t)
	if err != nil {
		return nil, fmt.Errorf("seed history: %w", err)
	}
	cfg.Progress("history: %d rows in %s", n, res.Seed.HistoryElapsed.Round(time.Millisecond))
	res.Seed.Elapsed = time.Since(seedStart)

	baseURL, pid, err := cfg.Broker.Start(ctx, "measure")
	if err != nil {
		return nil, fmt.Errorf("start the broker to measure: %w", err)
	}
	if cfg.Database != "" {
		if res.PostgresSettings, err = postgresSettings(ctx, cfg.Database); err != nil {
			return nil, fmt.Errorf("read the PostgreSQL server's settings: %w", err)
		}
	}
	if err := measure(ctx, cfg, res, baseURL, pid, large, small); err != nil {
		return nil, err
	}
	evaluate(res)
	return res, nil
}

// seedOpen starts the broker, creates both pools (BreadthFirst, limit =
// sessions per host, so the seats fill exactly), registers the hosts,
// keeps them heartbeating, places every seat's user by a connect through
// the API and waits until every host's agent has reported its users
// (Pending → Active, R-S2). Then it lifts the limit (999999) so the
// measured connects find room, and leaves the broker running.
func seedOpen(ctx context.Context, cfg PodConfig, res *PodResult, pools []*podPool) error {
	baseURL, _, err := cfg.Broker.Start(ctx, "seed")
	if err != nil {
		return err
	}
	client := newClient(Config{Concurrency: cfg.AgentConcurrency, Timeout: cfg.Timeout})
	defer client.CloseIdleConnections()
	api := strings.TrimRight(baseURL, "/") + "/api/v1"
	t := time.Now()
	var all [][]*podHost // by pool
	for _, p := range pools {
		poolURL := api + "/hostpools/" + url.PathEscape(p.name)
		body, _ := json.Marshal(map[string]any{"maxSessionLimit": cfg.SessionsPerHost, "loadBalancerType": vdibroker.BreadthFirst})
		if o, _ := send(ctx, client, http.MethodPut, poolURL, cfg.Token, body); o.code != "" {
			return fmt.Errorf("create pool %s: %s", p.name, describeOutcome(o))
		}
		regTokens, err := registrationTokens(ctx, client, poolURL, cfg.Token, p.hostCount)
		if err != nil {
			return err
		}
		hosts, outs := registerHosts(ctx, client, api, poolURL, regTokens, HeartbeatConfig{
			Hosts: p.hostCount, HostPrefix: p.hostPrefix, Concurrency: cfg.AgentConcurrency, Token: cfg.Token,
		})
		if errs := countErrors(outs); len(errs) > 0 {
			return fmt.Errorf("register hosts of %s: %s", p.name, describeErrors(errs))
		}
		p.byName = map[string]*podHost{}
		for _, h := range hosts {
			ph := &podHost{name: h.name, credential: h.credential}
			p.hosts = append(p.hosts, ph)
			p.byName[h.name] = ph
		}
		all = append(all, p.hosts)
	}
	agentOrder := interleave(all...)
	res.Seed.RegisterElapsed = time.Since(t)
	cfg.Progress("registered %d hosts in %s", len(agentOrder), res.Seed.RegisterElapsed.Round(time.Millisecond))

	// Every host heartbeats from now on: the first round at once (hosts
	// are Unavailable until then), each one sent however late, then every
	// interval.
	hbURL := api + "/agent/heartbeat"
	first := startAgents(ctx, client, hbURL, agentOrder, time.Second, time.Second, cfg.SeedTimeout, cfg.AgentConcurrency)
	<-first.done
	if s := first.stats(); s.OK != len(agentOrder) {
		return fmt.Errorf("first heartbeats: %d of %d answered 200: %s", s.OK, len(agentOrder), describeErrors(s.Errors))
	}
	// The agents do not wait for the seeding's connects (nor for each
	// other): on a busy machine 64 heartbeats in flight fell behind
	// until hosts went Unavailable and the seeding's connects failed.
	hbClient := newClient(Config{Concurrency: cfg.HeartbeatConcurrency, Timeout: cfg.Timeout})
	defer hbClient.CloseIdleConnections()
	agents := startAgents(ctx, hbClient, hbURL, agentOrder, cfg.Interval, cfg.SeedTimeout, cfg.Interval, cfg.HeartbeatConcurrency)
	defer agents.stop()

	t = time.Now()
	var outs []outcome
	for _, p := range pools {
		o := connectUsers(ctx, client, api, cfg, p, 1, p.seats, cfg.AgentConcurrency, false)
		outs = append(outs, o...)
		cfg.Progress("placed %d users in %s (%s so far)", p.seats, p.name, time.Since(t).Round(time.Millisecond))
	}
	res.Seed.ConnectElapsed = time.Since(t)
	res.Seed.ConnectErrors = countErrors(outs)
	for _, o := range outs {
		if o.code == "" {
			res.Seed.OpenSessions++
		}
	}
	if len(res.Seed.ConnectErrors) > 0 {
		return fmt.Errorf("seed connects: %s", describeErrors(res.Seed.ConnectErrors))
	}
	// One whole interval (and a margin) after the last placement, every
	// agent has reported its users.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(cfg.Interval + cfg.Interval/5):
	}
	for _, p := range pools {
		n, err := countSessions(ctx, client, api, cfg.Token, p.name, vdibroker.StatePending)
		if err != nil {
			return err
		}
		res.Seed.PendingLeft += n
		body, _ := json.Marshal(map[string]any{"maxSessionLimit": vdibroker.NoSessionLimit})
		if o, _ := send(ctx, client, http.MethodPatch, api+"/hostpools/"+url.PathEscape(p.name), cfg.Token, body); o.code != "" {
			return fmt.Errorf("lift the limit of %s: %s", p.name, describeOutcome(o))
		}
	}
	cfg.Progress("open sessions: %d placed in %s, %d still Pending", res.Seed.OpenSessions, res.Seed.ConnectElapsed.Round(time.Millisecond), res.Seed.PendingLeft)
	return nil
}

// connectAnswer is the part of a connect answer the bench reads.
type connectAnswer struct {
	SessionHost string `json:"sessionHost"`
	Reconnect   bool   `json:"reconnect"`
}

// connectUsers connects users from..to of pool p from workers and tells
// each answer's host that its user logged on.
func connectUsers(ctx context.Context, client *http.Client, api string, cfg PodConfig, p *podPool, from, to, workers int, dryRun bool) []outcome {
	endpoint := api + "/hostpools/" + url.PathEscape(p.name) + "/connect"
	outs := make([]outcome, to-from+1)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(outs) || ctx.Err() != nil {
					return
				}
				outs[i] = connectAs(ctx, client, endpoint, cfg.Token, p, p.user(from+i), dryRun)
			}
		})
	}
	wg.Wait()
	return outs
}

// connectAs sends one connect and, for a new session, adds it to its
// host's agent report.
func connectAs(ctx context.Context, client *http.Client, endpoint, token string, p *podPool, user string, dryRun bool) outcome {
	data, _ := json.Marshal(connectBody{User: user, DryRun: dryRun})
	o, answer := send(ctx, client, http.MethodPost, endpoint, token, data)
	if o.code != "" || dryRun {
		return o
	}
	var a connectAnswer
	if err := json.Unmarshal(answer, &a); err != nil || a.SessionHost == "" {
		o.code, o.message = "BadAnswer", fmt.Sprintf("connect answer has no sessionHost: %.200s", answer)
		return o
	}
	if h := p.byName[a.SessionHost]; h != nil && !a.Reconnect {
		h.addSession(user)
	}
	return o
}

// countSessions counts a pool's sessions in one state through the API's
// paged listing (at most 100 pages: enough to tell "none" from "some").
func countSessions(ctx context.Context, client *http.Client, api, token, pool, state string) (int, error) {
	next := api + "/hostpools/" + url.PathEscape(pool) + "/usersessions?limit=1000&state=" + url.QueryEscape(state)
	n := 0
	for range 100 {
		o, answer := send(ctx, client, http.MethodGet, next, token, nil)
		if o.code != "" {
			return n, fmt.Errorf("list %s sessions of %s: %s", state, pool, describeOutcome(o))
		}
		var page struct {
			Value    []json.RawMessage `json:"value"`
			NextLink string            `json:"nextLink"`
		}
		if err := json.Unmarshal(answer, &page); err != nil {
			return n, fmt.Errorf("list %s sessions of %s: %w", state, pool, err)
		}
		n += len(page.Value)
		if page.NextLink == "" {
			return n, nil
		}
		next = resolveLink(api, page.NextLink)
	}
	return n, nil
}

// resolveLink makes a nextLink (absolute, or a path) absolute.
func resolveLink(api, link string) string {
	if strings.HasPrefix(link, "http://") || strings.HasPrefix(link, "https://") {
		return link
	}
	u, err := url.Parse(api)
	if err != nil {
		return link
	}
	ref, err := url.Parse(link)
	if err != nil {
		return link
	}
	return u.ResolveReference(ref).String()
}

// postgresSettingNames are the PostgreSQL settings a pod's figures depend
// on: its page cache, its WAL and checkpoints, and its commits.
var postgresSettingNames = []string{"server_version", "shared_buffers", "wal_buffers", "max_wal_size",
	"checkpoint_timeout", "wal_compression", "synchronous_commit", "full_page_writes"}

// postgresSettings reads postgresSettingNames from the server of dsn.
func postgresSettings(ctx context.Context, dsn string) (map[string]string, error) {
	db, _, err := openStoreDB(dsn, "")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	got := map[string]string{}
	for _, name := range postgresSettingNames {
		var v string
		// SHOW takes no parameter; the names are this package's own.
		if err := db.QueryRowContext(ctx, "SHOW "+name).Scan(&v); err != nil {
			return nil, fmt.Errorf("SHOW %s: %w", name, err)
		}
		got[name] = v
	}
	return got, nil
}
