package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/agent"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// Fleet is the demo's simulated session hosts and users, run against the
// broker at URL with its admin token. Set the fields, then Start; Close
// stops the agents and users (not the broker).
type Fleet struct {
	// URL is the broker's base URL, e.g. http://127.0.0.1:8080.
	URL string
	// AdminToken creates the pools, the registration tokens and connects.
	AdminToken string
	// Logger receives the agents' logs and the fleet's own problems
	// (nil = discarded).
	Logger *slog.Logger
	// Rand drives the simulation (nil = seeded from the clock).
	Rand *rand.Rand
	// Heartbeat is the simulated agents' heartbeat interval; 0 is 2s.
	Heartbeat time.Duration
	// UserTick is how often simulated users act; 0 is 400ms.
	UserTick time.Duration
	// PowerStartDelay is how long a host the power driver starts takes
	// to boot (its agent runs again after it); 0 is 20s.
	PowerStartDelay time.Duration
	// PortalUser is the user portal's user whose desktops and apps the
	// fleet's hosts log on when the portal launches them, as her Remote
	// Desktop client would arrive (portalLoop); "" is none.
	PortalUser string

	client  *vhttp.Client
	hosts   []*simHost
	byName  map[string]*simHost // pool/host -> host
	mu      sync.Mutex          // guards Rand and users
	users   map[string]*simUser // user -> where they are
	run     context.Context     // the agents and users run until Close
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started time.Time
	driver  *driver // PowerDrivers
	closed  bool    // Close began: no agent starts (guarded by mu)
}

// Hosts is the number of simulated session hosts (after Start).
func (f *Fleet) Hosts() int { return len(f.hosts) }

// Pools is the number of host pools the fleet creates.
func (f *Fleet) Pools() int { return len(demoPools) }

// demoPool is one demo pool and its hosts.
type demoPool struct {
	name, friendly string
	body           map[string]any
	hosts          int
	prefix         string
}

