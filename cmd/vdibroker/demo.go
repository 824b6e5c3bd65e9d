package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/agent"
	"github.com/vdibroker/vdibroker/console"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/metrics"
)

// Demo is `vdibroker demo`: a broker (Main, embedded store) with three host
// pools, about twenty simulated session hosts whose agents heartbeat with
// moving metrics, and simulated users logging on and off, so the console
// shows a living system within seconds.
type Demo struct {
	Main *Main
	// Rand drives the simulation (nil = seeded from the clock).
	Rand *rand.Rand
	// Heartbeat is the simulated agents' heartbeat interval; 0 is 2s.
	Heartbeat time.Duration
	// UserTick is how often simulated users act; 0 is 400ms.
	UserTick time.Duration

	client  *vhttp.Client
	console *console.Console
	hosts   []*simHost
	byName  map[string]*simHost // pool/host -> host
	mu      sync.Mutex          // guards rand and users
	users   map[string]*simUser // user -> where they are
	run     context.Context     // the agents and users run until Close
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started time.Time
}

// demoPool is one demo pool and its hosts.
type demoPool struct {
	name, friendly string
	body           map[string]any
	hosts          int
	prefix         string
}

var demoPools = []demoPool{
	{"office-breadth", "Office desktops (breadth-first)", map[string]any{
		"loadBalancerType": vdibroker.BreadthFirst, "maxSessionLimit": 10,
	}, 8, "office"},
	{"dev-depth", "Developer workstations (depth-first)", map[string]any{
		"loadBalancerType": vdibroker.DepthFirst, "maxSessionLimit": 6,
	}, 6, "dev"},
	{"rds-loadindex", "RDS farm (Horizon load index)", map[string]any{
		"loadBalancerType": vdibroker.LoadIndex, "maxSessionLimit": 12,
		"loadBalancing": map[string]any{
			"includeSessionCount": true, "cpuThreshold": 85, "memoryThreshold": 90,
			"loadIndexThreshold": 40, "connectingSessionThreshold": 20, "minServersInQueue": 2,
		},
	}, 6, "rds"},
}

// simHost is one simulated session host. The real host agent
// (agent.Agent) runs for it in-process: simHost is the agent's metrics
// source and session provider, so registration, heartbeats, reconciliation
// and commands go through the same code as on a real host.
type simHost struct {
	demo             *Demo
	pool, name       string
	standard         bool
	cpuBase, memBase float64
	phase            float64
	agent            *agent.Agent

	mu       sync.Mutex
	sessions map[string]*vdibroker.AgentSession // by user
	nextID   int
}

var (
	_ agent.MetricsSource   = (*simHost)(nil)
	_ agent.SessionProvider = (*simHost)(nil)
)

// Sample returns metrics that move: a slow wave, a load per session, and
// noise.
func (h *simHost) Sample(context.Context) (vdibroker.Metrics, error) {
	d := h.demo
	d.mu.Lock()
	noise := d.Rand.Float64()*6 - 3
	d.mu.Unlock()
	h.mu.Lock()
	n := float64(len(h.sessions))
	h.mu.Unlock()
	wave := math.Sin(h.phase + float64(time.Since(d.started))/float64(90*time.Second)*2*math.Pi)
	return vdibroker.Metrics{
		CPUPercent:      clampPct(h.cpuBase + 7*n + 8*wave + noise),
		MemoryPercent:   clampPct(h.memBase + 5*n + 3*wave),
		DiskQueueLength: math.Max(0, 0.2*n+wave),
		SampledAt:       time.Now().UTC(),
	}, nil
}

// Sessions reports the users logged on to the host (R-S2).
func (h *simHost) Sessions(context.Context) ([]vdibroker.AgentSession, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]vdibroker.AgentSession, 0, len(h.sessions))
	for _, s := range h.sessions {
		out = append(out, *s)
	}
	return out, nil
}

