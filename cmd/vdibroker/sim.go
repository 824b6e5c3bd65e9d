package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker/sim"
)

// simFlags are the flags of vdibroker sim.
type simFlags struct {
	scenario string
	example  string
	print    bool
	out      string
	noPlots  bool
	parallel int
}

func newSimCmd() *cobra.Command {
	var f simFlags
	cmd := &cobra.Command{
		Use:   "sim (--scenario FILE.yaml | --example NAME) --out DIR",
		Short: "Simulate placement algorithms and session limits on a scenario",
		Long: `sim replays a scenario of users logging on, disconnecting, reconnecting and
logging off against the real placement engine on a simulated clock, once per
algorithm and maxSessionLimit, and writes DIR/report.json, plots (PNG and
SVG) and a summary table. The same scenario and seed give the same
report.json, byte for byte.

Built-in examples: ` + strings.Join(sim.Examples(), ", ") + ` (print one with --example NAME --print).
See docs/capacity-planning.md.`,
		Example: `  vdibroker sim --example workday --out workday-out
  vdibroker sim --example workday --print > my-day.yaml
  vdibroker sim --scenario my-day.yaml --out my-day-out`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSim(cmd.Context(), f, cmd.OutOrStdout(), os.Stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.scenario, "scenario", "", "scenario YAML file")
	fl.StringVar(&f.example, "example", "", "built-in scenario: "+strings.Join(sim.Examples(), ", "))
	fl.BoolVar(&f.print, "print", false, "print the --example scenario's YAML and exit")
	fl.StringVar(&f.out, "out", "", "output directory for report.json and the plots (created if needed)")
	fl.BoolVar(&f.noPlots, "no-plots", false, "write report.json only")
	fl.IntVar(&f.parallel, "parallel", 0, "simulations run at once (default: number of CPUs); does not change the result")
	return cmd
}

func runSim(ctx context.Context, f simFlags, stdout io.Writer, stderr *os.File) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if (f.scenario == "") == (f.example == "") {
		return usageError{errors.New("give one of --scenario FILE.yaml or --example NAME")}
	}
	if f.print && f.example == "" {
		return usageError{errors.New("--print prints a built-in scenario: use it with --example")}
	}
	var name string
	var data []byte
	var err error
	if f.example != "" {
		name = f.example + ".yaml"
		if data, err = sim.Example(f.example); err != nil {
			return usageError{err}
		}
	} else {
		name = f.scenario
		if data, err = os.ReadFile(f.scenario); err != nil {
			return fmt.Errorf("read scenario: %w", err)
		}
	}
	if f.print {
		_, err := stdout.Write(data)
		return err
	}
	if f.out == "" {
		return usageError{errors.New("--out DIR is required: where report.json and the plots go")}
	}
	if f.parallel < 0 {
		return usageError{fmt.Errorf("--parallel %d: must be 0 (all CPUs) or more", f.parallel)}
	}
	sc, err := sim.Parse(filepath.ToSlash(name), data)
	if err != nil {
		return err
	}
	opts := sim.Options{Parallel: f.parallel, NoSeries: f.noPlots}
	stop := func() {}
	if isTerminal(stderr) {
		opts.Progress = &sim.Progress{}
		stop = showProgress(stderr, opts.Progress)
	}
	start := time.Now()
	rep, err := sim.Run(ctx, sc, opts)
	elapsed := time.Since(start)
	stop()
	if err != nil {
		return err
	}
	if err := rep.WriteFiles(f.out, f.noPlots); err != nil {
		return err
	}
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	// Timing goes to stderr: stdout and report.json stay deterministic.
	placed, decisions := rep.Placements(), rep.Decisions()
	fmt.Fprintf(stderr, "%d placements (%d decisions with rejections and reconnects) in %s: %.0f placements/s, %.0f decisions/s; report in %s\n",
		placed, decisions, elapsed.Round(time.Millisecond), float64(placed)/elapsed.Seconds(), float64(decisions)/elapsed.Seconds(),
		filepath.Join(f.out, "report.json"))
	return nil
}

// isTerminal reports whether f is a character device (a terminal), without
// a dependency: the progress bar is drawn only there.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// showProgress redraws a progress bar on w until the returned stop is
// called; stop erases it.
func showProgress(w io.Writer, p *sim.Progress) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-t.C:
				total := p.Total.Load()
				if total == 0 {
					continue
				}
				frac := min(1, float64(p.Done.Load())/float64(total))
				const width = 40
				bar := strings.Repeat("#", int(frac*width)) + strings.Repeat(".", width-int(frac*width))
				fmt.Fprintf(w, "\rsimulating [%s] %3.0f%%", bar, frac*100)
			}
		}
	}()
	return func() { close(done); <-finished }
}

func init() { rootCmd.AddCommand(newSimCmd()) }
