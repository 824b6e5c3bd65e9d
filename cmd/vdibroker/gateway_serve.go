package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker"
	"github.com/vdibroker/vdibroker/gateway"
	"github.com/vdibroker/vdibroker/gatewaytoken"
)

// GatewayFlags are serve's RD gateway flags (docs/gateway.md, R-GW1..R-GW6):
// the server's gateway that connect answers send clients through, the
// access tokens' settings, and, with --gateway-listen, the gateway itself
// in this process, on the broker's certificate, checking tokens with the
// broker's keys and reporting to the broker without HTTP.
type GatewayFlags struct {
	// HostName is the server's gateway as clients reach it (the .rdp's
	// gatewayhostname); with Listen and no HostName, the listener's
	// address.
	HostName          string
	TokenTTL          time.Duration
	KeyRotation       time.Duration
	MaxTunnelsPerUser int
	// Listen runs the gateway in-process on this address (HTTPS, the
	// broker's --tls-cert).
	Listen string
	// Name is the in-process gateway's name in the reports.
	Name string
	// Config holds the in-process gateway's limits (gateway.Config's
	// defaults when zero).
	Config gateway.Config
	// TargetPorts and TargetNetworks are --gateway-target-ports and
	// --gateway-target-networks, read into Config by check (none: any).
	TargetPorts, TargetNetworks []string

	// requestTimeout is gatewayRequestTimeout unless a test sets it.
	requestTimeout time.Duration

	// flags is the set addFlags added to (nil for a Main built in code):
	// check tells a --gateway-name given empty from one never given.
	flags *pflag.FlagSet

	Gateway  *gateway.Gateway // set by start
	listener net.Listener
	tcp      net.Listener // under listener's TLS, for start's Gateway.Listener
	tlsConf  *tls.Config
	server   *http.Server
	stopKeys context.CancelFunc
}

func (f *GatewayFlags) addFlags(fl *pflag.FlagSet) {
	f.flags = fl
	fl.StringVar(&f.HostName, "gateway-hostname", "", "the RD gateway clients reach the hosts through, host or host:port (the .rdp's gatewayhostname): every pool whose gatewayUsage is Gateway and that names no gatewayHostName of its own goes through it, with an access token the broker signs per connect (docs/gateway.md)")
	fl.DurationVar(&f.TokenTTL, "gateway-token-ttl", vdibroker.DefaultGatewayTokenTTL, "how long a gateway access token may open its tunnel after the connect (1m..1h)")
	fl.DurationVar(&f.KeyRotation, "gateway-key-rotation", broker.DefaultGatewayKeyRotation, "make a new token signing key this often (at least 1h); it signs once gateways had 5 minutes to read it")
	fl.IntVar(&f.MaxTunnelsPerUser, "gateway-max-tunnels-per-user", broker.DefaultGatewayMaxTunnelsPerUser, "tunnels one user may hold open through all gateways together (0: no limit)")
	fl.StringVar(&f.Listen, "gateway-listen", "", "also run the RD gateway in this process on this address (HTTPS with --tls-cert, e.g. 0.0.0.0:443 with --gateway-hostname; without it the .rdp files name this address)")
	fl.StringVar(&f.Name, "gateway-name", hostnameOr("gateway"), "the in-process gateway's name in the reports and the audit log")
	fl.StringSliceVar(&f.TargetPorts, "gateway-target-ports", defaultTargetPorts, "ports a token's host may have, for the in-process gateway (any: every port)")
	fl.StringSliceVar(&f.TargetNetworks, "gateway-target-networks", nil, "CIDR networks the address the in-process gateway connects to must lie in, e.g. 10.20.0.0/16: the first of a token's host's addresses inside one (default: any)")
	fl.DurationVar(&f.Config.ReauthorizeEvery, "gateway-reauthorize-every", gateway.DefaultReauthorizeEvery, "the in-process gateway asks the broker this often whether each open tunnel's session is still open, and closes the tunnels of ended sessions (0: never; 10s..1h)")
}

