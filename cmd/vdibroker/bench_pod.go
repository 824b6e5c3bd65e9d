package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/loadgen"
)

// benchPodOptions are the flags of bench pod beyond the load's sizes.
type benchPodOptions struct {
	dataDir    string // "" = a temp dir, removed after
	database   string // "" = SQLite in the data dir; postgres://... gets a schema of its own
	keep       bool   // keep the data dir / schema
	cpuProfile string // the measured broker's CPU profile
	output     string // table or json
}

func newBenchPodCmd() *cobra.Command {
	var cfg loadgen.PodConfig
	var opt benchPodOptions
	cmd := &cobra.Command{
		Use:   "pod [--hosts N] [--sessions-per-host S] [--database postgres://...] [--output json]",
		Short: "Load one broker with a full pod's state and load, and check the pod's targets",
		Long: `pod starts vdibroker serve as a process of its own on 127.0.0.1:0 (SQLite in
a fresh data dir, or --database postgres://... in a fresh schema of that
database, dropped after), and builds a full pod's state before measuring:

  - pool pod-large: --hosts hosts (default 10,000), pool pod-small:
    --small-hosts (default 100); BreadthFirst.
  - every host registered through the API and heartbeating every
    --interval (each pool's hosts spread evenly over the interval, as
    independent agents are); --sessions-per-host users per host
    (default 25) placed by connects through the API (the pools' limit is
    the sessions per host while seeding, so every host gets exactly that
    many, then 999999), and reported Active by the hosts' next heartbeats.
  - a LoggedOff history of --history-days days (default 7) with
    --logons-per-seat-day sessions per seat and day (default 1.5), written
    by one INSERT ... SELECT per 100,000 rows into user_sessions with the
    broker stopped (the API would take hours), then the broker restarted.

Then, while every host keeps heartbeating, it runs --rounds rounds of four
--phase long phases (dry runs in pod-large, in pod-small, connects in
pod-large, in pod-small; --concurrency workers) with ?user= listings,
/metrics scrapes and the console's overview and pool page beside them, and
prints each figure with its target and PASS or FAIL (--output json: all of
it as JSON); heartbeats are judged by their p99 in every phase (under
250 ms) besides their rate. Everything goes to 127.0.0.1 only; every loop is bounded.

--broker-cpu-profile FILE writes the measured broker's CPU profile (go tool
pprof FILE).`,
		Example: `  vdibroker bench pod
  vdibroker bench pod --hosts 1000 --sessions-per-host 10 --phase 5s
  vdibroker bench pod --database 'postgres://vdibroker:vdibroker@127.0.0.1:5432/vdibroker?sslmode=disable' --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBenchPod(cmd.Context(), cfg, opt, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&cfg.Hosts, "hosts", 10_000, "hosts of the large pool")
	fl.IntVar(&cfg.SmallHosts, "small-hosts", 100, "hosts of the small pool")
	fl.IntVar(&cfg.SessionsPerHost, "sessions-per-host", 25, "open sessions per host (both pools)")
	fl.IntVar(&cfg.HistoryDays, "history-days", 7, "days of LoggedOff history")
	fl.Float64Var(&cfg.LogonsPerSeatDay, "logons-per-seat-day", 1.5, "history sessions per seat and day")
	fl.DurationVar(&cfg.Interval, "interval", 10*time.Second, "each host's heartbeat interval")
	fl.IntVar(&cfg.Rounds, "rounds", 2, "rounds of the four measured phases")
	fl.DurationVar(&cfg.Phase, "phase", 10*time.Second, "length of each measured phase")
	fl.IntVar(&cfg.Concurrency, "concurrency", 16, "connect and dry-run workers")
	fl.IntVar(&cfg.AgentConcurrency, "agent-concurrency", 64, "seeding requests in flight at most (registrations, connects, the first heartbeats)")
	fl.IntVar(&cfg.HeartbeatConcurrency, "heartbeat-concurrency", 1000, "heartbeats in flight at most after the first round (a pod's agents do not wait for each other)")
	fl.DurationVar(&cfg.SeedTimeout, "seed-timeout", 15*time.Minute, "bound on building the state")
	fl.DurationVar(&cfg.Timeout, "timeout", time.Minute, "timeout of each connect and heartbeat (readers get at least 3 minutes)")
	fl.StringVar(&opt.dataDir, "data-dir", "", "the broker's data dir (default a temp dir, removed after); must be new")
	fl.StringVar(&opt.database, "database", "", "postgres://... to run the broker on PostgreSQL, in a schema of its own (default SQLite)")
	fl.BoolVar(&opt.keep, "keep", false, "keep the data dir and the PostgreSQL schema after the run")
	fl.StringVar(&opt.cpuProfile, "broker-cpu-profile", "", "write the measured broker's CPU profile to this file")
	fl.StringVarP(&opt.output, "output", "o", "table", "output: table or json")
	return cmd
}

func runBenchPod(ctx context.Context, cfg loadgen.PodConfig, opt benchPodOptions, out, errOut io.Writer) error {
	if opt.output != "table" && opt.output != "json" {
		return usageError{fmt.Errorf("--output: want table or json, got %q", opt.output)}
	}
	dir := opt.dataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "vdibroker-pod-")
		if err != nil {
			return err
		}
		dir = tmp
		if !opt.keep {
			defer os.RemoveAll(tmp)
		}
	} else if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return usageError{fmt.Errorf("--data-dir %s: must be new or empty (the bench builds its own state)", dir)}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if opt.database != "" {
		dsn, drop, err := loadgen.PostgresSchema(ctx, opt.database)
		if err != nil {
			return err
		}
		if !opt.keep {
			defer func() {
				if err := drop(context.Background()); err != nil {
					fmt.Fprintf(errOut, "warning: %v\n", err)
				}
			}()
		}
		cfg.Database = dsn
	}
	token := "vdb_admin_" + randomHex(24)
	b := &brokerProcess{dataDir: dir, database: cfg.Database, token: token, cpuProfile: opt.cpuProfile}
	defer b.stop()
	cfg.Broker = loadgen.PodBroker{Start: b.start, Stop: b.stop}
	cfg.Token, cfg.DataDir = token, dir
	cfg.Progress = func(format string, args ...any) {
		fmt.Fprintf(errOut, "%s  %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	res, err := loadgen.RunPod(ctx, cfg)
	if err != nil {
		var ve *vdibroker.Error
		if errors.As(err, &ve) && ve.Code == vdibroker.EInvalid {
			return usageError{err}
		}
		return fmt.Errorf("%w (broker logs in %s)", err, dir)
	}
	if opt.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	res.WriteTable(out)
	return nil
}

// brokerProcess is vdibroker serve as a process of its own, started and
// stopped by the pod bench.
type brokerProcess struct {
	dataDir, database, token, cpuProfile string
	cmd                                  *exec.Cmd
}

// start runs serve on 127.0.0.1:0 and returns its URL once it listens.
func (b *brokerProcess) start(ctx context.Context, phase string) (string, int, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", 0, err
	}
	args := []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", b.dataDir}
	if b.database != "" {
		args = append(args, "--database", b.database)
	}
	if phase == "measure" && b.cpuProfile != "" {
		args = append(args, "--cpu-profile", b.cpuProfile)
	}
	logFile, err := os.Create(filepath.Join(b.dataDir, "broker-"+phase+".log"))
	if err != nil {
		return "", 0, err
	}
	defer logFile.Close() // the child holds its own descriptor
	c := exec.Command(exe, args...)
	c.Env = append(os.Environ(), "VDIBROKER_ADMIN_TOKEN="+b.token)
	c.Stderr = logFile
	stdout, err := c.StdoutPipe()
	if err != nil {
		return "", 0, err
	}
	if err := c.Start(); err != nil {
		return "", 0, err
	}
	b.cmd = c
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if url, ok := strings.CutPrefix(sc.Text(), "vdibroker listening on "); ok {
				lines <- url
				break
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case url := <-lines:
		return strings.TrimSpace(url), c.Process.Pid, nil
	case <-time.After(2 * time.Minute):
	case <-ctx.Done():
	}
	b.stop()
	return "", 0, fmt.Errorf("broker (%s) did not start: see %s", phase, logFile.Name())
}

// stop sends SIGTERM (serve shuts down gracefully and writes its profile)
// and kills the process if it has not exited within a minute.
func (b *brokerProcess) stop() error {
	if b.cmd == nil {
		return nil
	}
	c := b.cmd
	b.cmd = nil
	c.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		c.Process.Kill()
		<-done
		return errors.New("broker did not stop within a minute of SIGTERM: killed")
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
