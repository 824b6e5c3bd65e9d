package loadgen

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vdibroker/vdibroker"
)

// podHost is one simulated agent of the pod bench. Unlike agentHost, its
// sessions grow while the bench runs: a connect the broker answers with
// this host adds the user, and the host's next heartbeat reports it Active,
// as a real agent reports a user who logged on (R-S2).
type podHost struct {
	name       string
	credential string

	mu       sync.Mutex
	sessions []vdibroker.AgentSession
}

// addSession records that user now has a session on the host.
func (h *podHost) addSession(user string) {
	h.mu.Lock()
	h.sessions = append(h.sessions, vdibroker.AgentSession{
		ID: fmt.Sprint(len(h.sessions) + 1), User: user, State: vdibroker.StateActive,
	})
	h.mu.Unlock()
}

// report is the host's sessions now (a copy's header: entries are never
// changed once appended).
func (h *podHost) report() []vdibroker.AgentSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions[:len(h.sessions):len(h.sessions)]
}

// agentRun is a running heartbeat loop of podHosts; stop ends it early.
type agentRun struct {
	stopOnce sync.Once
	stopCh   chan struct{}
	done     chan struct{}

	start    time.Time
	hosts    int
	interval time.Duration
	outcomes []heartbeatOutcome // by schedule index; read after done
	stopAt   atomic.Int64       // schedule index at which stop was asked
}

// startAgents sends every host's heartbeat every interval, the hosts
// spread evenly over the interval (as sendHeartbeats does), from
// concurrency workers, until stop is called or maxDuration has passed. A
// heartbeat that could not go out within maxLate of its due time is
// skipped (counted as not sent): the loop never piles up.
func startAgents(ctx context.Context, client *http.Client, endpoint string, hosts []*podHost, interval, maxDuration, maxLate time.Duration, concurrency int) *agentRun {
	total := scheduled(len(hosts), interval, maxDuration)
	a := &agentRun{
		stopCh: make(chan struct{}), done: make(chan struct{}),
		start: time.Now(), hosts: len(hosts), interval: interval,
		outcomes: make([]heartbeatOutcome, total),
	}
	a.stopAt.Store(int64(total))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			timer := time.NewTimer(0)
			defer timer.Stop()
			stop := a.stopCh
			for {
				j := int(next.Add(1)) - 1
				// stopAt is total until stop is asked: a heartbeat due
				// before stop still goes out (a pod's agents do not stop
				// when the bench does), so the last phase's heartbeats are
				// not cut off in the generator's queue.
				if j >= total || int64(j) >= a.stopAt.Load() || ctx.Err() != nil {
					return
				}
				due := a.start.Add(dueOffset(j, len(hosts), interval))
				for wait := time.Until(due); wait > 0; wait = time.Until(due) {
					timer.Reset(wait)
					select {
					case <-ctx.Done():
						return
					case <-stop:
						stop = nil
						if int64(j) >= a.stopAt.Load() {
							return
						}
					case <-timer.C:
					}
				}
				now := time.Now()
				if now.Sub(due) > maxLate {
					continue // skipped: the broker is that far behind
				}
				h := hosts[j%len(hosts)]
				body, _ := json.Marshal(vdibroker.HeartbeatRequest{
					Metrics:  sampleMetrics(j, j/len(hosts), now),
					Sessions: h.report(),
				})
				build := time.Since(now)
				o, _ := send(ctx, client, http.MethodPost, endpoint, h.credential, body)
				a.outcomes[j] = heartbeatOutcome{outcome: o, sent: true, lateness: now.Sub(due), done: time.Now(), build: build, bytes: len(body)}
			}
		})
	}
	go func() {
		wg.Wait()
		close(a.done)
	}()
	return a
}

// stop ends the loop and waits for it: no heartbeat due after now is
// sent; those due before now still go out (each at most maxLate late),
// and those in flight finish.
func (a *agentRun) stop() {
	a.stopOnce.Do(func() {
		a.stopAt.Store(int64(min(scheduled(a.hosts, a.interval, time.Since(a.start)), len(a.outcomes))))
		close(a.stopCh)
	})
	<-a.done
}

