package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/agent"
)

func init() { rootCmd.AddCommand(newAgentCmd()) }

// The range of --heartbeat-interval, 1s..1h as its message says.
const (
	minHeartbeatInterval = time.Second
	maxHeartbeatInterval = vdibroker.MaxHeartbeatTimeoutSeconds * time.Second
)

// agentFlags are the flags of `vdibroker agent`. `agent install` takes the
// same ones and registers the Windows service with them.
type agentFlags struct {
	cfg      agent.Config
	provider string
	standard bool
	// remoteApps is --remote-apps: auto, yes or no (R-E12).
	remoteApps string
	protocols  []string
	logs       logFlags
	stateDir   string
	tokenFile  string
	// machineName is --host-name's default, the machine's host name.
	machineName string
	tls         clientTLSOptions
	// windowsService runs the agent under the Windows service control
	// manager; the service's command line has it (agentServiceArgs).
	windowsService bool
	// levelRefused says why --log-level-file was not read at start
	// (levelFileRefused); logged once the logger exists.
	levelRefused error
}

// register adds the flags to f.
func (o *agentFlags) register(f *pflag.FlagSet) {
	hostname, _ := os.Hostname()
	o.machineName = hostname
	f.StringVar(&o.cfg.Server, "server", "", "broker base URL, e.g. http://broker:8080 (env VDIBROKER_SERVER)")
	f.StringVar(&o.cfg.RegistrationToken, "registration-token", "", "host pool registration token; needed until the host has a credential (env VDIBROKER_REGISTRATION_TOKEN)")
	f.StringVar(&o.tokenFile, "registration-token-file", "", "file holding the registration token (what the Windows service uses: its command line is readable by every user)")
	f.StringVar(&o.cfg.HostName, "host-name", hostname, "session host name in the pool")
	f.StringVar(&o.cfg.Address, "address", "", "host:port clients connect to (default <host-name>:3389)")
	f.StringSliceVar(&o.protocols, "protocols", []string{"RDP"}, "protocols the host serves: RDP, PCoIP, Blast")
	f.StringVar(&o.stateDir, "state-dir", defaultAgentStateDir(runtime.GOOS, os.Getenv), "directory keeping the host credential (readable by the agent's user only; on Windows by SYSTEM and Administrators only)")
	f.DurationVar(&o.cfg.HeartbeatInterval, "heartbeat-interval", agent.DefaultHeartbeatInterval, "time between heartbeats, 1s..1h; well under the pool's heartbeatTimeoutSeconds")
	f.StringVar(&o.cfg.CustomScript, "custom-script", "", "custom load script printing an integer 0..100 (R-IDX3), run every sample with a 10s timeout")
	f.StringVar(&o.cfg.CustomLoadRegistry, "custom-load-registry", "", `Windows: registry value holding the custom load value (R-IDX3), read every sample: HKLM\KEY\VALUE, or horizon for Horizon's `+agent.HorizonCustomLoadValue)
	f.StringVar(&o.cfg.PolicyFile, "policy-file", "", "JSON or YAML file with hostLoadIndexThreshold and hostConnectingSessionThreshold (R-LI5), re-read every heartbeat")
	f.StringVar(&o.provider, "sessions-provider", "auto", "where sessions come from: auto (Linux: xrdp when xrdp-sesman runs, else logind, else utmp; Windows: wts), logind, utmp, xrdp, wts[:upn|domain|user], file:PATH or none")
	f.BoolVar(&o.standard, "standard-features", true, "host supports multi-session, unauthenticated access and all protocols")
	f.Var(newEnum(&o.remoteApps, "auto", "auto", "yes", "no"), "remote-apps",
		"whether the host can run RemoteApps (published applications, R-E12): auto (the sessions provider's word: xrdp no, wts yes, the others say nothing), yes or no")
	o.logs.addFlags(f, false)
	f.StringVar(&o.tls.CAFile, "ca-file", "", "PEM CA bundle to verify the broker's HTTPS certificate (default: the system's roots)")
	f.StringVar(&o.tls.CertFile, "client-cert", "", "PEM client certificate to present to the broker (mTLS)")
	f.StringVar(&o.tls.KeyFile, "client-key", "", "PEM private key of --client-cert")
	f.BoolVar(&o.tls.InsecureHTTP, "insecure-http", false, "allow plain http:// to a broker that is not on loopback (the credential crosses the network in clear)")
	f.BoolVar(&o.windowsService, "windows-service", false, "run under the Windows service control manager (the service installed by agent install)")
	f.MarkHidden("windows-service")
}

