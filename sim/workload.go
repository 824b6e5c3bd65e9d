package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// never is a time past any scenario's end: an event that does not happen.
const never = time.Duration(math.MaxInt64)

// visit is what one user will do if a host takes the session: arrive, maybe
// step away once or twice, and log off. Times are from the scenario start;
// a time at or after the scenario's end does not happen. Every algorithm and
// limit of a run replays the same visits (common random numbers), so their
// differences come from placement alone.
type visit struct {
	arrive, end time.Duration
	// away are up to two disconnect periods [from, back) inside the session;
	// back == never or back >= end means the user never came back.
	away [2]span
}

type span struct{ from, back time.Duration }

// workload is every user's visit, generated once per scenario.
type workload struct {
	users  []string
	visits []visit
}

// Stream ids of the scenario seed: the workload and the placement draws
// are separate streams, so changing an algorithm cannot change who arrives.
const (
	streamWorkload  = 1
	streamPlacement = 2
)

// newWorkload draws every visit from the scenario seed.
func newWorkload(sc *Scenario) *workload {
	rng := rand.New(rand.NewPCG(sc.Seed, streamWorkload))
	total := 0
	for _, g := range sc.Users {
		total += g.Count
	}
	w := &workload{users: make([]string, 0, total), visits: make([]visit, 0, total)}
	width := len(fmt.Sprint(total))
	mean := minutes(sc.Session.MeanMinutes)
	for _, g := range sc.Users {
		for i := 0; i < g.Count; i++ {
			w.users = append(w.users, fmt.Sprintf("user%0*d", width, len(w.users)+1))
			var v visit
			switch g.Pattern {
			case PatternStorm:
				v = stormVisit(rng, g, i, mean)
			default:
				v = workdayVisit(rng, g, mean)
			}
			v.away[1] = randomAway(rng, v, sc.Session)
			w.visits = append(w.visits, v)
		}
	}
	return w
}

// stormVisit: arrivals evenly spread within Over (i*Over/Count), exponential
// duration.
func stormVisit(rng *rand.Rand, g UserGroup, i int, mean time.Duration) visit {
	at := g.Start + time.Duration(float64(g.Over)*float64(i)/float64(g.Count))
	return visit{arrive: at, end: at + exponential(rng, mean), away: [2]span{{never, never}, {never, never}}}
}

// workdayVisit: arrival over the morning ramp (triangular, peaking in the
// middle of Over), exponential duration capped by the end of the working
// day (WorkHours after Start, plus up to an hour), and a lunch break: half
// of those connected at lunch (the middle of the working day, plus up to 30
// minutes) disconnect for 30 to 60 minutes.
func workdayVisit(rng *rand.Rand, g UserGroup, mean time.Duration) visit {
	at := g.Start + time.Duration(float64(g.Over)*(rng.Float64()+rng.Float64())/2)
	dayEnd := g.Start + g.WorkHours + time.Duration(rng.Float64()*float64(time.Hour))
	v := visit{arrive: at, end: min(at+exponential(rng, mean), dayEnd), away: [2]span{{never, never}, {never, never}}}
	lunch := g.Start + g.WorkHours/2 + time.Duration(rng.Float64()*float64(30*time.Minute))
	breakLen := 30*time.Minute + time.Duration(rng.Float64()*float64(30*time.Minute))
	if rng.Float64() < 0.5 && v.arrive < lunch && lunch < v.end {
		v.away[0] = span{from: lunch, back: lunch + breakLen}
	}
	return v
}

// randomAway is the session's random disconnect (disconnectProbability):
// at a uniform point of the session, away for an exponential time. It is
// dropped when it would overlap the lunch break. The draws happen whether or
// not the disconnect is kept, so one user's choice never shifts another's.
func randomAway(rng *rand.Rand, v visit, s SessionSpec) span {
	coin, where := rng.Float64(), rng.Float64()
	away := exponential(rng, minutes(s.ReconnectMeanMinutes))
	if coin >= s.DisconnectProbability {
		return span{never, never}
	}
	from := v.arrive + time.Duration(where*float64(v.end-v.arrive))
	sp := span{from: from, back: from + away}
	if from <= v.arrive || from >= v.end {
		return span{never, never}
	}
	if l := v.away[0]; l.from != never && from < l.back && sp.back > l.from {
		return span{never, never}
	}
	return sp
}

func exponential(rng *rand.Rand, mean time.Duration) time.Duration {
	d := time.Duration(rng.ExpFloat64() * float64(mean))
	if d < time.Second {
		d = time.Second // a session lasts at least a second
	}
	return d
}

func minutes(m float64) time.Duration { return time.Duration(m * float64(time.Minute)) }
