package sim

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// tb is what the helpers need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func parse(tb tb, src string) *Scenario {
	tb.Helper()
	sc, err := Parse("test.yaml", []byte(src))
	if err != nil {
		tb.Fatalf("parse:\n%s\n%v", src, err)
	}
	return sc
}

func run(tb tb, sc *Scenario) *Report {
	tb.Helper()
	rep, err := Run(context.Background(), sc, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return rep
}

// TestDepthFirstKnownAnswer (R-DF2, R-C4, R-C5): DepthFirst, 3 hosts, limit
// 2, seven users at once: the first host fills to 2 before the next gets
// any, so six are placed 2+2+2 and the seventh is rejected.
func TestDepthFirstKnownAnswer(t *testing.T) {
	sc := parse(t, `
duration: 1h
pool: {hosts: 3, maxSessionLimit: 2}
algorithms: [DepthFirst]
users:
  - {pattern: storm, count: 7, start: 0s, over: 0s}
session: {meanMinutes: 43200}
`)
	rep := run(t, sc)
	got := rep.Results[0]
	if got.Placed != 6 || got.Rejected != 1 || got.LimitViolations != 0 {
		t.Errorf("placed %d rejected %d violations %d, want 6, 1, 0", got.Placed, got.Rejected, got.LimitViolations)
	}
	if diff := cmp.Diff([]int{2, 2, 2}, got.FinalSessions); diff != "" {
		t.Errorf("final sessions per host (-want +got):\n%s", diff)
	}
	// One interval got all six: even share ceil(6/3) = 2; host1 got 2.
	if got.StormOvershoot != 0 || got.MaxSessionsOnAHost != 2 {
		t.Errorf("stormOvershoot %d maxSessionsOnAHost %d, want 0 and 2", got.StormOvershoot, got.MaxSessionsOnAHost)
	}
}

// TestBreadthFirstSeedExample (R-BF2): nine hosts with 11..19 sessions; the
// new session goes to one of the five least loaded (11..15), each about a
// fifth of the time, never to the others. 200 seeds: each of the five is
// expected 40 times; fewer than 15 would be a 5-sigma fluke.
func TestBreadthFirstSeedExample(t *testing.T) {
	chosen := make([]int, 9)
	for seed := 1; seed <= 200; seed++ {
		sc := parse(t, fmt.Sprintf(`
seed: %d
duration: 1h
pool:
  hosts: 9
  maxSessionLimit: 100
  initialSessions: [11, 12, 13, 14, 15, 16, 17, 18, 19]
algorithms: [BreadthFirst]
users: [{pattern: storm, count: 1}]
session: {meanMinutes: 43200}
`, seed))
		got := run(t, sc).Results[0]
		if got.Placed != 1 {
			t.Fatalf("seed %d: placed %d, want 1", seed, got.Placed)
		}
		for i, s := range got.FinalSessions {
			if s == 11+i+1 {
				chosen[i]++
			}
		}
	}
	for i, n := range chosen {
		if i < 5 && n < 15 {
			t.Errorf("host with %d sessions chosen %d of 200 times, want about 40", 11+i, n)
		}
		if i >= 5 && n > 0 {
			t.Errorf("host with %d sessions chosen %d times, want never (not among the ceil(9/2)=5 least loaded)", 11+i, n)
		}
	}
}

// TestExamples: every example runs with limitViolations 0 (R-C4) and places
// or rejects every arrival.
func TestExamples(t *testing.T) {
	for _, name := range Examples() {
		t.Run(name, func(t *testing.T) {
			data, _ := Example(name)
			sc := parse(t, string(data))
			rep := run(t, sc)
			if want := len(sc.Algorithms) * len(sc.Pool.MaxSessionLimits); len(rep.Results) != want {
				t.Fatalf("%d results, want %d", len(rep.Results), want)
			}
			for _, r := range rep.Results {
				if r.LimitViolations != 0 {
					t.Errorf("%s limit %d: limitViolations %d", r.Algorithm, r.MaxSessionLimit, r.LimitViolations)
				}
				if r.MaxSessionsOnAHost > r.MaxSessionLimit {
					t.Errorf("%s limit %d: a host had %d sessions", r.Algorithm, r.MaxSessionLimit, r.MaxSessionsOnAHost)
				}
				if r.Placed+r.Rejected != arrivals(sc) {
					t.Errorf("%s limit %d: placed %d + rejected %d, want %d arrivals", r.Algorithm, r.MaxSessionLimit, r.Placed, r.Rejected, arrivals(sc))
				}
				if r.Reconnects == 0 {
					t.Errorf("%s limit %d: no reconnects although users disconnect", r.Algorithm, r.MaxSessionLimit)
				}
			}
		})
	}
}

func arrivals(sc *Scenario) int {
	n := 0
	for _, v := range newWorkload(sc).visits {
		if v.arrive < sc.Duration {
			n++
		}
	}
	return n
}

// TestLogonStormShape: in the storm example DepthFirst packs (one host takes
// a whole interval's logons) while BreadthFirst and LoadIndex spread them,
// and DepthFirst keeps fewer hosts busy. These are the differences the
// simulator exists to show; if they vanish, placement or the simulator broke.
func TestLogonStormShape(t *testing.T) {
	data, _ := Example("logon-storm")
	rep := run(t, parse(t, string(data)))
	by := map[string]Result{}
	for _, r := range rep.Results {
		by[r.Algorithm] = r
	}
	bf, df, li := by["BreadthFirst"], by["DepthFirst"], by["LoadIndex"]
	if df.MaxSessionsOnAHost != 16 || df.StormOvershoot <= bf.StormOvershoot {
		t.Errorf("DepthFirst max/host %d overshoot %d (BreadthFirst %d): want 16 and more than BreadthFirst", df.MaxSessionsOnAHost, df.StormOvershoot, bf.StormOvershoot)
	}
	if df.HostHours >= bf.HostHours || df.HostHours >= li.HostHours {
		t.Errorf("host hours: DepthFirst %.2f, BreadthFirst %.2f, LoadIndex %.2f: want DepthFirst lowest", df.HostHours, bf.HostHours, li.HostHours)
	}
	if li.PeakSpread >= df.PeakSpread || bf.PeakSpread >= df.PeakSpread {
		t.Errorf("peak spread: LoadIndex %d, BreadthFirst %d, DepthFirst %d: want DepthFirst highest", li.PeakSpread, bf.PeakSpread, df.PeakSpread)
	}
}

// TestDeterministic: two runs of the same scenario give report.json byte for
// byte, however many runs go in parallel.
func TestDeterministic(t *testing.T) {
	data, _ := Example("workday")
	sc := parse(t, string(data))
	var got [2][]byte
	for i, parallel := range []int{1, 2} {
		rep, err := Run(context.Background(), sc, Options{Parallel: parallel, NoSeries: i == 0})
		if err != nil {
			t.Fatal(err)
		}
		if got[i], err = rep.JSON(); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got[0], got[1]) {
		t.Fatalf("two runs differ:\n%s\n%s", got[0], got[1])
	}
	for _, field := range []string{"algorithm", "maxSessionLimit", "placed", "rejected", "limitViolations",
		"maxSessionsOnAHost", "peakSpread", "peakCpuPercent", "hostHours", "stormOvershoot"} {
		if !bytes.Contains(got[0], []byte(`"`+field+`"`)) {
			t.Errorf("report.json lacks %q", field)
		}
	}
	// A different seed is a different day.
	sc.Seed++
	other, err := Run(context.Background(), sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := other.JSON()
	if bytes.Equal(b, got[0]) {
		t.Error("seed+1 gave the same report")
	}
}

// TestProperties (R-C4, R-C1, R-S1): over random scenarios, no placement
// takes a host above maxSessionLimit, every arrival is placed or rejected,
// every reconnect returns to its host (Run fails otherwise), and the
// engine's counts equal the simulator's at the end (Run fails otherwise).
func TestProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		hosts := rapid.IntRange(1, 12).Draw(t, "hosts")
		limits := rapid.SliceOfNDistinct(rapid.IntRange(1, 12), 1, 3, rapid.ID[int]).Draw(t, "limits")
		algs := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"BreadthFirst", "DepthFirst", "LoadIndex"}), 1, 3, rapid.ID[string]).Draw(t, "algorithms")
		var initial []string
		for i := rapid.IntRange(0, hosts).Draw(t, "initialHosts"); i > 0; i-- {
			initial = append(initial, fmt.Sprint(rapid.IntRange(0, 15).Draw(t, "initial")))
		}
		var users []string
		for i := rapid.IntRange(1, 3).Draw(t, "groups"); i > 0; i-- {
			users = append(users, fmt.Sprintf("  - {pattern: %s, count: %d, start: %dm, over: %dm}",
				rapid.SampledFrom([]string{"storm", "workday"}).Draw(t, "pattern"),
				rapid.IntRange(1, 150).Draw(t, "count"),
				rapid.IntRange(0, 100).Draw(t, "start"),
				rapid.IntRange(0, 120).Draw(t, "over")))
		}
		src := fmt.Sprintf(`seed: %d
duration: %dm
metricsInterval: %ds
pool:
  hosts: %d
  maxSessionLimit: [%s]
  initialSessions: [%s]
algorithms: [%s]
loadBalancing: {cpuThreshold: %d, loadIndexThreshold: %d, connectingSessionThreshold: %d, minServersInQueue: %d}
users:
%s
session: {meanMinutes: %d, disconnectProbability: %.2f, reconnectMeanMinutes: %d, cpuPercentPerSession: %d}
`,
			rapid.Uint64Range(0, 1<<40).Draw(t, "seed"),
			rapid.IntRange(101, 720).Draw(t, "minutes"),
			rapid.IntRange(5, 600).Draw(t, "interval"),
			hosts, joinInts(limits), strings.Join(initial, ", "), strings.Join(algs, ", "),
			rapid.IntRange(0, 100).Draw(t, "cpuThreshold"),
			rapid.IntRange(0, 100).Draw(t, "loadIndexThreshold"),
			rapid.IntRange(0, 150).Draw(t, "connectingThreshold"),
			rapid.IntRange(1, 20).Draw(t, "minServers"),
			strings.Join(users, "\n"),
			rapid.IntRange(1, 600).Draw(t, "meanMinutes"),
			rapid.Float64Range(0, 1).Draw(t, "disconnect"),
			rapid.IntRange(1, 60).Draw(t, "reconnectMinutes"),
			rapid.IntRange(0, 30).Draw(t, "cpu"))
		sc := parse(t, src)
		rep := run(t, sc)
		for _, r := range rep.Results {
			if r.LimitViolations != 0 {
				t.Fatalf("%s limit %d: limitViolations %d\n%s", r.Algorithm, r.MaxSessionLimit, r.LimitViolations, src)
			}
			if r.Placed+r.Rejected != arrivals(sc) {
				t.Fatalf("%s: placed %d + rejected %d != %d arrivals", r.Algorithm, r.Placed, r.Rejected, arrivals(sc))
			}
			for i, s := range r.FinalSessions {
				base := 0
				if i < len(sc.Pool.InitialSessions) {
					base = sc.Pool.InitialSessions[i]
				}
				if s > max(r.MaxSessionLimit, base) {
					t.Fatalf("%s limit %d: host %d ends with %d sessions (initially %d)", r.Algorithm, r.MaxSessionLimit, i, s, base)
				}
			}
			if r.PeakCPUPercent < 0 || r.PeakCPUPercent > 100 || r.StormOvershoot < 0 || r.PeakSpread < 0 {
				t.Fatalf("out of range: %+v", r)
			}
		}
	})
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

