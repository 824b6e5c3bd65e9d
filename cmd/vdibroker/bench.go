package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/loadgen"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load generators for a running broker",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newBenchConnectCmd())
	cmd.AddCommand(newBenchHeartbeatCmd())
	cmd.AddCommand(newBenchPodCmd())
	cmd.AddCommand(newBenchBareServerCmd())
	cmd.AddCommand(newBenchGatewayCmd())
	cmd.AddCommand(newBenchFederationCmd())
	return cmd
}

// newBenchBareServerCmd is the baseline's bare server in a process of its
// own, which bench connect --baseline starts: it prints its URL on a line
// of its own and serves until killed or its standard input is closed.
func newBenchBareServerCmd() *cobra.Command {
	var listen string
	var size int
	cmd := &cobra.Command{
		Use:    "bare-server [--listen ADDR] [--response-bytes N]",
		Short:  "Serve the bare baseline server of bench connect --baseline",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: loadgen.BareHandler(size), ReadHeaderTimeout: 10 * time.Second}
			go srv.Serve(ln)
			defer srv.Close()
			fmt.Fprintf(cmd.OutOrStdout(), "http://%s\n", ln.Addr())
			io.Copy(io.Discard, cmd.InOrStdin()) // until the parent closes it
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "address to listen on")
	cmd.Flags().IntVar(&size, "response-bytes", 855, "size of the JSON answer")
	return cmd
}

// bareProcess starts `vdibroker bench bare-server` and returns its URL,
// its process id and a function that stops it.
func bareProcess(responseBytes int) (url string, pid int, stop func(), err error) {
	exe, err := os.Executable()
	if err != nil {
		return "", 0, nil, err
	}
	c := exec.Command(exe, "bench", "bare-server", "--response-bytes", fmt.Sprint(responseBytes))
	stdin, err := c.StdinPipe()
	if err != nil {
		return "", 0, nil, err
	}
	stdout, err := c.StdoutPipe()
	if err != nil {
		return "", 0, nil, err
	}
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		return "", 0, nil, err
	}
	stop = func() {
		stdin.Close()
		c.Process.Kill()
		c.Wait()
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		stop()
		return "", 0, nil, fmt.Errorf("bare server process %s: no URL on its output (%q): %v", exe, line, err)
	}
	return strings.TrimSpace(line), c.Process.Pid, stop, nil
}