// check validates the flags before anything opens; tls says serve has a
// certificate.
func (f *GatewayFlags) check(tls bool) error {
	if err := vdibroker.ValidateGatewayHost("--gateway-hostname", f.HostName); err != nil {
		return usageError{errors.New(vdibroker.ErrorMessage(err))}
	}
	// Zero is the default (a Main built by a test).
	if f.TokenTTL != 0 && (f.TokenTTL < time.Minute || f.TokenTTL > gatewaytoken.MaxValidity) {
		return usageError{fmt.Errorf("--gateway-token-ttl: must be 1m..1h, got %s", vdibroker.DurationFlag(f.TokenTTL))}
	}
	if f.KeyRotation != 0 && f.KeyRotation < time.Hour {
		return usageError{fmt.Errorf("--gateway-key-rotation: must be at least 1h, got %s", vdibroker.DurationFlag(f.KeyRotation))}
	}
	if f.Name == "" && f.flags != nil && f.flags.Changed("gateway-name") {
		return usageError{fmt.Errorf("--gateway-name: must be 1..%d characters, got none", vdibroker.MaxTunnelReportText)}
	}
	if err := checkGatewayName("--gateway-name", f.Name); err != nil {
		return err
	}
	if err := gateway.ValidateReauthorizeEvery("--gateway-reauthorize-every", f.Config.ReauthorizeEvery); err != nil {
		return usageError{err}
	}
	var err error
	if f.Config.TargetPorts, f.Config.TargetNetworks, err = parseTargets("--gateway-target-ports", f.TargetPorts, "--gateway-target-networks", f.TargetNetworks); err != nil {
		return err
	}
	if f.MaxTunnelsPerUser < 0 {
		return usageError{fmt.Errorf("--gateway-max-tunnels-per-user: must be 0 or more, got %d", f.MaxTunnelsPerUser)}
	}
	if f.Listen != "" && !tls {
		return usageError{errors.New("--gateway-listen needs --tls-cert and --tls-key: RD Gateway clients speak HTTPS only")}
	}
	// Without --gateway-hostname the .rdp files name the listener's
	// address (R-GW1): one on every address (0.0.0.0, [::], none) is no
	// address a client can reach, so every connect through it would fail.
	if f.Listen != "" && f.HostName == "" {
		if host, _, err := net.SplitHostPort(f.Listen); err == nil {
			if ip, perr := netip.ParseAddr(host); host == "" || perr == nil && ip.IsUnspecified() {
				return usageError{fmt.Errorf("--gateway-listen %s listens on every address, which no client can reach: give --gateway-hostname, the name clients reach the gateway by (its certificate's), for the .rdp files", f.Listen)}
			}
		}
	}
	return nil
}

// listen opens the in-process gateway's listener, when there is one,
// before the broker starts, so that the server's gateway defaults to its
// address.
func (f *GatewayFlags) listen(certs *certReloader) error {
	if f.Listen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", f.Listen)
	if err != nil {
		return fmt.Errorf("--gateway-listen %s: %w", f.Listen, err)
	}
	if f.HostName == "" {
		f.HostName = ln.Addr().String()
	}
	// HTTP/1.1 only: the transport hijacks its connections. The
	// certificate is serve's, reloaded alike.
	f.tcp, f.tlsConf = ln, &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate, NextProtos: []string{"http/1.1"}}
	f.listener = tls.NewListener(ln, f.tlsConf)
	return nil
}

// brokerConfig is the broker's side of the flags.
func (f *GatewayFlags) brokerConfig() broker.GatewayConfig {
	max := f.MaxTunnelsPerUser
	if max == 0 {
		max = -1 // the flag's 0 is "no limit"
	}
	return broker.GatewayConfig{HostName: f.HostName, TokenTTL: f.TokenTTL, KeyRotation: f.KeyRotation, MaxTunnelsPerUser: max}
}

// inProcessKeysRefresh is how often the in-process gateway reads the
// broker's keys (from memory: the service's copy).
const inProcessKeysRefresh = 15 * time.Second

// start serves the in-process gateway on the listener of listen.
func (f *GatewayFlags) start(ctx context.Context, svc vdibroker.GatewayService, reg prometheus.Registerer, log *slog.Logger) error {
	if f.listener == nil {
		return nil
	}
	keys, err := gatewaytoken.NewKeyring(ctx, serviceKeys{svc}, inProcessKeysRefresh, nil, log)
	if err != nil {
		return err
	}
	cfg := f.Config
	cfg.Name, cfg.Verifier, cfg.Broker, cfg.Logger, cfg.Registry = f.Name, keys, gatewayReports{svc}, log, reg
	if cfg.MaxTunnelsPerUser == 0 {
		// A user's tunnels through it are bounded as the broker bounds
		// them (--gateway-max-tunnels-per-user, 0 none), not by
		// gateway.Config's default of 10, below a larger limit and in
		// place of none.
		cfg.MaxTunnelsPerUser = f.MaxTunnelsPerUser
		if cfg.MaxTunnelsPerUser <= 0 {
			cfg.MaxTunnelsPerUser = math.MaxInt
		}
	}
	if f.Gateway, err = gateway.New(cfg); err != nil {
		return err
	}
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f.stopKeys = cancel
	go keys.Run(kctx)
	// Connections per address are bounded before their TLS handshake.
	f.listener = f.Gateway.Listener(f.tcp, f.tlsConf)
	mux := http.NewServeMux()
	mux.Handle(gateway.Path, f.Gateway)
	mux.HandleFunc("GET "+gateway.HealthPath, f.Gateway.ServeHealth)
	f.server = newGatewayServer(mux, 8<<10, f.requestTimeout, log)
	go func() {
		if err := f.server.Serve(f.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("gateway server stopped", "err", err)
		}
	}()
	log.Info("RD gateway serving in-process", "addr", f.listener.Addr().String(), "hostName", f.HostName, "name", f.Name)
	return nil
}