// TestSpreadTracker: the O(1) min/max agrees with a scan after random ±1
// moves.
func TestSpreadTracker(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		counts := rapid.SliceOfN(rapid.IntRange(0, 5), 1, 8).Draw(t, "counts")
		st := make([]hostState, len(counts))
		for i, c := range counts {
			st[i].sessions = c
		}
		var tr spreadTracker
		tr.init(st)
		for step := rapid.IntRange(0, 50).Draw(t, "steps"); step > 0; step-- {
			i := rapid.IntRange(0, len(counts)-1).Draw(t, "host")
			to := counts[i] + 1
			if counts[i] > 0 && rapid.Bool().Draw(t, "down") {
				to = counts[i] - 1
			}
			tr.move(counts[i], to)
			counts[i] = to
			lo, hi := counts[0], counts[0]
			for _, c := range counts {
				lo, hi = min(lo, c), max(hi, c)
			}
			if tr.min != lo || tr.max != hi {
				t.Fatalf("tracker min/max %d/%d, scan %d/%d (counts %v)", tr.min, tr.max, lo, hi, counts)
			}
		}
	})
}

// TestStormArrivalsEven: a storm spreads its arrivals evenly within over.
func TestStormArrivalsEven(t *testing.T) {
	sc := parse(t, "pool: {hosts: 1}\nusers: [{pattern: storm, count: 4, start: 1m, over: 4m}]\n")
	w := newWorkload(sc)
	var got []string
	for _, v := range w.visits {
		got = append(got, v.arrive.String())
	}
	if diff := cmp.Diff([]string{"1m0s", "2m0s", "3m0s", "4m0s"}, got); diff != "" {
		t.Errorf("arrivals (-want +got):\n%s", diff)
	}
}

