package loadgen

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// PodTarget is one of the pod bench's targets, evaluated.
type PodTarget struct {
	Name     string  `json:"name"`
	Measured string  `json:"measured"` // the value and what it was computed from
	Target   string  `json:"target"`
	Value    float64 `json:"value"` // in Unit
	Limit    float64 `json:"limit"` // in Unit
	Unit     string  `json:"unit"`
	Pass     bool    `json:"pass"`
}

// evaluate fills res.Targets and res.Pass. A target with nothing measured
// fails.
func evaluate(res *PodResult) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	large := fmt.Sprintf("%d hosts", res.Hosts)
	small := fmt.Sprintf("%d hosts", res.SmallHosts)
	hbTarget := 0.99 * res.Heartbeats.OfferedRate
	t := []PodTarget{
		{
			Name:     fmt.Sprintf("dry-run rate, %s / %s", large, small),
			Measured: fmt.Sprintf("%.2f (%.1f/s / %.1f/s)", res.DryRunRatio, res.DryRunLarge.Rate, res.DryRunSmall.Rate),
			Target:   ">= 0.70", Value: res.DryRunRatio, Limit: 0.7, Unit: "ratio",
			Pass: res.DryRunSmall.OK > 0 && res.DryRunRatio >= 0.7,
		},
		{
			Name:     fmt.Sprintf("connect rate, %s / %s", large, small),
			Measured: fmt.Sprintf("%.2f (%.1f/s / %.1f/s)", res.ConnectRatio, res.ConnectLarge.Rate, res.ConnectSmall.Rate),
			Target:   ">= 0.70", Value: res.ConnectRatio, Limit: 0.7, Unit: "ratio",
			Pass: res.ConnectSmall.OK > 0 && res.ConnectRatio >= 0.7,
		},
		{
			Name: "heartbeats handled, after the first interval",
			Measured: fmt.Sprintf("%.1f/s of %.1f/s offered (%d hosts every %s)",
				res.Heartbeats.HandledRate, res.Heartbeats.OfferedRate, res.Heartbeats.Hosts, res.Heartbeats.Interval),
			Target: fmt.Sprintf(">= %.1f/s (99%% of offered)", hbTarget),
			Value:  res.Heartbeats.HandledRate, Limit: hbTarget, Unit: "/s",
			Pass: res.Heartbeats.OK > 0 && res.Heartbeats.HandledRate >= hbTarget,
		},
		beatP99Target(res.Heartbeats.ByPhase),
		{
			Name:     "connect p99, " + large,
			Measured: fmt.Sprintf("%s (%d connects)", fmtLatency(res.ConnectLarge.P99), res.ConnectLarge.Requests),
			Target:   "< 100ms", Value: ms(res.ConnectLarge.P99), Limit: 100, Unit: "ms",
			Pass: res.ConnectLarge.OK > 0 && res.ConnectLarge.P99 < 100*time.Millisecond,
		},
		{
			Name: "/metrics scrape, slowest",
			Measured: fmt.Sprintf("%s (%d scrapes, p50 %s, %d with store_up 0)", fmtLatency(res.MetricsScrapes.Max),
				res.MetricsScrapes.Requests, fmtLatency(res.MetricsScrapes.P50), res.MetricsStoreDown),
			Target: "< 1s, store_up 1", Value: ms(res.MetricsScrapes.Max), Limit: 1000, Unit: "ms",
			Pass: res.MetricsScrapes.OK > 0 && res.MetricsScrapes.OK == res.MetricsScrapes.Requests &&
				res.MetricsStoreDown == 0 && res.MetricsScrapes.Max < time.Second,
		},
		{
			Name:     "console overview, slowest",
			Measured: fmt.Sprintf("%s (%d pages, p50 %s)", fmtLatency(res.ConsoleOverview.Max), res.ConsoleOverview.Requests, fmtLatency(res.ConsoleOverview.P50)),
			Target:   "< 500ms", Value: ms(res.ConsoleOverview.Max), Limit: 500, Unit: "ms",
			Pass: res.ConsoleOverview.OK > 0 && res.ConsoleOverview.OK == res.ConsoleOverview.Requests && res.ConsoleOverview.Max < 500*time.Millisecond,
		},
		{
			Name: fmt.Sprintf("user portal's first page (%d resources), p99", PortalResources),
			Measured: fmt.Sprintf("%s (%d pages, p50 %s, slowest %s)", fmtLatency(res.PortalHome.P99), res.PortalHome.Requests,
				fmtLatency(res.PortalHome.P50), fmtLatency(res.PortalHome.Max)),
			Target: "< 200ms", Value: ms(res.PortalHome.P99), Limit: 200, Unit: "ms",
			Pass: res.PortalHome.OK > 0 && res.PortalHome.OK == res.PortalHome.Requests && res.PortalHome.P99 < 200*time.Millisecond,
		},
		{
			Name:     "broker RSS, peak while measuring",
			Measured: fmt.Sprintf("%s (VmHWM %s)", mib(res.BrokerRSS), mib(res.BrokerHWM)),
			Target:   "< 1 GiB", Value: float64(res.BrokerRSS) / (1 << 20), Limit: 1024, Unit: "MiB",
			Pass: res.BrokerRSS > 0 && res.BrokerRSS < 1<<30,
		},
	}
	res.Targets = t
	res.Pass = true
	for _, x := range t {
		res.Pass = res.Pass && x.Pass
	}
}

