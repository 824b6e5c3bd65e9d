package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vdibroker/vdibroker"
)

// HeartbeatConfig is one heartbeat load run: Hosts agents registered in
// HostPool, each reporting SessionsPerHost sessions every Interval for
// Duration, their first heartbeats spread evenly over the first interval.
type HeartbeatConfig struct {
	Server          string // broker base URL
	Token           string // admin or Contributor token: creates the pool and the registration tokens
	HostPool        string
	Hosts           int
	SessionsPerHost int
	Interval        time.Duration
	Duration        time.Duration
	Concurrency     int // requests in flight at once, registration and heartbeats
	// HostPrefix starts every host name: HostPrefix + "00001"... (default
	// "hb"). A name registered by an earlier run is reset (admin) and
	// registered again, so a second
	// run on the same pool reuses its hosts and sessions.
	HostPrefix string
	// Grace is how late after the end of Duration a heartbeat may still go
	// out; later ones are counted as Skipped, not sent (default Interval).
	// It bounds the run when the broker cannot keep up.
	Grace time.Duration
	// ServerPID, when > 0, is the broker's process: its resident memory and
	// CPU time are read from /proc/PID before and after the heartbeats.
	ServerPID int
	// Timeout bounds each request (default 30s).
	Timeout time.Duration
}

// Validate checks the configuration before any request goes out.
func (c *HeartbeatConfig) Validate() error {
	u, err := url.Parse(c.Server)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return vdibroker.FieldError("server", "must be an http:// or https:// URL, got %q", c.Server)
	case c.HostPool == "":
		return vdibroker.FieldError("hostPool", "required")
	case vdibroker.ValidateName("hostPool", c.HostPool, vdibroker.MinPoolNameLen, vdibroker.MaxPoolNameLen) != nil:
		return vdibroker.ValidateName("hostPool", c.HostPool, vdibroker.MinPoolNameLen, vdibroker.MaxPoolNameLen)
	case c.Hosts < 1 || c.Hosts > 1_000_000:
		return vdibroker.FieldError("hosts", "must be 1..1000000")
	case c.SessionsPerHost < 0 || c.SessionsPerHost > 1000:
		return vdibroker.FieldError("sessionsPerHost", "must be 0..1000")
	case c.Interval < 100*time.Millisecond || c.Interval > time.Hour:
		return vdibroker.FieldError("interval", "must be 100ms..1h, got %s", c.Interval)
	case c.Duration < c.Interval || c.Duration > 24*time.Hour:
		return vdibroker.FieldError("duration", "must be at least the interval (%s) and at most 24h, got %s", c.Interval, c.Duration)
	case c.Concurrency < 1 || c.Concurrency > 10_000:
		return vdibroker.FieldError("concurrency", "must be 1..10000")
	case len(c.HostPrefix)+len(strconv.Itoa(c.Hosts)) > vdibroker.MaxHostNameLen:
		return vdibroker.FieldError("hostPrefix", "with the host number must fit in %d characters", vdibroker.MaxHostNameLen)
	case c.ServerPID < 0:
		return vdibroker.FieldError("serverPid", "must be a process id (> 0), or 0 for none")
	}
	return nil
}

// ProcSample is a process's resident memory and CPU time at one moment,
// from /proc/PID/status and /proc/PID/stat (Linux).
type ProcSample struct {
	VmRSS   int64         `json:"vmRssBytes"` // resident set now
	VmHWM   int64         `json:"vmHwmBytes"` // peak resident set since the process started
	CPUTime time.Duration `json:"cpuTime"`    // user + system
	At      time.Time     `json:"at"`
}

