package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// measure runs the pod's load against the restarted broker: every host
// heartbeating, the readers beside it, and Rounds of the four measured
// phases, then fills res.
func measure(ctx context.Context, cfg PodConfig, res *PodResult, baseURL string, pid int, large, small *podPool) error {
	base := strings.TrimRight(baseURL, "/")
	api := base + "/api/v1"
	agentClient := newClient(Config{Concurrency: cfg.HeartbeatConcurrency, Timeout: cfg.Timeout})
	defer agentClient.CloseIdleConnections()
	loadClient := newClient(Config{Concurrency: cfg.Concurrency, Timeout: cfg.Timeout})
	defer loadClient.CloseIdleConnections()
	// A reader may take far longer than a connect (a scrape that reads
	// every session): give it minutes, so the figure is its time, not a
	// timeout. Readers run one request at a time, so none piles up.
	readClient := newClient(Config{Concurrency: 4, Timeout: max(cfg.Timeout, 3*time.Minute)})
	defer readClient.CloseIdleConnections()

	all := interleave(large.hosts, small.hosts)
	// The agents' schedule outlasts the phases even when each phase's last
	// requests run to their timeout; stop ends it when the phases end.
	window := cfg.Interval + time.Duration(cfg.Rounds*4)*(cfg.Phase+cfg.Timeout) + 2*cfg.Interval
	// A heartbeat a whole interval late is skipped, as the next one is due.
	agents := startAgents(ctx, agentClient, api+"/agent/heartbeat", all, cfg.Interval, window, cfg.Interval, cfg.HeartbeatConcurrency)
	defer agents.stop()
	// One whole interval: every host has heartbeated since the restart
	// (the history load may have outlasted the heartbeat timeout).
	cfg.Progress("measuring: heartbeats of %d hosts every %s; one interval before the phases", len(all), cfg.Interval)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(cfg.Interval):
	}

	consoleClient, err := consoleSignIn(ctx, base, cfg.Token, max(cfg.Timeout, 3*time.Minute))
	if err != nil {
		return err
	}
	defer consoleClient.CloseIdleConnections()
	portalClient, err := portalUser(ctx, base, cfg.Token, large, small, max(cfg.Timeout, 3*time.Minute))
	if err != nil {
		return err
	}
	defer portalClient.CloseIdleConnections()

	// phase names what the phases are doing, so each reader's times can
	// be told apart by what ran beside them.
	var phase atomic.Value
	phase.Store("before phases")
	cur := func() string { return phase.Load().(string) }
	stopReaders := make(chan struct{})
	var readers sync.WaitGroup
	var listings, scrapes, overview, poolPage, portalHome readerLog
	var goMem scrapeReading
	readers.Go(func() {
		n := 0
		every(stopReaders, cfg.ListEvery, func() {
			// A logged-on user of either pool, alternately (?user=, SPEC §9).
			p := large
			if n%2 == 1 {
				p = small
			}
			u := p.user(1 + (n*7919)%p.seats)
			n++
			ph := cur()
			listings.add(get(ctx, readClient, api+"/hostpools/"+url.PathEscape(p.name)+"/usersessions?user="+url.QueryEscape(u), cfg.Token), ph)
		})
	})
	readers.Go(func() {
		every(stopReaders, cfg.MetricsEvery, func() {
			ph := cur()
			o, body := send(ctx, readClient, http.MethodGet, base+"/metrics", "", nil)
			scrapes.add(o, ph)
			if o.code == "" {
				goMem.observe(body)
			}
		})
	})
	readers.Go(func() {
		every(stopReaders, cfg.ConsoleEvery, func() {
			ph := cur()
			overview.add(get(ctx, consoleClient, base+"/", ""), ph)
			poolPage.add(get(ctx, consoleClient, base+"/pools/"+url.PathEscape(large.name), ""), ph)
		})
	})
	readers.Go(func() {
		every(stopReaders, cfg.ConsoleEvery, func() {
			portalHome.add(get(ctx, portalClient, base+"/portal/", ""), cur())
		})
	})
	var rssMu sync.Mutex
	var peakRSS int64
	readers.Go(func() {
		every(stopReaders, time.Second, func() {
			if s := readProcOrNil(pid); s != nil {
				rssMu.Lock()
				peakRSS = max(peakRSS, s.VmRSS)
				rssMu.Unlock()
			}
		})
	})

	res.LoadAverage[0] = loadAverage()
	before := readProcOrNil(pid)
	start := time.Now()
	var windows []phaseWindow
	for r := range cfg.Rounds {
		var round PodRound
		for _, ph := range []struct {
			name   string
			p      *podPool
			dryRun bool
			into   *PhaseStats
		}{
			{"dry runs large", large, true, &round.DryRunLarge}, {"dry runs small", small, true, &round.DryRunSmall},
			{"connects large", large, false, &round.ConnectLarge}, {"connects small", small, false, &round.ConnectSmall},
		} {
			phase.Store(ph.name)
			w := phaseWindow{name: fmt.Sprintf("%s %d", ph.name, r+1), start: time.Now()}
			cfg.Progress("phase %s", w.name)
			*ph.into = runPhase(ctx, loadClient, api, cfg, ph.p, ph.dryRun)
			w.end = time.Now()
			windows = append(windows, w)
		}
		cfg.Progress("round %d: dry runs %.1f/s (large) %.1f/s (small), connects %.1f/s (large) %.1f/s (small)", r+1,
			round.DryRunLarge.Rate, round.DryRunSmall.Rate, round.ConnectLarge.Rate, round.ConnectSmall.Rate)
		res.Rounds = append(res.Rounds, round)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	res.Measured = time.Since(start)
	res.LoadAverage[1] = loadAverage()
	phase.Store("after phases")
	after := readProcOrNil(pid)
	close(stopReaders)
	readers.Wait()
	agents.stop()

	res.Heartbeats = agents.steadyStats()
	res.Heartbeats.ByPhase = agents.byPhase(windows)
	goMem.brokerTimes(res.Heartbeats.ByPhase, windows)
	res.UserListings, res.MetricsScrapes = listings.stats(), scrapes.stats()
	res.ConsoleOverview, res.ConsolePool = overview.stats(), poolPage.stats()
	res.PortalHome = portalHome.stats()
	res.BrokerRSS = peakRSS
	if after != nil {
		res.BrokerHWM = after.VmHWM
		res.BrokerRSS = max(res.BrokerRSS, after.VmRSS)
	}
	res.BrokerCPU = cpuCores(before, after)
	res.BrokerGoHeap, res.BrokerGoSys = goMem.heapInuse, goMem.sys
	res.MetricsStoreDown = goMem.storeDown
	merge := func(pick func(*PodRound) *PhaseStats) PhaseStats {
		var ps []*PhaseStats
		for i := range res.Rounds {
			ps = append(ps, pick(&res.Rounds[i]))
		}
		return mergePhases(ps)
	}
	res.DryRunLarge = merge(func(r *PodRound) *PhaseStats { return &r.DryRunLarge })
	res.DryRunSmall = merge(func(r *PodRound) *PhaseStats { return &r.DryRunSmall })
	res.ConnectLarge = merge(func(r *PodRound) *PhaseStats { return &r.ConnectLarge })
	res.ConnectSmall = merge(func(r *PodRound) *PhaseStats { return &r.ConnectSmall })
	if res.DryRunSmall.Rate > 0 {
		res.DryRunRatio = res.DryRunLarge.Rate / res.DryRunSmall.Rate
	}
	if res.ConnectSmall.Rate > 0 {
		res.ConnectRatio = res.ConnectLarge.Rate / res.ConnectSmall.Rate
	}
	return ctx.Err()
}