// TestPlotsWritten: a sweep writes per-result plots and the trade-off plot,
// as PNG and SVG.
func TestPlotsWritten(t *testing.T) {
	sc := parse(t, `
duration: 2h
pool: {hosts: 4, maxSessionLimit: [4, 8]}
algorithms: [BreadthFirst, DepthFirst]
users: [{pattern: storm, count: 20, over: 10m}]
`)
	dir := t.TempDir()
	if err := run(t, sc).WriteFiles(dir, false); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"report.json", "tradeoff.png", "tradeoff.svg", "sessions-DepthFirst-limit8.png",
		"sessions-BreadthFirst-limit4.svg", "cpu-DepthFirst-limit4.png", "cpu-BreadthFirst-limit8.svg"} {
		if !fileExists(dir + "/" + name) {
			t.Errorf("%s not written", name)
		}
	}
}

func fileExists(name string) bool {
	st, err := os.Stat(name)
	return err == nil && st.Size() > 0
}

// TestLoadIndexRoundRobin (R-LI3, R-LI4): sixteen users at once on eight
// idle hosts, limit 16: every host stays in bucket 1 (session factor
// 100*2/16 = 13 < 20), and round robin from the host after the last chosen
// gives each exactly two, so no host gets more than an even share.
func TestLoadIndexRoundRobin(t *testing.T) {
	got := run(t, parse(t, `
duration: 1h
pool: {hosts: 8, maxSessionLimit: 16}
algorithms: [LoadIndex]
users: [{pattern: storm, count: 16}]
session: {meanMinutes: 43200}
`)).Results[0]
	if diff := cmp.Diff([]int{2, 2, 2, 2, 2, 2, 2, 2}, got.FinalSessions); diff != "" {
		t.Errorf("final sessions (-want +got):\n%s", diff)
	}
	if got.StormOvershoot != 0 || got.PeakSpread != 1 {
		t.Errorf("stormOvershoot %d peakSpread %d, want 0 and 1", got.StormOvershoot, got.PeakSpread)
	}
}

