package placement

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/vdibroker/vdibroker"
)

// model drives the indexed engine and the reference with the same operations
// and the same clock and random source, and checks they agree on every
// decision and every host, and that no host ever goes over its limit (R-C4).
type model struct {
	now   time.Time
	pool  Pool
	fast  Placer
	ref   Placer
	names []string
	users []string
	hosts map[string]Host // what the caller last told both engines, plus applies
	// chain is the last name added by "gapName": each next one sorts just
	// after it and before every other name, so all land in one label gap
	// and run it out (a relabel of every host).
	chain string
	// held are decisions placed but not applied yet, each as the indexed
	// and the reference engine made it, applied later by "applyHeld"
	// (after relabels, table rebuilds, removals and pool changes).
	held [][2]Decision
}

func genPool(t *rapid.T) Pool {
	algo := rapid.SampledFrom([]string{
		vdibroker.BreadthFirst, vdibroker.DepthFirst, vdibroker.LoadIndex,
		vdibroker.Persistent, vdibroker.MultiplePersistent,
	}).Draw(t, "algorithm")
	p := Pool{
		Name: "pool", LoadBalancerType: algo, HostPoolType: vdibroker.Pooled,
		MaxSessionLimit:         rapid.SampledFrom([]int{1, 2, 3, 5, 8, vdibroker.NoSessionLimit}).Draw(t, "limit"),
		HeartbeatTimeoutSeconds: rapid.IntRange(10, 120).Draw(t, "timeout"),
		LoadBalancing:           genLoadBalancing(t),
	}
	if personal(algo) {
		p.HostPoolType = vdibroker.Personal
		p.AssignmentType = rapid.SampledFrom([]string{vdibroker.Automatic, vdibroker.Direct}).Draw(t, "assignment")
	}
	return p
}

func genLoadBalancing(t *rapid.T) vdibroker.LoadBalancing {
	lb := vdibroker.DefaultLoadBalancing()
	lb.UseCustomScript = rapid.IntRange(0, 4).Draw(t, "custom") == 0
	lb.IncludeSessionCount = rapid.Bool().Draw(t, "includeSessions")
	lb.CPUThreshold = float64(rapid.SampledFrom([]int{0, 50, 80, 100}).Draw(t, "cpuT"))
	lb.MemoryThreshold = float64(rapid.SampledFrom([]int{0, 90}).Draw(t, "memT"))
	lb.DiskQueueLengthThreshold = float64(rapid.SampledFrom([]int{0, 4}).Draw(t, "dqT"))
	// Up to five enabled factors: the indexed engine keeps up to three per
	// host and reads the sample for more.
	lb.DiskReadLatencyThreshold = float64(rapid.SampledFrom([]int{0, 20}).Draw(t, "drT"))
	lb.DiskWriteLatencyThreshold = float64(rapid.SampledFrom([]int{0, 30}).Draw(t, "dwT"))
	lb.LoadIndexThreshold = rapid.SampledFrom([]int{0, 10, 20, 50}).Draw(t, "T")
	lb.ConnectingSessionThreshold = rapid.SampledFrom([]int{0, 1, 2, 20}).Draw(t, "C")
	lb.MinServersInQueue = rapid.IntRange(1, 5).Draw(t, "M")
	lb.HostLoadIndexThreshold = rapid.SampledFrom([]int{0, 60, 90}).Draw(t, "hT")
	lb.HostConnectingSessionThreshold = rapid.SampledFrom([]int{0, 2, 3}).Draw(t, "hC")
	return lb
}

func (m *model) genMetrics(t *rapid.T) *vdibroker.Metrics {
	if rapid.IntRange(0, 5).Draw(t, "noMetrics") == 0 {
		return nil
	}
	mt := &vdibroker.Metrics{
		CPUPercent:         rapid.Float64Range(0, 100).Draw(t, "cpu"),
		MemoryPercent:      rapid.Float64Range(0, 100).Draw(t, "mem"),
		DiskQueueLength:    rapid.Float64Range(0, 8).Draw(t, "dq"),
		DiskReadLatencyMs:  rapid.Float64Range(0, 40).Draw(t, "dr"),
		DiskWriteLatencyMs: rapid.Float64Range(0, 40).Draw(t, "dw"),
		SampledAt:          m.now,
	}
	if rapid.IntRange(0, 2).Draw(t, "hasCustom") == 0 {
		v := rapid.IntRange(-1, 120).Draw(t, "customValue")
		mt.CustomLoadValue = &v
	}
	return mt
}

