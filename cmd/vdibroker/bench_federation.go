package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/cputime"
	"github.com/vdibroker/vdibroker/loadgen"
)

// benchFederationOptions are bench federation's flags.
type benchFederationOptions struct {
	pods        []int // federation sizes measured, ascending; the last is how many pods start
	sites       int
	sessions    int // open sessions in all, at the largest size
	hostsPerPod int
	connects    int // measured connects per phase
	rounds      int
	concurrency int
	// rate, when above 0, adds paced rounds at rate connects per second
	// (an open loop) of pacedConnects connects each.
	rate          float64
	pacedConnects int
	podTimeout    time.Duration
	output        string
	cpuProfile    string // CPU profiles of the global phases: cpuProfile.<pods>
}

// fedBenchPool is every pod's one member pool; fedBenchEntitlement the
// global entitlement of them all.
const (
	fedBenchPool        = "desk"
	fedBenchEntitlement = "desktop"
)

func newBenchFederationCmd() *cobra.Command {
	opt := benchFederationOptions{}
	var podsText string
	cmd := &cobra.Command{
		Use:   "federation [--pods 3,10,25,50] [--sites 15] [--sessions 250000]",
		Short: "Measure global connects across a federation of pods against pool connects, from 3 pods to Horizon's 50",
		Long: `federation starts the largest of --pods pods in this process, each the real
broker (serve's wiring: its own SQLite store in a temp dir, its own HTTP
server on 127.0.0.1), pod-to-pod calls over real HTTP on loopback, signed
with a shared secret. Every pod has one pool ("desk", BreadthFirst) of
--hosts-per-pod hosts, registered and heartbeating through the API, and
--sessions / pods open sessions placed by pool connects through the API
(250,000 in 50 pods: Horizon Cloud Pod Architecture's published limits
are 50 pods, 15 sites, 250,000 sessions).

Then for each size of --pods, smallest first, the pods of that size get a
federation document (the first N pods over min(N, --sites) sites) with
one global entitlement, "desktop" (scope AllSites, SessionCount, every
pod's pool a member), and, through the first pod, --rounds rounds of two
phases of --connects connects each from --concurrency workers, side by
side: pool connects to the first pod's pool, then global connects to
"desktop". Every connect is for a new user and makes a session.

With --rate, each size then runs --rounds rounds of paced phases:
--paced-connects pool connects, then as many global connects, offered at
--rate per second whatever the answers, each connect's latency counted
from when it was due. At 8 workers the shared cores run flat out and a
connect's latency is the queue of every pod's work; paced below that,
it is the latency of the connect's own path.

Reported per size: pool and global connect p50 and p99 and their ratios
(target: global within 2x of a pool connect), the process's CPU time per
pool and per global connect (every pod's and the load's: at a fixed
number of workers a connect's latency follows it), and per global connect the
pod-to-pod calls (by operation: loads, sessions, connect) and their bytes
(request and status lines, headers and bodies, both directions, counted by
a wrapper of every pod's pod-to-pod client).

Every pod and the load generator share this process and its cores: the
figures are for one machine carrying the whole federation, so a pod's
work is slower than on a machine of its own; the ratio is measured under
the same conditions. Everything goes to 127.0.0.1; every loop is bounded.`,
		Example: `  vdibroker bench federation
  vdibroker bench federation --pods 3,50 --rate 100
  vdibroker bench federation --pods 3,10 --sessions 20000 --connects 500`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, f := range strings.Split(podsText, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil || n < 2 || n > 100 {
					return usageError{fmt.Errorf("--pods: want sizes of 2..100 separated by commas, got %q", podsText)}
				}
				opt.pods = append(opt.pods, n)
			}
			slices.Sort(opt.pods)
			opt.pods = slices.Compact(opt.pods)
			return runBenchFederation(cmd.Context(), opt, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&podsText, "pods", "3,10,25,50", "federation sizes to measure (pods), separated by commas")
	fl.IntVar(&opt.sites, "sites", 15, "sites the pods are spread over (at most one per pod)")
	fl.IntVar(&opt.sessions, "sessions", 250_000, "open sessions in all the pods, placed before measuring")
	fl.IntVar(&opt.hostsPerPod, "hosts-per-pod", 20, "hosts of each pod's pool")
	fl.IntVar(&opt.connects, "connects", 2000, "connects of each measured phase")
	fl.IntVar(&opt.rounds, "rounds", 2, "rounds of a pool phase then a global phase per size")
	fl.IntVar(&opt.concurrency, "concurrency", 8, "workers of each phase")
	fl.Float64Var(&opt.rate, "rate", 0, "also measure paced phases: connects offered at this many per second, whatever the answers (0: none)")
	fl.IntVar(&opt.pacedConnects, "paced-connects", 1000, "connects of each paced phase (with --rate)")
	fl.DurationVar(&opt.podTimeout, "pod-timeout", 2*time.Second, "the pods' --pod-timeout")
	fl.StringVarP(&opt.output, "output", "o", "table", "output: table or json")
	fl.StringVar(&opt.cpuProfile, "cpuprofile", "", "write a Go CPU profile of each size's last global phase (the whole process: every pod and the load) to FILE.<pods>")
	return cmd
}

// fedBenchPod is one pod of the bench, running in this process.
type fedBenchPod struct {
	name, site, url string
	m               *Main
	api             *vhttp.Client
}

// FederationSize is what bench federation measured at one size.
type FederationSize struct {
	Pods     int `json:"pods"`
	Sites    int `json:"sites"`
	Sessions int `json:"sessions"` // open sessions in the federation's pools before the phases
	// Local are the pool connects, Global the global connects, every
	// round's together.
	Local  PhaseFigures `json:"local"`
	Global PhaseFigures `json:"global"`
	// PacedLocal and PacedGlobal are the paced rounds' (with --rate):
	// connects offered at a fixed rate, latency from when each was due.
	PacedLocal  *PhaseFigures `json:"pacedLocal,omitempty"`
	PacedGlobal *PhaseFigures `json:"pacedGlobal,omitempty"`
	// CallsPerConnect are the pod-to-pod calls per global connect, by
	// operation; BytesPerConnect their bytes.
	CallsPerConnect map[string]float64 `json:"callsPerConnect"`
	BytesPerConnect float64            `json:"bytesPerConnect"`
	// Directory is how long after the document was put every pod's whole
	// list of sessions was at their directory pods (R-G1); the phases
	// start after it, as a pod runs (a new document is a rare event),
	// and DirectoryCPU is the process's CPU in that time.
	Directory    time.Duration `json:"directoryNanos"`
	DirectoryCPU time.Duration `json:"directoryCPUNanos"`
}

// PhaseFigures are one kind of connect's figures over a size's rounds.
type PhaseFigures struct {
	Connects int           `json:"connects"`
	Errors   int           `json:"errors"`
	Rate     float64       `json:"rate"` // the rounds' mean
	P50      time.Duration `json:"p50"`
	P99      time.Duration `json:"p99"`
	// CPU is this process's CPU time per connect over the rounds: every
	// pod's and the load's, on the machine's cores. At a fixed number of
	// workers a connect's latency follows it.
	CPU time.Duration `json:"cpuPerConnect"`
}

func runBenchFederation(ctx context.Context, opt benchFederationOptions, out, errOut io.Writer) error {
	if opt.output != "table" && opt.output != "json" {
		return usageError{fmt.Errorf("--output: want table or json, got %q", opt.output)}
	}
	switch {
	case opt.sites < 1 || opt.sites > 100:
		return usageError{errors.New("--sites: must be 1..100")}
	case opt.connects < 1 || opt.connects > 1_000_000:
		return usageError{errors.New("--connects: must be 1..1000000")}
	case opt.rounds < 1 || opt.rounds > 20:
		return usageError{errors.New("--rounds: must be 1..20")}
	case opt.concurrency < 1 || opt.concurrency > 1000:
		return usageError{errors.New("--concurrency: must be 1..1000")}
	case opt.rate < 0 || opt.rate > 100_000:
		return usageError{errors.New("--rate: must be 0 (no paced phases) to 100000 connects per second")}
	case opt.pacedConnects < 1 || opt.pacedConnects > 1_000_000:
		return usageError{errors.New("--paced-connects: must be 1..1000000")}
	case opt.hostsPerPod < 1 || opt.hostsPerPod > 10_000:
		return usageError{errors.New("--hosts-per-pod: must be 1..10000")}
	case opt.sessions < 0 || opt.sessions > 10_000_000:
		return usageError{errors.New("--sessions: must be 0..10000000")}
	}
	dir, err := os.MkdirTemp("", "vdibroker-federation-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logf := func(format string, a ...any) {
		fmt.Fprintf(errOut, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
	}
	counter := loadgen.NewCallCounter()
	n := opt.pods[len(opt.pods)-1]
	t0 := time.Now()
	pods, err := startBenchPods(ctx, dir, n, opt, counter)
	defer func() {
		for _, p := range pods {
			p.m.Close()
		}
	}()
	if err != nil {
		return err
	}
	logf("started %d pods in %s", n, time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	perPod := opt.sessions / n
	if err := seedBenchPods(ctx, pods, opt.hostsPerPod, perPod); err != nil {
		return err
	}
	logf("%d hosts and %d open sessions (%d per pod, placed by pool connects) in %s", n*opt.hostsPerPod, perPod*n, perPod, time.Since(t0).Round(time.Millisecond))
	var sizes []FederationSize
	for gen, size := range opt.pods {
		members := pods[:size]
		cpu, t0 := cputime.Process(), time.Now()
		if err := putBenchDocument(ctx, members, gen+1); err != nil {
			return err
		}
		if err := waitDirectories(ctx, members); err != nil {
			return err
		}
		dirTook, dirCPU := time.Since(t0), cputime.Process()-cpu
		// The peers' load summaries the entry pod cached while their
		// lists were on their way say so until they expire: it asks
		// those pods themselves meanwhile (R-G1), as it would after any
		// new document, until the load TTL (3s) has passed.
		time.Sleep(3 * time.Second)
		logf("%d pods: every whole list at its directory pods %s after the document (CPU %s)", size, dirTook.Round(time.Millisecond), dirCPU.Round(time.Millisecond))
		entry := members[0]
		base := loadgen.Config{Server: entry.url, Token: entry.m.AdminToken, Connects: opt.connects, Concurrency: opt.concurrency, Timeout: time.Minute}
		// Warm up: the entry pod's caches of the document and the
		// peers' loads, and its connections to them.
		warm := base
		warm.Connects, warm.UserPrefix = min(opt.connects, 4*size), fmt.Sprintf("warm-%d-", size)
		if _, err := loadgen.GlobalConnect(ctx, warm, fedBenchEntitlement); err != nil {
			return err
		}
		fs := FederationSize{Pods: size, Sites: min(size, opt.sites), Sessions: perPod * size, CallsPerConnect: map[string]float64{},
			Directory: dirTook, DirectoryCPU: dirCPU}
		var local, global phaseRun
		var calls map[string]int64
		var bytes int64
		for r := 1; r <= opt.rounds; r++ {
			if err := local.run(ctx, base, false, fmt.Sprintf("local-%d-r%d-", size, r)); err != nil {
				return err
			}
			counter.Take()
			stop := func() {}
			if opt.cpuProfile != "" && r == opt.rounds {
				var err error
				if stop, err = startCPUProfile(fmt.Sprintf("%s.%d", opt.cpuProfile, size)); err != nil {
					return err
				}
			}
			err := global.run(ctx, base, true, fmt.Sprintf("global-%d-r%d-", size, r))
			stop()
			if err != nil {
				return err
			}
			c, b := counter.Take()
			bytes += b
			if calls == nil {
				calls = c
			} else {
				for op, k := range c {
					calls[op] += k
				}
			}
		}
		fs.Local, fs.Global = local.figures(), global.figures()
		if opt.rate > 0 {
			if fs.PacedLocal, fs.PacedGlobal, err = pacedRounds(ctx, base, opt, size); err != nil {
				return err
			}
			logf("%d pods, paced at %g/s: pool p50 %s, global p50 %s", size, opt.rate, fs.PacedLocal.P50, fs.PacedGlobal.P50)
		}
		for op, k := range calls {
			fs.CallsPerConnect[op] = float64(k) / float64(fs.Global.Connects)
		}
		fs.BytesPerConnect = float64(bytes) / float64(fs.Global.Connects)
		sizes = append(sizes, fs)
		logf("%d pods: pool p50 %s, global p50 %s", size, fs.Local.P50, fs.Global.P50)
	}
	if opt.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(sizes)
	}
	writeFederationTable(out, sizes, opt)
	return nil
}

// pacedWorkers bounds a paced phase's connects outstanding: enough that
// connects do not wait for a worker at the rates this bench offers.
const pacedWorkers = 256

// pacedRounds runs opt.rounds rounds of a paced pool phase then a paced
// global phase, each of opt.pacedConnects connects offered at opt.rate.
// Below the machine's pace a connect's latency is then its own path's,
// not the queue of every other connect's work on the shared cores.
func pacedRounds(ctx context.Context, base loadgen.Config, opt benchFederationOptions, size int) (local, global *PhaseFigures, err error) {
	base.Connects, base.Rate, base.Concurrency = opt.pacedConnects, opt.rate, pacedWorkers
	var ls, gs phaseRun
	for r := 1; r <= opt.rounds; r++ {
		if err := ls.run(ctx, base, false, fmt.Sprintf("paced-local-%d-r%d-", size, r)); err != nil {
			return nil, nil, err
		}
		if err := gs.run(ctx, base, true, fmt.Sprintf("paced-global-%d-r%d-", size, r)); err != nil {
			return nil, nil, err
		}
	}
	l, g := ls.figures(), gs.figures()
	return &l, &g, nil
}

// phaseRun is one kind of connect's rounds so far, and the process's CPU
// time they took.
type phaseRun struct {
	rs  []*loadgen.Result
	cpu time.Duration
}

// run runs one round of cfg's connects, each for a new user named from
// prefix: global connects to the bench's entitlement, or pool connects
// to its pool.
func (p *phaseRun) run(ctx context.Context, cfg loadgen.Config, global bool, prefix string) error {
	cfg.UserPrefix = prefix
	cpu := cputime.Process()
	var res *loadgen.Result
	var err error
	if global {
		res, err = loadgen.GlobalConnect(ctx, cfg, fedBenchEntitlement)
	} else {
		cfg.HostPool = fedBenchPool
		res, err = loadgen.Connect(ctx, cfg)
	}
	if err != nil {
		return err
	}
	p.cpu += cputime.Process() - cpu
	p.rs = append(p.rs, res)
	return nil
}

func (p *phaseRun) figures() PhaseFigures { return phaseFigures(p.rs, p.cpu) }

// phaseFigures merges the rounds of one kind of connect, which took cpu
// of this process in all: the latency percentiles are the rounds' worst
// (a result keeps percentiles, not its latencies), the rate their mean.
func phaseFigures(rs []*loadgen.Result, cpu time.Duration) PhaseFigures {
	var f PhaseFigures
	for _, r := range rs {
		f.Connects += r.Connects
		f.Errors += r.Connects - r.OK
		f.Rate += r.Rate / float64(len(rs))
		f.P50 = max(f.P50, r.P50)
		f.P99 = max(f.P99, r.P99)
	}
	if f.Connects > 0 {
		f.CPU = cpu / time.Duration(f.Connects)
	}
	return f
}

func writeFederationTable(w io.Writer, sizes []FederationSize, opt benchFederationOptions) {
	fmt.Fprintf(w, "bench federation: %d pods in this process (real brokers, SQLite each, pod-to-pod HTTP on 127.0.0.1), %d hosts per pod, %d sessions placed before measuring\n",
		opt.pods[len(opt.pods)-1], opt.hostsPerPod, sizes[len(sizes)-1].Sessions)
	fmt.Fprintf(w, "each size: %d round(s) of %d pool connects then %d global connects (AllSites, SessionCount) through the first pod, %d workers; percentiles are the rounds' worst\n\n",
		opt.rounds, opt.connects, opt.connects, opt.concurrency)
	fmt.Fprintf(w, "%5s %5s %8s  %-21s %-21s %-13s %-21s %-30s %s\n", "pods", "sites", "sessions", "pool connect p50/p99", "global p50/p99", "global/pool", "CPU per pool/global", "pod calls per global connect", "bytes/connect")
	for _, s := range sizes {
		var ops []string
		total := 0.0
		for op, k := range s.CallsPerConnect {
			ops = append(ops, fmt.Sprintf("%s %.2f", op, k))
			total += k
		}
		slices.Sort(ops)
		errs := ""
		if s.Local.Errors+s.Global.Errors > 0 {
			errs = fmt.Sprintf("  errors: %d pool, %d global", s.Local.Errors, s.Global.Errors)
		}
		fmt.Fprintf(w, "%5d %5d %8d  %-21s %-21s %-13s %-21s %-30s %.0f%s\n", s.Pods, s.Sites, s.Sessions,
			fmtMs(s.Local.P50)+" / "+fmtMs(s.Local.P99), fmtMs(s.Global.P50)+" / "+fmtMs(s.Global.P99),
			fmt.Sprintf("%.2f / %.2f", ratioOf(s.Global.P50, s.Local.P50), ratioOf(s.Global.P99, s.Local.P99)),
			fmtMs(s.Local.CPU)+" / "+fmtMs(s.Global.CPU),
			fmt.Sprintf("%.1f (%s)", total, strings.Join(ops, ", ")), s.BytesPerConnect, errs)
	}
	if opt.rate > 0 {
		fmt.Fprintf(w, "\npaced: %d round(s) of %d pool connects then %d global connects offered at %g/s (up to %d outstanding), latency from when each was due (not a free worker's late timer: loadgen.Config.Rate)\n\n",
			opt.rounds, opt.pacedConnects, opt.pacedConnects, opt.rate, pacedWorkers)
		fmt.Fprintf(w, "%5s  %-21s %-21s %-13s %-21s %s\n", "pods", "pool connect p50/p99", "global p50/p99", "global/pool", "CPU per pool/global", "rate pool/global")
		for _, s := range sizes {
			l, g := s.PacedLocal, s.PacedGlobal
			errs := ""
			if l.Errors+g.Errors > 0 {
				errs = fmt.Sprintf("  errors: %d pool, %d global", l.Errors, g.Errors)
			}
			fmt.Fprintf(w, "%5d  %-21s %-21s %-13s %-21s %.0f/s / %.0f/s%s\n", s.Pods,
				fmtMs(l.P50)+" / "+fmtMs(l.P99), fmtMs(g.P50)+" / "+fmtMs(g.P99),
				fmt.Sprintf("%.2f / %.2f", ratioOf(g.P50, l.P50), ratioOf(g.P99, l.P99)),
				fmtMs(l.CPU)+" / "+fmtMs(g.CPU), l.Rate, g.Rate, errs)
		}
	}
	fmt.Fprintln(w)
	for _, s := range sizes {
		fmt.Fprintf(w, "%d pods: every pod's whole list of sessions at the directory pods %s after the document was put (CPU %s); the connects ran after it\n",
			s.Pods, s.Directory.Round(time.Millisecond), s.DirectoryCPU.Round(time.Millisecond))
	}
	last := sizes[len(sizes)-1]
	verdict := "PASS"
	if ratioOf(last.Global.P50, last.Local.P50) > 2 || ratioOf(last.Global.P99, last.Local.P99) > 2 || last.Global.Errors > 0 {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "\ntarget: global connect within 2x of a pool connect (p50 and p99) at %d pods, %d workers: %s\n", last.Pods, opt.concurrency, verdict)
	if p := last.PacedGlobal; p != nil {
		verdict = "PASS"
		if ratioOf(p.P50, last.PacedLocal.P50) > 2 || ratioOf(p.P99, last.PacedLocal.P99) > 2 || p.Errors > 0 {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "target: global connect within 2x of a pool connect (p50 and p99) at %d pods, paced at %g/s: %s\n", last.Pods, opt.rate, verdict)
	}
}

func fmtMs(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }

func ratioOf(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// startBenchPods starts n pods in this process, a few at a time.
func startBenchPods(ctx context.Context, dir string, n int, opt benchFederationOptions, counter *loadgen.CallCounter) ([]*fedBenchPod, error) {
	secret := filepath.Join(dir, "federation.secret")
	if err := os.WriteFile(secret, []byte(vdibroker.RandomHex(32)), 0o600); err != nil {
		return nil, err
	}
	pods := make([]*fedBenchPod, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			pods[i], errs[i] = startBenchPod(ctx, dir, secret, i, opt, counter)
		})
	}
	wg.Wait()
	started := slices.DeleteFunc(slices.Clone(pods), func(p *fedBenchPod) bool { return p == nil })
	return started, errors.Join(errs...)
}

func startBenchPod(ctx context.Context, dir, secret string, i int, opt benchFederationOptions, counter *loadgen.CallCounter) (*fedBenchPod, error) {
	// The pod's URL is in the document and must be its own: a port
	// found free, then listened on by the pod.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	p := &fedBenchPod{name: fmt.Sprintf("pod%02d", i+1), site: fmt.Sprintf("site%02d", i%opt.sites+1), url: "http://" + addr}
	p.m = &Main{Listen: addr, DataDir: filepath.Join(dir, p.name), Logger: slog.New(slog.DiscardHandler),
		Federation: FederationFlags{PodName: p.name, Site: p.site, ExternalURL: p.url, SecretFile: secret,
			PodTimeout: opt.podTimeout, Allow: []string{"http://127.0.0.1"}, WrapPodTransport: counter.Wrap}}
	if err := p.m.Open(ctx); err != nil {
		return nil, fmt.Errorf("pod %s: %w", p.name, err)
	}
	p.api = vhttp.NewClient(p.url, p.m.AdminToken)
	return p, nil
}

// seedBenchPods gives every pod its pool of hosts, each heartbeating once
// with a heartbeat timeout long enough for the run, and perPod sessions
// placed by pool connects (each pod a few at a time).
func seedBenchPods(ctx context.Context, pods []*fedBenchPod, hosts, perPod int) error {
	errs := make([]error, len(pods))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = seedBenchPod(ctx, p, hosts, perPod)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func seedBenchPod(ctx context.Context, p *fedBenchPod, hosts, perPod int) error {
	if _, err := p.api.PutHostPool(ctx, fedBenchPool, map[string]any{"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
		"maxSessionLimit": 999999, "heartbeatTimeoutSeconds": vdibroker.MaxHeartbeatTimeoutSeconds}); err != nil {
		return fmt.Errorf("pod %s: pool: %w", p.name, err)
	}
	var rt *vhttp.RegistrationTokenResponse
	for h := range hosts {
		// A token for every 250 new hosts: the broker takes a token's
		// NewHostsPerTokenBurst at once, then a second each (R-SEC).
		if h%(vhttp.NewHostsPerTokenBurst/2) == 0 {
			var err error
			if rt, err = p.api.CreateRegistrationToken(ctx, fedBenchPool, vhttp.RegistrationTokenRequest{}); err != nil {
				return fmt.Errorf("pod %s: registration token: %w", p.name, err)
			}
		}
		name := fmt.Sprintf("%s-h%03d", p.name, h+1)
		reg, err := p.api.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: name, Address: name + ":3389"})
		if err == nil {
			_, err = p.api.Heartbeat(ctx, reg.Credential, &vdibroker.HeartbeatRequest{})
		}
		if err != nil {
			return fmt.Errorf("pod %s: host %s: %w", p.name, name, err)
		}
	}
	if perPod == 0 {
		return nil
	}
	res, err := loadgen.Connect(ctx, loadgen.Config{Server: p.url, Token: p.m.AdminToken, HostPool: fedBenchPool,
		Connects: perPod, Concurrency: 16, UserPrefix: "seed-" + p.name + "-", Timeout: time.Minute})
	if err != nil {
		return fmt.Errorf("pod %s: sessions: %w", p.name, err)
	}
	if res.OK != perPod {
		return fmt.Errorf("pod %s: %d of %d seeding connects failed: %+v", p.name, perPod-res.OK, perPod, res.Errors)
	}
	return nil
}