// config checks the flags and the environment and returns the agent's
// configuration, without its logger and sessions provider; wrong flags are
// usage errors.
func (o *agentFlags) config() (agent.Config, slog.Level, error) {
	cfg := o.cfg
	var level slog.Level
	if cfg.Server == "" {
		cfg.Server = os.Getenv("VDIBROKER_SERVER")
	}
	if cfg.Server == "" {
		return cfg, level, usageError{errors.New("--server (or VDIBROKER_SERVER) is required")}
	}
	if o.tokenFile != "" && cfg.RegistrationToken != "" {
		return cfg, level, usageError{errors.New("--registration-token and --registration-token-file: give one")}
	}
	// On Windows the state directory and the token file in it are
	// SYSTEM's and Administrators' alone: said before the file is read.
	if err := agent.CheckStateDirAccess(o.stateDir); err != nil {
		return cfg, level, err
	}
	if cfg.RegistrationToken == "" && o.tokenFile != "" {
		t, err := readTokenFile(o.tokenFile)
		if err != nil {
			return cfg, level, err
		}
		cfg.RegistrationToken = t
	}
	if cfg.RegistrationToken == "" {
		cfg.RegistrationToken = os.Getenv("VDIBROKER_REGISTRATION_TOKEN")
	}
	hc, err := o.tls.httpClient(cfg.Server, 30*time.Second)
	if err != nil {
		return cfg, level, err
	}
	cfg.HTTPClient = hc
	if cfg.Address == "" {
		cfg.Address = net.JoinHostPort(cfg.HostName, "3389")
	}
	cfg.StateDir = o.stateDir
	cfg.Protocols = o.protocols
	standard := o.standard
	cfg.StandardFeatures = &standard
	cfg.RemoteApps = remoteAppsFlag(o.remoteApps)
	if level, err = o.startLevel(); err != nil {
		return cfg, level, usageError{err}
	}
	if err := agent.CheckSessionsProvider(o.provider); err != nil {
		return cfg, level, usageError{fmt.Errorf("--sessions-provider: %w", err)}
	}
	// Checked here as the broker checks them, so the agent stops at once
	// with the flag's name rather than at registration with the API's
	// field, and a machine whose own name the broker refuses ("vm") is
	// told to give --host-name.
	if err := vdibroker.ValidateName("name", cfg.HostName, vdibroker.MinHostNameLen, vdibroker.MaxHostNameLen); err != nil {
		from := ""
		if cfg.HostName == o.machineName {
			from = " (this machine's host name; give the session host's name with --host-name)"
		}
		return cfg, level, usageError{fmt.Errorf("--host-name %q%s: %s", cfg.HostName, from, strings.TrimPrefix(vdibroker.ErrorMessage(err), "name: "))}
	}
	// Zero is the default (agent.Config); the broker refuses more than
	// HeartbeatsPerSecond, and a host whose heartbeats are further apart
	// than its pool's heartbeatTimeoutSeconds (at most an hour) turns
	// Unavailable between them.
	if iv := cfg.HeartbeatInterval; iv < 0 || (iv > 0 && iv < minHeartbeatInterval) || iv > maxHeartbeatInterval {
		return cfg, level, usageError{fmt.Errorf("--heartbeat-interval %s: must be 1s..1h, well under the pool's heartbeatTimeoutSeconds (%d s by default)",
			vdibroker.DurationFlag(iv), vdibroker.DefaultHeartbeatTimeoutSeconds)}
	}
	return cfg, level, nil
}

// readAgentLevelFile reads --log-level-file when agent.ReadTrustedFile
// trusts it: the agent runs as root or LocalSystem, and whoever may
// change the file would choose what it logs, silencing its warnings at
// error or filling the journal at debug (R-SEC). The file read is the
// file checked.
func readAgentLevelFile(path string) ([]byte, error) {
	b, err := agent.ReadTrustedFile(path)
	if errors.Is(err, agent.ErrUntrusted) {
		return nil, fmt.Errorf("%s: not read: %w, who could set the agent's log level", path, err)
	}
	return b, err
}

// startLevel is the level to start at: --log-level-file's (logFlags.wanted),
// or --log-level's when the file is refused; why is kept in levelRefused.
// It has the level file read by readAgentLevelFile from then on.
func (o *agentFlags) startLevel() (slog.Level, error) {
	o.logs.readFile = readAgentLevelFile
	lv, _, err := o.logs.wanted()
	if o.levelRefused = nil; errors.Is(err, agent.ErrUntrusted) {
		o.levelRefused = err
		if lv, err = parseLevel(o.logs.level); err != nil {
			return lv, fmt.Errorf("--log-level: %w", err)
		}
	}
	return lv, err
}