// HeartbeatResult is what one heartbeat run measured. Latency is per
// heartbeat, from sending to the end of the body; lateness is how long after
// its due time a heartbeat went out (the generator waiting for a free
// worker is the broker not keeping up).
type HeartbeatResult struct {
	Hosts           int           `json:"hosts"` // registered, and heartbeating
	SessionsPerHost int           `json:"sessionsPerHost"`
	Interval        time.Duration `json:"interval"`
	Duration        time.Duration `json:"duration"`
	Concurrency     int           `json:"concurrency"`
	PoolCreated     bool          `json:"poolCreated"`

	RegisterElapsed time.Duration `json:"registerElapsed"`
	RegisterErrors  []ErrorCount  `json:"registerErrors"`

	Scheduled int           `json:"scheduled"` // heartbeats due within Duration
	Sent      int           `json:"sent"`
	Skipped   int           `json:"skipped"` // due, but not sent within Grace after the end
	OK        int           `json:"ok"`      // answered 200: handled
	Elapsed   time.Duration `json:"elapsed"` // first due time to last answer
	// OfferedRate is Scheduled / Duration; HandledRate is OK / Elapsed.
	OfferedRate float64       `json:"offeredRate"`
	HandledRate float64       `json:"handledRate"`
	P50         time.Duration `json:"p50"`
	P95         time.Duration `json:"p95"`
	P99         time.Duration `json:"p99"`
	Max         time.Duration `json:"max"`
	// SteadyP50/P99 leave out the first round, in which the broker adopts
	// every host's sessions (R-S2).
	SteadyP50   time.Duration `json:"steadyP50"`
	SteadyP99   time.Duration `json:"steadyP99"`
	LatenessP50 time.Duration `json:"latenessP50"`
	LatenessP99 time.Duration `json:"latenessP99"`
	LatenessMax time.Duration `json:"latenessMax"`
	Errors      []ErrorCount  `json:"errors"`
	// KeptUp: at least 99% of the scheduled heartbeats handled, the handled
	// rate at least 99% of the offered one, and 99% of heartbeats sent less
	// than a tenth of an interval late.
	KeptUp bool `json:"keptUp"`

	// Server (and Client, this process) before and after the heartbeats;
	// nil when not measured or /proc is not readable.
	// SameProcess: the broker runs in the generator's process (in-process
	// run), so its memory and CPU include the generator's.
	SameProcess  bool        `json:"sameProcess"`
	ServerBefore *ProcSample `json:"serverBefore,omitempty"`
	ServerAfter  *ProcSample `json:"serverAfter,omitempty"`
	ClientBefore *ProcSample `json:"clientBefore,omitempty"`
	ClientAfter  *ProcSample `json:"clientAfter,omitempty"`
}

// heartbeatOutcome is one scheduled heartbeat, written by exactly one worker.
type heartbeatOutcome struct {
	outcome
	sent     bool
	lateness time.Duration
	done     time.Time
	// build is the generator's own time to make the body (the report
	// copied and marshalled), before the request went out.
	build time.Duration
	// bytes is the body's size.
	bytes int
}

// agentHost is one simulated host: its credential and its report.
type agentHost struct {
	name       string
	credential string
	sessions   []vdibroker.AgentSession
}

// Heartbeat runs cfg against the broker: creates the pool if it is absent,
// registers the hosts, then sends their heartbeats.
func Heartbeat(ctx context.Context, cfg HeartbeatConfig) (*HeartbeatResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.HostPrefix == "" {
		cfg.HostPrefix = "hb"
	}
	if cfg.Grace <= 0 {
		cfg.Grace = cfg.Interval
	}
	client := newClient(Config{Concurrency: cfg.Concurrency, Timeout: cfg.Timeout})
	defer client.CloseIdleConnections()
	api := strings.TrimRight(cfg.Server, "/") + "/api/v1"
	poolURL := api + "/hostpools/" + url.PathEscape(cfg.HostPool)
	res := &HeartbeatResult{
		SessionsPerHost: cfg.SessionsPerHost, Interval: cfg.Interval,
		Duration: cfg.Duration, Concurrency: cfg.Concurrency,
	}

	created, err := ensurePool(ctx, client, poolURL, cfg.Token)
	if err != nil {
		return nil, err
	}
	res.PoolCreated = created
	regTokens, err := registrationTokens(ctx, client, poolURL, cfg.Token, cfg.Hosts)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	hosts, regOutcomes := registerHosts(ctx, client, api, poolURL, regTokens, cfg)
	res.RegisterElapsed = time.Since(start)
	res.RegisterErrors = countErrors(regOutcomes)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("registration interrupted: %w", err)
	}
	if len(hosts) == 0 {
		return res, fmt.Errorf("no host registered: %s", describeErrors(res.RegisterErrors))
	}
	res.Hosts = len(hosts)

	// The generator's own process is read too, unless it is the broker's.
	self := os.Getpid()
	res.SameProcess = cfg.ServerPID == self
	if res.SameProcess {
		self = 0
	}
	res.ServerBefore, res.ClientBefore = readProcOrNil(cfg.ServerPID), readProcOrNil(self)
	outcomes, elapsed := sendHeartbeats(ctx, client, api+"/agent/heartbeat", hosts, cfg)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("heartbeat run interrupted: %w", err)
	}
	res.ServerAfter, res.ClientAfter = readProcOrNil(cfg.ServerPID), readProcOrNil(self)
	summarizeHeartbeats(res, outcomes, len(hosts), elapsed)
	return res, nil
}

