package sim

import (
	"context"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/placement"
)

// Epoch is the wall time the simulated clock starts at (a Monday 08:00 UTC).
// It only shows in the engine's decision records; reports use offsets.
var Epoch = time.Date(2026, time.January, 5, 8, 0, 0, 0, time.UTC)

// Result is one algorithm and maxSessionLimit's outcome. The JSON fields are
// report.json's; the others feed the plots and the tests.
type Result struct {
	Algorithm       string `json:"algorithm"`
	MaxSessionLimit int    `json:"maxSessionLimit"`
	// Placed counts new sessions placed; reconnects are not placements.
	Placed   int `json:"placed"`
	Rejected int `json:"rejected"`
	// LimitViolations counts placements that left a host above
	// maxSessionLimit (R-C4). Always 0 unless the engine is wrong.
	LimitViolations    int `json:"limitViolations"`
	MaxSessionsOnAHost int `json:"maxSessionsOnAHost"`
	// PeakSpread is the largest max-minus-min of session counts across the
	// placeable hosts (all simulated hosts are placeable), at any instant.
	PeakSpread int `json:"peakSpread"`
	// PeakCPUPercent is the highest CPU of any host at any instant:
	// min(100, (sessions - disconnected) x cpuPercentPerSession).
	PeakCPUPercent float64 `json:"peakCpuPercent"`
	// HostHours is the time hosts carried at least one session, summed over
	// hosts: what had to be powered on. Rounded to 0.01.
	HostHours float64 `json:"hostHours"`
	// StormOvershoot is, over every metrics interval, the most sessions one
	// host received beyond an even share, ceil(placements in the interval /
	// hosts).
	StormOvershoot int `json:"stormOvershoot"`
	// Autoscale is what the scenario's scaling plan did (autoscale.go);
	// nil without one.
	Autoscale *AutoscaleResult `json:"autoscale,omitempty"`

	Reconnects    int     `json:"-"`
	FinalSessions []int   `json:"-"` // per host, at the end
	Series        *Series `json:"-"`
}

// Report is report.json.
type Report struct {
	Results []Result `json:"results"`
}

// Series is what the plots draw: one value per recorded sample. With few
// hosts (at most MaxPlottedHosts) each host has its own line; with more,
// Lines are the minimum, mean and maximum over hosts.
type Series struct {
	Hours    []float64   // sample times, hours from the start
	Lines    []string    // host names, or "min", "mean", "max"
	Sessions [][]float64 // [line][sample]
	CPU      [][]float64 // [line][sample]
}

// MaxPlottedHosts is the most hosts drawn one line each.
const MaxPlottedHosts = 24

// maxPlotPoints bounds the samples kept per line.
const maxPlotPoints = 600

// Progress counts simulated seconds done out of the total of all runs; Run
// updates it as it goes, so a caller may poll it from another goroutine.
type Progress struct {
	Done, Total atomic.Int64
}

// Options tune Run without changing its result.
type Options struct {
	// Parallel is how many runs go at once (default GOMAXPROCS). Runs are
	// independent, so the report does not depend on it.
	Parallel int
	// Progress, when set, is updated while running.
	Progress *Progress
	// NoSeries skips recording the plot series.
	NoSeries bool
}

// Run simulates every algorithm with every maxSessionLimit of sc, in that
// order (algorithm outer, limit inner), and returns the report.
func Run(ctx context.Context, sc *Scenario, opts Options) (*Report, error) {
	w := newWorkload(sc)
	type job struct {
		alg   string
		limit int
	}
	var jobs []job
	for _, a := range sc.Algorithms {
		for _, l := range sc.Pool.MaxSessionLimits {
			jobs = append(jobs, job{a, l})
		}
	}
	if opts.Progress != nil {
		opts.Progress.Total.Add(int64(len(jobs)) * int64(sc.Duration/time.Second))
	}
	parallel := opts.Parallel
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}
	results := make([]Result, len(jobs))
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := ctx.Err(); err != nil {
				errs[i] = err
				return
			}
			res, err := runOne(ctx, sc, w, j.alg, j.limit, opts)
			results[i], errs[i] = res, err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("simulate %s with maxSessionLimit %d: %w", jobs[i].alg, jobs[i].limit, err)
		}
	}
	return &Report{Results: results}, nil
}

