package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vdibroker/vdibroker"
)

// Config is one load run.
type Config struct {
	Server      string // broker base URL, e.g. http://127.0.0.1:8080
	Token       string // bearer token (admin, Contributor, or User for one user)
	HostPool    string
	Connects    int  // how many connects, each for a distinct user
	Concurrency int  // workers sending at once
	DryRun      bool // "dryRun": true: the broker decides and stores nothing (R-C8)
	// UserPrefix starts every user name; users are UserPrefix + "0001"...
	// Give each run its own prefix, or the broker answers reconnects (R-C1).
	UserPrefix string
	// Timeout bounds each request (default 30s).
	Timeout time.Duration
	// Rate, when above 0, paces the run (an open loop): connect i is due
	// at i/Rate seconds after the start, whatever the answers before it,
	// and its latency counts from when it was due, so time spent waiting
	// for a free worker counts too (not a free worker's timer waking
	// late: the generator's, not the broker's). Concurrency then bounds
	// the connects outstanding. At 0 each worker sends its next connect
	// when its last is answered (a closed loop), as fast as the broker
	// answers.
	Rate float64
}

// Validate checks the configuration before any request goes out.
func (c *Config) Validate() error {
	u, err := url.Parse(c.Server)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return vdibroker.FieldError("server", "must be an http:// or https:// URL, got %q", c.Server)
	case c.HostPool == "":
		return vdibroker.FieldError("hostPool", "required")
	case c.Connects < 1 || c.Connects > 100_000_000:
		return vdibroker.FieldError("connects", "must be 1..100000000")
	case c.Concurrency < 1 || c.Concurrency > 10_000:
		return vdibroker.FieldError("concurrency", "must be 1..10000")
	case c.Rate < 0 || c.Rate > 1_000_000:
		return vdibroker.FieldError("rate", "must be 0 (as fast as answered) or up to 1000000 connects per second")
	}
	return nil
}

// ErrorCount is how many requests failed one way: by HTTP status and the
// error code of the body ({"error": {"code"}}), or Status 0 and Code
// "Transport" when no HTTP answer came.
type ErrorCount struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Count   int    `json:"count"`
	Example string `json:"example,omitempty"` // the first message seen
}

// Result is what one run measured. Latency is per request, from sending
// (from when it was due, in a paced run) to the end of the body.
type Result struct {
	Connects    int           `json:"connects"`
	Concurrency int           `json:"concurrency"`
	OK          int           `json:"ok"`
	Elapsed     time.Duration `json:"elapsed"`
	Rate        float64       `json:"rate"` // completed requests per second, errors included
	P50         time.Duration `json:"p50"`
	P95         time.Duration `json:"p95"`
	P99         time.Duration `json:"p99"`
	Errors      []ErrorCount  `json:"errors"` // by status, then code
	// ResponseBytes is the mean body size of the successful answers (of
	// all answers when none succeeded): what Baseline answers with.
	ResponseBytes int `json:"responseBytes"`
	// ServerCPU is the CPU time (user and system) the server's process
	// used during the run, when its process id was given (MeasureCPU);
	// CPUPerRequest is it divided by the requests. Unlike the rate, it
	// hardly moves with other work on the machine, so it compares two
	// builds run minutes apart.
	ServerCPU     time.Duration `json:"serverCPU,omitempty"`
	CPUPerRequest time.Duration `json:"cpuPerRequest,omitempty"`
}

// MeasureCPU runs fn, which sends the requests of one run, and sets the
// run's ServerCPU and CPUPerRequest from process pid's CPU time before and
// after (nothing when pid is 0 or /proc cannot be read).
func MeasureCPU(pid int, fn func() (*Result, error)) (*Result, error) {
	before := readProcOrNil(pid)
	r, err := fn()
	after := readProcOrNil(pid)
	if err != nil || before == nil || after == nil {
		return r, err
	}
	r.ServerCPU = after.CPUTime - before.CPUTime
	if r.Connects > 0 {
		r.CPUPerRequest = r.ServerCPU / time.Duration(r.Connects)
	}
	return r, nil
}