// ensurePool creates the pool (maxSessionLimit 999999, every other field
// its default) unless it exists; it reports whether it created it.
func ensurePool(ctx context.Context, client *http.Client, poolURL, token string) (bool, error) {
	o, _ := send(ctx, client, http.MethodGet, poolURL, token, nil)
	switch {
	case o.status == http.StatusOK:
		return false, nil
	case o.status != http.StatusNotFound:
		return false, fmt.Errorf("get host pool: %s", describeOutcome(o))
	}
	body, _ := json.Marshal(map[string]any{"maxSessionLimit": vdibroker.NoSessionLimit})
	o, _ = send(ctx, client, http.MethodPut, poolURL, token, body)
	if o.code != "" {
		return false, fmt.Errorf("create host pool: %s", describeOutcome(o))
	}
	return true, nil
}

// hostsPerToken is how many new hosts a run registers with one
// registration token: the broker takes 500 new hosts of a token at once,
// then 60 a minute (R-SEC, http.NewHostsPerTokenBurst), so a run of
// 10,000 hosts gives them a token every 250, as an admin bringing up more
// hosts at once than a token's burst gives them more tokens.
const hostsPerToken = 250

// registrationTokens gets the one-hour registration tokens of the pool
// that n new hosts need, hostsPerToken each.
func registrationTokens(ctx context.Context, client *http.Client, poolURL, token string, n int) ([]string, error) {
	out := make([]string, 0, (n+hostsPerToken-1)/hostsPerToken)
	for range max(cap(out), 1) {
		t, err := registrationToken(ctx, client, poolURL, token)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// registrationToken gets a one-hour registration token of the pool.
func registrationToken(ctx context.Context, client *http.Client, poolURL, token string) (string, error) {
	body, _ := json.Marshal(map[string]int{"expiresInSeconds": vdibroker.MinRegistrationTokenSeconds})
	o, answer := send(ctx, client, http.MethodPost, poolURL+"/registrationtoken", token, body)
	if o.code != "" {
		return "", fmt.Errorf("create registration token: %s", describeOutcome(o))
	}
	var rt struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(answer, &rt); err != nil || rt.Token == "" {
		return "", fmt.Errorf("create registration token: answer has no token: %.200s", answer)
	}
	return rt.Token, nil
}

// registerHosts registers cfg.Hosts hosts from cfg.Concurrency workers,
// host i with regTokens[i/hostsPerToken], and returns the ones that got a
// credential, in host order, and every registration's outcome.
func registerHosts(ctx context.Context, client *http.Client, api, poolURL string, regTokens []string, cfg HeartbeatConfig) ([]agentHost, []outcome) {
	endpoint := api + "/agent/register"
	width := len(strconv.Itoa(cfg.Hosts))
	all := make([]agentHost, cfg.Hosts)
	outcomes := make([]outcome, cfg.Hosts)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range cfg.Concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= cfg.Hosts || ctx.Err() != nil {
					return
				}
				h := agentHost{name: fmt.Sprintf("%s%0*d", cfg.HostPrefix, width, i+1)}
				body, _ := json.Marshal(vdibroker.RegisterRequest{
					Token:    regTokens[min(i/hostsPerToken, len(regTokens)-1)],
					HostName: h.name,
					// A private address per host; the broker never dials it.
					Address: fmt.Sprintf("10.%d.%d.%d:3389", i>>16&255, i>>8&255, i&255),
				})
				o, answer := send(ctx, client, http.MethodPost, endpoint, "", body)
				if o.code == vdibroker.EConflict {
					// Registered by an earlier run: the admin lets this run
					// take the name (a registration token alone cannot).
					reset := poolURL + "/sessionhosts/" + url.PathEscape(h.name) + "/resetregistration"
					if ro, _ := send(ctx, client, http.MethodPost, reset, cfg.Token, []byte("{}")); ro.code == "" {
						o, answer = send(ctx, client, http.MethodPost, endpoint, "", body)
					}
				}
				if o.code == "" {
					var rr vdibroker.RegisterResponse
					if err := json.Unmarshal(answer, &rr); err != nil || rr.Credential == "" {
						o.code, o.message = "BadAnswer", fmt.Sprintf("register answer has no credential: %.200s", answer)
					}
					h.credential = rr.Credential
				}
				outcomes[i] = o
				if o.code == "" {
					h.sessions = agentSessions(h.name, cfg.SessionsPerHost)
					all[i] = h
				}
			}
		})
	}
	wg.Wait()
	hosts := make([]agentHost, 0, cfg.Hosts)
	for _, h := range all {
		if h.credential != "" {
			hosts = append(hosts, h)
		}
	}
	return hosts, outcomes
}

