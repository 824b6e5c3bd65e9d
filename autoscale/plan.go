package autoscale

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/vdibroker/vdibroker"
)

// Host is what the arithmetic needs of one session host.
type Host struct {
	Name string
	// Placeable: its status takes sessions (R-H1 Available or
	// NeedsAssistance).
	Placeable bool
	// Power is its power state (vdibroker.Power*, PowerStartTimedOut or
	// PowerStartShuttingDown).
	Power string
	// SilentRunning: Power is Unknown because its agent fell silent while
	// it was recorded Running (vdibroker.SilentRunning). Started after the
	// other Unknown hosts: its machine may run with a crashed agent.
	SilentRunning bool
	// Unheard: Power is Unknown and its agent silent, but the broker
	// started (or its store came back) less than the heartbeat timeout
	// ago, so its agent may just not have reported yet
	// (vdibroker.AgentSilent). Neither capacity nor startable, and while
	// a pool has one no host of it is started: its capacity is not known.
	Unheard bool
	// AdminDrained: an admin set allowNewSession false. The autoscaler
	// leaves such a host alone: it neither starts, stops nor undrains it,
	// and it is not capacity.
	AdminDrained bool
	// AutoscaleDrained: the autoscaler drains it to stop it (R-A3).
	AutoscaleDrained bool
	// Sessions are its open sessions (Pending, Active, Disconnected);
	// Active those of them Active.
	Sessions, Active int
}

// PowerStartTimedOut is the Power of a host the autoscaler started that
// has not come up within Config.StartTimeout: it is no longer counted as
// capacity to come, so the demand starts another host, and it is not
// started again (it is still Starting for the power service).
const PowerStartTimedOut = "StartTimedOut"

// PowerStartShuttingDown is the Power of a host Starting whose agent said
// since the start that it shuts down (vdibroker.ShuttingDownAfterStart):
// its machine is going down, so it is not capacity to come and the demand
// starts another host; it is not started either (R-A2, R-A4).
const PowerStartShuttingDown = "StartShuttingDown"

// Input is a pool at one evaluation.
type Input struct {
	Phase    string
	Schedule *vdibroker.ScalingSchedule
	// MaxSessionLimit is the pool's maxSessionLimit.
	MaxSessionLimit int
	Hosts           []Host
}

// Decision is what Plan decided, with the figures it decided on.
type Decision struct {
	// Hosts: the hosts the autoscaler manages (not admin-drained).
	Hosts int
	// Running: running placeable hosts, not drained (R-A1); Starting:
	// hosts being started, counted as capacity to come, so that the same
	// demand does not start a second host.
	Running, Starting int
	Sessions          int
	Available         int     // MaxSessionLimit × Running (R-A1)
	UsedPct           float64 // Sessions / Available in percent
	ThresholdPct      int
	MinimumHosts      int
	MaximumHosts      *int
	// Start lists hosts to start, Undrain running hosts whose autoscale
	// drain to lift (capacity they give back at once), Drain hosts to
	// autoscale-drain to stop them, each with its reason.
	Start, Undrain, Drain []Step
	// Note says why nothing was done when no step was decided.
	Note string
}

// Step is one host to act on and why.
type Step struct {
	Host   string
	Reason string
}

// Figures of one phase: the capacity threshold and the floor and cap of
// running hosts, in percent of Hosts. AVD has no threshold for peak and
// off-peak: peak uses ramp-up's, off-peak ramp-down's.
func figures(phase string, sc *vdibroker.ScalingSchedule) (threshold, minPct int, maxPct *int) {
	switch phase {
	case vdibroker.PhaseRampUp:
		return sc.RampUpCapacityThresholdPct, sc.RampUpMinimumHostsPct, nil
	case vdibroker.PhasePeak:
		if sc.PeakMinimumHostsPct != nil {
			return sc.RampUpCapacityThresholdPct, *sc.PeakMinimumHostsPct, nil
		}
		return sc.RampUpCapacityThresholdPct, 0, nil
	case vdibroker.PhaseRampDown:
		return sc.RampDownCapacityThresholdPct, sc.RampDownMinimumHostsPct, nil
	default: // off-peak
		return sc.RampDownCapacityThresholdPct, sc.RampDownMinimumHostsPct, sc.OffPeakMaximumHostsPct
	}
}

// stops reports whether a phase stops hosts: ramp-down and off-peak.
// Ramp-up never does (R-A2), nor does peak.
func stops(phase string) bool {
	return phase == vdibroker.PhaseRampDown || phase == vdibroker.PhaseOffPeak
}