// User session states in the simulator.
const (
	userNone uint8 = iota // not arrived, or rejected
	userOpen              // Pending or Active
	userAway              // Disconnected
	userEnded
)

type userState struct {
	host  int32
	state uint8
	// slot is the session's place in its host's hostState.open.
	slot int32
	// at is when the session was placed.
	at time.Duration
	// placedAt is at, or -1 once the session can no longer be Pending; it
	// is Pending while placedAt >= the last heartbeat (the agent has not
	// reported the logon yet, R-S2).
	placedAt time.Duration
}

// hostState is the simulator's own truth about a host; the engine gets a
// copy through Apply and Upsert.
type hostState struct {
	sessions, connecting, away int
	busySince                  time.Duration // when sessions went from 0 to 1
	windowPlaced               int           // placements this metrics interval
	// initial is how many of sessions are the scenario's initialSessions,
	// which never end; open are the users of the others.
	initial int
	open    []int32
	// sample is the agent's last metrics sample, which every heartbeat
	// carries (R-LI6); changed is set when the host's load changed since.
	sample  *vdibroker.Metrics
	changed bool
	// dirty is set when anything the agent reports changed since the
	// host's last heartbeat reached the engine.
	dirty bool
}

// heartbeatInterval is how often an agent reports (the agent's default):
// every heartbeat carries its sessions and its last metrics sample, taken
// every metricsInterval (R-LI6).
const heartbeatInterval = 10 * time.Second

// keepAliveEvery is how many heartbeats an unchanged host may skip; the
// pool's heartbeat timeout is twice that many intervals.
const keepAliveEvery = 10

// runner is one simulation: one algorithm, one limit.
type runner struct {
	sc     *Scenario
	w      *workload
	limit  int
	placer placement.Placer
	hosts  []placement.Host
	index  map[string]int32
	st     []hostState
	users  []userState
	q      eventQueue
	now    time.Duration
	// lastSample is the time of the latest metrics sample.
	lastSample time.Duration
	// lastHeartbeat is the time of the agents' latest heartbeat.
	lastHeartbeat time.Duration
	beats         int           // heartbeats sent
	samples       int           // samples taken
	busy          time.Duration // host busy time, summed over closed periods
	maxActive     int
	spread        spreadTracker
	touched       []int32 // hosts that got a placement this interval
	placedWin     int
	res           Result
	series        *seriesRecorder
	progress      *Progress
	as            *simAutoscale // nil without a scaling plan
}