// agentSessions is a host's report: n Active sessions with ids and users
// stable from one heartbeat to the next, unique across hosts.
func agentSessions(host string, n int) []vdibroker.AgentSession {
	s := make([]vdibroker.AgentSession, n)
	for j := range s {
		s[j] = vdibroker.AgentSession{
			ID:    fmt.Sprintf("%d", j+1),
			User:  fmt.Sprintf("%s-u%02d", host, j+1),
			State: vdibroker.StateActive,
		}
	}
	return s
}

// dueOffset is when heartbeat j of a run is due, after the start: host
// j%hosts, round j/hosts, the hosts spread evenly over each interval.
func dueOffset(j, hosts int, interval time.Duration) time.Duration {
	return time.Duration(int64(j) * int64(interval) / int64(hosts))
}

// scheduled is how many heartbeats are due within duration.
func scheduled(hosts int, interval, duration time.Duration) int {
	n := int(int64(duration) * int64(hosts) / int64(interval))
	// dueOffset(n) >= duration > dueOffset(n-1), with integer rounding.
	for n > 0 && dueOffset(n-1, hosts, interval) >= duration {
		n--
	}
	for dueOffset(n, hosts, interval) < duration {
		n++
	}
	return n
}

// sendHeartbeats sends every scheduled heartbeat at its due time from
// cfg.Concurrency workers. A heartbeat whose worker is free only after
// Duration + Grace is not sent. It returns the outcomes in schedule order
// and the time from the start to the last answer.
func sendHeartbeats(ctx context.Context, client *http.Client, endpoint string, hosts []agentHost, cfg HeartbeatConfig) ([]heartbeatOutcome, time.Duration) {
	total := scheduled(len(hosts), cfg.Interval, cfg.Duration)
	outcomes := make([]heartbeatOutcome, total)
	start := time.Now()
	deadline := start.Add(cfg.Duration + cfg.Grace)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range cfg.Concurrency {
		wg.Go(func() {
			timer := time.NewTimer(0)
			defer timer.Stop()
			for {
				j := int(next.Add(1)) - 1
				if j >= total || ctx.Err() != nil {
					return
				}
				due := start.Add(dueOffset(j, len(hosts), cfg.Interval))
				if wait := time.Until(due); wait > 0 {
					timer.Reset(wait)
					select {
					case <-ctx.Done():
						return
					case <-timer.C:
					}
				}
				now := time.Now()
				if now.After(deadline) {
					continue // skipped: counted as not sent
				}
				h := &hosts[j%len(hosts)]
				round := j / len(hosts)
				body, _ := json.Marshal(vdibroker.HeartbeatRequest{
					Metrics:  sampleMetrics(j, round, now),
					Sessions: h.sessions,
				})
				o, _ := send(ctx, client, http.MethodPost, endpoint, h.credential, body)
				outcomes[j] = heartbeatOutcome{outcome: o, sent: true, lateness: now.Sub(due), done: time.Now()}
			}
		})
	}
	wg.Wait()
	last := start
	for _, o := range outcomes {
		if o.sent && o.done.After(last) {
			last = o.done
		}
	}
	return outcomes, last.Sub(start)
}

