package sim

import (
	"errors"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/autoscale"
)

// A scenario's scaling plan (R-SP): the simulated pool's hosts get a
// power state, the autoscaler's own arithmetic (autoscale.PhaseAt and
// autoscale.Plan, R-A1..R-A3) evaluates the plan every autoscaleInterval,
// a host takes startDelay to start, and a logon that finds no capacity
// waits for a host being started, or starts one (start VM on connect,
// R-A4). The report adds what the plan cost and saved against always-on.

// AutoscaleResult is what a scaling plan did in one run.
type AutoscaleResult struct {
	// PoweredHostHours is the time hosts were powered on (starting,
	// running or draining), summed over hosts; AlwaysOnHostHours is what
	// every host running all the time costs. Rounded to 0.01.
	PoweredHostHours  float64 `json:"poweredHostHours"`
	AlwaysOnHostHours float64 `json:"alwaysOnHostHours"`
	Starts            int     `json:"starts"`
	Stops             int     `json:"stops"`
	// LogonsWaitedForStart counts users whose logon found no capacity and
	// waited for a host to start (each user once).
	LogonsWaitedForStart int `json:"logonsWaitedForStart"`
	// Evaluations counts the autoscaler's evaluations.
	Evaluations int `json:"evaluations"`
}

// scalingPlan decodes scalingPlan with the API's field names, refusing
// unknown ones, and checks it as the API does.
func (p *scenarioParser) scalingPlan(n ast.Node) *vdibroker.ScalingPlan {
	const name = "scalingPlan"
	var plan vdibroker.ScalingPlan
	if err := yaml.NodeToValue(n, &plan, yaml.DisallowUnknownField()); err != nil {
		msg := err.Error()
		var yerr yaml.Error
		if errors.As(err, &yerr) {
			msg = yerr.GetMessage()
		}
		p.errf(n, name, "%s", msg)
		return nil
	}
	if plan.Name == "" {
		plan.Name = "scenario"
	}
	// The API's own checks and defaults (R-SP1..R-SP3): a plan the
	// simulator takes is one the broker takes.
	plan.FillDefaults()
	if err := plan.Validate(); err != nil {
		field := vdibroker.ErrorField(err)
		p.errf(n, join(name, field), "%s", strings.TrimPrefix(vdibroker.ErrorMessage(err), field+": "))
		return nil
	}
	if plan.HostPoolType != vdibroker.Pooled {
		p.errf(n, name+".hostPoolType", "the simulator's pool is Pooled, got %q", plan.HostPoolType)
		return nil
	}
	return &plan
}

// Power states of a simulated host.
const (
	powerRunning uint8 = iota
	powerStarting
	powerStopped
)

// simHost is a host's power as the simulated autoscaler sees it.
type simHost struct {
	power   uint8
	drained bool
	drainAt time.Duration
	since   time.Duration // powered on since (running or starting)
	ready   time.Duration // when a starting host is ready
}

// simAutoscale is one run's autoscaler.
type simAutoscale struct {
	plan    *vdibroker.ScalingPlan
	hosts   []simHost
	waited  map[int32]bool
	powered time.Duration
	res     AutoscaleResult
}

// initAutoscale powers the hosts as the plan wants them at time 0, as if
// the autoscaler had been running before the scenario began: hosts with
// initial sessions and as many as the plan starts at once; the others are
// stopped.
func (r *runner) initAutoscale() error {
	a := &simAutoscale{plan: r.sc.ScalingPlan, hosts: make([]simHost, len(r.st)), waited: map[int32]bool{}}
	r.as = a
	for i := range a.hosts {
		a.hosts[i].power = powerStopped
		if r.st[i].sessions > 0 {
			a.hosts[i].power = powerRunning
		}
	}
	d, ok, err := r.decide()
	if err != nil {
		return err
	}
	if ok {
		for _, s := range d.Start {
			a.hosts[r.index[s.Host]].power = powerRunning
		}
	}
	for i := range a.hosts {
		r.setPlaceable(int32(i))
	}
	r.q.push(event{at: 0, kind: evAutoscale})
	return nil
}

// setPlaceable tells the engine whether host i takes sessions: running
// and not drained. The simulator has no admin drain, so allowNewSession
// carries it.
func (r *runner) setPlaceable(i int32) {
	h := &r.as.hosts[i]
	r.hosts[i].AllowNewSession = h.power == powerRunning && !h.drained
	if r.placer != nil {
		r.placer.Upsert(r.hosts[i])
	}
}

