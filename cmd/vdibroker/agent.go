package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/agent"
)

func init() { rootCmd.AddCommand(newAgentCmd()) }

// newAgentCmd is `vdibroker agent`, the program that runs on every session
// host (docs/agent.md).
func newAgentCmd() *cobra.Command {
	hostname, _ := os.Hostname()
	var (
		cfg          agent.Config
		provider     string
		standard     bool
		protocols    []string
		logs         logFlags
		stateDirFlag string
		tlsOpts      clientTLSOptions
	)
	c := &cobra.Command{
		Use:   "agent",
		Short: "Run the host agent: register this session host and report its load and sessions",
		Long: `Run the host agent on a session host. It registers the host with the broker
once (--registration-token), keeps the host credential in --state-dir and
reuses it after a restart, then sends a heartbeat every --heartbeat-interval
with the host's metrics, sessions, policy and command results. It never exits
because the broker is unreachable; SIGTERM sends a last heartbeat that marks
the host Shutdown; SIGHUP reads --log-level-file again.
` + envFlagsHelp + `
The registration token belongs there (VDIBROKER_REGISTRATION_TOKEN), not on
the command line, which ps shows.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fromEnv, err := flagsFromEnv(cmd)
			if err != nil {
				return err
			}
			if cfg.Server == "" {
				return usageError{errors.New("--server (or VDIBROKER_SERVER) is required")}
			}
			hc, err := tlsOpts.httpClient(cfg.Server, 30*time.Second)
			if err != nil {
				return err
			}
			cfg.HTTPClient = hc
			if cfg.Address == "" {
				cfg.Address = net.JoinHostPort(cfg.HostName, "3389")
			}
			cfg.StateDir = stateDirFlag
			cfg.Protocols = protocols
			cfg.StandardFeatures = &standard
			if cfg.Logger, err = logs.logger(os.Stderr); err != nil {
				return err
			}
			if len(fromEnv) > 0 {
				cfg.Logger.Debug("flags from the environment", "flags", fromEnv)
			}
			switch {
			case provider == "auto", provider == "logind", provider == "utmp", provider == "xrdp", provider == "none",
				strings.HasPrefix(provider, "file:") && len(provider) > len("file:"):
			default:
				return usageError{fmt.Errorf("--sessions-provider %q: want auto, logind, utmp, xrdp, file:PATH or none", provider)}
			}
			sessions, err := agent.NewSessionProvider(provider)
			if err != nil {
				return err
			}
			cfg.Sessions = sessions
			a, err := agent.New(cfg)
			if err != nil {
				var e *vdibroker.Error
				if errors.As(err, &e) && e.Code == vdibroker.EInvalid {
					return usageError{err}
				}
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			onHUP(ctx, func() { logs.reload(cfg.Logger) })
			return a.Run(ctx)
		},
	}
	f := c.Flags()
	f.StringVar(&cfg.Server, "server", "", "broker base URL, e.g. http://broker:8080 (env VDIBROKER_SERVER)")
	f.StringVar(&cfg.RegistrationToken, "registration-token", "", "host pool registration token; needed until the host has a credential (env VDIBROKER_REGISTRATION_TOKEN)")
	f.StringVar(&cfg.HostName, "host-name", hostname, "session host name in the pool")
	f.StringVar(&cfg.Address, "address", "", "host:port clients connect to (default <host-name>:3389)")
	f.StringSliceVar(&protocols, "protocols", []string{"RDP"}, "protocols the host serves: RDP, PCoIP, Blast")
	f.StringVar(&stateDirFlag, "state-dir", "/var/lib/vdibroker-agent", "directory keeping the host credential (mode 0700)")
	f.DurationVar(&cfg.HeartbeatInterval, "heartbeat-interval", agent.DefaultHeartbeatInterval, "time between heartbeats")
	f.StringVar(&cfg.CustomScript, "custom-script", "", "custom load script printing an integer 0..100 (R-IDX3), run every sample with a 10s timeout")
	f.StringVar(&cfg.PolicyFile, "policy-file", "", "JSON or YAML file with hostLoadIndexThreshold and hostConnectingSessionThreshold (R-LI5), re-read every heartbeat")
	f.StringVar(&provider, "sessions-provider", "auto", "where sessions come from: auto (xrdp when xrdp-sesman runs, else logind, else utmp), logind, utmp, xrdp, file:PATH or none")
	f.BoolVar(&standard, "standard-features", true, "host supports multi-session, unauthenticated access and all protocols")
	logs.addFlags(f, false)
	f.StringVar(&tlsOpts.CAFile, "ca-file", "", "PEM CA bundle to verify the broker's HTTPS certificate (default: the system's roots)")
	f.StringVar(&tlsOpts.CertFile, "client-cert", "", "PEM client certificate to present to the broker (mTLS)")
	f.StringVar(&tlsOpts.KeyFile, "client-key", "", "PEM private key of --client-cert")
	f.BoolVar(&tlsOpts.InsecureHTTP, "insecure-http", false, "allow plain http:// to a broker that is not on loopback (the credential crosses the network in clear)")
	return c
}