// sampleMetrics is a plausible sample that changes from round to round, so
// the broker stores a new sample every time as it would from a real agent.
func sampleMetrics(j, round int, now time.Time) *vdibroker.Metrics {
	return &vdibroker.Metrics{
		CPUPercent:         float64(5 + (j*7+round*3)%80),
		MemoryPercent:      float64(20 + (j*3+round)%60),
		DiskQueueLength:    float64((j + round) % 4),
		DiskReadLatencyMs:  float64(1 + (j+round)%9),
		DiskWriteLatencyMs: float64(2 + (j+round)%7),
		SampledAt:          now.UTC(),
	}
}

func summarizeHeartbeats(r *HeartbeatResult, outcomes []heartbeatOutcome, hosts int, elapsed time.Duration) {
	r.Scheduled, r.Elapsed = len(outcomes), elapsed
	var lat, steady, late []time.Duration
	var sent []outcome
	for j, o := range outcomes {
		if !o.sent {
			r.Skipped++
			continue
		}
		r.Sent++
		sent = append(sent, o.outcome)
		lat = append(lat, o.latency)
		late = append(late, o.lateness)
		if j >= hosts {
			steady = append(steady, o.latency)
		}
		if o.code == "" {
			r.OK++
		}
	}
	r.Errors = countErrors(sent)
	for _, s := range [][]time.Duration{lat, steady, late} {
		slices.Sort(s)
	}
	r.P50, r.P95, r.P99 = percentile(lat, 50), percentile(lat, 95), percentile(lat, 99)
	r.SteadyP50, r.SteadyP99 = percentile(steady, 50), percentile(steady, 99)
	r.LatenessP50, r.LatenessP99 = percentile(late, 50), percentile(late, 99)
	if len(lat) > 0 {
		r.Max, r.LatenessMax = lat[len(lat)-1], late[len(late)-1]
	}
	r.OfferedRate = float64(r.Scheduled) / r.Duration.Seconds()
	if elapsed > 0 {
		r.HandledRate = float64(r.OK) / elapsed.Seconds()
	}
	r.KeptUp = r.Scheduled > 0 &&
		float64(r.OK) >= 0.99*float64(r.Scheduled) &&
		r.HandledRate >= 0.99*r.OfferedRate &&
		r.LatenessP99 < r.Interval/10
}

// ReadProc reads a process's resident memory (VmRSS, VmHWM of
// /proc/PID/status) and CPU time (utime + stime of /proc/PID/stat, in clock
// ticks of 1/100 s, the value of USER_HZ on every Linux architecture Go
// supports).
func ReadProc(pid int) (*ProcSample, error) {
	dir := fmt.Sprintf("/proc/%d/", pid)
	status, err := os.ReadFile(dir + "status")
	if err != nil {
		return nil, fmt.Errorf("read process %d memory: %w", pid, err)
	}
	stat, err := os.ReadFile(dir + "stat")
	if err != nil {
		return nil, fmt.Errorf("read process %d CPU time: %w", pid, err)
	}
	s, err := parseProc(string(status), string(stat))
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	s.At = time.Now()
	return s, nil
}