// connectBody is the connect request of SPEC §9.
type connectBody struct {
	User   string `json:"user"`
	DryRun bool   `json:"dryRun"`
}

// errorBody is the error answer of SPEC §9.
type errorBody struct {
	Error vdibroker.Error `json:"error"`
}

// Connect runs cfg against the broker.
func Connect(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	endpoint := strings.TrimRight(cfg.Server, "/") + "/api/v1/hostpools/" + url.PathEscape(cfg.HostPool) + "/connect"
	return load(ctx, cfg, endpoint)
}

// outcome is one request's result, written by exactly one worker.
type outcome struct {
	latency time.Duration
	status  int
	code    string
	message string
	size    int
}

func load(ctx context.Context, cfg Config, endpoint string) (*Result, error) {
	client := newClient(cfg)
	defer client.CloseIdleConnections()
	width := len(fmt.Sprint(cfg.Connects))
	outcomes := make([]outcome, cfg.Connects)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= cfg.Connects || ctx.Err() != nil {
					return
				}
				user := fmt.Sprintf("%s%0*d", cfg.UserPrefix, width, i+1)
				var late time.Duration
				if cfg.Rate > 0 {
					due := start.Add(time.Duration(float64(i) / cfg.Rate * float64(time.Second)))
					if wait := time.Until(due); wait > 0 {
						// A free worker sends it when due. How late its
						// timer wakes it is this generator's, not the
						// broker's: counted, it added half a millisecond
						// to every connect of either kind here, which
						// brought the global/pool ratio towards 1.
						select {
						case <-ctx.Done():
							return
						case <-pacedAfter(wait):
						}
					} else {
						// Due while every worker waited for an answer:
						// that wait is the broker's (an open loop).
						late = -wait
					}
				}
				outcomes[i] = connectOnce(ctx, client, endpoint, cfg.Token, connectBody{User: user, DryRun: cfg.DryRun})
				outcomes[i].latency += late
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("load run interrupted: %w", err)
	}
	return summarize(cfg, outcomes, elapsed), nil
}

// pacedAfter is time.After for a paced run's waits (a test makes the
// timer late).
var pacedAfter = time.After

func newClient(cfg Config) *http.Client {
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:               nil, // measure the broker, not a proxy
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        cfg.Concurrency,
			MaxIdleConnsPerHost: cfg.Concurrency,
			IdleConnTimeout:     90 * time.Second,
		},
	}
}

func connectOnce(ctx context.Context, client *http.Client, endpoint, token string, body connectBody) outcome {
	data, _ := json.Marshal(body) // a struct of strings and a bool cannot fail
	o, _ := send(ctx, client, http.MethodPost, endpoint, token, data)
	return o
}

