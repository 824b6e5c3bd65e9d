package autoscale

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
)

// world is an in-memory pool for unit tests of the loop: both the Store
// and the Actions of an Autoscaler. Its power actions change power states
// at once; StopHost refuses with Conflict while sessions exist unless
// forced, as the power service does.
type world struct {
	mu       sync.Mutex
	plans    []*vdibroker.ScalingPlan
	pools    map[string]*vdibroker.HostPool
	hosts    map[string][]*vdibroker.SessionHost // by pool, by name
	sessions []*vdibroker.UserSession
	commands []*vdibroker.Command
	evals    []*vdibroker.AutoscaleEvaluation
	states   map[string]*vdibroker.AutoscaleState
	starts   []string
	stops    []string
	lease    struct {
		holder string
		expire time.Time
	}
	now time.Time
	// onList, when set, runs before ListUserSessions answers for a host,
	// with how many times that host's sessions were listed (1 first).
	onList func(host string, call int)
	lists  map[string]int
}

func newWorld(now time.Time) *world {
	return &world{pools: map[string]*vdibroker.HostPool{}, hosts: map[string][]*vdibroker.SessionHost{},
		states: map[string]*vdibroker.AutoscaleState{}, now: now}
}

func (w *world) addPool(p *vdibroker.HostPool, hosts ...*vdibroker.SessionHost) {
	w.pools[p.Name] = p
	for _, h := range hosts {
		h.HostPool = p.Name
	}
	w.hosts[p.Name] = hosts
}

func (w *world) host(pool, name string) *vdibroker.SessionHost {
	for _, h := range w.hosts[pool] {
		if h.Name == name {
			return h
		}
	}
	return nil
}

func (w *world) addSession(pool, host, id, state string, at time.Time) *vdibroker.UserSession {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := &vdibroker.UserSession{ID: id, User: "u" + id, HostPool: pool, SessionHost: host, State: state, CreateTime: at, StateTime: at}
	w.sessions = append(w.sessions, s)
	return s
}

func (w *world) endSessions(host string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.sessions {
		if s.SessionHost == host {
			s.State = vdibroker.StateLoggedOff
		}
	}
}

func (w *world) SessionHosts(ctx context.Context, pool string) (*vdibroker.HostPool, []*vdibroker.SessionHost, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, ok := w.pools[pool]
	if !ok {
		return nil, nil, vdibroker.Errorf(vdibroker.ENotFound, "no pool %s", pool)
	}
	cp := *p
	var out []*vdibroker.SessionHost
	for _, h := range w.hosts[pool] {
		c := *h
		c.Sessions = 0
		for _, s := range w.sessions {
			if s.SessionHost == h.Name && s.Open() {
				c.Sessions++
			}
		}
		out = append(out, &c)
	}
	return &cp, out, nil
}

func (w *world) SetLoadBalancer(ctx context.Context, pool, from, to string) (*vdibroker.HostPool, bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, ok := w.pools[pool]
	if !ok {
		return nil, false, vdibroker.Errorf(vdibroker.ENotFound, "no pool %s", pool)
	}
	if p.LoadBalancerType != from {
		return nil, false, nil
	}
	p.LoadBalancerType = to
	cp := *p
	return &cp, true, nil
}

func (w *world) StartHost(ctx context.Context, pool, host, by string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.starts = append(w.starts, host)
	w.host(pool, host).PowerState = vdibroker.PowerStarting
	return nil
}

func (w *world) StopHost(ctx context.Context, pool, host string, force bool, by string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.sessions {
		if s.SessionHost == host && s.Open() && !force {
			return vdibroker.Errorf(vdibroker.EConflict, "host %s has sessions", host)
		}
	}
	w.stops = append(w.stops, host)
	w.host(pool, host).PowerState = vdibroker.PowerStopped
	return nil
}

func (w *world) SetAutoscaleDrain(ctx context.Context, pool, host string, on bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.host(pool, host).AutoscaleDrain = on
	return nil
}

func (w *world) ListScalingPlans(ctx context.Context) ([]*vdibroker.ScalingPlan, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.plans), nil
}

func (w *world) ListUserSessions(ctx context.Context, f vdibroker.SessionFilter) ([]*vdibroker.UserSession, error) {
	if w.onList != nil && f.SessionHost != "" {
		w.mu.Lock()
		if w.lists == nil {
			w.lists = map[string]int{}
		}
		w.lists[f.SessionHost]++
		n := w.lists[f.SessionHost]
		w.mu.Unlock()
		w.onList(f.SessionHost, n)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*vdibroker.UserSession
	for _, s := range w.sessions {
		if s.HostPool == f.HostPool && (f.SessionHost == "" || s.SessionHost == f.SessionHost) && s.Open() {
			c := *s
			out = append(out, &c)
		}
	}
	return out, nil
}

func (w *world) QueueCommand(ctx context.Context, c *vdibroker.Command) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.commands = append(w.commands, c)
	return nil
}

func (w *world) AcquireAutoscaleLease(ctx context.Context, holder string, now time.Time, ttl time.Duration) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lease.holder == "" || w.lease.holder == holder || !now.Before(w.lease.expire) {
		w.lease.holder, w.lease.expire = holder, now.Add(ttl)
		return true, nil
	}
	return false, nil
}

func (w *world) ReleaseAutoscaleLease(ctx context.Context, holder string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lease.holder == holder {
		w.lease.holder = ""
	}
	return nil
}

func (w *world) AppendAutoscaleEvaluation(ctx context.Context, e *vdibroker.AutoscaleEvaluation) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	e.Seq = int64(len(w.evals) + 1)
	w.evals = append(w.evals, e)
	return nil
}

func (w *world) ListAutoscaleEvaluations(ctx context.Context, pool string, before int64, limit int) ([]*vdibroker.AutoscaleEvaluation, error) {
	return nil, nil
}

// The states are copied in and out, as a store would, so that the loop
// cannot rely on keeping a pointer between evaluations.
func (w *world) ListAutoscaleStates(ctx context.Context) ([]*vdibroker.AutoscaleState, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*vdibroker.AutoscaleState
	for _, st := range w.states {
		out = append(out, copyState(st))
	}
	return out, nil
}

func (w *world) PutAutoscaleState(ctx context.Context, st *vdibroker.AutoscaleState) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.states[st.HostPool] = copyState(st)
	return nil
}

func (w *world) DeleteAutoscaleState(ctx context.Context, pool string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.states, pool)
	return nil
}

func copyState(st *vdibroker.AutoscaleState) *vdibroker.AutoscaleState {
	c := *st
	c.Hosts = map[string]*vdibroker.AutoscaleHostState{}
	for k, v := range st.Hosts {
		hv := *v
		c.Hosts[k] = &hv
	}
	return &c
}

// lastEval returns the last evaluation of pool.
func (w *world) lastEval(pool string) *vdibroker.AutoscaleEvaluation {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.evals) - 1; i >= 0; i-- {
		if w.evals[i].HostPool == pool {
			return w.evals[i]
		}
	}
	return nil
}

func (w *world) commandsOf(typ string) []*vdibroker.Command {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*vdibroker.Command
	for _, c := range w.commands {
		if c.Type == typ {
			out = append(out, c)
		}
	}
	return out
}