// HeartbeatStats is what the agents' heartbeats measured while the bench
// ran: offered is every heartbeat due in the window, handled those answered
// 200, both per second of the window.
type HeartbeatStats struct {
	Hosts       int           `json:"hosts"`
	Interval    time.Duration `json:"interval"`
	Window      time.Duration `json:"window"`
	Scheduled   int           `json:"scheduled"`
	Sent        int           `json:"sent"`
	Skipped     int           `json:"skipped"` // a whole interval late: not sent
	OK          int           `json:"ok"`
	OfferedRate float64       `json:"offeredRate"`
	HandledRate float64       `json:"handledRate"`
	P50         time.Duration `json:"p50"`
	P99         time.Duration `json:"p99"`
	Max         time.Duration `json:"max"`
	LatenessP99 time.Duration `json:"latenessP99"`
	Errors      []ErrorCount  `json:"errors"`
	// ByPhase is the heartbeats due in each measured phase.
	ByPhase []HeartbeatPhase `json:"byPhase,omitempty"`
	// WarmUp is the first interval after the broker's restart, left out
	// of the figures above (nil when they include it).
	WarmUp *HeartbeatPhase `json:"warmUp,omitempty"`
}

// HeartbeatPhase is the heartbeats due while one phase ran: how many, how
// many were skipped (a whole interval late), and how long the sent ones
// took.
type HeartbeatPhase struct {
	Phase   string        `json:"phase"`
	Due     int           `json:"due"`
	Skipped int           `json:"skipped"`
	OK      int           `json:"ok"`
	P99     time.Duration `json:"p99"`
	Max     time.Duration `json:"max"`
	// LatenessP99 and LatenessMax are how late after their due time the
	// phase's heartbeats went out: a heartbeat waits only for a free
	// worker, so lateness is every worker busy in a round trip.
	LatenessP99 time.Duration `json:"latenessP99"`
	LatenessMax time.Duration `json:"latenessMax"`
	// BuildP99 is the generator's own time to make a body (copy the
	// report, marshal it) before sending; MaxBytes the largest body.
	BuildP99 time.Duration `json:"buildP99"`
	MaxBytes int           `json:"maxBytes"`
	// StoreMean is the broker's own mean time in ApplyHeartbeat (queue
	// of the group committer included) from its
	// vdibroker_store_tx_duration_seconds between two /metrics scrapes of
	// the phase; StoreP99Below the bucket bound its p99 is under; 0 when
	// no two scrapes fell in the phase.
	StoreMean     time.Duration `json:"storeMean"`
	StoreP99Below time.Duration `json:"storeP99Below"`
	// AnswerMean and AnswerP99Below are the same of the broker's whole
	// answer to a heartbeat (vdibroker_heartbeat_duration_seconds, code
	// OK): the store's time and the rest of the broker's. What an agent
	// waited beyond it was the network and its own process.
	AnswerMean     time.Duration `json:"answerMean"`
	AnswerP99Below time.Duration `json:"answerP99Below"`
}

// phaseWindow is when one measured phase ran.
type phaseWindow struct {
	name       string
	start, end time.Time
}

// byPhase attributes every heartbeat due before stop to the phase whose
// window holds its due time; call after stop.
func (a *agentRun) byPhase(windows []phaseWindow) []HeartbeatPhase {
	<-a.done
	n := min(int(a.stopAt.Load()), len(a.outcomes))
	out := make([]HeartbeatPhase, len(windows))
	lat := make([][]time.Duration, len(windows))
	late := make([][]time.Duration, len(windows))
	build := make([][]time.Duration, len(windows))
	for j := range n {
		due := a.start.Add(dueOffset(j, a.hosts, a.interval))
		for i, w := range windows {
			if due.Before(w.start) || !due.Before(w.end) {
				continue
			}
			o := a.outcomes[j]
			out[i].Due++
			switch {
			case !o.sent:
				out[i].Skipped++
			case o.code == "":
				out[i].OK++
			}
			if o.sent {
				lat[i] = append(lat[i], o.latency)
				late[i] = append(late[i], o.lateness)
				build[i] = append(build[i], o.build)
				out[i].MaxBytes = max(out[i].MaxBytes, o.bytes)
			}
			break
		}
	}
	for i, w := range windows {
		out[i].Phase = w.name
		for _, s := range [][]time.Duration{lat[i], late[i], build[i]} {
			slices.Sort(s)
		}
		out[i].P99 = percentile(lat[i], 99)
		if len(lat[i]) > 0 {
			out[i].Max = lat[i][len(lat[i])-1]
			out[i].LatenessMax = late[i][len(late[i])-1]
		}
		out[i].LatenessP99 = percentile(late[i], 99)
		out[i].BuildP99 = percentile(build[i], 99)
	}
	return out
}