// send makes one request with a JSON body (none when data is nil) and
// returns its outcome and the answer's body.
func send(ctx context.Context, client *http.Client, method, endpoint, token string, data []byte) (outcome, []byte) {
	var body io.Reader
	if data != nil {
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint, body)
	if err != nil {
		return outcome{code: "Transport", message: err.Error()}, nil
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return outcome{latency: time.Since(start), code: "Transport", message: transportMessage(err)}, nil
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	o := outcome{latency: time.Since(start), status: resp.StatusCode, size: len(answer)}
	if err != nil {
		o.status, o.code, o.message = 0, "Transport", transportMessage(err)
		return o, nil
	}
	if resp.StatusCode >= 300 {
		var eb errorBody
		if json.Unmarshal(answer, &eb) == nil && eb.Error.Code != "" {
			o.code, o.message = eb.Error.Code, eb.Error.Message
		} else {
			o.code, o.message = "-", strings.TrimSpace(string(answer[:min(len(answer), 200)]))
		}
	}
	return o, answer
}

// transportMessage drops the URL from a *url.Error: the message is about
// the connection, and the URL is the same for every request.
func transportMessage(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

func summarize(cfg Config, outcomes []outcome, elapsed time.Duration) *Result {
	r := &Result{Connects: len(outcomes), Concurrency: cfg.Concurrency, Elapsed: elapsed}
	lat := make([]time.Duration, len(outcomes))
	okBytes, allBytes := 0, 0
	for i, o := range outcomes {
		lat[i] = o.latency
		allBytes += o.size
		if o.code == "" {
			r.OK++
			okBytes += o.size
		}
	}
	r.Errors = countErrors(outcomes)
	slices.Sort(lat)
	r.P50, r.P95, r.P99 = percentile(lat, 50), percentile(lat, 95), percentile(lat, 99)
	if elapsed > 0 {
		r.Rate = float64(len(outcomes)) / elapsed.Seconds()
	}
	switch {
	case r.OK > 0:
		r.ResponseBytes = okBytes / r.OK
	case len(outcomes) > 0:
		r.ResponseBytes = allBytes / len(outcomes)
	}
	return r
}

// countErrors groups the failed outcomes by status and code, sorted.
func countErrors(outcomes []outcome) []ErrorCount {
	byKind := map[[2]string]*ErrorCount{}
	for _, o := range outcomes {
		if o.code == "" {
			continue
		}
		key := [2]string{fmt.Sprint(o.status), o.code}
		ec, ok := byKind[key]
		if !ok {
			ec = &ErrorCount{Status: o.status, Code: o.code, Example: o.message}
			byKind[key] = ec
		}
		ec.Count++
	}
	errs := []ErrorCount{}
	for _, ec := range byKind {
		errs = append(errs, *ec)
	}
	slices.SortFunc(errs, func(a, b ErrorCount) int {
		if a.Status != b.Status {
			return a.Status - b.Status
		}
		return strings.Compare(a.Code, b.Code)
	})
	return errs
}

// percentile is the nearest-rank percentile of sorted latencies: the
// smallest value with at least p% of the values at or below it.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return sorted[max(rank, 1)-1]
}

// Baseline runs the same load as cfg (connects, concurrency, client, body)
// against a bare net/http server on 127.0.0.1:0 in this process, answering
// 201 with a JSON body of responseBytes bytes, and returns its result.
func Baseline(ctx context.Context, cfg Config, responseBytes int) (*Result, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("baseline server: %w", err)
	}
	srv := &http.Server{Handler: BareHandler(responseBytes), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	return BaselineAt(ctx, cfg, "http://"+ln.Addr().String())
}

// BaselineAt is Baseline against a bare server already listening at
// baseURL (BareHandler in a process of its own, say, as the broker is).
func BaselineAt(ctx context.Context, cfg Config, baseURL string) (*Result, error) {
	cfg.Server, cfg.HostPool = baseURL, "baseline"
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return load(ctx, cfg, strings.TrimSuffix(baseURL, "/")+"/api/v1/hostpools/baseline/connect")
}

// BareHandler is the baseline's bare net/http server: it decodes each
// connect body, as any server must, and answers 201 with a fixed JSON body
// of responseBytes bytes, doing nothing else.
func BareHandler(responseBytes int) http.Handler {
	answer := jsonOfSize(responseBytes)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body connectBody
		// Decode like a server must, so the baseline is not unfairly cheap.
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, `{"error":{"code":"InvalidArgument","message":"bad body"}}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write(answer)
	})
}

// jsonOfSize returns a JSON object of exactly n bytes (at least the size of
// the smallest one, {"pad":""}).
func jsonOfSize(n int) []byte {
	const frame = `{"pad":""}`
	pad := max(n-len(frame), 0)
	return []byte(`{"pad":"` + strings.Repeat("x", pad) + `"}`)
}

// WriteSummary prints r as the bench command shows it.
func (r *Result) WriteSummary(w io.Writer, title string) {
	fmt.Fprintf(w, "%s\n", title)
	fmt.Fprintf(w, "  connects     %d (concurrency %d) in %s\n", r.Connects, r.Concurrency, r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "  ok           %d\n", r.OK)
	fmt.Fprintf(w, "  rate         %.1f per second\n", r.Rate)
	fmt.Fprintf(w, "  latency      p50 %s  p95 %s  p99 %s\n", fmtLatency(r.P50), fmtLatency(r.P95), fmtLatency(r.P99))
	if r.ServerCPU > 0 {
		fmt.Fprintf(w, "  server CPU   %s in all, %s per request\n", r.ServerCPU.Round(10*time.Millisecond), r.CPUPerRequest.Round(time.Microsecond))
	}
	writeErrors(w, r.Errors)
}

// writeErrors prints the errors block of a summary.
func writeErrors(w io.Writer, errs []ErrorCount) {
	if len(errs) == 0 {
		fmt.Fprintf(w, "  errors       none\n")
	}
	for i, e := range errs {
		label := "  errors       "
		if i > 0 {
			label = "               "
		}
		status := fmt.Sprint(e.Status)
		if e.Status == 0 {
			status = "no answer"
		}
		fmt.Fprintf(w, "%s%d × %s %s: %s\n", label, e.Count, status, e.Code, e.Example)
	}
}

// WriteRatio prints broker against bare: throughput and latency ratios.
func WriteRatio(w io.Writer, broker, bare *Result) {
	ratio := func(a, b float64) string {
		if b == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	fmt.Fprintf(w, "broker/bare\n")
	fmt.Fprintf(w, "  rate         %s (broker %.1f/s, bare %.1f/s)\n", ratio(broker.Rate, bare.Rate), broker.Rate, bare.Rate)
	fmt.Fprintf(w, "  p50 latency  %s\n", ratio(float64(broker.P50), float64(bare.P50)))
	fmt.Fprintf(w, "  p99 latency  %s\n", ratio(float64(broker.P99), float64(bare.P99)))
	if broker.CPUPerRequest > 0 && bare.CPUPerRequest > 0 {
		fmt.Fprintf(w, "  CPU/request  %s (broker %s, bare %s)\n", ratio(float64(broker.CPUPerRequest), float64(bare.CPUPerRequest)),
			broker.CPUPerRequest.Round(time.Microsecond), bare.CPUPerRequest.Round(time.Microsecond))
	}
}

func fmtLatency(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	default:
		return d.Round(time.Microsecond).String()
	}
}

// Round is one broker phase and the bare phase run right after it.
type Round struct {
	Broker *Result
	Bare   *Result
}

// MedianRatio is the median over rounds of broker rate / bare rate, each
// ratio taken within its round: on a machine whose speed drifts, phases
// run side by side compare better than phases minutes apart. It is 0 when
// no round has a bare rate.
func MedianRatio(rounds []Round) float64 {
	var rs []float64
	for _, r := range rounds {
		if r.Broker != nil && r.Bare != nil && r.Bare.Rate > 0 {
			rs = append(rs, r.Broker.Rate/r.Bare.Rate)
		}
	}
	if len(rs) == 0 {
		return 0
	}
	slices.Sort(rs)
	if len(rs)%2 == 1 {
		return rs[len(rs)/2]
	}
	return (rs[len(rs)/2-1] + rs[len(rs)/2]) / 2
}

// WriteRounds prints one line per round (rates, p99s, ratio) and the
// median ratio.
func WriteRounds(w io.Writer, rounds []Round) {
	fmt.Fprintf(w, "rounds (broker, then bare, side by side)\n")
	for i, r := range rounds {
		cpu := ""
		if r.Broker.CPUPerRequest > 0 {
			cpu = fmt.Sprintf("  broker CPU %s/connect", r.Broker.CPUPerRequest.Round(time.Microsecond))
			if r.Bare.CPUPerRequest > 0 {
				cpu += fmt.Sprintf(", bare %s/request", r.Bare.CPUPerRequest.Round(time.Microsecond))
			}
		}
		fmt.Fprintf(w, "  %2d  broker %8.1f/s p99 %-8s  bare %8.1f/s p99 %-8s  ratio %.2f%s\n", i+1,
			r.Broker.Rate, fmtLatency(r.Broker.P99), r.Bare.Rate, fmtLatency(r.Bare.P99), r.Broker.Rate/max(r.Bare.Rate, 1e-9), cpu)
	}
	fmt.Fprintf(w, "  median ratio %.2f over %d rounds\n", MedianRatio(rounds), len(rounds))
}