func (m *model) genHost(t *rapid.T, name string) Host {
	hb := m.now.Add(-time.Duration(rapid.IntRange(0, 150).Draw(t, "hbAge")) * time.Second)
	h := Host{
		Name:             name,
		AllowNewSession:  rapid.IntRange(0, 4).Draw(t, "drained") != 0,
		StandardFeatures: rapid.IntRange(0, 3).Draw(t, "nonStandard") != 0,
		LastHeartBeat:    &hb,
		Sessions:         rapid.IntRange(0, 9).Draw(t, "sessions"),
	}
	if rapid.IntRange(0, 9).Draw(t, "neverBeat") == 0 {
		h.LastHeartBeat = nil
	}
	h.ShuttingDown = rapid.IntRange(0, 9).Draw(t, "shutdown") == 0
	h.NoRemoteApps = rapid.IntRange(0, 3).Draw(t, "noRemoteApps") == 0
	if rapid.IntRange(0, 5).Draw(t, "unhealthy") == 0 {
		h.HealthError = "disk nearly full"
	}
	h.Connecting = rapid.IntRange(0, h.Sessions).Draw(t, "connecting")
	h.Metrics = m.genMetrics(t)
	h.MetricsSessions = rapid.IntRange(0, h.Sessions).Draw(t, "metricsSessions")
	if rapid.IntRange(0, 4).Draw(t, "policy") == 0 {
		v := rapid.IntRange(0, 100).Draw(t, "policyLoad")
		h.Policy.HostLoadIndexThreshold = &v
	}
	if rapid.IntRange(0, 4).Draw(t, "policyConn") == 0 {
		v := rapid.IntRange(0, 3).Draw(t, "policyConnValue")
		h.Policy.HostConnectingSessionThreshold = &v
	}
	if personal(algorithmOf(m.pool)) && rapid.IntRange(0, 2).Draw(t, "assigned") == 0 {
		h.AssignedUsers = []string{rapid.SampledFrom(m.users).Draw(t, "assignee")}
	}
	return h
}

func (m *model) upsert(h Host) {
	m.hosts[h.Name] = h
	m.fast.Upsert(h)
	m.ref.Upsert(h)
}

func (m *model) check(t *rapid.T) {
	for _, name := range m.names {
		f, fok := m.fast.Host(name)
		r, rok := m.ref.Host(name)
		if fok != rok {
			t.Fatalf("host %s known: indexed %v, reference %v", name, fok, rok)
		}
		if diff := cmp.Diff(r, f); diff != "" {
			t.Fatalf("host %s differs (-reference +indexed):\n%s", name, diff)
		}
	}
}

func (m *model) place(t *rapid.T) {
	req := Request{User: rapid.SampledFrom(m.users).Draw(t, "user")}
	if rapid.IntRange(0, 3).Draw(t, "withExisting") == 0 {
		req.Existing = &Existing{SessionID: "s1", Host: rapid.SampledFrom(m.names).Draw(t, "existingHost"), State: vdibroker.StateActive}
	}
	if rapid.IntRange(0, 3).Draw(t, "withSessionHost") == 0 {
		req.SessionHost = rapid.SampledFrom(m.names).Draw(t, "sessionHost")
	}
	req.RemoteApp = rapid.IntRange(0, 2).Draw(t, "remoteApp") == 0
	fd, ferr := m.fast.Place(req)
	rd, rerr := m.ref.Place(req)
	if diff := cmp.Diff(rd, fd, cmpopts.IgnoreUnexported(Decision{})); diff != "" {
		t.Fatalf("decision differs for %+v (-reference +indexed):\n%s", req, diff)
	}
	if fmt.Sprint(ferr) != fmt.Sprint(rerr) {
		t.Fatalf("error differs: indexed %v, reference %v", ferr, rerr)
	}
	if ferr != nil {
		code := vdibroker.ErrorCode(ferr)
		if code != vdibroker.ENoCapacity && code != vdibroker.ENotAssigned && !(req.RemoteApp && code == vdibroker.ERemoteAppUnsupported) {
			t.Fatalf("unexpected error code %s: %v", code, ferr)
		}
		return
	}
	b, err := json.Marshal(fd.Explain)
	if err != nil {
		t.Fatalf("explain does not marshal: %v", err)
	}
	var back Explain
	if err := json.Unmarshal(b, &back); err != nil || !cmp.Equal(back, fd.Explain) {
		t.Fatalf("explain does not round-trip through JSON (err %v): %s", err, cmp.Diff(fd.Explain, back))
	}
	if fd.Reconnect {
		return
	}
	h, _ := m.ref.Host(fd.Host)
	if req.RemoteApp && h.NoRemoteApps {
		t.Fatalf("R-E12: application placed on %s, which cannot run RemoteApps", h.Name)
	}
	if h.Sessions >= limitOf(m.pool) {
		t.Fatalf("R-C4: placed on %s with %d sessions at limit %d", h.Name, h.Sessions, limitOf(m.pool))
	}
	if !h.AllowNewSession && !personal(algorithmOf(m.pool)) {
		t.Fatalf("R-C2: placed on drained host %s", h.Name)
	}
	if st := Status(&h, timeoutOf(m.pool), m.now); !vdibroker.Placeable(st) {
		t.Fatalf("R-C3: placed on %s host %s", st, h.Name)
	}
	switch rapid.IntRange(0, 5).Draw(t, "then") {
	case 0: // a dry run
	case 1:
		m.held = append(m.held, [2]Decision{fd, rd})
	default:
		m.fast.Apply(fd)
		m.ref.Apply(rd)
		h, _ = m.ref.Host(fd.Host)
		m.hosts[h.Name] = h
	}
}