// TestConnectingSessionsUntilTheAgentReports (R-LI2, R-S2): a host whose
// own connecting-session threshold is 1 takes no second session while its
// first is still Pending. Five users at once on three hosts: three placed,
// two rejected. The agents' heartbeat at 10s sees the three logged on
// (Active), so three more users at 1m are all placed, one per host.
func TestConnectingSessionsUntilTheAgentReports(t *testing.T) {
	got := run(t, parse(t, `
duration: 1h
pool: {hosts: 3, maxSessionLimit: 10}
algorithms: [LoadIndex]
loadBalancing: {hostConnectingSessionThreshold: 1}
users:
  - {pattern: storm, count: 5, start: 0s}
  - {pattern: storm, count: 3, start: 1m}
session: {meanMinutes: 43200}
`)).Results[0]
	if got.Placed != 6 || got.Rejected != 2 {
		t.Errorf("placed %d rejected %d, want 6 and 2", got.Placed, got.Rejected)
	}
	if diff := cmp.Diff([]int{2, 2, 2}, got.FinalSessions); diff != "" {
		t.Errorf("final sessions (-want +got):\n%s", diff)
	}
}

// TestHeartbeatsBetweenSamples (R-S2, R-LI2): agents report their sessions
// every 10 s, whatever the metrics interval (here 1 minute, so no sample
// between 0 s and 60 s). A host whose own connecting-session threshold is 1
// takes its first user at 0 s; the heartbeat at 10 s reports the logon, so
// the second user, at 15 s, is placed too. A simulator that reported only
// with the samples kept the first Pending until 60 s and refused the
// second.
func TestHeartbeatsBetweenSamples(t *testing.T) {
	got := run(t, parse(t, `
duration: 1h
metricsInterval: 1m
pool: {hosts: 1, maxSessionLimit: 10}
algorithms: [LoadIndex]
loadBalancing: {hostConnectingSessionThreshold: 1}
users:
  - {pattern: storm, count: 1, start: 0s}
  - {pattern: storm, count: 1, start: 15s}
session: {meanMinutes: 43200}
`)).Results[0]
	if got.Placed != 2 || got.Rejected != 0 {
		t.Errorf("placed %d rejected %d, want 2 and 0", got.Placed, got.Rejected)
	}
}

// TestRepeatedSampleKeepsCompensation (R-LI6, R-LI2): one host with two
// sessions sampled at 20 % CPU (10 % each); its own load-index threshold is
// 50. Ten users arrive over 25 s, between two samples (0 s and 30 s):
// the estimate 20 + 20/2 × placed reaches 50 after three, so three are
// placed and seven refused. The heartbeats at 10 s and 20 s repeat the
// sample of 0 s and must not make it new: taking it with the current
// count as its base (an old bug) dropped the estimate to 20 and let
// more in.
func TestRepeatedSampleKeepsCompensation(t *testing.T) {
	got := run(t, parse(t, `
duration: 1h
metricsInterval: 30s
pool: {hosts: 1, maxSessionLimit: 100, initialSessions: [2]}
algorithms: [LoadIndex]
loadBalancing: {cpuThreshold: 100, includeSessionCount: false, hostLoadIndexThreshold: 50}
users: [{pattern: storm, count: 10, start: 0s, over: 25s}]
session: {meanMinutes: 43200, cpuPercentPerSession: 10}
`)).Results[0]
	if got.Placed != 3 || got.Rejected != 7 {
		t.Errorf("placed %d rejected %d, want 3 and 7", got.Placed, got.Rejected)
	}
}