func newBenchConnectCmd() *cobra.Command {
	var cfg loadgen.Config
	var baseline, inProcess bool
	var rounds, serverPID int
	cmd := &cobra.Command{
		Use:   "connect --server URL --token T --host-pool P --connects N --concurrency C [--baseline] [--dry-run]",
		Short: "Send N connects for distinct users with C workers; print rate, latency percentiles and errors",
		Long: `connect sends --connects POST /api/v1/hostpools/{pool}/connect requests, each for
a distinct user (--user-prefix plus a number), from --concurrency workers,
and prints the rate, the p50/p95/p99 latency and the errors by HTTP status
and error code. --dry-run asks the broker to decide and store nothing.

--baseline then runs the same load, with the same client and concurrency,
against a bare net/http server on 127.0.0.1:0 that answers a JSON body of
the broker's mean response size, and prints the ratio broker/bare. That
ratio is what the broker itself costs. The bare server runs as a process of
its own, as the broker does, so both compete with this load generator for
the CPU alike; --baseline-in-process runs it inside this process instead
(sharing the generator's Go runtime, which favours it).

--rounds N repeats the broker phase (each round with users of its own)
and, with --baseline, the bare phase right after it, then prints each
round's ratio and their median: on a machine whose speed drifts, a ratio
taken within one round is steadier than one run of each.

--server-pid PID (the broker's process) adds the CPU time the broker used
per connect, read from /proc, and with --baseline the bare server's per
request: figures that move little with other work on the machine, so two
builds can be compared by them when the machine is busy.`,
		Example: `  vdibroker bench connect --server http://127.0.0.1:8080 --token "$(cat vdibroker-data/admin.token)" \
    --host-pool bench --connects 10000 --concurrency 32 --dry-run --baseline`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Server = firstSet(cfg.Server, os.Getenv("VDIBROKER_SERVER"))
			cfg.Token = firstSet(cfg.Token, os.Getenv("VDIBROKER_TOKEN"))
			// --user-prefix "" would silently get the default prefix.
			if err := emptyFlag(cmd, "user-prefix"); err != nil {
				return err
			}
			if cfg.UserPrefix == "" {
				// A fresh prefix per run: users of an earlier run would be
				// answered as reconnects (R-C1), which measures something else.
				cfg.UserPrefix = fmt.Sprintf("bench-%d-", time.Now().Unix())
			}
			return runBenchConnect(cmd, cfg, benchConnectOptions{baseline, inProcess, rounds, serverPID}, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfg.Server, "server", "", "broker URL (default $VDIBROKER_SERVER)")
	fl.StringVar(&cfg.Token, "token", "", "API token (default $VDIBROKER_TOKEN)")
	fl.StringVar(&cfg.HostPool, "host-pool", "", "host pool to connect to")
	fl.IntVar(&cfg.Connects, "connects", 1000, "number of connects, one per distinct user")
	fl.IntVar(&cfg.Concurrency, "concurrency", 8, "concurrent workers")
	fl.BoolVar(&cfg.DryRun, "dry-run", false, `send "dryRun": true (the broker decides and stores nothing)`)
	fl.StringVar(&cfg.UserPrefix, "user-prefix", "", "prefix of the user names (default bench-<unix time>-)")
	fl.DurationVar(&cfg.Timeout, "timeout", 30*time.Second, "timeout of each request")
	fl.BoolVar(&baseline, "baseline", false, "also measure a bare HTTP server (a process of its own) and print the ratio broker/bare")
	fl.BoolVar(&inProcess, "baseline-in-process", false, "with --baseline: run the bare server inside this process")
	fl.IntVar(&rounds, "rounds", 1, "rounds of broker then bare phase (1..100); prints the median ratio")
	fl.IntVar(&serverPID, "server-pid", 0, "the broker's process id: print its CPU time per connect (and the bare server's per request)")
	return cmd
}

// benchConnectOptions are bench connect's flags beyond the load.
type benchConnectOptions struct {
	baseline, inProcess bool
	rounds, serverPID   int
}

func runBenchConnect(cmd *cobra.Command, cfg loadgen.Config, opt benchConnectOptions, out io.Writer) error {
	baseline, inProcess, rounds := opt.baseline, opt.inProcess, opt.rounds
	if err := cfg.Validate(); err != nil {
		field := vdibroker.ErrorField(err)
		flag := map[string]string{"server": "--server", "hostPool": "--host-pool", "connects": "--connects", "concurrency": "--concurrency"}[field]
		return usageError{fmt.Errorf("%s: %s", flag, strings.TrimPrefix(vdibroker.ErrorMessage(err), field+": "))}
	}
	if rounds < 1 || rounds > 100 {
		return usageError{fmt.Errorf("--rounds: must be 1..100, got %d", rounds)}
	}
	ctx := cmd.Context()
	var done []loadgen.Round
	bareURL, where, barePID := "", "in this process", 0
	prefix := cfg.UserPrefix
	ok := 0
	for round := 1; round <= rounds; round++ {
		label := ""
		if rounds > 1 {
			// Users of an earlier round would be answered as reconnects.
			cfg.UserPrefix = fmt.Sprintf("%sr%d-", prefix, round)
			label = fmt.Sprintf("round %d: ", round)
		}
		res, err := loadgen.MeasureCPU(opt.serverPID, func() (*loadgen.Result, error) { return loadgen.Connect(ctx, cfg) })
		if err != nil {
			return err
		}
		ok += res.OK
		res.WriteSummary(out, fmt.Sprintf("%sbroker %s, host pool %q, dryRun %v", label, cfg.Server, cfg.HostPool, cfg.DryRun))
		if !baseline {
			continue
		}
		var bare *loadgen.Result
		switch {
		case inProcess:
			bare, err = loadgen.Baseline(ctx, cfg, res.ResponseBytes)
		default:
			if bareURL == "" {
				// One bare process for every round, sized by the first
				// round's answers.
				where = "own process"
				url, pid, stop, perr := bareProcess(res.ResponseBytes)
				if perr != nil {
					return perr
				}
				defer stop()
				bareURL, barePID = url, pid
			}
			if opt.serverPID == 0 {
				barePID = 0 // CPU figures only beside the broker's
			}
			bare, err = loadgen.MeasureCPU(barePID, func() (*loadgen.Result, error) { return loadgen.BaselineAt(ctx, cfg, bareURL) })
		}
		if err != nil {
			return err
		}
		bare.WriteSummary(out, fmt.Sprintf("%sbare net/http server (%s), %d-byte JSON answer", label, where, bare.ResponseBytes))
		loadgen.WriteRatio(out, res, bare)
		done = append(done, loadgen.Round{Broker: res, Bare: bare})
	}
	if len(done) > 1 {
		loadgen.WriteRounds(out, done)
	}
	if ok == 0 {
		return errors.New("no connect succeeded")
	}
	return nil
}

func firstSet(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

func init() { rootCmd.AddCommand(newBenchCmd()) }