func runOne(ctx context.Context, sc *Scenario, w *workload, alg string, limit int, opts Options) (Result, error) {
	n := sc.Pool.Hosts
	r := &runner{
		sc: sc, w: w, limit: limit,
		hosts:    make([]placement.Host, n),
		index:    make(map[string]int32, n),
		st:       make([]hostState, n),
		users:    make([]userState, len(w.visits)),
		res:      Result{Algorithm: alg, MaxSessionLimit: limit},
		progress: opts.Progress,
	}
	width := len(fmt.Sprint(n))
	for i := range r.hosts {
		name := fmt.Sprintf("host%0*d", width, i+1) // zero-padded: query order is host order
		sessions := 0
		if i < len(sc.Pool.InitialSessions) {
			sessions = sc.Pool.InitialSessions[i]
		}
		r.index[name] = int32(i)
		r.st[i] = hostState{sessions: sessions, initial: sessions}
		r.hosts[i] = placement.Host{Name: name, AllowNewSession: true, StandardFeatures: true, Sessions: sessions}
	}
	r.spread.init(r.st)
	for i := range r.st {
		r.res.MaxSessionsOnAHost = max(r.res.MaxSessionsOnAHost, r.st[i].sessions)
		r.maxActive = max(r.maxActive, r.st[i].sessions)
	}
	if !opts.NoSeries {
		r.series = newSeriesRecorder(r)
	}
	rng := rand.New(rand.NewPCG(sc.Seed, streamPlacement))
	pool := placement.Pool{
		Name:             "sim",
		HostPoolType:     vdibroker.Pooled,
		LoadBalancerType: alg,
		MaxSessionLimit:  limit,
		LoadBalancing:    sc.LoadBalancing,
		// All simulated hosts are healthy: the timeout outlasts the
		// longest gap between two reports of a host (see heartbeat).
		HeartbeatTimeoutSeconds: int(2*keepAliveEvery*heartbeatInterval/time.Second) + 90,
	}
	if sc.ScalingPlan != nil {
		if err := r.initAutoscale(); err != nil {
			return Result{}, err
		}
	}
	r.sample(0) // the agents' first sample and report, before anyone arrives
	r.heartbeat(0)
	r.placer = placement.New(pool, r.hosts, placement.Options{
		Rand: rng.IntN,
		Now:  func() time.Time { return Epoch.Add(r.now) },
	})
	for u, v := range w.visits {
		if v.arrive < sc.Duration {
			r.q.push(event{at: v.arrive, kind: evArrive, user: int32(u)})
		}
	}
	if sc.MetricsInterval < sc.Duration {
		r.q.push(event{at: sc.MetricsInterval, kind: evSample})
	}
	if heartbeatInterval < sc.Duration {
		r.q.push(event{at: heartbeatInterval, kind: evHeartbeat})
	}
	for r.q.len() > 0 {
		e := r.q.pop()
		if e.at >= sc.Duration {
			break
		}
		r.now = e.at
		var err error
		switch e.kind {
		case evSample:
			if err = ctx.Err(); err != nil {
				break
			}
			r.sample(e.at)
			if next := e.at + sc.MetricsInterval; next < sc.Duration {
				r.q.push(event{at: next, kind: evSample})
			}
		case evHeartbeat:
			r.heartbeat(e.at)
			if next := e.at + heartbeatInterval; next < sc.Duration {
				r.q.push(event{at: next, kind: evHeartbeat})
			}
		case evArrive:
			err = r.arrive(e.user)
		case evHostReady:
			r.hostReady(e.user)
		case evAutoscale:
			err = r.evaluate()
		case evEnd:
			r.end(e.user)
		case evDisconnect:
			r.disconnect(e.user, e.away)
		case evReconnect:
			err = r.reconnect(e.user)
		}
		if err != nil {
			return Result{}, err
		}
	}
	return r.finish()
}

// arrive places a new session (R-BF, R-DF, R-LI through the engine).
func (r *runner) arrive(u int32) error {
	d, err := r.placer.Place(placement.Request{User: r.w.users[u]})
	if err != nil {
		if vdibroker.ErrorCode(err) == vdibroker.ENoCapacity {
			if r.as != nil && r.waitForStart(u) {
				return nil
			}
			r.res.Rejected++
			return nil
		}
		return fmt.Errorf("place %s at %s: %w", r.w.users[u], r.now, err)
	}
	i, ok := r.index[d.Host]
	if !ok || d.Reconnect {
		return fmt.Errorf("place %s at %s: engine chose %q (reconnect %v) for a new session", r.w.users[u], r.now, d.Host, d.Reconnect)
	}
	r.placer.Apply(d)
	r.res.Placed++
	h := &r.st[i]
	r.addSession(i)
	h.connecting++
	if h.sessions > r.limit {
		r.res.LimitViolations++
	}
	if h.windowPlaced == 0 {
		r.touched = append(r.touched, i)
	}
	h.windowPlaced++
	r.placedWin++
	r.users[u] = userState{host: i, state: userOpen, slot: int32(len(h.open)), at: r.now, placedAt: r.now}
	h.open = append(h.open, u)
	v := &r.w.visits[u]
	r.q.push(event{at: v.end, kind: evEnd, user: u})
	for k, a := range v.away {
		if a.from < v.end && a.from < r.sc.Duration && a.from >= r.now { // a logon that waited for a start may come after it
			r.q.push(event{at: a.from, kind: evDisconnect, user: u, away: uint8(k)})
		}
	}
	return nil
}