func TestIndexedMatchesReference_Property(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &model{
			now: testNow,
			// Short names and long names that share a prefix and are
			// prefixes of one another (their labels must keep byte order).
			names: []string{"h00", "h01", "h02", "h03", "h04", "h05", "h06", "h07",
				"pool-a-host-0001", "pool-a-host-0001b", "pool-a-host-0001a", "pool-a-host-000"},
			users: []string{"ann", "bob", "cy", "dee"},
			hosts: map[string]Host{},
		}
		m.pool = genPool(t)
		seed := rapid.Uint64().Draw(t, "seed")
		clock := func() time.Time { return m.now }
		fastRand := rand.New(rand.NewPCG(seed, 1))
		refRand := rand.New(rand.NewPCG(seed, 1))
		var initial []Host
		for _, name := range m.names[:rapid.IntRange(0, len(m.names)).Draw(t, "hosts")] {
			h := m.genHost(t, name)
			initial = append(initial, h)
			m.hosts[name] = h
		}
		m.fast = New(m.pool, initial, Options{Rand: fastRand.IntN, Now: clock})
		m.ref = NewReference(m.pool, initial, Options{Rand: refRand.IntN, Now: clock})
		pickHost := func(t *rapid.T) (Host, bool) {
			name := rapid.SampledFrom(m.names).Draw(t, "host")
			h, ok := m.ref.Host(name)
			return h, ok
		}
		t.Repeat(map[string]func(*rapid.T){
			"":      m.check,
			"place": m.place,
			"endSession": func(t *rapid.T) {
				if h, ok := pickHost(t); ok && h.Sessions > 0 {
					h.Sessions--
					h.Connecting = min(h.Connecting, h.Sessions)
					m.upsert(h)
				}
			},
			"logon": func(t *rapid.T) {
				if h, ok := pickHost(t); ok && h.Connecting > 0 {
					h.Connecting--
					m.upsert(h)
				}
			},
			"drain": func(t *rapid.T) {
				if h, ok := pickHost(t); ok {
					h.AllowNewSession = !h.AllowNewSession
					m.upsert(h)
				}
			},
			"setPool": func(t *rapid.T) {
				p := genPool(t)
				if personal(algorithmOf(p)) != personal(algorithmOf(m.pool)) {
					p.LoadBalancerType, p.HostPoolType, p.AssignmentType = m.pool.LoadBalancerType, m.pool.HostPoolType, m.pool.AssignmentType
				}
				m.pool = p
				m.fast.SetPool(p)
				m.ref.SetPool(p)
			},
			"metrics": func(t *rapid.T) {
				if h, ok := pickHost(t); ok {
					h.Metrics = m.genMetrics(t)
					h.MetricsSessions = h.Sessions
					m.upsert(h)
				}
			},
			"heartbeat": func(t *rapid.T) {
				if h, ok := pickHost(t); ok {
					now := m.now
					h.LastHeartBeat = &now
					h.ShuttingDown = false
					m.upsert(h)
				}
			},
			"setRoundRobin": func(t *rapid.T) {
				// R-LI4: the cursor another replica stored, naming a host
				// of this pool, one removed since, or none.
				after := rapid.SampledFrom(append([]string{"", "h03a", "zz"}, m.names...)).Draw(t, "rrAfter")
				m.fast.SetRoundRobin(after)
				m.ref.SetRoundRobin(after)
				if m.fast.RoundRobin() != after || m.ref.RoundRobin() != after {
					t.Fatalf("RoundRobin after SetRoundRobin(%q): indexed %q, reference %q", after, m.fast.RoundRobin(), m.ref.RoundRobin())
				}
			},
			"tick": func(t *rapid.T) {
				m.now = m.now.Add(time.Duration(rapid.IntRange(0, 90).Draw(t, "seconds")) * time.Second)
			},
			"clockBack": func(t *rapid.T) {
				m.now = m.now.Add(-time.Duration(rapid.IntRange(1, 60).Draw(t, "back")) * time.Second)
			},
			"addOrReplace": func(t *rapid.T) {
				m.upsert(m.genHost(t, rapid.SampledFrom(m.names).Draw(t, "name")))
			},
			"gapName": func(t *rapid.T) {
				if m.chain == "" {
					m.chain = "h00"
				}
				for range rapid.IntRange(1, 16).Draw(t, "chained") {
					m.chain += "a" // after the last one, before "h01"
					m.names = append(m.names, m.chain)
					m.upsert(m.genHost(t, m.chain))
				}
			},
			"applyHeld": func(t *rapid.T) {
				if len(m.held) == 0 {
					return
				}
				i := rapid.IntRange(0, len(m.held)-1).Draw(t, "held")
				d := m.held[i]
				m.held = append(m.held[:i], m.held[i+1:]...)
				m.fast.Apply(d[0])
				m.ref.Apply(d[1])
				if h, ok := m.ref.Host(d[1].Host); ok {
					m.hosts[h.Name] = h
				}
			},
			"remove": func(t *rapid.T) {
				name := rapid.SampledFrom(m.names).Draw(t, "name")
				delete(m.hosts, name)
				m.fast.Remove(name)
				m.ref.Remove(name)
			},
		})
	})
}