// stats summarizes the heartbeats due before stop; call after stop.
func (a *agentRun) stats() HeartbeatStats { return a.statsFrom(0) }

// steadyStats is stats without the first interval (the broker's first
// heartbeat of every host after its restart, with cold caches), which it
// reports apart as WarmUp: the target is about a running pod.
func (a *agentRun) steadyStats() HeartbeatStats {
	<-a.done
	n := min(int(a.stopAt.Load()), len(a.outcomes))
	if n <= a.hosts {
		return a.statsFrom(0)
	}
	s := a.statsFrom(a.hosts)
	w := HeartbeatPhase{Phase: "first interval after the broker's restart", Due: a.hosts}
	for _, o := range a.outcomes[:a.hosts] {
		switch {
		case !o.sent:
			w.Skipped++
		case o.code == "":
			w.OK++
		}
		w.Max = max(w.Max, o.latency)
	}
	s.WarmUp = &w
	return s
}

// statsFrom summarizes the heartbeats due from the from-th (a multiple of
// the hosts: whole intervals) to stop.
func (a *agentRun) statsFrom(from int) HeartbeatStats {
	<-a.done
	n := int(a.stopAt.Load())
	n = min(n, len(a.outcomes))
	start := a.start.Add(dueOffset(from, a.hosts, a.interval))
	hr := &HeartbeatResult{Duration: max(dueOffset(n, a.hosts, a.interval)-dueOffset(from, a.hosts, a.interval), time.Millisecond), Interval: a.interval}
	summarizeHeartbeats(hr, a.outcomes[from:n], a.hosts, 0)
	s := HeartbeatStats{
		Hosts: a.hosts, Interval: a.interval, Window: hr.Duration,
		Scheduled: hr.Scheduled, Sent: hr.Sent, Skipped: hr.Skipped, OK: hr.OK,
		OfferedRate: hr.OfferedRate, P50: hr.P50, P99: hr.P99, Max: hr.Max,
		LatenessP99: hr.LatenessP99, Errors: hr.Errors,
	}
	// Handled per second from the start to the last answer (at least the
	// window): a broker that answers late shows a lower rate.
	last := start.Add(hr.Duration)
	for _, o := range a.outcomes[from:n] {
		if o.sent && o.done.After(last) {
			last = o.done
		}
	}
	s.HandledRate = float64(hr.OK) / last.Sub(start).Seconds()
	return s
}

// interleave orders the hosts of several pools for the agents' schedule
// (startAgents spreads its hosts evenly over the interval, in order) so
// that each pool's hosts are spread evenly over the interval too: host i
// of a pool of n goes where (i+½)/n of the interval falls. Real agents
// start at unrelated times, so a pool's heartbeats do not come together.
// In pool order instead, a 100-host pool of a 10,100-host pod beat within
// one hundredth of each interval: in the phases that connected users to
// it, its hosts' heartbeats each carried some 170 logons, and all 100
// arrived within 0.1 s, 0.7 s of work for the store's one SQLite writer
// in a burst no pod of independent agents makes.
func interleave(pools ...[]*podHost) []*podHost {
	type slot struct {
		at   float64
		pool int
		h    *podHost
	}
	var slots []slot
	for p, hosts := range pools {
		for i, h := range hosts {
			slots = append(slots, slot{(float64(i) + 0.5) / float64(len(hosts)), p, h})
		}
	}
	slices.SortStableFunc(slots, func(a, b slot) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.pool, b.pool)
	})
	all := make([]*podHost, len(slots))
	for i, s := range slots {
		all[i] = s.h
	}
	return all
}
