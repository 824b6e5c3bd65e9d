package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/sim/bench"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load generators for a running broker",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newBenchConnectCmd())
	cmd.AddCommand(newBenchHeartbeatCmd())
	return cmd
}

func newBenchConnectCmd() *cobra.Command {
	var cfg bench.Config
	var baseline bool
	cmd := &cobra.Command{
		Use:   "connect --server URL --token T --host-pool P --connects N --concurrency C [--baseline] [--dry-run]",
		Short: "Send N connects for distinct users with C workers; print rate, latency percentiles and errors",
		Long: `connect sends --connects POST /api/v1/hostpools/{pool}/connect requests, each for
a distinct user (--user-prefix plus a number), from --concurrency workers,
and prints the rate, the p50/p95/p99 latency and the errors by HTTP status
and error code. --dry-run asks the broker to decide and store nothing.

--baseline then runs the same load, with the same client and concurrency,
against a bare net/http server started in this process on 127.0.0.1:0 that
answers a JSON body of the broker's mean response size, and prints the ratio
broker/bare. That ratio is what the broker itself costs.`,
		Example: `  vdibroker bench connect --server http://127.0.0.1:8080 --token "$(cat vdibroker-data/admin.token)" \
    --host-pool bench --connects 10000 --concurrency 32 --dry-run --baseline`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Server = firstSet(cfg.Server, os.Getenv("VDIBROKER_SERVER"))
			cfg.Token = firstSet(cfg.Token, os.Getenv("VDIBROKER_TOKEN"))
			if cfg.UserPrefix == "" {
				// A fresh prefix per run: users of an earlier run would be
				// answered as reconnects (R-C1), which measures something else.
				cfg.UserPrefix = fmt.Sprintf("bench-%d-", time.Now().Unix())
			}
			return runBenchConnect(cmd, cfg, baseline, cmd.OutOrStdout())
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
	fl.BoolVar(&baseline, "baseline", false, "also measure a bare in-process HTTP server and print the ratio broker/bare")
	return cmd
}

func runBenchConnect(cmd *cobra.Command, cfg bench.Config, baseline bool, out io.Writer) error {
	if err := cfg.Validate(); err != nil {
		field := vdibroker.ErrorField(err)
		flag := map[string]string{"server": "--server", "hostPool": "--host-pool", "connects": "--connects", "concurrency": "--concurrency"}[field]
		return usageError{fmt.Errorf("%s: %s", flag, strings.TrimPrefix(vdibroker.ErrorMessage(err), field+": "))}
	}
	ctx := cmd.Context()
	res, err := bench.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	res.WriteSummary(out, fmt.Sprintf("broker %s, host pool %q, dryRun %v", cfg.Server, cfg.HostPool, cfg.DryRun))
	if baseline {
		bare, err := bench.Baseline(ctx, cfg, res.ResponseBytes)
		if err != nil {
			return err
		}
		bare.WriteSummary(out, fmt.Sprintf("bare net/http server, %d-byte JSON answer", bare.ResponseBytes))
		bench.WriteRatio(out, res, bare)
	}
	if res.OK == 0 {
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