// waitDirectories waits until every pod has sent its whole list of
// sessions to their directory pods at the document it holds (R-G1).
func waitDirectories(ctx context.Context, pods []*fedBenchPod) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, p := range pods {
		for {
			st, err := p.api.GetFederation(ctx)
			if err != nil {
				return fmt.Errorf("pod %s: federation status: %w", p.name, err)
			}
			if !st.Directory.Behind {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("pod %s: its session directory entries are still behind: %w", p.name, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// putBenchDocument gives the pods a document of them all (on their sites:
// pod i is on site i mod --sites), with one global entitlement of every
// pod's pool, at generation gen.
func putBenchDocument(ctx context.Context, pods []*fedBenchPod, gen int) error {
	var podList, members []map[string]any
	siteSet := map[string]bool{}
	for _, p := range pods {
		podList = append(podList, map[string]any{"name": p.name, "site": p.site, "url": p.url})
		members = append(members, map[string]any{"pod": p.name, "hostPool": fedBenchPool})
		siteSet[p.site] = true
	}
	var siteList []map[string]any
	for s := range siteSet {
		siteList = append(siteList, map[string]any{"name": s})
	}
	slices.SortFunc(siteList, func(a, b map[string]any) int { return cmp.Compare(a["name"].(string), b["name"].(string)) })
	doc := map[string]any{"generation": gen, "sites": siteList, "pods": podList,
		"globalEntitlements": []map[string]any{{"name": fedBenchEntitlement, "scope": "AllSites", "sessionDistribution": "SessionCount",
			"allUsers": true, "members": members}}}
	data, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	for _, p := range pods {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, p.url+"/api/v1/federation", strings.NewReader(string(data)))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+p.m.AdminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("pod %s: federation document: %w", p.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			return fmt.Errorf("pod %s: federation document: %s: %s", p.name, resp.Status, body)
		}
	}
	return nil
}