// parseProc reads VmRSS and VmHWM ("VmRSS:   123456 kB") from a
// /proc/PID/status text and utime and stime (fields 14 and 15, counted
// after the parenthesized command name, which may hold spaces) from a
// /proc/PID/stat text.
func parseProc(status, stat string) (*ProcSample, error) {
	s := &ProcSample{}
	for line := range strings.Lines(status) {
		key, val, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(val), "kB")), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("status %s: %q is not a size in kB", key, strings.TrimSpace(val))
		}
		if key == "VmRSS" {
			s.VmRSS = kb * 1024
		} else {
			s.VmHWM = kb * 1024
		}
	}
	if s.VmRSS == 0 {
		return nil, errors.New("status has no VmRSS")
	}
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, errors.New("stat has no command name")
	}
	fields := strings.Fields(stat[i+1:]) // fields[0] is field 3 (state)
	if len(fields) < 13 {
		return nil, errors.New("stat is too short")
	}
	var ticks int64
	for _, f := range fields[11:13] { // fields 14 (utime) and 15 (stime)
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("stat: CPU time %q is not a number", f)
		}
		ticks += n
	}
	s.CPUTime = time.Duration(ticks) * 10 * time.Millisecond
	return s, nil
}

func readProcOrNil(pid int) *ProcSample {
	if pid <= 0 {
		return nil
	}
	s, err := ReadProc(pid)
	if err != nil {
		return nil
	}
	return s
}

// cpuCores is how many cores a process used on average between two samples.
func cpuCores(before, after *ProcSample) float64 {
	if before == nil || after == nil || !after.At.After(before.At) {
		return 0
	}
	return float64(after.CPUTime-before.CPUTime) / float64(after.At.Sub(before.At))
}

func describeOutcome(o outcome) string {
	if o.status == 0 {
		return "no answer: " + o.message
	}
	return fmt.Sprintf("%d %s: %s", o.status, o.code, o.message)
}

func describeErrors(errs []ErrorCount) string {
	var parts []string
	for _, e := range errs {
		parts = append(parts, fmt.Sprintf("%d × %d %s: %s", e.Count, e.Status, e.Code, e.Example))
	}
	return strings.Join(parts, "; ")
}

// WriteSummary prints r as the bench command shows it.
func (r *HeartbeatResult) WriteSummary(w io.Writer, title string) {
	fmt.Fprintf(w, "%s\n", title)
	fmt.Fprintf(w, "  hosts        %d registered in %s (pool created: %v), %d sessions each\n",
		r.Hosts, r.RegisterElapsed.Round(time.Millisecond), r.PoolCreated, r.SessionsPerHost)
	if len(r.RegisterErrors) > 0 {
		fmt.Fprintf(w, "  register errors:\n")
		writeErrors(w, r.RegisterErrors)
	}
	fmt.Fprintf(w, "  heartbeats   every %s for %s, concurrency %d\n", r.Interval, r.Duration, r.Concurrency)
	fmt.Fprintf(w, "  scheduled    %d  sent %d  skipped %d  handled (200) %d\n", r.Scheduled, r.Sent, r.Skipped, r.OK)
	fmt.Fprintf(w, "  rate         offered %.1f/s  handled %.1f/s (%d in %s)\n", r.OfferedRate, r.HandledRate, r.OK, r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "  latency      p50 %s  p95 %s  p99 %s  max %s\n", fmtLatency(r.P50), fmtLatency(r.P95), fmtLatency(r.P99), fmtLatency(r.Max))
	fmt.Fprintf(w, "  after round 1 p50 %s  p99 %s (round 1 adopts the sessions)\n", fmtLatency(r.SteadyP50), fmtLatency(r.SteadyP99))
	fmt.Fprintf(w, "  lateness     p50 %s  p99 %s  max %s\n", fmtLatency(r.LatenessP50), fmtLatency(r.LatenessP99), fmtLatency(r.LatenessMax))
	writeErrors(w, r.Errors)
	fmt.Fprintf(w, "  kept up      %v\n", r.KeptUp)
	server := "server"
	if r.SameProcess {
		server = "server+gen."
	}
	writeProc(w, server, r.ServerBefore, r.ServerAfter)
	writeProc(w, "generator", r.ClientBefore, r.ClientAfter)
}

func writeProc(w io.Writer, who string, before, after *ProcSample) {
	if before == nil || after == nil {
		return
	}
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	fmt.Fprintf(w, "  %-12s RSS %s before, %s after, peak (VmHWM) %s; CPU %.2f cores\n",
		who, mib(before.VmRSS), mib(after.VmRSS), mib(after.VmHWM), cpuCores(before, after))
}