// loadAverage is the first three fields of /proc/loadavg ("" where there
// is none).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// every calls fn now and then every period (at once again if fn took
// longer) until stop is closed.
func every(stop <-chan struct{}, period time.Duration, fn func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		default:
		}
		fn()
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// runPhase sends dry runs or connects to pool p from cfg.Concurrency
// workers for cfg.Phase. Dry runs ask for returning users (history, no
// open session), cycling. Connects ask for new users (no session, no
// history, never dry-run before): a dry run makes the server's view know
// its user, and a connect of a known user reads the user's sessions from
// the store, so connects of dry-run users would measure dry runs again.
func runPhase(ctx context.Context, client *http.Client, api string, cfg PodConfig, p *podPool, dryRun bool) PhaseStats {
	endpoint := api + "/hostpools/" + url.PathEscape(p.name) + "/connect"
	deadline := time.Now().Add(cfg.Phase)
	var mu sync.Mutex
	var all []outcome
	var wg sync.WaitGroup
	start := time.Now()
	for w := range cfg.Concurrency {
		wg.Go(func() {
			var mine []outcome
			for k := w; time.Now().Before(deadline) && ctx.Err() == nil && k < 10_000_000; k += cfg.Concurrency {
				var user string
				if dryRun {
					user = p.user(p.seats + 1 + k%p.seats)
				} else {
					user = p.user(2*p.seats + 1 + int(p.nextUser.Add(1)-1))
				}
				mine = append(mine, connectAs(ctx, client, endpoint, cfg.Token, p, user, dryRun))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return phaseStats(all, time.Since(start))
}

func phaseStats(outs []outcome, elapsed time.Duration) PhaseStats {
	s := PhaseStats{Requests: len(outs), Elapsed: elapsed, outs: outs}
	for _, o := range outs {
		s.lat = append(s.lat, o.latency)
		if o.code == "" {
			s.OK++
		}
	}
	slices.Sort(s.lat)
	s.P50, s.P99 = percentile(s.lat, 50), percentile(s.lat, 99)
	if len(s.lat) > 0 {
		s.Max = s.lat[len(s.lat)-1]
	}
	if elapsed > 0 {
		// Answered requests only: a timeout is not a decision.
		s.Rate = float64(s.OK) / elapsed.Seconds()
	}
	s.Errors = countErrors(outs)
	return s
}

// mergePhases is the phases of every round as one: rate over their summed
// time, percentiles over all their requests.
func mergePhases(ps []*PhaseStats) PhaseStats {
	var outs []outcome
	var elapsed time.Duration
	for _, p := range ps {
		outs = append(outs, p.outs...)
		elapsed += p.Elapsed
	}
	return phaseStats(outs, elapsed)
}

// readerLog collects one reader's outcomes and the phase each one started
// in.
type readerLog struct {
	mu     sync.Mutex
	outs   []outcome
	phases []string
}

func (l *readerLog) add(o outcome, phase string) {
	l.mu.Lock()
	l.outs = append(l.outs, o)
	l.phases = append(l.phases, phase)
	l.mu.Unlock()
}

func (l *readerLog) stats() ReaderStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := ReaderStats{Requests: len(l.outs), Errors: countErrors(l.outs), MaxByPhase: map[string]time.Duration{}}
	var lat []time.Duration
	bytes := 0
	for i, o := range l.outs {
		s.MaxByPhase[l.phases[i]] = max(s.MaxByPhase[l.phases[i]], o.latency)
		lat = append(lat, o.latency)
		if o.code == "" {
			s.OK++
			bytes += o.size
		}
	}
	slices.Sort(lat)
	s.P50, s.P99 = percentile(lat, 50), percentile(lat, 99)
	if len(lat) > 0 {
		s.Max = lat[len(lat)-1]
	}
	if s.OK > 0 {
		s.Bytes = bytes / s.OK
	}
	return s
}

// scrapeReading is what the broker's /metrics answers said beyond their
// time: the largest Go heap in use and Go runtime memory (what of its RSS
// is Go's), and how many scrapes had vdibroker_store_up 0 (the store
// collector gave up, at its timeout, and the store's gauges are missing).
type scrapeReading struct {
	mu             sync.Mutex
	heapInuse, sys int64
	storeDown      int
	// beats is the broker's two heartbeat histograms at each scrape.
	beats []beatReading
}

// beatReading is the broker's heartbeat histograms at one scrape: its
// store's time (ApplyHeartbeat) and its whole answer's.
type beatReading struct {
	at            time.Time
	store, answer histReading
}

// histReading is one histogram of the broker's /metrics at one moment:
// cumulative counts by upper bound (seconds), sum and count.
type histReading struct {
	sum        float64
	count      float64
	le         []float64
	cumulative []float64
}

// The broker's heartbeat histograms: the store's time of heartbeats, and
// the whole answer's (of those answered OK).
const (
	storeHist  = `vdibroker_store_tx_duration_seconds`
	storeOp    = `op="ApplyHeartbeat"`
	answerHist = `vdibroker_heartbeat_duration_seconds`
	answerOK   = `code="OK"`
)

// between is the mean and the bucket bound under which 99% fall of the
// observations between two readings (0, 0 when none).
func between(a, b histReading) (mean, p99Below time.Duration) {
	n := b.count - a.count
	if n <= 0 || len(a.le) != len(b.le) {
		return 0, 0
	}
	mean = time.Duration((b.sum - a.sum) / n * float64(time.Second))
	for i := range b.le {
		if b.cumulative[i]-a.cumulative[i] >= 0.99*n {
			return mean, time.Duration(b.le[i] * float64(time.Second))
		}
	}
	return mean, -1 // above the last finite bound
}

// brokerTimes fills each phase's store and answer times (StoreMean,
// AnswerMean...) from the first and last scrape that started and ended
// inside it.
func (g *scrapeReading) brokerTimes(phases []HeartbeatPhase, windows []phaseWindow) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, w := range windows {
		var first, last *beatReading
		for k := range g.beats {
			r := &g.beats[k]
			if r.at.Before(w.start) || !r.at.Before(w.end) {
				continue
			}
			if first == nil {
				first = r
			}
			last = r
		}
		if first != nil && last != first && i < len(phases) {
			phases[i].StoreMean, phases[i].StoreP99Below = between(first.store, last.store)
			phases[i].AnswerMean, phases[i].AnswerP99Below = between(first.answer, last.answer)
		}
	}
}

// add reads one line of a histogram's series (name without labels, the
// value) into h.
func (h *histReading) add(series, name string, f float64) {
	switch {
	case strings.HasPrefix(name, series+"_sum"):
		h.sum = f
	case strings.HasPrefix(name, series+"_count"):
		h.count = f
	case strings.HasPrefix(name, series+"_bucket"):
		_, le, _ := strings.Cut(name, `le="`)
		le, _, _ = strings.Cut(le, `"`)
		if bound, err := strconv.ParseFloat(le, 64); err == nil && le != "+Inf" {
			h.le = append(h.le, bound)
			h.cumulative = append(h.cumulative, f)
		}
	}
}

func (g *scrapeReading) observe(body []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	br := beatReading{at: time.Now()}
	for line := range strings.Lines(string(body)) {
		name, val, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(val, 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(name, storeHist) && strings.Contains(name, storeOp):
			br.store.add(storeHist, name, f)
		case strings.HasPrefix(name, answerHist) && strings.Contains(name, answerOK):
			br.answer.add(answerHist, name, f)
		case name == "go_memstats_sys_bytes":
			g.sys = max(g.sys, int64(f))
		case name == "go_memstats_heap_inuse_bytes":
			g.heapInuse = max(g.heapInuse, int64(f))
		case name == "vdibroker_store_up":
			if f == 0 {
				g.storeDown++
			}
		}
	}
	if br.store.count > 0 || br.answer.count > 0 {
		g.beats = append(g.beats, br)
	}
}

// get sends one GET and returns its outcome (the body is read, not kept).
func get(ctx context.Context, client *http.Client, endpoint, token string) outcome {
	o, _ := send(ctx, client, http.MethodGet, endpoint, token, nil)
	return o
}

// consoleSignIn signs in to the web console with token as a browser does
// and returns a client whose cookie jar holds the console session.
func consoleSignIn(ctx context.Context, base, token string, timeout time.Duration) (*http.Client, error) {
	c := newClient(Config{Concurrency: 2, Timeout: timeout})
	if err := formSignIn(ctx, c, base, "/signin", "vdibroker_signin", token, "/"); err != nil {
		return nil, fmt.Errorf("console %w", err)
	}
	return c, nil
}

// formSignIn signs client c in with token through a site's sign-in form as
// a browser does: the form's page sets its CSRF cookie (csrfCookie), then
// the form is posted and answered 303. c gets a cookie jar holding the
// session and follows no redirect, so a page that sends it back to the
// sign-in form counts as a failure.
func formSignIn(ctx context.Context, c *http.Client, base, path, csrfCookie, token, next string) error {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return err
	}
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if o := get(ctx, c, base+path, ""); o.status != http.StatusOK {
		return fmt.Errorf("sign-in form: %s", describeOutcome(o))
	}
	u, _ := url.Parse(base + path)
	csrf := ""
	for _, ck := range jar.Cookies(u) {
		// Over HTTPS the broker names it with the __Host- prefix.
		if ck.Name == csrfCookie || ck.Name == "__Host-"+csrfCookie {
			csrf = ck.Value
		}
	}
	form := url.Values{"csrf": {csrf}, "token": {token}, "next": {next}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("sign-in: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return fmt.Errorf("sign-in: %s, want 303", resp.Status)
	}
	return nil
}

// PortalUser is the end user whose first page of the user portal bench
// pod reads (R-U1): entitled to PortalResources resources, the two pools'
// desktops and the applications of a RemoteApp group of the large pool.
const (
	PortalUser      = "portal.user@bench.test"
	PortalResources = 50
)

// portalUser publishes the pools' desktops and PortalResources-2
// applications to PortalUser with the admin token, makes PortalUser a User
// token, signs in to the user portal with it as a browser does (the
// sign-in form's CSRF cookie, then the form) and returns a client whose
// cookie jar holds the portal session. It follows no redirect, so a page
// that sends it back to the sign-in form counts as a failure.
func portalUser(ctx context.Context, base, admin string, large, small *podPool, timeout time.Duration) (*http.Client, error) {
	api := base + "/api/v1"
	c := newClient(Config{Concurrency: 2, Timeout: timeout})
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	put := func(path string, body any) error {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		o, answer := send(ctx, c, http.MethodPut, api+path, admin, data)
		if o.status != http.StatusOK && o.status != http.StatusCreated {
			return fmt.Errorf("PUT %s: %s %.200s", path, describeOutcome(o), answer)
		}
		return nil
	}
	mine := map[string]any{"users": []string{PortalUser}}
	for _, p := range []*podPool{large, small} {
		if err := put("/applicationgroups/"+url.PathEscape(p.name+"-desktop"), map[string]any{"hostPool": p.name,
			"applicationGroupType": "Desktop", "assignments": mine}); err != nil {
			return nil, err
		}
	}
	apps := large.name + "-apps"
	if err := put("/applicationgroups/"+url.PathEscape(apps), map[string]any{"hostPool": large.name,
		"applicationGroupType": "RemoteApp", "assignments": mine}); err != nil {
		return nil, err
	}
	for i := range PortalResources - 2 {
		name := fmt.Sprintf("app%02d", i)
		if err := put("/applicationgroups/"+url.PathEscape(apps)+"/applications/"+name, map[string]any{
			"filePath": `C:\Program Files\Bench\` + name + `.exe`, "friendlyName": "Application " + name, "showInPortal": true}); err != nil {
			return nil, err
		}
	}
	data, _ := json.Marshal(map[string]any{"role": "User", "subject": PortalUser, "expiresInSeconds": 86400})
	o, answer := send(ctx, c, http.MethodPost, api+"/tokens", admin, data)
	var tok struct {
		Token string `json:"token"`
	}
	if o.status != http.StatusCreated || json.Unmarshal(answer, &tok) != nil || tok.Token == "" {
		return nil, fmt.Errorf("the portal user's token: %s %.200s", describeOutcome(o), answer)
	}

	if err := formSignIn(ctx, c, base, "/portal/signin", "vdibroker_portal_signin", tok.Token, "/portal/"); err != nil {
		return nil, fmt.Errorf("portal %w", err)
	}
	// The page lists every resource: the last application too.
	last := fmt.Sprintf("Application app%02d", PortalResources-3)
	if o, page := send(ctx, c, http.MethodGet, base+"/portal/", "", nil); o.status != http.StatusOK || !strings.Contains(string(page), last) {
		return nil, fmt.Errorf("the portal's first page: %s, without %q", describeOutcome(o), last)
	}
	return c, nil
}