// beatP99Limit is the heartbeats' round trip at p99 that no measured
// phase may reach: heartbeats never wait behind a storm of connects.
const beatP99Limit = 250 * time.Millisecond

// beatP99Target is the target on the heartbeats' p99 round trip in every
// measured phase: it is judged by the slowest phase's, and fails when a
// phase answered none.
func beatP99Target(phases []HeartbeatPhase) PodTarget {
	t := PodTarget{Name: "heartbeat p99, every phase", Target: "< 250ms", Limit: float64(beatP99Limit) / float64(time.Millisecond), Unit: "ms",
		Pass: len(phases) > 0, Measured: "no phase measured"}
	var worst *HeartbeatPhase
	for i := range phases {
		p := &phases[i]
		if p.OK == 0 || p.P99 >= beatP99Limit {
			t.Pass = false
		}
		if worst == nil || p.P99 > worst.P99 {
			worst = p
		}
	}
	if worst != nil {
		t.Value = float64(worst.P99) / float64(time.Millisecond)
		t.Measured = fmt.Sprintf("%s (slowest phase: %s; %d phases)", fmtLatency(worst.P99), worst.Phase, len(phases))
	}
	return t
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// WriteTable prints the result as bench pod shows it: the state, the
// measured phases and readers, and the targets with PASS or FAIL.
func (r *PodResult) WriteTable(out io.Writer) {
	var b strings.Builder
	r.writeTable(&b)
	for line := range strings.Lines(b.String()) {
		fmt.Fprintln(out, strings.TrimRight(line, " \n"))
	}
}

func (r *PodResult) writeTable(w io.Writer) {
	fmt.Fprintf(w, "bench pod: %s store; pools %s (%d hosts) and %s (%d hosts), %d open sessions per host\n",
		r.Store, PodLargePool, r.Hosts, PodSmallPool, r.SmallHosts, r.SessionsPerHost)
	if len(r.PostgresSettings) > 0 {
		var kv []string
		for _, name := range postgresSettingNames {
			kv = append(kv, name+"="+r.PostgresSettings[name])
		}
		fmt.Fprintf(w, "postgresql   %s\n", strings.Join(kv, " "))
	}
	s := r.Seed
	fmt.Fprintf(w, "state        %d open sessions (placed by connects in %s, reported Active by the agents; %d left Pending)\n",
		s.OpenSessions, s.ConnectElapsed.Round(time.Millisecond), s.PendingLeft)
	fmt.Fprintf(w, "             %d LoggedOff history rows (bulk SQL, broker stopped) in %s; hosts registered in %s; seeding %s in all\n",
		s.HistoryRows, s.HistoryElapsed.Round(time.Millisecond), s.RegisterElapsed.Round(time.Millisecond), s.Elapsed.Round(time.Second))
	fmt.Fprintf(w, "measured     %s: %d rounds of dry runs and connects in each pool while every host heartbeats (at most %d in flight); load average %s before, %s after\n",
		r.Measured.Round(time.Millisecond), len(r.Rounds), r.HeartbeatConcurrency, r.LoadAverage[0], r.LoadAverage[1])
	for i, rd := range r.Rounds {
		fmt.Fprintf(w, "  round %-2d   dry run %8.1f/s large %8.1f/s small   connect %8.1f/s large %8.1f/s small\n",
			i+1, rd.DryRunLarge.Rate, rd.DryRunSmall.Rate, rd.ConnectLarge.Rate, rd.ConnectSmall.Rate)
	}
	phase := func(name string, p PhaseStats) {
		fmt.Fprintf(w, "  %-22s %7d in %-9s %9.1f/s  p50 %-9s p99 %-9s max %-9s", name, p.Requests,
			p.Elapsed.Round(time.Millisecond), p.Rate, fmtLatency(p.P50), fmtLatency(p.P99), fmtLatency(p.Max))
		fmt.Fprintf(w, "%s\n", errorsInline(p.Errors))
	}
	phase("dry runs, large", r.DryRunLarge)
	phase("dry runs, small", r.DryRunSmall)
	phase("connects, large", r.ConnectLarge)
	phase("connects, small", r.ConnectSmall)
	byPhase := func(s ReaderStats) {
		var parts []string
		for _, ph := range []string{"before phases", "dry runs large", "dry runs small", "connects large", "connects small", "after phases"} {
			if d, ok := s.MaxByPhase[ph]; ok {
				parts = append(parts, ph+" "+fmtLatency(d))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, "  %-22s slowest by phase: %s\n", "", strings.Join(parts, ", "))
		}
	}
	reader := func(name string, s ReaderStats) {
		fmt.Fprintf(w, "  %-22s %7d          %10s   p50 %-9s p99 %-9s max %-9s %7d B", name, s.Requests, "",
			fmtLatency(s.P50), fmtLatency(s.P99), fmtLatency(s.Max), s.Bytes)
		fmt.Fprintf(w, "%s\n", errorsInline(s.Errors))
		byPhase(s)
	}
	reader("?user= listings", r.UserListings)
	reader("/metrics scrapes", r.MetricsScrapes)
	reader("console overview", r.ConsoleOverview)
	reader("console pool page", r.ConsolePool)
	reader("user portal's first page", r.PortalHome)
	h := r.Heartbeats
	fmt.Fprintf(w, "  %-22s %7d sent of %d due, %d skipped; p50 %s p99 %s max %s; lateness p99 %s%s\n", "heartbeats",
		h.Sent, h.Scheduled, h.Skipped, fmtLatency(h.P50), fmtLatency(h.P99), fmtLatency(h.Max), fmtLatency(h.LatenessP99), errorsInline(h.Errors))
	for _, p := range h.ByPhase {
		fmt.Fprintf(w, "  %-22s %-18s %6d due, %6d skipped, %6d ok; p99 %-9s max %-9s late p99 %-9s max %-9s build p99 %-9s %6d B; broker answer mean %s p99<%s, store mean %s p99<%s\n", "",
			p.Phase, p.Due, p.Skipped, p.OK, fmtLatency(p.P99), fmtLatency(p.Max), fmtLatency(p.LatenessP99), fmtLatency(p.LatenessMax),
			fmtLatency(p.BuildP99), p.MaxBytes, fmtLatency(p.AnswerMean), fmtLatency(p.AnswerP99Below), fmtLatency(p.StoreMean), fmtLatency(p.StoreP99Below))
	}
	if p := h.WarmUp; p != nil {
		fmt.Fprintf(w, "  %-22s not in the figures above: the %s: %d due, %d skipped, %d ok; max %s\n", "",
			p.Phase, p.Due, p.Skipped, p.OK, fmtLatency(p.Max))
	}
	fmt.Fprintf(w, "  %-22s RSS peak %s, VmHWM %s (Go heap in use at most %s, Go runtime %s); CPU %.2f cores\n", "broker",
		mib(r.BrokerRSS), mib(r.BrokerHWM), mib(r.BrokerGoHeap), mib(r.BrokerGoSys), r.BrokerCPU)
	fmt.Fprintln(w)
	nameW, measW := len("target"), len("measured")
	for _, t := range r.Targets {
		nameW, measW = max(nameW, len(t.Name)), max(measW, len(t.Measured))
	}
	fmt.Fprintf(w, "%-*s  %-*s  %-28s  %s\n", nameW, "target", measW, "measured", "wanted", "result")
	fmt.Fprintf(w, "%s  %s  %s  %s\n", strings.Repeat("-", nameW), strings.Repeat("-", measW), strings.Repeat("-", 28), "------")
	for _, t := range r.Targets {
		verdict := "FAIL"
		if t.Pass {
			verdict = "PASS"
		}
		fmt.Fprintf(w, "%-*s  %-*s  %-28s  %s\n", nameW, t.Name, measW, t.Measured, t.Target, verdict)
	}
}

// errorsInline is "  errors: 3 × 503 NoCapacity, ..." or "".
func errorsInline(errs []ErrorCount) string {
	if len(errs) == 0 {
		return ""
	}
	var parts []string
	for _, e := range errs {
		parts = append(parts, fmt.Sprintf("%d × %d %s", e.Count, e.Status, e.Code))
	}
	return "  errors: " + strings.Join(parts, ", ")
}