// pending reports whether u's session is still Pending: placed after the
// last heartbeat and never disconnected.
func (r *runner) pending(us *userState) bool {
	return us.placedAt >= 0 && us.placedAt >= r.lastHeartbeat
}

// end logs u off: the host's count drops at once (R-S1, R-S2).
func (r *runner) end(u int32) {
	us := &r.users[u]
	if us.state != userOpen && us.state != userAway {
		return
	}
	h := &r.st[us.host]
	switch {
	case us.state == userAway:
		h.away--
	case r.pending(us):
		h.connecting--
	}
	r.removeSession(us.host)
	last := h.open[len(h.open)-1]
	h.open[us.slot] = last
	r.users[last].slot = us.slot
	h.open = h.open[:len(h.open)-1]
	us.state = userEnded
	r.push(us.host)
}

// disconnect marks u's session Disconnected; it still counts (R-S1).
func (r *runner) disconnect(u int32, k uint8) {
	us := &r.users[u]
	if us.state != userOpen {
		return
	}
	h := &r.st[us.host]
	wasPending := r.pending(us)
	if wasPending {
		h.connecting--
	}
	h.away++
	h.dirty, h.changed = true, true
	us.state, us.placedAt = userAway, -1
	if wasPending {
		r.push(us.host)
	}
	v := &r.w.visits[u]
	if back := v.away[k].back; back < v.end && back < r.sc.Duration {
		r.q.push(event{at: back, kind: evReconnect, user: u})
	}
	r.trackActive(us.host)
}

// reconnect sends u back through the engine with its existing session: the
// answer must be that session on its host (R-C1).
func (r *runner) reconnect(u int32) error {
	us := &r.users[u]
	if us.state != userAway {
		return nil
	}
	host := r.hosts[us.host].Name
	d, err := r.placer.Place(placement.Request{
		User:     r.w.users[u],
		Existing: &placement.Existing{SessionID: r.w.users[u], Host: host, State: vdibroker.StateDisconnected},
	})
	if err != nil {
		return fmt.Errorf("reconnect %s at %s: %w", r.w.users[u], r.now, err)
	}
	if !d.Reconnect || d.Host != host {
		return fmt.Errorf("reconnect %s at %s: engine answered %q (reconnect %v), want its session on %s (R-C1)", r.w.users[u], r.now, d.Host, d.Reconnect, host)
	}
	r.placer.Apply(d) // a no-op for reconnects, as the server would call it
	r.res.Reconnects++
	r.st[us.host].away--
	r.st[us.host].dirty, r.st[us.host].changed = true, true
	us.state = userOpen
	r.trackActive(us.host)
	return nil
}

// push sends the simulator's counts of host i to the engine.
func (r *runner) push(i int32) {
	h := &r.hosts[i]
	h.Sessions, h.Connecting = r.st[i].sessions, r.st[i].connecting
	r.placer.Upsert(*h)
}

func (r *runner) addSession(i int32) {
	h := &r.st[i]
	if h.sessions == 0 {
		h.busySince = r.now
	}
	r.spread.move(h.sessions, h.sessions+1)
	h.sessions++
	h.dirty, h.changed = true, true
	r.res.MaxSessionsOnAHost = max(r.res.MaxSessionsOnAHost, h.sessions)
	r.res.PeakSpread = max(r.res.PeakSpread, r.spread.max-r.spread.min)
	r.trackActive(i)
}

func (r *runner) removeSession(i int32) {
	h := &r.st[i]
	r.spread.move(h.sessions, h.sessions-1)
	h.sessions--
	h.dirty, h.changed = true, true
	if h.sessions == 0 {
		r.busy += r.now - h.busySince
	}
	r.res.PeakSpread = max(r.res.PeakSpread, r.spread.max-r.spread.min)
}

func (r *runner) trackActive(i int32) {
	r.maxActive = max(r.maxActive, r.st[i].sessions-r.st[i].away)
}