// byID finds a session by the host's own id; h.mu is held.
func (h *simHost) byID(id string) *vdibroker.AgentSession {
	for _, s := range h.sessions {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// Logoff ends a session, as the broker asked (R-S4).
func (h *simHost) Logoff(_ context.Context, id string) error {
	h.mu.Lock()
	s := h.byID(id)
	if s != nil {
		delete(h.sessions, s.User)
	}
	h.mu.Unlock()
	if s == nil {
		return agent.ErrNoSession
	}
	h.demo.mu.Lock()
	delete(h.demo.users, s.User)
	h.demo.mu.Unlock()
	return nil
}

// Disconnect disconnects a session, as the broker asked (R-S4).
func (h *simHost) Disconnect(_ context.Context, id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.byID(id)
	if s == nil {
		return agent.ErrNoSession
	}
	s.State = vdibroker.StateDisconnected
	return nil
}

// SendMessage shows a message to nobody: simulated users do not read.
func (h *simHost) SendMessage(_ context.Context, id, _ string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byID(id) == nil {
		return agent.ErrNoSession
	}
	return nil
}

// simUser is a simulated user with a session somewhere.
type simUser struct {
	pool, host string
	loggedOn   bool
}

// Start opens the broker, mounts the console and /metrics when serve did
// not, creates the pools, registers the hosts (each sends a first heartbeat
// before Start returns, so they are Available at once), places a first wave
// of users, and starts the agents and users. Close stops everything.
func (d *Demo) Start(ctx context.Context) error {
	if d.Rand == nil {
		d.Rand = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x9e3779b97f4a7c15))
	}
	if d.Heartbeat <= 0 {
		d.Heartbeat = 2 * time.Second
	}
	if d.UserTick <= 0 {
		d.UserTick = 400 * time.Millisecond
	}
	if err := d.Main.Open(ctx); err != nil {
		return err
	}
	d.mountExtras()
	d.client = vhttp.NewClient(d.Main.URL(), d.Main.AdminToken)
	d.users = map[string]*simUser{}
	d.byName = map[string]*simHost{}
	d.started = time.Now()
	d.run, d.cancel = context.WithCancel(context.Background())
	if err := d.setup(ctx); err != nil {
		d.Close()
		return err
	}
	d.wg.Add(1)
	go func() { defer d.wg.Done(); d.userLoop(d.run) }()
	return nil
}

// mountExtras mounts the console at "/" and Prometheus at "/metrics" on the
// server's mux unless serve's Main already did.
func (d *Demo) mountExtras() {
	mux := d.Main.Server.Mux()
	registered := func(path string) bool {
		r, _ := http.NewRequest(http.MethodGet, path, nil)
		_, pattern := mux.Handler(r)
		// A pattern is "[METHOD ][HOST]/path"; only an exact path counts,
		// not the catch-all "/" that matches everything.
		return pattern == path || strings.HasSuffix(pattern, " "+path)
	}
	// Ask before mounting: once the console is at "/", every path matches.
	hasConsole, hasMetrics := registered("/"), registered("/metrics")
	if !hasConsole {
		d.console = console.New(console.Config{
			API: d.Main.Server.Handler(), Store: d.Main.Store,
			SampleInterval: 10 * time.Second, Logger: d.Main.Logger,
		})
		mux.Handle("/", d.console)
	}
	if !hasMetrics {
		mux.Handle("GET /metrics", metrics.Handler(metrics.NewRegistry(metrics.Config{Store: d.Main.Store})))
	}
}

func (d *Demo) setup(ctx context.Context) error {
	for _, p := range demoPools {
		// Metrics are sampled every 5 s (the minimum) so the load index moves.
		lb := map[string]any{"sampleIntervalSeconds": 5}
		body := map[string]any{"friendlyName": p.friendly, "heartbeatTimeoutSeconds": 20, "loadBalancing": lb}
		for k, v := range p.body {
			if k == "loadBalancing" {
				for lk, lv := range v.(map[string]any) {
					lb[lk] = lv
				}
				continue
			}
			body[k] = v
		}
		if _, err := d.client.PutHostPool(ctx, p.name, body); err != nil {
			return fmt.Errorf("create pool %s: %w", p.name, err)
		}
		rt, err := d.client.CreateRegistrationToken(ctx, p.name, vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
		if err != nil {
			return fmt.Errorf("registration token for %s: %w", p.name, err)
		}
		for i := 1; i <= p.hosts; i++ {
			d.mu.Lock() // the agents already running draw from d.Rand too
			h := &simHost{
				demo: d, pool: p.name, name: fmt.Sprintf("%s-%02d", p.prefix, i), standard: true,
				cpuBase: 5 + d.Rand.Float64()*15, memBase: 20 + d.Rand.Float64()*20,
				phase: d.Rand.Float64() * 2 * math.Pi, sessions: map[string]*vdibroker.AgentSession{},
			}
			if p.prefix == "rds" && i == p.hosts {
				h.standard = false // Horizon bucket 2 (R-LI3)
			}
			agentRand := rand.New(rand.NewPCG(d.Rand.Uint64(), d.Rand.Uint64()))
			d.mu.Unlock()
			a, err := agent.New(agent.Config{
				Server: d.Main.URL(), RegistrationToken: rt.Token,
				HostName: h.name, Address: h.name + ".demo.internal:3389", StandardFeatures: &h.standard,
				HeartbeatInterval: d.Heartbeat, Metrics: h, Sessions: h,
				Logger: d.Main.Logger, Rand: agentRand,
				BackoffBase: 200 * time.Millisecond, BackoffMax: 5 * time.Second,
			})
			if err != nil {
				return fmt.Errorf("agent for %s: %w", h.name, err)
			}
			h.agent = a
			d.hosts = append(d.hosts, h)
			d.byName[h.pool+"/"+h.name] = h
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				if err := a.Run(d.run); err != nil {
					d.Main.Logger.Error("demo: agent stopped", "host", h.name, "err", err)
				}
			}()
		}
	}
	if err := d.waitAvailable(ctx); err != nil {
		return err
	}
	// One host drained by "an admin", to show drain mode.
	if _, err := d.client.PatchSessionHost(ctx, "office-breadth", "office-08", map[string]any{"allowNewSession": false}); err != nil {
		return fmt.Errorf("drain office-08: %w", err)
	}
	// A first wave of users, logged on at once.
	for i := 0; i < 24; i++ {
		d.connect(ctx, true)
	}
	return nil
}

