package power

import (
	"context"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
)

// Simulated keeps each host's power state in memory: Start makes it
// Starting, then Running after StartDelay (at once without one), Stop
// makes it Stopped. For the demo, the simulator and tests; it starts
// nothing real, so a started host runs only if something else runs its
// agent.
type Simulated struct {
	StartDelay time.Duration
	Now        func() time.Time // injected in tests; time.Now when nil

	mu    sync.Mutex
	hosts map[Target]simHost
	calls map[string]int // "start pool/host" -> how many Start calls (Calls)
}

type simHost struct {
	state   string
	started time.Time
}

func (s *Simulated) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func key(t Target) Target { return Target{Pool: t.Pool, Host: t.Host} }

// Start implements Driver.
func (s *Simulated) Start(_ context.Context, t Target) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	s.calls["start "+t.Pool+"/"+t.Host]++
	s.hosts[key(t)] = simHost{state: vdibroker.PowerStarting, started: s.now()}
	return nil
}

// Stop implements Driver.
func (s *Simulated) Stop(_ context.Context, t Target) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	s.calls["stop "+t.Pool+"/"+t.Host]++
	s.hosts[key(t)] = simHost{state: vdibroker.PowerStopped}
	return nil
}

// Status implements Driver: Unknown for a host never started or stopped.
func (s *Simulated) Status(_ context.Context, t Target) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.hosts[key(t)]
	switch {
	case !ok:
		return vdibroker.PowerUnknown, nil
	case h.state == vdibroker.PowerStarting && !s.now().Before(h.started.Add(s.StartDelay)):
		return vdibroker.PowerRunning, nil
	}
	return h.state, nil
}

// Calls returns how often action ("start", "stop") was called for pool/host.
func (s *Simulated) Calls(action, pool, host string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[action+" "+pool+"/"+host]
}

func (s *Simulated) init() {
	if s.hosts == nil {
		s.hosts = map[Target]simHost{}
		s.calls = map[string]int{}
	}
}