// Plan decides an evaluation of a pooled pool (R-A1..R-A3).
//
// With L = maxSessionLimit, S = open sessions of the pool (on every host:
// users of a drained host come back to the pool), R = running placeable
// hosts that are not drained, C = hosts starting, T = the phase's
// capacity threshold and N = the hosts the autoscaler manages:
//
//   - available = L × R and used = S / available (R-A1);
//   - hosts needed for the demand: need = ceil(S × 100 / (L × T)), the
//     fewest with used ≤ T; the floor: min = ceil(minimumHostsPct × N /
//     100); off-peak the cap max = floor(offPeakMaximumHostsPct × N / 100)
//     (a cap is never exceeded, and wins over the floor and the demand);
//   - when R + C < max(need, min): give capacity back, first by lifting
//     autoscale drains (hosts with the most sessions first, they are
//     running), then by starting stopped hosts (R-A2), then Unknown ones
//     whose agents are silent, those recorded Running last (R-A4), up to
//     the cap; none while a host is Unheard (the broker started or its
//     store came back too lately to know whose agent is silent);
//   - in ramp-up and peak every autoscale drain is lifted (a day must not
//     begin with hosts left drained);
//   - in ramp-down and off-peak, drain hosts, fewest sessions first, while
//     the hosts left keep used ≤ T and at least min running (R-A3),
//     several in one evaluation if the numbers allow; off-peak also the
//     hosts above the cap.
func Plan(in Input) Decision {
	threshold, minPct, maxPct := figures(in.Phase, in.Schedule)
	d := Decision{ThresholdPct: threshold}
	var running, starting, stopped, unknown, draining []Host
	unheard := 0
	L := max(in.MaxSessionLimit, 1)
	for _, h := range in.Hosts {
		// A host counts at most its limit: more than that are sessions
		// its agent reported (R-S2 adoption), and one host's credential
		// must not be able to make the autoscaler start the whole pool
		// by reporting two thousand made-up users.
		d.Sessions += min(h.Sessions, L)
		if h.AdminDrained {
			continue
		}
		d.Hosts++
		switch {
		case h.Power == vdibroker.PowerStarting:
			starting = append(starting, h)
		case h.Power == vdibroker.PowerStopped:
			stopped = append(stopped, h)
		case h.Unheard:
			unheard++
		case h.Power == vdibroker.PowerUnknown && !h.Placeable && !h.AutoscaleDrained:
			// A start that failed, a host no driver has told of, or one
			// that ran, and whose agent is silent: started after the
			// Stopped ones. One the autoscaler drains is not (as start
			// VM on connect, R-A4): its drain stops it.
			unknown = append(unknown, h)
		case h.Power == vdibroker.PowerStopping || h.Power == PowerStartTimedOut || h.Power == PowerStartShuttingDown || !h.Placeable:
			// Neither capacity nor startable: on its way down (its
			// start timed out, or its agent said since the start that
			// it shuts down), or running and saying it shuts down.
		case h.AutoscaleDrained:
			draining = append(draining, h)
		default:
			running = append(running, h)
		}
	}
	d.Running, d.Starting = len(running), len(starting)
	d.Available = L * d.Running
	d.UsedPct = usedPct(d.Sessions, d.Available)
	d.MinimumHosts = ceilDiv(minPct*d.Hosts, 100)
	cap := d.Hosts
	if maxPct != nil {
		c := *maxPct * d.Hosts / 100
		d.MaximumHosts = &c
		cap = c
		d.MinimumHosts = min(d.MinimumHosts, c)
	}
	need := hostsFor(d.Sessions, L, threshold)
	have := d.Running + d.Starting
	want := min(max(need, d.MinimumHosts), cap)

	if !stops(in.Phase) {
		for _, h := range draining {
			d.Undrain = append(d.Undrain, Step{h.Name, fmt.Sprintf("%s: the autoscaler drains no host (R-A2)", in.Phase)})
		}
		have += len(draining)
	} else if have < want {
		// Lift drains first: those hosts run, their capacity is back at once.
		slices.SortStableFunc(draining, func(a, b Host) int { return cmp.Compare(b.Sessions, a.Sessions) })
		for _, h := range draining {
			if have >= want {
				break
			}
			d.Undrain = append(d.Undrain, Step{h.Name, reasonMore(d, need, have, want)})
			have++
		}
	}
	byName := func(a, b Host) int { return cmp.Compare(a.Name, b.Name) }
	slices.SortStableFunc(stopped, byName)
	// The silent Running ones after the other Unknown ones (R-A4).
	slices.SortStableFunc(unknown, func(a, b Host) int {
		return cmp.Or(compareBool(a.SilentRunning, b.SilentRunning), byName(a, b))
	})
	for _, h := range append(stopped, unknown...) {
		if have >= want || unheard > 0 {
			break
		}
		d.Start = append(d.Start, Step{h.Name, reasonMore(d, need, have, want)})
		have++
	}
	if have < want && unheard > 0 {
		d.Note = fmt.Sprintf("%s wanted, %d running or starting; the agents of %s have not reported since the broker started or its store came back: no host is started until they have had the heartbeat timeout to (R-A4)", vdibroker.Plural(want, "host"), have, vdibroker.Plural(unheard, "host"))
	}
	if have < want {
		if d.Note == "" {
			d.Note = fmt.Sprintf("%s wanted, %d running or starting: no stopped host left to start", vdibroker.Plural(want, "host"), have)
		}
	}
	if stops(in.Phase) && len(d.Start) == 0 && len(d.Undrain) == 0 {
		// R-A3: fewest sessions first (then name, for a stable order).
		slices.SortStableFunc(running, func(a, b Host) int {
			return cmp.Or(cmp.Compare(a.Sessions, b.Sessions), cmp.Compare(a.Name, b.Name))
		})
		left := d.Running + d.Starting
		for _, h := range running {
			if left <= 0 {
				break
			}
			after := left - 1
			overCap := maxPct != nil && left > cap
			fits := after >= d.MinimumHosts && d.Sessions*100 <= threshold*L*after
			if !overCap && !fits {
				break
			}
			var why string
			if overCap {
				why = fmt.Sprintf("off-peak: %s running or starting, above the cap of %d (offPeakMaximumHostsPct)", vdibroker.Plural(left, "host"), cap)
			} else {
				why = fmt.Sprintf("fewest sessions (%d); without it %s give capacity %d, used %.1f%% ≤ %d%% (R-A3), minimum %d",
					h.Sessions, vdibroker.Plural(after, "host"), L*after, usedPct(d.Sessions, L*after), threshold, d.MinimumHosts)
			}
			d.Drain = append(d.Drain, Step{h.Name, why})
			left = after
		}
	}
	if d.Note == "" && len(d.Start)+len(d.Undrain)+len(d.Drain) == 0 {
		d.Note = noteIdle(in.Phase, d, need, want)
	}
	return d
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// reasonMore is the reason of a start or undrain.
func reasonMore(d Decision, need, have, want int) string {
	if need >= want && need > have {
		return fmt.Sprintf("used %.1f%% > threshold %d%% (R-A2): %s need %s, %d running or starting",
			d.UsedPct, d.ThresholdPct, vdibroker.Plural(d.Sessions, "session"), vdibroker.Plural(need, "host"), have)
	}
	return fmt.Sprintf("minimum %s (R-A2), %d running or starting", vdibroker.Plural(d.MinimumHosts, "host"), have)
}

func noteIdle(phase string, d Decision, need, want int) string {
	switch {
	case d.UsedPct > float64(d.ThresholdPct) && d.Starting > 0:
		return fmt.Sprintf("used %.1f%% > threshold %d%%: the %d hosts starting bring %d, enough for the %d sessions (no second start for the same demand)",
			d.UsedPct, d.ThresholdPct, d.Starting, d.Running+d.Starting, d.Sessions)
	case !stops(phase):
		return fmt.Sprintf("%s: used %.1f%% ≤ threshold %d%% with %d running and %d starting, minimum %d; %s stops no host (R-A2)",
			phase, d.UsedPct, d.ThresholdPct, d.Running, d.Starting, d.MinimumHosts, phase)
	case d.Running+d.Starting <= d.MinimumHosts:
		return fmt.Sprintf("%s running or starting, the minimum is %d", vdibroker.Plural(d.Running+d.Starting, "host"), d.MinimumHosts)
	default:
		return fmt.Sprintf("stopping one more host would leave %s for %s, used above %d%% (R-A3)",
			vdibroker.Plural(d.Running+d.Starting-1, "host"), vdibroker.Plural(d.Sessions, "session"), d.ThresholdPct)
	}
}

// hostsFor is the fewest hosts of limit sessions each on which sessions
// keep used capacity at or under threshold percent: ceil(S×100/(L×T)).
func hostsFor(sessions, limit, threshold int) int {
	if sessions == 0 {
		return 0
	}
	return ceilDiv(sessions*100, limit*max(threshold, 1))
}

func usedPct(sessions, available int) float64 {
	if available == 0 {
		if sessions == 0 {
			return 0
		}
		return 100
	}
	return math.Round(float64(sessions)*1000/float64(available)) / 10
}

func ceilDiv(a, b int) int {
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}
