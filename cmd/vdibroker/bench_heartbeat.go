package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/loadgen"
)

// benchHeartbeatOptions are the flags of bench heartbeat beyond the load.
type benchHeartbeatOptions struct {
	inProcess  bool
	dataDir    string // in-process broker's data dir ("" = a temp dir, removed after)
	database   string // in-process broker's database ("" = SQLite in the data dir)
	cpuProfile string
	jsonOut    bool
}

func newBenchHeartbeatCmd() *cobra.Command {
	cfg := loadgen.HeartbeatConfig{HostPrefix: "hb"}
	var opt benchHeartbeatOptions
	cmd := &cobra.Command{
		Use:   "heartbeat --server URL --token T --host-pool P --hosts N --sessions-per-host S --interval 10s --duration 60s [--server-pid PID | --in-process]",
		Short: "Register N agents and send their heartbeats with S sessions each; print handled rate, latency and the broker's memory",
		Long: `heartbeat is the host agents' load on a broker, to check its memory bound. It
creates the host pool if it is absent (maxSessionLimit 999999), gets a
registration token for every 250 hosts (the broker takes 500 new hosts of
a token at once, then 60 a minute), registers --hosts hosts (named --host-prefix plus a
number; a name an earlier run registered is reset and registered again, so runs can repeat), then
for --duration sends each host's heartbeat every --interval, the hosts'
heartbeats spread evenly over the interval, from at most --concurrency
requests in flight. Each heartbeat carries a metrics sample and the host's
--sessions-per-host Active sessions, the same ids and users every time, so
the first round adopts them (R-S2) and later rounds are steady state.

It prints offered and handled heartbeats per second, latency percentiles,
lateness (how long after its due time a heartbeat could go out: the broker
not keeping up shows here), errors by status and code, and whether the
broker kept up. With --server-pid (or --in-process) it also reads the
broker's resident memory (VmRSS, peak VmHWM) and CPU time from /proc.

--in-process starts the real broker in this process on 127.0.0.1:0 (SQLite
in --data-dir, or --database postgres://...), so one command measures
everything; its memory then includes this load generator's, which the
separate line for the generator lets you subtract only roughly. For the
broker's own memory, run vdibroker serve separately and pass --server-pid.`,
		Example: `  vdibroker serve --data-dir /tmp/hb &
  vdibroker bench heartbeat --server http://127.0.0.1:8080 --token "$(cat /tmp/hb/admin.token)" \
    --host-pool hb --hosts 10000 --sessions-per-host 25 --interval 10s --duration 60s --server-pid $!

  vdibroker bench heartbeat --in-process --host-pool hb --hosts 10000 --sessions-per-host 25 --duration 60s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Server = firstSet(cfg.Server, os.Getenv("VDIBROKER_SERVER"))
			cfg.Token = firstSet(cfg.Token, os.Getenv("VDIBROKER_TOKEN"))
			return runBenchHeartbeat(cmd, cfg, opt, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfg.Server, "server", "", "broker URL (default $VDIBROKER_SERVER)")
	fl.StringVar(&cfg.Token, "token", "", "admin or Contributor token (default $VDIBROKER_TOKEN)")
	fl.StringVar(&cfg.HostPool, "host-pool", "", "host pool of the hosts (created if absent)")
	fl.IntVar(&cfg.Hosts, "hosts", 1000, "number of hosts")
	fl.IntVar(&cfg.SessionsPerHost, "sessions-per-host", 25, "Active sessions each host reports")
	fl.DurationVar(&cfg.Interval, "interval", 10*time.Second, "each host's heartbeat interval")
	fl.DurationVar(&cfg.Duration, "duration", 60*time.Second, "how long to send heartbeats (after registration)")
	fl.IntVar(&cfg.Concurrency, "concurrency", 64, "requests in flight at most")
	fl.StringVar(&cfg.HostPrefix, "host-prefix", "hb", "prefix of the host names")
	fl.DurationVar(&cfg.Grace, "grace", 0, "how late after --duration a heartbeat may still go out (default one interval)")
	fl.IntVar(&cfg.ServerPID, "server-pid", 0, "broker's process id: read its memory and CPU from /proc")
	fl.DurationVar(&cfg.Timeout, "timeout", 30*time.Second, "timeout of each request")
	fl.BoolVar(&opt.inProcess, "in-process", false, "start the real broker in this process on 127.0.0.1:0 and measure it")
	fl.StringVar(&opt.dataDir, "data-dir", "", "with --in-process: the broker's data dir (default a temp dir, removed after)")
	fl.StringVar(&opt.database, "database", "", "with --in-process: postgres://... (default SQLite in the data dir)")
	fl.StringVar(&opt.cpuProfile, "cpu-profile", "", "with --in-process: write a CPU profile of the heartbeat run (broker and generator) to this file")
	fl.BoolVar(&opt.jsonOut, "json", false, "print the result as JSON")
	return cmd
}

func runBenchHeartbeat(cmd *cobra.Command, cfg loadgen.HeartbeatConfig, opt benchHeartbeatOptions, out io.Writer) error {
	ctx := cmd.Context()
	if opt.inProcess {
		if cfg.Server != "" || cfg.ServerPID != 0 {
			return usageError{errors.New("--in-process starts its own broker: do not give --server or --server-pid")}
		}
		dir := opt.dataDir
		if dir == "" {
			tmp, err := os.MkdirTemp("", "vdibroker-bench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			dir = tmp
		}
		m := &Main{Listen: "127.0.0.1:0", DataDir: dir, Database: opt.database}
		if err := m.Open(ctx); err != nil {
			return err
		}
		defer m.Close()
		cfg.Server, cfg.Token, cfg.ServerPID = m.URL(), m.AdminToken, os.Getpid()
	} else if opt.database != "" || opt.dataDir != "" || opt.cpuProfile != "" {
		return usageError{errors.New("--data-dir, --database and --cpu-profile need --in-process")}
	}
	if err := cfg.Validate(); err != nil {
		field := vdibroker.ErrorField(err)
		flag := map[string]string{
			"server": "--server", "hostPool": "--host-pool", "hosts": "--hosts", "sessionsPerHost": "--sessions-per-host",
			"interval": "--interval", "duration": "--duration", "concurrency": "--concurrency",
			"hostPrefix": "--host-prefix", "serverPid": "--server-pid",
		}[field]
		return usageError{fmt.Errorf("%s: %s", flag, strings.TrimPrefix(vdibroker.ErrorMessage(err), field+": "))}
	}
	if opt.cpuProfile != "" {
		stop, err := startCPUProfile(opt.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	res, err := loadgen.Heartbeat(ctx, cfg)
	if err != nil {
		return err
	}
	if opt.jsonOut {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		where := cfg.Server
		if opt.inProcess {
			where = "in-process " + storeKind(opt.database) + " broker " + cfg.Server
		}
		res.WriteSummary(out, fmt.Sprintf("broker %s, host pool %q", where, cfg.HostPool))
	}
	if res.OK == 0 {
		return errors.New("no heartbeat succeeded")
	}
	return nil
}

// startCPUProfile writes a Go CPU profile to path until the returned stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