var demoPools = []demoPool{
	// Autoscaled (power.go): started and stopped by the office-hours plan
	// through the fleet's power driver; a connect that finds the running
	// hosts full starts a stopped one and waits for it (R-A4, R-U4), so
	// the portal's Open works before the plan's ramp-up caught up.
	{autoscalePool, "Office desktops (breadth-first, autoscaled)", map[string]any{
		"loadBalancerType": vdibroker.BreadthFirst, "maxSessionLimit": 10, "powerDriver": DriverName, "startVMOnConnect": true,
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
	fleet            *Fleet
	pool, name       string
	standard         bool
	cpuBase, memBase float64
	phase            float64
	agent            *agent.Agent
	// stop ends the agent's run and done is closed when it has ended
	// (nil while the host is powered off; guarded by the fleet's mu).
	stop func()
	done chan struct{}

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
	f := h.fleet
	f.mu.Lock()
	noise := f.Rand.Float64()*6 - 3
	f.mu.Unlock()
	h.mu.Lock()
	n := float64(len(h.sessions))
	h.mu.Unlock()
	wave := math.Sin(h.phase + float64(time.Since(f.started))/float64(90*time.Second)*2*math.Pi)
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
	h.fleet.mu.Lock()
	delete(h.fleet.users, s.User)
	h.fleet.mu.Unlock()
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

// Start creates the pools, registers the hosts (each sends a first
// heartbeat before Start returns, so they are Available at once), drains
// one host to show drain mode, powers off five office hosts and puts the
// office pool under a scaling plan (power.go), places a first wave of
// users, and starts the agents and users. The broker at URL must be
// serving with PowerDrivers among its drivers. Close stops everything
// Start started, also after Start failed.
func (f *Fleet) Start(ctx context.Context) error {
	if f.Logger == nil {
		f.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if f.Rand == nil {
		f.Rand = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x9e3779b97f4a7c15))
	}
	if f.Heartbeat <= 0 {
		f.Heartbeat = 2 * time.Second
	}
	if f.UserTick <= 0 {
		f.UserTick = 400 * time.Millisecond
	}
	f.client = vhttp.NewClient(f.URL, f.AdminToken)
	f.users = map[string]*simUser{}
	f.byName = map[string]*simHost{}
	f.started = time.Now()
	f.run, f.cancel = context.WithCancel(context.Background())
	if err := f.setup(ctx); err != nil {
		f.Close()
		return err
	}
	f.wg.Add(2)
	go func() { defer f.wg.Done(); f.userLoop(f.run) }()
	go func() { defer f.wg.Done(); f.portalLoop(f.run) }()
	return nil
}

func (f *Fleet) setup(ctx context.Context) error {
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
		if _, err := f.client.PutHostPool(ctx, p.name, body); err != nil {
			return fmt.Errorf("create pool %s: %w", p.name, err)
		}
		// Every user may open the pool's desktops (R-E1, R-E3): the user
		// portal's demo user sees the three.
		if _, err := f.client.PutApplicationGroup(ctx, p.name+"-desktop", map[string]any{"hostPool": p.name,
			"applicationGroupType": vdibroker.AppGroupDesktop, "friendlyName": p.friendly,
			"assignments": map[string]any{"allUsers": true}}); err != nil {
			return fmt.Errorf("desktop group of %s: %w", p.name, err)
		}
		rt, err := f.client.CreateRegistrationToken(ctx, p.name, vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
		if err != nil {
			return fmt.Errorf("registration token for %s: %w", p.name, err)
		}
		for i := 1; i <= p.hosts; i++ {
			f.mu.Lock() // the agents already running draw from f.Rand too
			h := &simHost{
				fleet: f, pool: p.name, name: fmt.Sprintf("%s-%02d", p.prefix, i), standard: true,
				cpuBase: 5 + f.Rand.Float64()*15, memBase: 20 + f.Rand.Float64()*20,
				phase: f.Rand.Float64() * 2 * math.Pi, sessions: map[string]*vdibroker.AgentSession{},
			}
			if p.prefix == "rds" && i == p.hosts {
				h.standard = false // Horizon bucket 2 (R-LI3)
			}
			agentRand := rand.New(rand.NewPCG(f.Rand.Uint64(), f.Rand.Uint64()))
			f.mu.Unlock()
			a, err := agent.New(agent.Config{
				Server: f.URL, RegistrationToken: rt.Token,
				HostName: h.name, Address: h.name + ".demo.internal:3389", StandardFeatures: &h.standard,
				HeartbeatInterval: f.Heartbeat, Metrics: h, Sessions: h,
				Logger: f.Logger, Rand: agentRand,
				BackoffBase: 200 * time.Millisecond, BackoffMax: 5 * time.Second,
			})
			if err != nil {
				return fmt.Errorf("agent for %s: %w", h.name, err)
			}
			h.agent = a
			f.hosts = append(f.hosts, h)
			f.byName[h.pool+"/"+h.name] = h
			f.powerOn(h.pool, h.name)
		}
	}
	if err := f.waitAvailable(ctx); err != nil {
		return err
	}
	// One host drained by "an admin", to show drain mode.
	if _, err := f.client.PatchSessionHost(ctx, autoscalePool, "office-08", map[string]any{"allowNewSession": false}); err != nil {
		return fmt.Errorf("drain office-08: %w", err)
	}
	if err := f.setupAutoscale(ctx); err != nil {
		return err
	}
	// A first wave of users, logged on at once.
	for i := 0; i < 24; i++ {
		f.connect(ctx, true)
	}
	return nil
}

// waitAvailable waits until every simulated host has registered and
// heartbeated (status Available), so the demo is alive when Start returns.
func (f *Fleet) waitAvailable(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		ready := 0
		for _, p := range demoPools {
			hosts, err := f.client.ListSessionHosts(ctx, p.name)
			if err != nil {
				return fmt.Errorf("list hosts of %s: %w", p.name, err)
			}
			for _, h := range hosts {
				if vdibroker.Placeable(h.Status) {
					ready++
				}
			}
		}
		if ready == len(f.hosts) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d simulated hosts became Available within a minute", ready, len(f.hosts))
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
func (f *Fleet) userLoop(ctx context.Context) {
	t := time.NewTicker(f.UserTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		elapsed := time.Since(f.started)
		target := 70 + int(45*math.Sin(float64(elapsed)/float64(10*time.Minute)*2*math.Pi))
		f.mu.Lock()
		open := len(f.users)
		roll := f.Rand.Float64()
		f.mu.Unlock()
		switch {
		case roll < 0.1:
			f.disconnectOrReturn(ctx)
		case open < target:
			f.connect(ctx, false)
		case open > target || roll < 0.35:
			f.logoff()
		}
	}
}

// connect places a user who has no session in a random pool; the user
// "logs on" (the host's agent reports the session) now or a moment later.
func (f *Fleet) connect(ctx context.Context, now bool) {
	f.mu.Lock()
	var user string
	for range 20 {
		u := fmt.Sprintf("user%03d", 1+f.Rand.IntN(250))
		if f.users[u] == nil {
			user = u
			break
		}
	}
	pool := f.pickPool()
	delay := time.Duration(300+f.Rand.IntN(2500)) * time.Millisecond
	f.mu.Unlock()
	if user == "" || pool == "" {
		return
	}
	f.connectAs(ctx, user, pool, now, delay)
}

// pickPool picks the pool of a simulated user's next connect, each in
// proportion to the places it has left below three quarters of its
// capacity (its hosts times its maxSessionLimit), or "" when none has.
// The simulated users then never fill a pool: the portal's user finds a
// place in each (the six hosts of six of "Developer workstations" were
// full within a minute of the start, so her first Open was NoCapacity).
// Called with f.mu held.
func (f *Fleet) pickPool() string {
	taken := map[string]int{}
	for _, u := range f.users {
		taken[u.pool]++
	}
	room := make([]int, len(demoPools))
	total := 0
	for i, p := range demoPools {
		room[i] = max(0, p.hosts*p.body["maxSessionLimit"].(int)*3/4-taken[p.name])
		total += room[i]
	}
	if total == 0 {
		return ""
	}
	n := f.Rand.IntN(total)
	for i, r := range room {
		if n < r {
			return demoPools[i].name
		}
		n -= r
	}
	return ""
}

// connectAs places user in pool, who logs on now or after delay. A pool
// that is full is the demo at work, not a problem to log: NoCapacity, or
// HostStarting while the office pool starts a host for the connect
// (start VM on connect, R-A4); it returns the connect's error.
func (f *Fleet) connectAs(ctx context.Context, user, pool string, now bool, delay time.Duration) error {
	res, err := f.client.Connect(ctx, pool, vhttp.ConnectRequest{User: user})
	if err != nil {
		if code := vdibroker.ErrorCode(err); code != vdibroker.ENoCapacity && code != vdibroker.EHostStarting && ctx.Err() == nil {
			f.Logger.Warn("demo: connect", "user", user, "pool", pool, "err", err)
		}
		return err
	}
	f.mu.Lock()
	f.users[user] = &simUser{pool: pool, host: res.SessionHost}
	f.mu.Unlock()
	logon := func() { f.logon(user, pool, res.SessionHost) }
	if now {
		logon()
		return nil
	}
	time.AfterFunc(delay, logon)
	return nil
}

// portalLoop plays the Remote Desktop client of the user portal's user
// (PortalUser): every heartbeat interval it reads her launches the portal
// handed a file for since it last looked (their audit entries,
// portal.launch, which name the session's host), and logs each one's
// session on at its host, as when her client arrives with the file: a
// new session and a Disconnected one she reconnects alike, Active at the
// host's next heartbeat (R-S2). Without it her session stayed Starting
// until its pending timeout ended it, and her portal's Disconnect and
// Reconnect could not be tried. Another user's launch is left alone: a
// real client of hers may be on its way, and a simulated user of the
// same name would get a session the fleet does not know of. It reads at
// most one page (100 entries) a look, after the last entry it read (by
// seq, which no slow request's entry can slip under), so that a backlog
// is read in bounded steps; it returns when ctx ends.
func (f *Fleet) portalLoop(ctx context.Context) {
	if f.PortalUser == "" {
		return
	}
	c := vhttp.NewClient(f.URL, f.AdminToken)
	c.MaxPages = 1
	t := time.NewTicker(f.Heartbeat)
	defer t.Stop()
	q := vhttp.AuditQuery{Action: "portal.launch", Principal: f.PortalUser, Since: f.started}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		list, err := c.ListAudit(ctx, q)
		if err != nil {
			if ctx.Err() == nil {
				f.Logger.Warn("demo: the portal's launches", "err", err)
			}
			continue
		}
		for _, e := range list {
			q.After = max(q.After, e.Seq)
			var got struct {
				SessionHost string `json:"sessionHost"`
			}
			if e.Outcome != vdibroker.AuditOK || e.Principal.Role != vdibroker.RoleUser || !vdibroker.SameUser(e.Principal.Name, f.PortalUser) ||
				json.Unmarshal(e.After, &got) != nil || got.SessionHost == "" {
				continue
			}
			f.logon(e.Principal.Name, e.HostPool, got.SessionHost)
		}
	}
}

// logon makes the session appear on its host, as when the user's RDP
// client arrives: the next heartbeat turns Pending into Active (R-S2).
func (f *Fleet) logon(user, pool, host string) {
	h := f.byName[pool+"/"+host]
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
	f.mu.Lock()
	if u := f.users[user]; u != nil {
		u.loggedOn = true
	}
	f.mu.Unlock()
}

// logoff ends a random logged-on user's session on the host; the next
// heartbeat no longer reports it and the broker ends it (R-S2).
func (f *Fleet) logoff() {
	f.mu.Lock()
	var user string
	var u *simUser
	for name, su := range f.users { // map order is random enough here
		if su.loggedOn {
			user, u = name, su
			break
		}
	}
	if u != nil {
		delete(f.users, user)
	}
	f.mu.Unlock()
	if u == nil {
		return
	}
	if h := f.byName[u.pool+"/"+u.host]; h != nil {
		h.mu.Lock()
		delete(h.sessions, user)
		h.mu.Unlock()
	}
}

// disconnectOrReturn disconnects a random session, or brings a
// disconnected user back with a connect (reconnect first, R-C1).
func (f *Fleet) disconnectOrReturn(ctx context.Context) {
	f.mu.Lock()
	var user string
	var u *simUser
	for name, su := range f.users {
		if su.loggedOn {
			user, u = name, su
			break
		}
	}
	f.mu.Unlock()
	if u == nil {
		return
	}
	h := f.byName[u.pool+"/"+u.host]
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
		if _, err := f.client.Connect(ctx, u.pool, vhttp.ConnectRequest{User: user}); err == nil {
			f.logon(user, u.pool, u.host)
		}
	}
}

// Close stops the users and the agents and waits for them. The broker
// keeps running; a stopped agent just stops heartbeating.
func (f *Fleet) Close() error {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	if f.cancel != nil {
		f.cancel()
	}
	f.wg.Wait()
	return nil
}