// gatewayRequestTimeout bounds the reading of each request on a
// gateway's listener, its head and its body (http.Server's
// ReadHeaderTimeout and ReadTimeout), and so the TLS handshake before it.
// net/http answers a request whose body its handler did not read (every
// refusal: 400, 401, 404, 405, 429, 503; /healthz, /metrics) only once it
// has read or dropped that body, with no deadline but ReadTimeout's: a
// client announcing a body and sending none held the connection, its
// goroutine and buffers, for ever, as many as an address may hold
// (--max-conns-per-address, 1,000), before any token. A tunnel's
// connections are hijacked, which clears the deadline; the gateway sets
// its own.
const gatewayRequestTimeout = 10 * time.Second

// newGatewayServer is the HTTP server of a gateway's listener, `vdibroker
// gateway`'s and serve's in-process one's; requestTimeout 0 is
// gatewayRequestTimeout.
func newGatewayServer(h http.Handler, maxHeaderBytes int, requestTimeout time.Duration, log *slog.Logger) *http.Server {
	requestTimeout = cmp.Or(requestTimeout, gatewayRequestTimeout)
	return &http.Server{Handler: h, ReadHeaderTimeout: requestTimeout, ReadTimeout: requestTimeout, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: maxHeaderBytes, ErrorLog: serverErrorLog(log)} // anyone causes these lines: bounded
}

// Addr is the in-process gateway's address.
func (f *GatewayFlags) Addr() string { return f.listener.Addr().String() }

// close stops the in-process gateway: its listener, its tunnels (each
// reported closed to the broker, which must still run) and its key reload.
func (f *GatewayFlags) close() error {
	var errs []error
	if f.server != nil {
		errs = append(errs, f.server.Close())
	} else if f.listener != nil {
		errs = append(errs, f.listener.Close())
	}
	if f.Gateway != nil {
		errs = append(errs, f.Gateway.Close())
	}
	if f.stopKeys != nil {
		f.stopKeys()
	}
	return errors.Join(errs...)
}

// serviceKeys is the in-process gateway's key source: the broker's own
// JWKS, read from the service.
type serviceKeys struct{ svc vdibroker.GatewayService }

func (k serviceKeys) Keys(ctx context.Context) (*gatewaytoken.KeySet, error) {
	doc, err := k.svc.GatewayKeys(ctx)
	if err != nil {
		return nil, err
	}
	return gatewaytoken.ParseJWKS(doc)
}

// gatewayReports is the in-process gateway's Broker: its reports go to the
// broker's gateway service as calls, the broker's own (no principal), and
// its refusals come back as the gateway's errors.
type gatewayReports struct{ svc vdibroker.GatewayService }

var _ gateway.Broker = gatewayReports{}

func report(ev gateway.TunnelEvent) *vdibroker.TunnelReport {
	return &vdibroker.TunnelReport{TokenID: ev.TokenID, User: ev.User, Session: ev.Session, Pool: ev.Pool, Host: ev.Host,
		Client: ev.Client, Gateway: ev.Gateway, At: ev.At, Expiry: ev.Expiry, BytesToHost: ev.BytesToHost,
		BytesToClient: ev.BytesToClient, Reason: ev.Reason, Reached: ev.Reached, SentAt: ev.SentAt}
}

func (g gatewayReports) TunnelOpen(ctx context.Context, ev gateway.TunnelEvent) error {
	err := g.svc.TunnelOpen(ctx, report(ev))
	switch vdibroker.ErrorCode(err) {
	case vdibroker.EConflict:
		return gateway.ErrTokenUsed
	case vdibroker.ETooManyRequests:
		return gateway.ErrUserLimit
	case vdibroker.ENotFound:
		return fmt.Errorf("%w: %s", gateway.ErrNotAdmitted, vdibroker.ErrorMessage(err))
	}
	return err
}

func (g gatewayReports) ChannelOpen(ctx context.Context, ev gateway.TunnelEvent) error {
	return g.svc.TunnelChannel(ctx, report(ev))
}

// TunnelClose reports a close; a refusal is final (gateway.ErrRefused),
// the store down or an internal error is sent again (R-GW3).
func (g gatewayReports) TunnelClose(ctx context.Context, ev gateway.TunnelEvent) error {
	err := g.svc.TunnelClose(ctx, report(ev))
	switch code := vdibroker.ErrorCode(err); code {
	case "", vdibroker.EStoreUnavailable, vdibroker.EInternal, vdibroker.ETooManyRequests:
		return err
	default:
		return fmt.Errorf("%w: %s: %s", gateway.ErrRefused, code, vdibroker.ErrorMessage(err))
	}
}

func (g gatewayReports) CheckTunnels(ctx context.Context, name string, tunnels []gateway.TunnelEvent) ([]string, error) {
	c := &vdibroker.TunnelCheck{Gateway: name, Tunnels: make([]vdibroker.TunnelReport, len(tunnels))}
	for i, ev := range tunnels {
		c.Tunnels[i] = *report(ev)
	}
	a, err := g.svc.CheckTunnels(ctx, c)
	if err != nil {
		return nil, err
	}
	return a.Open, nil
}