// sample is every agent's metrics sample at t: CPU from its active
// sessions (a session loads its host from its placement on). It reaches the
// engine with the host's next heartbeat.
//
// A host whose load did not change since its last sample keeps that one:
// the new one would carry the very same figures and, through Resample, the
// same base; only SampledAt would move, and decisions do not read it.
func (r *runner) sample(t time.Duration) {
	r.closeWindow()
	if r.progress != nil && t > 0 {
		r.progress.Done.Add(int64((t - r.lastSample) / time.Second))
	}
	r.lastSample = t
	at := Epoch.Add(t)
	for i := range r.st {
		s := &r.st[i]
		if s.sample != nil && !s.changed {
			continue
		}
		s.sample, s.changed, s.dirty = &vdibroker.Metrics{CPUPercent: r.cpu(s), SampledAt: at}, false, true
	}
	r.samples++
	if r.series != nil {
		r.series.record(r, t)
	}
}

// heartbeat is every agent's report at t, as the agent sends it every
// heartbeatInterval: its sessions (Pending ones seen logged on, R-S2) and
// its last sample, which the engine takes through vdibroker.Resample, the
// store's rule (R-LI6): a sample already delivered changes nothing, so the
// estimate for the sessions placed since it stays until the next sample.
//
// A host with nothing new to report would send the engine the very values
// it already has; only LastHeartBeat would move. So such a host is sent
// only every keepAliveEvery heartbeats (staggered across hosts), which
// keeps it well inside the heartbeat timeout: the engine's decisions are
// the same, and a 10,000-host pool is not re-indexed 10,000 times a
// heartbeat.
func (r *runner) heartbeat(t time.Duration) {
	r.lastHeartbeat = t
	at := Epoch.Add(t)
	for i := range r.hosts {
		s := &r.st[i]
		if r.placer != nil && !s.dirty && (r.beats+i)%keepAliveEvery != 0 {
			continue
		}
		s.connecting, s.dirty = 0, false
		h := &r.hosts[i]
		sample := vdibroker.Resample(vdibroker.MetricsSample{Metrics: h.Metrics, Sessions: h.MetricsSessions}, s.sample, at, r.openSessions(int32(i)))
		h.Metrics, h.MetricsSessions, h.LastHeartBeat = sample.Metrics, sample.Sessions, &at
		h.Sessions, h.Connecting = s.sessions, 0
		if r.placer != nil {
			r.placer.Upsert(*h)
		}
	}
	r.beats++
}

// openSessions yields host i's open sessions as Resample sees them: the
// initial ones from the start, the others from their placement.
func (r *runner) openSessions(i int32) iter.Seq[vdibroker.SampleSession] {
	return func(yield func(vdibroker.SampleSession) bool) {
		s := &r.st[i]
		for range s.initial {
			if !yield(vdibroker.SampleSession{Since: Epoch}) {
				return
			}
		}
		for _, u := range s.open {
			us := &r.users[u]
			if !yield(vdibroker.SampleSession{Pending: r.pending(us), Since: Epoch.Add(us.at)}) {
				return
			}
		}
	}
}

func (r *runner) cpu(s *hostState) float64 {
	return min(100, float64(s.sessions-s.away)*r.sc.Session.CPUPercentPerSession)
}

// closeWindow ends a metrics interval for stormOvershoot.
func (r *runner) closeWindow() {
	if r.placedWin > 0 {
		even := (r.placedWin + len(r.hosts) - 1) / len(r.hosts)
		for _, i := range r.touched {
			r.res.StormOvershoot = max(r.res.StormOvershoot, r.st[i].windowPlaced-even)
			r.st[i].windowPlaced = 0
		}
	}
	r.touched, r.placedWin = r.touched[:0], 0
}

