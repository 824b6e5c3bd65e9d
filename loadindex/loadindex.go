package loadindex

import (
	"math"

	"github.com/vdibroker/vdibroker"
)

// Off is the load index of a host when load balancing is off for its pool
// (R-IDX3: custom script configured and no host reports a value).
const Off = -1

// NoCustomValue is the index that counts for a host without a valid custom
// value while another host of the pool reports one (R-IDX3).
const NoCustomValue = 25

// Preferences shown for a load index (R-IDX4).
const (
	Light   = "Light"
	Normal  = "Normal"
	Heavy   = "Heavy"
	Blocked = "Blocked"
)

// Host is what the load index needs of one session host.
type Host struct {
	// Sessions is the current session count (R-S1).
	Sessions int
	// Metrics is the last sample, nil when the host never sent one.
	Metrics *vdibroker.Metrics
	// MetricsSessions is the session count when Metrics was sampled (R-LI6).
	MetricsSessions int
}

// Factors holds one value per sampled factor (everything but sessions).
type Factors struct {
	CPU, Memory, DiskQueue, DiskRead, DiskWrite float64
}

// Pool is the pool-wide state a host's index depends on.
type Pool struct {
	// AnyCustom is true when at least one host of the pool reports a valid
	// custom load value (R-IDX3).
	AnyCustom bool
	// PerSession is the pool's mean per-session value of each factor, used
	// by R-LI6 for a host that had no session when it was sampled.
	PerSession Factors
}

// ValidCustom reports whether m carries a usable custom load value (R-IDX3):
// present and not negative (values above 100 are capped, not refused).
func ValidCustom(m *vdibroker.Metrics) bool {
	return m != nil && m.CustomLoadValue != nil && *m.CustomLoadValue >= 0
}

// Percent returns 100 × value / threshold rounded to the nearest integer and
// clamped to 0..100 (R-IDX1). A threshold ≤ 0 means the factor is not used
// and gives 0.
//
// Example: cpu 45 % with cpuThreshold 60 → 100 × 45 / 60 = 75.
func Percent(value, threshold float64) int {
	if threshold <= 0 {
		return 0
	}
	return clamp(math.Round(100 * value / threshold))
}

// SessionFactor is the session factor of R-IDX1: 100 × sessions / limit,
// rounded and clamped, or the session count itself (clamped to 100) when the
// limit is "no limit" (999999) or not positive.
//
// Example: 3 sessions, limit 8 → 37.5 → 38.
func SessionFactor(sessions, limit int) int {
	if limit <= 0 || limit >= vdibroker.NoSessionLimit {
		return clamp(float64(sessions))
	}
	return clamp(math.Round(100 * float64(sessions) / float64(limit)))
}

// Compensate applies R-LI6: each sampled factor is raised by the estimated
// load of the sessions placed since the sample, (value / sessionsAtSample) ×
// placed, or perSession × placed when the host had no session at sample time.
// placed is sessions − sessionsAtSample, never negative (sessions that ended
// since the sample do not lower the figures: we choose the cautious side).
//
// Example: cpu 40 % sampled with 4 sessions, now 6 → 40 + 40/4 × 2 = 60.
func Compensate(f Factors, sessionsAtSample, sessions int, perSession Factors) Factors {
	placed := sessions - sessionsAtSample
	if placed <= 0 {
		return f
	}
	p := float64(placed)
	if sessionsAtSample > 0 {
		s := float64(sessionsAtSample)
		return Factors{
			CPU:       f.CPU + f.CPU/s*p,
			Memory:    f.Memory + f.Memory/s*p,
			DiskQueue: f.DiskQueue + f.DiskQueue/s*p,
			DiskRead:  f.DiskRead + f.DiskRead/s*p,
			DiskWrite: f.DiskWrite + f.DiskWrite/s*p,
		}
	}
	return Factors{
		CPU:       f.CPU + perSession.CPU*p,
		Memory:    f.Memory + perSession.Memory*p,
		DiskQueue: f.DiskQueue + perSession.DiskQueue*p,
		DiskRead:  f.DiskRead + perSession.DiskRead*p,
		DiskWrite: f.DiskWrite + perSession.DiskWrite*p,
	}
}

// FactorsOf returns the sampled factors of m (zero when m is nil).
func FactorsOf(m *vdibroker.Metrics) Factors {
	if m == nil {
		return Factors{}
	}
	return Factors{
		CPU:       m.CPUPercent,
		Memory:    m.MemoryPercent,
		DiskQueue: m.DiskQueueLength,
		DiskRead:  m.DiskReadLatencyMs,
		DiskWrite: m.DiskWriteLatencyMs,
	}
}

// Compute returns the load index placement uses for h (R-IDX1..3, R-LI6):
//   - with useCustomScript: the custom value capped at 100; 25 for a host
//     without a valid value while another host reports one; Off (-1) for all
//     hosts when none does;
//   - otherwise the largest enabled factor index, the sampled factors first
//     raised by Compensate; the session factor when no factor is enabled.
//
// A host without a metrics sample has sampled factors 0 (we choose: it is
// new and idle) but still its session factor.
func Compute(lb vdibroker.LoadBalancing, maxSessionLimit int, h Host, pool Pool) int {
	if lb.UseCustomScript {
		switch {
		case ValidCustom(h.Metrics):
			return min(*h.Metrics.CustomLoadValue, 100)
		case pool.AnyCustom:
			return NoCustomValue
		default:
			return Off
		}
	}
	f := FactorsOf(h.Metrics)
	if h.Metrics != nil {
		f = Compensate(f, h.MetricsSessions, h.Sessions, pool.PerSession)
	}
	idx, enabled := FactorIndex(lb, f)
	return WithSessions(lb, maxSessionLimit, h.Sessions, idx, enabled)
}