// logger is the agent's logger on w, at level (startLevel's) until a
// SIGHUP reads the level again (reloadLevel); it logs why the level file
// was refused, once.
func (o *agentFlags) logger(w io.Writer, level slog.Level) *slog.Logger {
	o.logs.lv.Set(level)
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: &o.logs.lv}))
	o.logLevelRefused(log, level)
	return log
}

// logLevelRefused logs why the level file was not read at start, if it
// was not: the agent started at level instead.
func (o *agentFlags) logLevelRefused(log *slog.Logger, level slog.Level) {
	if o.levelRefused != nil {
		log.Error("log level file refused; log level kept", "level", level.String(), "err", o.levelRefused)
	}
}

// reloadLevel is the agent's SIGHUP: logFlags.reload, whose file is read
// by readAgentLevelFile (startLevel): a file refused keeps the level
// running, and one line says why, as for a file that holds no level. The
// file is read at start and on SIGHUP only, so nothing repeats the line
// but another SIGHUP.
func (o *agentFlags) reloadLevel(log *slog.Logger) {
	o.logs.reload(log)
}

// readTokenFile reads a registration token file; a file that is gone means
// no token (the host may have its credential already). On Windows a file
// others may read is refused, as serve refuses such an admin.token
// (agent.CheckSecretFile, R-SEC).
func readTokenFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("--registration-token-file: %w", err)
	}
	if err := agent.CheckSecretFile(path); err != nil {
		return "", fmt.Errorf("--registration-token-file: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// newAgent builds the agent of cfg with its sessions provider.
func (o *agentFlags) newAgent(cfg agent.Config) (*agent.Agent, error) {
	sessions, err := agent.NewSessionProvider(o.provider)
	if err != nil {
		return nil, err
	}
	cfg.Sessions = sessions
	a, err := agent.New(cfg)
	if err != nil {
		var e *vdibroker.Error
		if errors.As(err, &e) && e.Code == vdibroker.EInvalid {
			return nil, usageError{err}
		}
		return nil, err
	}
	return a, nil
}

// newAgentCmd is `vdibroker agent`, the program that runs on every session
// host (docs/agent.md), with `agent install` and `agent uninstall` for the
// Windows service.
func newAgentCmd() *cobra.Command {
	var o agentFlags
	c := &cobra.Command{
		Use:   "agent",
		Short: "Run the host agent: register this session host and report its load and sessions",
		Long: `Run the host agent on a session host. It registers the host with the broker
once (--registration-token), keeps the host credential in --state-dir and
reuses it after a restart, then sends a heartbeat every --heartbeat-interval
with the host's metrics, sessions, policy and command results. It never exits
because the broker is unreachable; SIGTERM (Ctrl+C, or stopping the Windows
service) sends a last heartbeat that marks the host Shutdown; SIGHUP reads
--log-level-file again. On Windows, "agent install" runs it as a service.
` + envFlagsHelp + `
The registration token belongs there (VDIBROKER_REGISTRATION_TOKEN), or in
--registration-token-file, not on the command line, which ps shows.`,
		Args: cobra.NoArgs,
		RunE: runWithEnvFlags(func(cmd *cobra.Command, fromEnv []string) error {
			cfg, level, err := o.config()
			if err != nil {
				return err
			}
			if o.windowsService {
				return runAgentService(&o, cfg, level)
			}
			cfg.Logger = o.logger(os.Stderr, level)
			if len(fromEnv) > 0 {
				cfg.Logger.Debug("flags from the environment", "flags", fromEnv)
			}
			warnEnvOverridden(cmd, fromEnv, cfg.Logger)
			a, err := o.newAgent(cfg)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			onHUP(ctx, nil, func() { o.reloadLevel(cfg.Logger) })
			return a.Run(ctx)
		}),
	}
	o.register(c.Flags())
	c.AddCommand(newAgentInstallCmd(), newAgentUninstallCmd())
	return c
}

// remoteAppsFlag is what --remote-apps tells the agent (R-E12): nil for
// auto (the sessions provider says), else the administrator's word.
func remoteAppsFlag(v string) *bool {
	switch v {
	case "yes":
		return new(true)
	case "no":
		return new(false)
	}
	return nil
}