// finish closes the books at the scenario's end and checks that the engine
// and the simulator agree on every count.
func (r *runner) finish() (Result, error) {
	r.now = r.sc.Duration
	r.closeWindow()
	if r.progress != nil {
		r.progress.Done.Add(int64((r.sc.Duration - r.lastSample) / time.Second))
	}
	r.res.FinalSessions = make([]int, len(r.st))
	for i := range r.st {
		s := &r.st[i]
		if s.sessions > 0 {
			r.busy += r.now - s.busySince
		}
		r.res.FinalSessions[i] = s.sessions
		got, ok := r.placer.Host(r.hosts[i].Name)
		if !ok || got.Sessions != s.sessions {
			return Result{}, fmt.Errorf("engine lost count of %s: it has %d sessions, the simulator %d", r.hosts[i].Name, got.Sessions, s.sessions)
		}
	}
	r.res.HostHours = math.Round(float64(r.busy)/float64(time.Hour)*100) / 100
	if r.as != nil {
		r.finishAutoscale()
	}
	r.res.PeakCPUPercent = min(100, float64(r.maxActive)*r.sc.Session.CPUPercentPerSession)
	if r.series != nil {
		r.res.Series = r.series.s
	}
	return r.res, nil
}

// spreadTracker keeps the minimum and maximum session count over all hosts
// in O(1) per change: counts move by one, so a histogram suffices.
type spreadTracker struct {
	hist     []int
	min, max int
}

func (t *spreadTracker) init(st []hostState) {
	t.min = math.MaxInt
	for i := range st {
		s := st[i].sessions
		t.grow(s)
		t.hist[s]++
		t.min, t.max = min(t.min, s), max(t.max, s)
	}
}

func (t *spreadTracker) grow(s int) {
	for len(t.hist) <= s {
		t.hist = append(t.hist, 0)
	}
}

func (t *spreadTracker) move(from, to int) {
	t.grow(to)
	t.hist[from]--
	t.hist[to]++
	if to > t.max {
		t.max = to
	}
	if to < t.min {
		t.min = to
	}
	if t.hist[from] == 0 {
		if from == t.min && to > from {
			t.min = to
		}
		if from == t.max && to < from {
			t.max = to
		}
	}
}

// seriesRecorder keeps every stride-th sample for the plots.
type seriesRecorder struct {
	s       *Series
	stride  int
	n       int
	perHost bool
}

func newSeriesRecorder(r *runner) *seriesRecorder {
	samples := int(r.sc.Duration/r.sc.MetricsInterval) + 1
	rec := &seriesRecorder{s: &Series{}, stride: (samples + maxPlotPoints - 1) / maxPlotPoints, perHost: len(r.hosts) <= MaxPlottedHosts}
	if rec.perHost {
		for i := range r.hosts {
			rec.s.Lines = append(rec.s.Lines, r.hosts[i].Name)
		}
	} else {
		rec.s.Lines = []string{"min", "mean", "max"}
	}
	rec.s.Sessions = make([][]float64, len(rec.s.Lines))
	rec.s.CPU = make([][]float64, len(rec.s.Lines))
	return rec
}

func (rec *seriesRecorder) record(r *runner, t time.Duration) {
	rec.n++
	if (rec.n-1)%rec.stride != 0 {
		return
	}
	s := rec.s
	s.Hours = append(s.Hours, t.Hours())
	if rec.perHost {
		for i := range r.st {
			s.Sessions[i] = append(s.Sessions[i], float64(r.st[i].sessions))
			s.CPU[i] = append(s.CPU[i], r.cpu(&r.st[i]))
		}
		return
	}
	minS, maxS, sumS := math.Inf(1), math.Inf(-1), 0.0
	minC, maxC, sumC := math.Inf(1), math.Inf(-1), 0.0
	for i := range r.st {
		v, c := float64(r.st[i].sessions), r.cpu(&r.st[i])
		minS, maxS, sumS = min(minS, v), max(maxS, v), sumS+v
		minC, maxC, sumC = min(minC, c), max(maxC, c), sumC+c
	}
	n := float64(len(r.st))
	for k, v := range []float64{minS, sumS / n, maxS} {
		s.Sessions[k] = append(s.Sessions[k], v)
	}
	for k, v := range []float64{minC, sumC / n, maxC} {
		s.CPU[k] = append(s.CPU[k], v)
	}
}