// waitAvailable waits until every simulated host has registered and
// heartbeated (status Available), so the demo is alive when Start returns.
func (d *Demo) waitAvailable(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		ready := 0
		for _, p := range demoPools {
			hosts, err := d.client.ListSessionHosts(ctx, p.name)
			if err != nil {
				return fmt.Errorf("list hosts of %s: %w", p.name, err)
			}
			for _, h := range hosts {
				if vdibroker.Placeable(h.Status) {
					ready++
				}
			}
		}
		if ready == len(d.hosts) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d simulated hosts became Available within a minute", ready, len(d.hosts))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func clampPct(v float64) float64 { return math.Max(0, math.Min(100, v)) }

// userLoop makes users act: the number of sessions follows a slow wave
// (a working day in ten minutes), with users logging on, logging off,
// disconnecting and coming back.
func (d *Demo) userLoop(ctx context.Context) {
	t := time.NewTicker(d.UserTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		elapsed := time.Since(d.started)
		target := 70 + int(45*math.Sin(float64(elapsed)/float64(10*time.Minute)*2*math.Pi))
		d.mu.Lock()
		open := len(d.users)
		roll := d.Rand.Float64()
		d.mu.Unlock()
		switch {
		case roll < 0.1:
			d.disconnectOrReturn(ctx)
		case open < target:
			d.connect(ctx, false)
		case open > target || roll < 0.35:
			d.logoff()
		}
	}
}

// connect places a user who has no session in a random pool; the user
// "logs on" (the host's agent reports the session) now or a moment later.
func (d *Demo) connect(ctx context.Context, now bool) {
	d.mu.Lock()
	var user string
	for range 20 {
		u := fmt.Sprintf("user%03d", 1+d.Rand.IntN(250))
		if d.users[u] == nil {
			user = u
			break
		}
	}
	pool := demoPools[d.Rand.IntN(len(demoPools))].name
	delay := time.Duration(300+d.Rand.IntN(2500)) * time.Millisecond
	d.mu.Unlock()
	if user == "" {
		return
	}
	res, err := d.client.Connect(ctx, pool, vhttp.ConnectRequest{User: user})
	if err != nil {
		if vdibroker.ErrorCode(err) != vdibroker.ENoCapacity && ctx.Err() == nil {
			d.Main.Logger.Warn("demo: connect", "user", user, "pool", pool, "err", err)
		}
		return
	}
	d.mu.Lock()
	d.users[user] = &simUser{pool: pool, host: res.SessionHost}
	d.mu.Unlock()
	logon := func() { d.logon(user, pool, res.SessionHost) }
	if now {
		logon()
		return
	}
	time.AfterFunc(delay, logon)
}

// logon makes the session appear on its host, as when the user's RDP
// client arrives: the next heartbeat turns Pending into Active (R-S2).
func (d *Demo) logon(user, pool, host string) {
	h := d.byName[pool+"/"+host]
	if h == nil {
		return
	}
	h.mu.Lock()
	if h.sessions[user] == nil {
		h.nextID++
		h.sessions[user] = &vdibroker.AgentSession{ID: fmt.Sprint(h.nextID), User: user}
	}
	h.sessions[user].State = vdibroker.StateActive
	h.mu.Unlock()
	d.mu.Lock()
	if u := d.users[user]; u != nil {
		u.loggedOn = true
	}
	d.mu.Unlock()
}

// logoff ends a random logged-on user's session on the host; the next
// heartbeat no longer reports it and the broker ends it (R-S2).
func (d *Demo) logoff() {
	d.mu.Lock()
	var user string
	var u *simUser
	for name, su := range d.users { // map order is random enough here
		if su.loggedOn {
			user, u = name, su
			break
		}
	}
	if u != nil {
		delete(d.users, user)
	}
	d.mu.Unlock()
	if u == nil {
		return
	}
	if h := d.byName[u.pool+"/"+u.host]; h != nil {
		h.mu.Lock()
		delete(h.sessions, user)
		h.mu.Unlock()
	}
}

// disconnectOrReturn disconnects a random session, or brings a
// disconnected user back with a connect (reconnect first, R-C1).
func (d *Demo) disconnectOrReturn(ctx context.Context) {
	d.mu.Lock()
	var user string
	var u *simUser
	for name, su := range d.users {
		if su.loggedOn {
			user, u = name, su
			break
		}
	}
	d.mu.Unlock()
	if u == nil {
		return
	}
	h := d.byName[u.pool+"/"+u.host]
	if h == nil {
		return
	}
	h.mu.Lock()
	s := h.sessions[user]
	wasDisconnected := s != nil && s.State == vdibroker.StateDisconnected
	if s != nil && !wasDisconnected {
		s.State = vdibroker.StateDisconnected
	}
	h.mu.Unlock()
	if wasDisconnected {
		if _, err := d.client.Connect(ctx, u.pool, vhttp.ConnectRequest{User: user}); err == nil {
			d.logon(user, u.pool, u.host)
		}
	}
}

// Close stops users and agents, then the broker.
func (d *Demo) Close() error {
	if d.cancel != nil {
		d.cancel()
	}
	d.wg.Wait()
	var errs []error
	errs = append(errs, d.Main.Close())
	if d.console != nil {
		errs = append(errs, d.console.Close())
	}
	return errors.Join(errs...)
}

func newDemoCmd() *cobra.Command {
	m := &Main{}
	var keep, verbose bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a broker with simulated hosts and users, and its web console",
		Long: `demo starts a broker on the embedded store with three host pools
(BreadthFirst, DepthFirst with a limit, LoadIndex), twenty simulated session
hosts whose metrics move, and simulated users logging on and off. Open the
printed URL and sign in with the printed admin token. Ctrl-C stops it.

The admin token is VDIBROKER_ADMIN_TOKEN when set. Without --data-dir the
state lives in a temporary directory removed on exit.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// The simulation makes ten requests a second: log only problems
			// unless asked, so the banner stays readable.
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			m.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			if m.DataDir == "" {
				dir, err := os.MkdirTemp("", "vdibroker-demo-")
				if err != nil {
					return err
				}
				if !keep {
					defer os.RemoveAll(dir)
				}
				m.DataDir = dir
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			d := &Demo{Main: m}
			if err := d.Start(ctx); err != nil {
				return err
			}
			printDemoBanner(cmd.OutOrStdout(), d)
			<-ctx.Done()
			fmt.Fprintln(cmd.OutOrStdout(), "stopping the demo...")
			return d.Close()
		},
	}
	cmd.Flags().StringVar(&m.Listen, "listen", "127.0.0.1:8080", "address to listen on")
	cmd.Flags().StringVar(&m.DataDir, "data-dir", "", "directory for the embedded store (default: a temporary directory)")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temporary data directory on exit")
	cmd.Flags().BoolVar(&verbose, "verbose", false, "log every request (info level)")
	return cmd
}

func printDemoBanner(w io.Writer, d *Demo) {
	url := d.Main.URL()
	var b strings.Builder
	fmt.Fprintf(&b, "vdibroker demo is running: %d simulated hosts in %d pools, users logging on and off.\n\n", len(d.hosts), len(demoPools))
	fmt.Fprintf(&b, "  console      %s/\n", url)
	fmt.Fprintf(&b, "  admin token  %s\n", d.Main.AdminToken)
	fmt.Fprintf(&b, "  API          %s/api/v1   (vdibroker --server %s --token <admin token> hostpool list)\n", url, url)
	fmt.Fprintf(&b, "  metrics      %s/metrics\n", url)
	fmt.Fprintf(&b, "  data dir     %s\n\n", d.Main.DataDir)
	b.WriteString("Press Ctrl-C to stop.\n")
	io.WriteString(w, b.String())
}

func init() { rootCmd.AddCommand(newDemoCmd()) }
