package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/demo"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// Demo is `vdibroker demo`: the broker exactly as serve runs it (Main:
// embedded store, API, console at "/", /metrics) and the simulated fleet of
// package demo driving it through the API.
type Demo struct {
	Main  *Main
	Fleet *demo.Fleet
	// UserToken is an end user's token (DemoUser) for the user portal.
	UserToken string
}

// DemoUser is the end user the demo makes a token for: the portal shows
// them the demo's desktops, which every user may open.
const DemoUser = "demo.user@contoso.com"

// Start opens the broker, with the fleet's power driver, then starts the
// fleet against it.
func (d *Demo) Start(ctx context.Context) error {
	if d.Main.PowerDrivers == nil {
		d.Main.PowerDrivers = d.Fleet.PowerDrivers()
	}
	if err := d.Main.Open(ctx); err != nil {
		return err
	}
	d.Fleet.URL, d.Fleet.AdminToken, d.Fleet.Logger = d.Main.URL(), d.Main.AdminToken, d.Main.Logger
	d.Fleet.PortalUser = DemoUser // her launches are logged on at their hosts
	if err := d.Fleet.Start(ctx); err != nil {
		d.Main.Close()
		return err
	}
	tok, err := vhttp.NewClient(d.Main.URL(), d.Main.AdminToken).CreateToken(ctx,
		vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: DemoUser, ExpiresInSeconds: 7 * 24 * 3600})
	if err != nil {
		d.Close()
		return fmt.Errorf("the demo user's token: %w", err)
	}
	d.UserToken = tok.Secret
	return nil
}

// Close stops the fleet, then the broker.
func (d *Demo) Close() error {
	return errors.Join(d.Fleet.Close(), d.Main.Close())
}

func newDemoCmd() *cobra.Command {
	m := &Main{}
	var keep, verbose bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a broker with simulated hosts and users, and its web console",
		Long: `demo starts a broker on the embedded store with three host pools
(BreadthFirst, DepthFirst with a limit, LoadIndex), twenty simulated session
hosts whose metrics move, and simulated users logging on and off. The
office pool is autoscaled: a scaling plan in this machine's time zone whose
ramp-up began a minute ago starts its powered-off hosts as users arrive
(through a simulated power driver), and ramp-down drains and stops them
eight minutes later; its autoscale page shows each decision. Open the
printed URL and sign in with the printed admin token. Ctrl-C stops it.

The admin token is VDIBROKER_ADMIN_TOKEN when set. Without --data-dir the
state lives in a temporary directory removed on exit.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// The simulation makes ten requests a second: log only problems
			// unless asked, so the banner stays readable.
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			m.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			m.AutoscaleInterval = 10 * time.Second // decisions show within seconds
			if m.DataDir == "" {
				dir, err := os.MkdirTemp("", "vdibroker-demo-")
				if err != nil {
					return err
				}
				if !keep {
					defer os.RemoveAll(dir)
				}
				m.DataDir = dir
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			d := &Demo{Main: m, Fleet: &demo.Fleet{}}
			if err := d.Start(ctx); err != nil {
				return err
			}
			printDemoBanner(cmd.OutOrStdout(), d)
			<-ctx.Done()
			fmt.Fprintln(cmd.OutOrStdout(), "stopping the demo...")
			return d.Close()
		},
	}
	cmd.Flags().StringVar(&m.Listen, "listen", "127.0.0.1:8080", "address to listen on")
	cmd.Flags().StringVar(&m.DataDir, "data-dir", "", "directory for the embedded store (default: a temporary directory)")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temporary data directory on exit")
	cmd.Flags().BoolVar(&verbose, "verbose", false, "log every request (info level)")
	return cmd
}

func printDemoBanner(w io.Writer, d *Demo) {
	url := d.Main.URL()
	var b strings.Builder
	fmt.Fprintf(&b, "vdibroker demo is running: %d simulated hosts in %d pools, users logging on and off.\n\n", d.Fleet.Hosts(), d.Fleet.Pools())
	fmt.Fprintf(&b, "  console      %s/\n", url)
	fmt.Fprintf(&b, "  admin token  %s\n", d.Main.AdminToken)
	fmt.Fprintf(&b, "  API          %s/api/v1   (vdibroker --server %s --token <admin token> hostpool list)\n", url, url)
	fmt.Fprintf(&b, "  portal       %s/portal/   (the user's side: sign in with the user token)\n", url)
	fmt.Fprintf(&b, "  user token   %s   (%s)\n", d.UserToken, DemoUser)
	fmt.Fprintf(&b, "  metrics      %s/metrics\n", url)
	fmt.Fprintf(&b, "  autoscale    %s/pools/office-breadth/autoscale   (scaling plan %s: hosts started and stopped by a simulated power driver)\n", url, demo.AutoscalePlan)
	fmt.Fprintf(&b, "  data dir     %s\n\n", d.Main.DataDir)
	b.WriteString("Press Ctrl-C to stop.\n")
	io.WriteString(w, b.String())
}

func init() { rootCmd.AddCommand(newDemoCmd()) }