// decide is the autoscaler's arithmetic on the simulated pool now.
func (r *runner) decide() (autoscale.Decision, bool, error) {
	where, ok, err := autoscale.PhaseAt(r.as.plan, Epoch.Add(r.now))
	if err != nil || !ok {
		return autoscale.Decision{}, false, err
	}
	in := autoscale.Input{Phase: where.Phase, Schedule: where.Schedule, MaxSessionLimit: r.limit}
	for i := range r.st {
		h := &r.as.hosts[i]
		power := vdibroker.PowerRunning
		switch h.power {
		case powerStarting:
			power = vdibroker.PowerStarting
		case powerStopped:
			power = vdibroker.PowerStopped
		}
		in.Hosts = append(in.Hosts, autoscale.Host{Name: r.hosts[i].Name, Placeable: true, Power: power,
			AutoscaleDrained: h.drained, Sessions: r.st[i].sessions, Active: r.st[i].sessions - r.st[i].away})
	}
	return autoscale.Plan(in), true, nil
}

// evaluate is one evaluation of the plan: lift drains, start, drain, and
// carry the drains on (forced logoff after the wait, stop once empty).
func (r *runner) evaluate() error {
	a := r.as
	a.res.Evaluations++
	if next := r.now + r.sc.AutoscaleInterval; next < r.sc.Duration {
		r.q.push(event{at: next, kind: evAutoscale})
	}
	d, ok, err := r.decide()
	if err != nil || !ok {
		return err
	}
	for _, s := range d.Undrain {
		i := r.index[s.Host]
		a.hosts[i].drained = false
		r.setPlaceable(i)
	}
	for _, s := range d.Start {
		r.start(r.index[s.Host])
	}
	for _, s := range d.Drain {
		i := r.index[s.Host]
		a.hosts[i].drained, a.hosts[i].drainAt = true, r.now
		r.setPlaceable(i)
	}
	where, _, _ := autoscale.PhaseAt(a.plan, Epoch.Add(r.now))
	sc := where.Schedule
	for i := range a.hosts {
		h := &a.hosts[i]
		if !h.drained || h.power != powerRunning {
			continue
		}
		if sc.RampDownForceLogoffUsers && r.now >= h.drainAt+time.Duration(sc.RampDownWaitTimeMinutes)*time.Minute {
			r.endAll(int32(i), false)
		}
		left := r.st[i].sessions
		if sc.RampDownStopHostsWhen == vdibroker.StopWhenZeroActiveSessions {
			left -= r.st[i].away
		}
		if left > 0 {
			continue
		}
		r.endAll(int32(i), true) // disconnected ones end with the host
		if r.st[i].sessions > 0 {
			continue // initial sessions never end
		}
		h.power, h.drained = powerStopped, false
		a.powered += r.now - h.since
		a.res.Stops++
		r.setPlaceable(int32(i))
	}
	return nil
}

// endAll logs off host i's sessions (only the disconnected ones when
// awayOnly).
func (r *runner) endAll(i int32, awayOnly bool) {
	for _, u := range slices.Clone(r.st[i].open) {
		if !awayOnly || r.users[u].state == userAway {
			r.end(u)
		}
	}
}

// start starts host i: ready after startDelay.
func (r *runner) start(i int32) {
	h := &r.as.hosts[i]
	h.power, h.since, h.ready = powerStarting, r.now, r.now+r.sc.Pool.StartDelay
	r.as.res.Starts++
	r.setPlaceable(i)
	r.q.push(event{at: h.ready, kind: evHostReady, user: i})
}

// hostReady: host i finished starting.
func (r *runner) hostReady(i int32) {
	if h := &r.as.hosts[i]; h.power == powerStarting {
		h.power = powerRunning
		r.setPlaceable(i)
	}
}

// waitForStart handles a logon that found no capacity: it waits for the
// host being started that is ready first, or starts a stopped one (start
// VM on connect: a second logon meanwhile starts no second host), and
// tries again when that host is ready. false: no host can come.
func (r *runner) waitForStart(u int32) bool {
	a := r.as
	ready := time.Duration(math.MaxInt64)
	for i := range a.hosts {
		if a.hosts[i].power == powerStarting {
			ready = min(ready, a.hosts[i].ready)
		}
	}
	if ready == time.Duration(math.MaxInt64) {
		i := slices.IndexFunc(a.hosts, func(h simHost) bool { return h.power == powerStopped })
		if i < 0 {
			return false
		}
		r.start(int32(i))
		ready = a.hosts[i].ready
	}
	if ready >= r.sc.Duration || ready >= r.w.visits[u].end {
		return false // the user would be gone before the host is ready
	}
	if !a.waited[u] {
		a.waited[u] = true
		a.res.LogonsWaitedForStart++
	}
	r.q.push(event{at: ready, kind: evArrive, user: u})
	return true
}

// finishAutoscale closes the power books at the end.
func (r *runner) finishAutoscale() {
	a := r.as
	for i := range a.hosts {
		if a.hosts[i].power != powerStopped {
			a.powered += r.now - a.hosts[i].since
		}
	}
	hours := func(d time.Duration) float64 { return math.Round(d.Hours()*100) / 100 }
	a.res.PoweredHostHours = hours(a.powered)
	a.res.AlwaysOnHostHours = hours(time.Duration(len(a.hosts)) * r.sc.Duration)
	res := a.res
	r.res.Autoscale = &res
}