// FactorIndex is R-IDX1 and R-IDX2 over the sampled factors f: the largest
// enabled factor index, and whether any factor is enabled. A caller that
// recomputes a host's index often may keep it per sample: for a host with
// no session placed since its sample, Compute is WithSessions of
// FactorIndex(lb, FactorsOf(h.Metrics)).
func FactorIndex(lb vdibroker.LoadBalancing, f Factors) (idx int, enabled bool) {
	use := func(value, threshold float64) {
		if threshold > 0 {
			enabled = true
			idx = max(idx, Percent(value, threshold))
		}
	}
	use(f.CPU, lb.CPUThreshold)
	use(f.Memory, lb.MemoryThreshold)
	use(f.DiskQueue, lb.DiskQueueLengthThreshold)
	use(f.DiskRead, lb.DiskReadLatencyThreshold)
	use(f.DiskWrite, lb.DiskWriteLatencyThreshold)
	return idx, enabled
}

// WithSessions completes a FactorIndex result as Compute does: the session
// factor counts when includeSessionCount is on or no other factor is.
func WithSessions(lb vdibroker.LoadBalancing, maxSessionLimit, sessions, idx int, enabled bool) int {
	if lb.IncludeSessionCount || !enabled {
		idx = max(idx, SessionFactor(sessions, maxSessionLimit))
	}
	return idx
}

// Displayed returns the load index to show for h: Compute's value, except
// that a host without a valid custom value shows -1 under useCustomScript
// even while it counts as 25 for placement (R-IDX3).
func Displayed(lb vdibroker.LoadBalancing, maxSessionLimit int, h Host, pool Pool) int {
	if lb.UseCustomScript && !ValidCustom(h.Metrics) {
		return Off
	}
	return Compute(lb, maxSessionLimit, h, pool)
}

// Preference names a load index for display (R-IDX4): 0..24 Light, 25..74
// Normal, 75..99 Heavy, 100 Blocked; "" for -1 (load balancing off).
func Preference(idx int) string {
	switch {
	case idx < 0:
		return ""
	case idx < 25:
		return Light
	case idx < 75:
		return Normal
	case idx < 100:
		return Heavy
	default:
		return Blocked
	}
}

func clamp(v float64) int {
	switch {
	case v < 0 || math.IsNaN(v):
		return 0
	case v > 100:
		return 100
	default:
		return int(v)
	}
}

// quantum is the fixed-point scale of Mean: sums of factor values are kept
// as integers of 1e-6, so adding and removing hosts in any order gives the
// same mean bit for bit (the indexed engine and the reference must agree).
const quantum = 1e6

// Mean accumulates the pool's mean per-session value of each factor (R-LI6):
// Σ value / Σ sessionsAtSample over the hosts whose sample had at least one
// session (a session-weighted mean). The zero value is an empty pool.
type Mean struct {
	sum      [5]int64
	sessions int64
}

// Add counts one host's sample in the mean; hosts without a sample or
// sampled with no session do not count.
func (m *Mean) Add(metrics *vdibroker.Metrics, sessionsAtSample int) {
	m.add(metrics, sessionsAtSample, 1)
}

// Remove takes back what Add counted for the same arguments.
func (m *Mean) Remove(metrics *vdibroker.Metrics, sessionsAtSample int) {
	m.add(metrics, sessionsAtSample, -1)
}

func (m *Mean) add(metrics *vdibroker.Metrics, sessionsAtSample int, sign int64) {
	if metrics == nil || sessionsAtSample <= 0 {
		return
	}
	f := FactorsOf(metrics)
	for i, v := range [5]float64{f.CPU, f.Memory, f.DiskQueue, f.DiskRead, f.DiskWrite} {
		m.sum[i] += sign * quantize(v)
	}
	m.sessions += sign * int64(sessionsAtSample)
}

// PerSession returns the mean per-session value of each factor, 0 while no
// host has been sampled with sessions ("0 while unknown").
func (m *Mean) PerSession() Factors {
	if m.sessions <= 0 {
		return Factors{}
	}
	s := float64(m.sessions)
	v := func(i int) float64 { return float64(m.sum[i]) / quantum / s }
	return Factors{CPU: v(0), Memory: v(1), DiskQueue: v(2), DiskRead: v(3), DiskWrite: v(4)}
}

// quantize turns a factor value into fixed point, clamping to a range where
// sums over 100,000 hosts cannot overflow.
func quantize(v float64) int64 {
	switch {
	case !(v > 0): // negative or NaN
		return 0
	case v > 1e9:
		v = 1e9
	}
	return int64(math.Round(v * quantum))
}

// PoolOf computes the pool-wide inputs from all of a pool's hosts: whether
// any reports a custom value (R-IDX3) and the mean per-session value of each
// factor (R-LI6). Present uses it to show each host's loadIndex:
//
//	pool := loadindex.PoolOf(hosts)
//	shown := loadindex.Displayed(p.LoadBalancing, p.MaxSessionLimit, hosts[i], pool)
func PoolOf(hosts []Host) Pool {
	var mean Mean
	var p Pool
	for _, h := range hosts {
		mean.Add(h.Metrics, h.MetricsSessions)
		p.AnyCustom = p.AnyCustom || ValidCustom(h.Metrics)
	}
	p.PerSession = mean.PerSession()
	return p
}
