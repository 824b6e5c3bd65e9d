package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"golang.org/x/time/rate"
	"k8s.io/utils/clock"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker"
	"github.com/vdibroker/vdibroker/gateway"
	"github.com/vdibroker/vdibroker/gatewaytoken"
)

// GatewayMain is the `vdibroker gateway` program: an RD Gateway on its own
// TLS listener, its token keys and its broker. Tests start it on
// 127.0.0.1:0.
type GatewayMain struct {
	Listen          string
	TLSCert, TLSKey string
	Logger          *slog.Logger
	Name            string
	KeysFile        string
	KeysURL         string
	KeysToken       string
	KeysRefresh     time.Duration
	BrokerURL       string
	BrokerToken     string
	// KeysTokenFile and BrokerTokenFile, when set, hold KeysToken and
	// BrokerToken: read at Open and again on SIGHUP, so a gateway's
	// credential is replaced without a restart, which would drop every
	// tunnel (and its user's session with it).
	KeysTokenFile   string
	BrokerTokenFile string
	// MetricsToken is the bearer token /metrics requires (none: open);
	// MetricsTokenFile, when set, holds it, read at Open and again on
	// SIGHUP, so a leaked one is replaced without dropping tunnels.
	MetricsToken     string
	MetricsTokenFile string
	MaxHeaderBytes   int
	Config           gateway.Config // limits; Verifier, Broker, Logger, Registry are set by Open
	// requestTimeout is gatewayRequestTimeout unless a test sets it.
	requestTimeout   time.Duration
	clientTLS        clientTLSOptions
	certs            *certReloader
	keys             *gatewaytoken.Keyring
	Gateway          *gateway.Gateway
	server           *http.Server
	listener         net.Listener
	stopKeys         context.CancelFunc
	stopHUP          func()
	localBrokerInUse bool
	// probed is closed when the start's check of --broker-url is done
	// (nil without one).
	probed chan struct{}
	// reported is the name the broker last said it takes this gateway's
	// reports under (its check of no tunnel, at start and after a SIGHUP
	// that changed the Gateway token); "" before one answered.
	reported atomic.Pointer[string]
}

// Open loads the keys and the certificate and starts serving. SIGHUP
// is caught from its start: one that comes while the first keys are
// fetched (up to 10 s) would otherwise end the process, as is a
// signal's default; it is answered once Open is done.
func (m *GatewayMain) Open(ctx context.Context) (err error) {
	if m.Logger == nil {
		m.Logger = slog.New(slog.DiscardHandler)
	}
	// SIGHUP reads the token files and reloads the keys too (the
	// certificate reloader has its own), once ready: reload reads what
	// Open sets below, after it is set.
	ready := make(chan struct{})
	var tokens []*tokenFile
	var keys *gatewaytoken.Keyring
	var brokerToken *tokenFile
	var probe *gateway.HTTPBroker
	hctx, stopHUP := context.WithCancel(context.WithoutCancel(ctx))
	m.stopHUP = stopHUP
	defer func() {
		if err != nil {
			stopHUP()
		}
	}()
	onHUP(hctx, ready, func() {
		sent := brokerToken.get()
		for _, f := range tokens {
			f.hup(m.Logger)
		}
		if err := keys.Reload(hctx); err != nil {
			m.Logger.Error("SIGHUP: reload gateway token keys; keeping the keys in force", "err", err)
		}
		// A new Gateway token is checked as the start's was, so the
		// operator who wrote one to the file, as the start's warnings
		// ask, reads whether the broker takes it and under which name
		// (R-GW4). Before the keys are read the start's check is still
		// to come, and makes it with the new token.
		if probe != nil && brokerToken.get() != sent && keys.KeyCount() > 0 {
			m.probeBroker(hctx, probe)
		}
	})
	if m.TLSCert == "" || m.TLSKey == "" {
		return usageError{errors.New("--tls-cert and --tls-key are required: RD Gateway clients speak HTTPS only")}
	}
	if m.KeysFile != "" && m.KeysURL != "" {
		return usageError{errors.New("--keys-file and --keys-url: give one, not both")}
	}
	if m.KeysFile == "" && m.KeysURL == "" {
		return usageError{errors.New("one of --keys-file and --keys-url is required: the public keys the broker signs access tokens with")}
	}
	keysToken, err := newTokenFile("--keys-token-file", m.KeysTokenFile, m.KeysToken, tokenSent, 0)
	if err != nil {
		return err
	}
	brokerToken, err = newTokenFile("--broker-token-file", m.BrokerTokenFile, m.BrokerToken, tokenSent, 0)
	if err != nil {
		return err
	}
	metricsToken, err := newTokenFile("--metrics-token-file", m.MetricsTokenFile, m.MetricsToken, tokenChecked, 0)
	if err != nil {
		return err
	}
	tokens = []*tokenFile{keysToken, brokerToken, metricsToken}
	var src gatewaytoken.KeySource = gatewaytoken.FileSource{Path: m.KeysFile}
	if m.KeysURL != "" {
		client, err := m.clientTLS.httpClientFor("--keys-url", m.KeysURL, 10*time.Second)
		if err != nil {
			return err
		}
		src = gatewaytoken.URLSource{URL: m.KeysURL, TokenFunc: keysToken.get, Client: client}
	}
	src = explainedKeys{src: src, file: m.KeysFile, url: m.KeysURL}
	var keysClock clock.WithTicker // the gateway's, so a test steps one clock
	if m.Config.Clock != nil {
		keysClock = m.Config.Clock
	}
	keys = gatewaytoken.NewPendingKeyring(src, m.KeysRefresh, keysClock, m.Logger)
	if err := keys.Reload(ctx); err != nil {
		// A mistake a read again does not mend stops the start (exit
		// 2, the unit not restarting it); a broker that does not answer
		// yet does not: the gateway serves, refusing tunnels until it
		// has read the keys (R-GW6).
		if !keysRetryable(m.KeysURL, err) {
			return usageError{err}
		}
		m.Logger.Warn("gateway token keys not read; serving, and refusing every tunnel keys_unavailable until a read succeeds (again in 1s, backing off to 30s, or at once on SIGHUP)", "err", err)
	}
	m.keys = keys
	if m.KeysFile != "" && m.BrokerURL != "" {
		// A broker adds a signing key every --gateway-key-rotation and
		// signs with it 5 minutes later (R-GW6): a file copied once
		// refuses every token from then on.
		m.Logger.Warn("--keys-file with --broker-url: the broker makes a new signing key every serve --gateway-key-rotation (720h) and signs with it 5 minutes later, and tokens of a key this file lacks are refused token_unknown_key until the file is rewritten; give --keys-url, the broker's URL ending in /api/v1/gateway/keys", "keysFile", m.KeysFile)
	}
	var broker gateway.Broker = &gateway.MemoryBroker{}
	m.localBrokerInUse = true
	if m.BrokerURL != "" {
		client, err := m.clientTLS.httpClientFor("--broker-url", m.BrokerURL, 15*time.Second)
		if err != nil {
			return err
		}
		probe = &gateway.HTTPBroker{URL: m.BrokerURL, TokenFunc: brokerToken.get, Client: client}
		broker, m.localBrokerInUse = probe, false
	}
	var certClock clock.PassiveClock // the gateway's, so a test steps one clock
	if m.Config.Clock != nil {
		certClock = m.Config.Clock
	}
	if m.certs, err = newCertReloader(m.TLSCert, m.TLSKey, m.Logger, certClock); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vdibroker_gateway_keys",
			Help: "Token keys the gateway holds; 0 until its first read of them succeeds, every tunnel refused keys_unavailable meanwhile."},
			func() float64 { return float64(keys.KeyCount()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "vdibroker_gateway_keys_read_failures_total",
			Help: "Reads of the token keys (--keys-url, --keys-file) that failed; the keys in force stay."},
			func() float64 { return float64(keys.Failures()) }))
	cfg := m.Config
	cfg.Name, cfg.Verifier, cfg.Broker, cfg.Logger, cfg.Registry = m.Name, keys, broker, m.Logger, reg
	if m.Name == "" {
		// The broker names it after its Gateway token (R-GW4); the
		// host name is its name in its own log, or without a broker.
		cfg.Name, cfg.NameFromCredential = hostnameOr("gateway"), probe != nil
	}
	if m.Gateway, err = gateway.New(cfg); err != nil {
		m.certs.Close()
		return err
	}
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.stopKeys = cancel
	go keys.Run(kctx)
	if probe != nil {
		// Beside serving, not before it: a broker whose packets are
		// dropped would hold the start for brokerProbeTimeout.
		// Once the keys are read: a gateway started before its broker
		// asks it when it is up, not while every call fails.
		m.probed = make(chan struct{})
		go func() {
			defer close(m.probed)
			select {
			case <-keys.Loaded():
				m.probeBroker(kctx, probe)
			case <-kctx.Done():
			}
		}()
	}

	mux := http.NewServeMux()
	mux.Handle(gateway.Path, m.Gateway)
	mux.HandleFunc("GET "+gateway.HealthPath, m.Gateway.ServeHealth) // a load balancer's probe (R-GW6)
	mux.Handle("GET /metrics", requireBearer(metricsToken.get, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	ln, err := net.Listen("tcp", m.Listen)
	if err != nil {
		m.Close()
		return fmt.Errorf("listen on %s: %w", m.Listen, err)
	}
	// HTTP/1.1 only: the transport hijacks its connections.
	// Connections per address are bounded before their TLS handshake.
	m.listener = m.Gateway.Listener(ln, &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: m.certs.GetCertificate, NextProtos: []string{"http/1.1"}})
	m.server = newGatewayServer(mux, m.MaxHeaderBytes, m.requestTimeout, m.Logger)
	go func() {
		if err := m.server.Serve(m.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.Logger.Error("gateway server stopped", "err", err)
		}
	}()
	close(ready)
	return nil
}

// explainedKeys is a key source whose errors say which flag the read
// failed on and what to fix (keysReadError): at start and in the log of
// each read again.
type explainedKeys struct {
	src       gatewaytoken.KeySource
	file, url string
}

func (e explainedKeys) Keys(ctx context.Context) (*gatewaytoken.KeySet, error) {
	ks, err := e.src.Keys(ctx)
	if err != nil {
		return nil, keysReadError(e.file, e.url, err)
	}
	return ks, nil
}

// keysReadError says which flag a read of the keys failed on and what to
// fix: "HTTP 404" alone does not say that --keys-url is the broker's
// .../api/v1/gateway/keys (R-GW6).
func keysReadError(file, url string, err error) error {
	if url == "" {
		return fmt.Errorf("--keys-file %q: %w", file, err)
	}
	var status *gatewaytoken.StatusError
	var cert *tls.CertificateVerificationError
	switch {
	case errors.As(err, &status) && notFound(status.StatusCode) && keysRoute(url):
		return fmt.Errorf("--keys-url %q: no keys there (HTTP %d), though it names the broker's keys route: a proxy before a broker that is not up yet (the gateway reads again), or the host is not the broker's: %w", url, status.StatusCode, err)
	case errors.As(err, &status) && notFound(status.StatusCode):
		return fmt.Errorf("--keys-url %q: no keys there (HTTP %d): give the broker's URL ending in /api/v1/gateway/keys: %w", url, status.StatusCode, err)
	case errors.As(err, &status) && (status.StatusCode == http.StatusUnauthorized || status.StatusCode == http.StatusForbidden):
		return fmt.Errorf("--keys-url %q: refused (HTTP %d): the broker's keys need no credential, so a proxy before it wants one: give it in --keys-token-file: %w", url, status.StatusCode, err)
	case errors.As(err, &status) && retryableStatus(status.StatusCode):
		return fmt.Errorf("--keys-url %q: the broker is not ready (HTTP %d): start it, or wait for it: %w", url, status.StatusCode, err)
	case errors.As(err, &status):
		return fmt.Errorf("--keys-url %q: HTTP %d, not the broker's keys: give its URL ending in /api/v1/gateway/keys: %w", url, status.StatusCode, err)
	case errors.As(err, &cert):
		return fmt.Errorf("--keys-url %q: the broker's certificate is not trusted (%w): give its CA with --ca-file", url, err)
	case errors.Is(err, gatewaytoken.ErrNotKeySet):
		return fmt.Errorf("--keys-url %q: %w: give the broker's URL ending in /api/v1/gateway/keys", url, err)
	}
	return fmt.Errorf("--keys-url %q: the broker did not answer (%w): start the broker, or give --keys-file", url, err)
}

// retryableStatus is an answer a broker gives while it starts or is
// loaded (a proxy before it, 502 to 504), which a read again may mend.
func retryableStatus(code int) bool {
	return code/100 == 5 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests
}

// notFound is a status that says there is nothing at a URL.
func notFound(code int) bool {
	return code == http.StatusNotFound || code == http.StatusMethodNotAllowed
}

// keysRoute reports whether url's path is the broker's keys route.
func keysRoute(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/api/v1/gateway/keys")
}

// keysRetryable reports whether the start's failed read of the keys from
// keysURL (empty: --keys-file) is one a read again may mend (R-GW6): a
// broker not up yet (no answer, a timeout, a 5xx, 408 or 429), and a 404
// or 405 of a URL ending in the keys route, which the broker always
// serves: a proxy before it answers that while it has no broker to send
// to (Traefik while a broker's upgrade leaves it no backend), and exit 2
// would leave the gateway stopped after the broker is back. Mistakes in
// the settings are not: a --keys-file that cannot be read or parsed, a
// --keys-url of another path answering 404 (not the keys route) or
// another status, 401 or 403 (a credential), a certificate not trusted
// (--ca-file), a document that is no key set.
func keysRetryable(keysURL string, err error) bool {
	var status *gatewaytoken.StatusError
	var cert *tls.CertificateVerificationError
	switch {
	case keysURL == "":
		return false
	case errors.As(err, &status) && notFound(status.StatusCode):
		return keysRoute(keysURL)
	case errors.As(err, &status):
		return retryableStatus(status.StatusCode)
	case errors.As(err, &cert), errors.Is(err, gatewaytoken.ErrNotKeySet):
		return false
	}
	return true
}

// brokerProbeTimeout bounds the start's check of --broker-url: a broker
// that does not answer is said so this long after the start at most.
const brokerProbeTimeout = 5 * time.Second

// probeBroker checks --broker-url and the Gateway token at start, with a
// check of no tunnel, and logs what to fix when the broker does not take
// it: a URL that is not the broker's tunnel API or a token it refuses
// otherwise shows only as every user's tunnel refused (broker_refused,
// broker_unavailable), with words about tokens or sessions. It runs
// while the gateway serves, which it does either way: a broker that is
// not up yet may be soon. A check cut short by Close says nothing.
func (m *GatewayMain) probeBroker(ctx context.Context, b *gateway.HTTPBroker) {
	pctx, cancel := context.WithTimeout(ctx, brokerProbeTimeout)
	defer cancel()
	a, err := b.Probe(pctx, m.Name) // "": the broker names it after its token
	if ctx.Err() != nil {
		return // closed
	}
	switch status := a.Status; {
	case err == nil && a.Gateway == "" && m.Name == "":
		// A broker older than gateways given no --name: it takes the
		// name each report gives, and these give none (R-GW4).
		m.Logger.Warn("--name: the broker takes this gateway's reports, but it is older than this gateway and does not name it after its Gateway token: its sessions and tunnels are recorded through no gateway; give --name (the token's subject), or upgrade the broker first", "brokerURL", b.URL)
	case err == nil:
		name := cmp.Or(a.Gateway, m.Name)
		m.Logger.Info("broker takes this gateway's reports", "brokerURL", b.URL, "gateway", name)
		if was := m.reported.Swap(&name); was != nil && !vdibroker.SameGateway(*was, name) && m.Name == "" {
			// A gateway given no --name is its token's gateway: a
			// token of another one renames it, and the broker's
			// checks of open tunnels find none admitted under the old
			// name, so the gateway closes them (R-GW4). A token for
			// the same name in other case, or with a trailing dot, is
			// the same gateway's: the broker keeps its tunnels.
			m.Logger.Warn(fmt.Sprintf("--broker-token-file: the new Gateway token is another gateway's, and this gateway, given no --name, takes its name: the broker records its reports as %q from now on, and at the next check of open tunnels (--reauthorize-every) answers none of those admitted as %q, which the gateway then closes (their users connect again); to keep them, write a token for %q (vdibroker token create --role Gateway --subject %q) and send SIGHUP before that check", name, *was, *was, *was),
				"was", *was, "gateway", name, "tunnelsOpen", m.Gateway.Stats().Tunnels, "brokerURL", b.URL)
		}
		for _, w := range a.Warnings {
			// The broker's words, about this gateway's own credential
			// (R-GW4): an admin token, a token for no gateway.
			m.Logger.Warn("--broker-token-file: "+w, "brokerURL", b.URL)
		}
	case status == 0:
		m.Logger.Warn("--broker-url: the broker did not answer; every tunnel is refused broker_unavailable until it does", "brokerURL", b.URL, "err", err)
	case status == http.StatusUnauthorized:
		m.Logger.Warn("--broker-token-file: the broker refused this gateway's token; every tunnel is refused until it takes one: write a Gateway token to the file (vdibroker token create --role Gateway, docs/gateway.md) and send SIGHUP", "brokerURL", b.URL, "err", err)
	case status == http.StatusForbidden && a.Field == "gateway":
		m.Logger.Warn("--name: the broker's Gateway token in --broker-token-file is another gateway's, and every tunnel is refused credential_refused: give this gateway its own token (vdibroker token create --role Gateway --subject NAME, NAME its --name) and send SIGHUP, or start it with the token's name as --name, or without --name", "name", m.Name, "brokerURL", b.URL, "err", err)
	case status == http.StatusForbidden:
		m.Logger.Warn("--broker-token-file: the broker takes the token but not for tunnel reports; give a Gateway token (vdibroker token create --role Gateway, docs/gateway.md) and send SIGHUP", "brokerURL", b.URL, "err", err)
	case status == http.StatusNotFound || status == http.StatusMethodNotAllowed:
		m.Logger.Warn("--broker-url: no tunnel API there, so every tunnel would be refused broker_refused; give the broker's URL ending in /api/v1/gateway/tunnels (a broker older than this gateway also answers 404 to this check, and its tunnels work)", "brokerURL", b.URL, "err", err)
	default:
		m.Logger.Warn("--broker-url: the broker did not take a check of no tunnel; tunnels may be refused", "brokerURL", b.URL, "err", err)
	}
}

// Addr is the address the gateway listens on.
func (m *GatewayMain) Addr() string { return m.listener.Addr().String() }

// Close stops the listener, ends the tunnels (reporting each to the
// broker) and the reloaders.
func (m *GatewayMain) Close() error {
	var errs []error
	if m.server != nil {
		errs = append(errs, m.server.Close())
	}
	if m.Gateway != nil {
		errs = append(errs, m.Gateway.Close())
	}
	if m.stopKeys != nil {
		m.stopKeys()
	}
	if m.stopHUP != nil {
		m.stopHUP()
	}
	if m.certs != nil {
		m.certs.Close()
	}
	return errors.Join(errs...)
}

func newGatewayCmd() *cobra.Command { return newGatewayCmdFor(&GatewayMain{}) }

// defaultTargetPorts is --target-ports' default: the RDP port only, as
// RD Gateway's resource authorization policy allows by default. A token's
// host is the address its agent registered, which anyone holding a pool's
// registration token chooses: with any port allowed, a user placed on
// such a host tunnels to whatever service that address offers.
var defaultTargetPorts = []string{"3389"}

// checkGatewayName refuses a gateway's name the broker would refuse in
// every report of it (R-GW4): at start, not at the first tunnel.
func checkGatewayName(flag, name string) error {
	if err := vdibroker.ValidateText(flag, name, vdibroker.MaxTunnelReportText); err != nil {
		return usageError{errors.New(vdibroker.ErrorMessage(err))}
	}
	return nil
}

// parseTargets reads a gateway's --target-ports (ports 1..65535, or
// "any") and --target-networks (CIDR prefixes; none is any), the flags
// named as given, into gateway.Config's TargetPorts and TargetNetworks
// (nil: any). Ports nil are any port (a Main built in code; the flags'
// default is 3389), but an empty --target-ports (--target-ports=, or ""
// in a deployment's arguments), which pflag reads as an empty list, not
// nil, is a usage error: only "any" says every port (R-GW1).
func parseTargets(portsFlag string, ports []string, networksFlag string, networks []string) ([]uint16, []netip.Prefix, error) {
	if ports != nil && len(ports) == 0 {
		return nil, nil, usageError{fmt.Errorf("%s: empty; give ports (1..65535), or any for every port", portsFlag)}
	}
	var outPorts []uint16
	if !(len(ports) == 1 && ports[0] == "any") {
		for _, p := range ports {
			n, err := strconv.ParseUint(p, 10, 16)
			if err != nil || n == 0 {
				return nil, nil, usageError{fmt.Errorf("%s: %q is not a port (1..65535, or any)", portsFlag, p)}
			}
			outPorts = append(outPorts, uint16(n))
		}
	}
	var outNets []netip.Prefix
	for _, n := range networks {
		pfx, err := netip.ParsePrefix(n)
		if err != nil {
			return nil, nil, usageError{fmt.Errorf("%s: %w", networksFlag, err)}
		}
		outNets = append(outNets, pfx.Masked())
	}
	return outPorts, outNets, nil
}

// gatewayTokenEnv are the variables an administrator may set by analogy
// with the agent's VDIBROKER_REGISTRATION_TOKEN, each with the flag of the
// file the gateway reads that token from.
var gatewayTokenEnv = []struct{ env, flag string }{
	{"VDIBROKER_BROKER_TOKEN", "broker-token-file"},
	{"VDIBROKER_KEYS_TOKEN", "keys-token-file"},
	{"VDIBROKER_METRICS_TOKEN", "metrics-token-file"},
}

// gatewayTokensNotInEnv refuses a gateway token given in the environment:
// the gateway reads its tokens from files, again on SIGHUP, so that one is
// replaced without a restart, which would drop every tunnel. Ignored, such
// a variable would leave the gateway without its token, every tunnel
// refused, with nothing at start to say why.
func gatewayTokensNotInEnv() error {
	for _, t := range gatewayTokenEnv {
		if os.Getenv(t.env) != "" {
			return usageError{fmt.Errorf("%s: the gateway reads its tokens from files only (read again on SIGHUP, without dropping tunnels): write the token to a file readable by the gateway's user only and give %s (--%s)", t.env, envName(t.flag), t.flag)}
		}
	}
	return nil
}

// newGatewayCmdFor is newGatewayCmd running m (a test reads m's settings).
func newGatewayCmdFor(m *GatewayMain) *cobra.Command {
	var logLevel, keysTokenFile, brokerTokenFile, metricsTokenFile string
	var requestRate float64
	var targetPorts, targetNetworks []string
	cmd := &cobra.Command{
		Use:   "gateway --tls-cert FILE --tls-key FILE --keys-file FILE|--keys-url URL [--broker-url URL]",
		Short: "Run an RD Gateway (MS-TSGU over HTTPS) that tunnels clients to the host their broker-signed access token names",
		Long: `gateway runs vdibroker's RD Gateway. RDP clients (mstsc, FreeRDP) reach it over
HTTPS with the .rdp lines gatewayhostname, gatewayusagemethod:i:1 and
gatewayaccesstoken (FreeRDP: /g:HOST /gat:TOKEN); it checks the token with the
broker's public keys (--keys-file, a JWKS document, or --keys-url) and opens a
tunnel only to the host:port the token names. Tunnel open, host reached and
close are reported to the broker (--broker-url); without it a token is
admitted once by this gateway alone. See docs/gateway.md.
` + envFlagsHelp + `
Its tokens are read from files only (VDIBROKER_BROKER_TOKEN_FILE and the
other --*-token-file flags), never from the environment: a file is read
again on SIGHUP, so a token is replaced without dropping tunnels.`,
		Args: cobra.NoArgs,
		RunE: runWithEnvFlags(func(cmd *cobra.Command, fromEnv []string) error {
			if err := gatewayTokensNotInEnv(); err != nil {
				return err
			}
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", logLevel)}
			}
			m.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: lvl}))
			if len(fromEnv) > 0 {
				m.Logger.Info("flags from the environment", "flags", fromEnv)
			}
			warnEnvOverridden(cmd, fromEnv, m.Logger)
			m.KeysTokenFile, m.BrokerTokenFile, m.MetricsTokenFile = keysTokenFile, brokerTokenFile, metricsTokenFile
			if m.MaxHeaderBytes < 1024 || m.MaxHeaderBytes > 1<<20 {
				return usageError{fmt.Errorf("--max-header-bytes: must be 1024..1048576, got %d", m.MaxHeaderBytes)}
			}
			if err := gateway.ValidateReauthorizeEvery("--reauthorize-every", m.Config.ReauthorizeEvery); err != nil {
				return usageError{err}
			}
			if requestRate <= 0 {
				return usageError{fmt.Errorf("--request-rate: must be above 0, got %v", requestRate)}
			}
			m.Config.RequestRate = rate.Limit(requestRate)
			// gateway.Config takes 0 for its default: refused here, not
			// taken as "no limit" (serve's --gateway-max-tunnels-per-user
			// 0) or "never" silently.
			for _, f := range []struct {
				flag string
				v    int
			}{
				{"--max-conns-per-address", m.Config.MaxConnsPerAddress},
				{"--max-handshakes-per-address", m.Config.MaxHandshakesPerAddress},
				{"--max-tunnels-per-user", m.Config.MaxTunnelsPerUser},
				{"--max-tunnels", m.Config.MaxTunnels},
				{"--request-burst", m.Config.RequestBurst},
			} {
				if f.v < 1 {
					return usageError{fmt.Errorf("%s: must be 1 or more, got %d", f.flag, f.v)}
				}
			}
			for _, f := range []struct {
				flag string
				v    time.Duration
			}{
				{"--idle-timeout", m.Config.IdleTimeout},
				{"--max-lifetime", m.Config.MaxLifetime},
				{"--max-start-wait", m.Config.MaxStartWait},
				{"--keepalive-interval", m.Config.KeepaliveInterval},
				{"--handshake-timeout", m.Config.HandshakeTimeout},
			} {
				if f.v <= 0 {
					return usageError{fmt.Errorf("%s: must be above 0, got %s", f.flag, vdibroker.DurationFlag(f.v))}
				}
			}
			// 0 would never read the keys again; a broker signs with a
			// new key PublishDelay after it makes it, and a replica
			// publishes it up to 30 s later (R-GW6), so a gateway reading
			// its URL less often than MaxGatewayKeysRefresh may refuse
			// that key's tokens until it reads again.
			if m.KeysRefresh < time.Second {
				return usageError{fmt.Errorf("--keys-refresh: must be at least 1s, got %s", vdibroker.DurationFlag(m.KeysRefresh))}
			}
			if m.KeysURL != "" && m.KeysRefresh > broker.MaxGatewayKeysRefresh {
				return usageError{fmt.Errorf("--keys-refresh: must be at most %s with --keys-url, got %s: the broker signs with a new key %s after it makes it, a replica publishes it up to 30s later, and a gateway that has not read it by then refuses its tokens",
					vdibroker.DurationFlag(broker.MaxGatewayKeysRefresh), vdibroker.DurationFlag(m.KeysRefresh), vdibroker.DurationFlag(broker.DefaultGatewayPublishDelay))}
			}
			// Not given, the name is the broker's: its Gateway token's
			// (R-GW4). Given empty, it is a mistake.
			if m.Name == "" && cmd.Flags().Changed("name") {
				return usageError{fmt.Errorf("--name: must be 1..%d characters, got none", vdibroker.MaxTunnelReportText)}
			}
			if err := checkGatewayName("--name", m.Name); m.Name != "" && err != nil {
				return err
			}
			var err error
			if m.Config.TargetPorts, m.Config.TargetNetworks, err = parseTargets("--target-ports", targetPorts, "--target-networks", targetNetworks); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := m.Open(ctx); err != nil {
				return err
			}
			if m.localBrokerInUse {
				m.Logger.Warn("no --broker-url: each token is admitted once by this gateway only; run one gateway, or give the broker's URL")
			}
			if ks := m.keys.Current(); ks != nil {
				m.Logger.Info("vdibroker gateway serving", "addr", m.Addr(), "keys", ks.KeyIDs())
			} else {
				m.Logger.Warn("vdibroker gateway serving, without keys yet: every tunnel is refused keys_unavailable until it reads them", "addr", m.Addr())
			}
			// Read by tests and scripts that start on port 0.
			fmt.Fprintf(cmd.OutOrStdout(), "vdibroker gateway listening on %s\n", m.Addr())
			<-ctx.Done()
			m.Logger.Info("shutting down")
			return m.Close()
		}),
	}
	cmd.AddCommand(newGatewayKeygenCmd(), newGatewayTokenCmd())
	fl := cmd.Flags()
	fl.StringVar(&m.Listen, "listen", "0.0.0.0:443", "address to listen on (HTTPS)")
	fl.StringVar(&m.TLSCert, "tls-cert", "", "PEM certificate (chain) for the gateway's host name; reloaded when it changes or on SIGHUP")
	fl.StringVar(&m.TLSKey, "tls-key", "", "the PEM private key of --tls-cert")
	fl.StringVar(&m.Name, "name", "", "this gateway's name in the reports to the broker, which must be its Gateway token's (default: with --broker-url, its Gateway token's name; without, the host name)")
	fl.StringVar(&m.KeysFile, "keys-file", "", "JWKS file of the broker's Ed25519 token keys (current and previous); reloaded every --keys-refresh and on SIGHUP")
	fl.StringVar(&m.KeysURL, "keys-url", "", "URL of the broker's JWKS document of token keys, instead of --keys-file")
	fl.StringVar(&keysTokenFile, "keys-token-file", "", "file with a bearer token for --keys-url (read again on SIGHUP)")
	fl.DurationVar(&m.KeysRefresh, "keys-refresh", time.Minute, "how often the keys are read again (at least 1s; with --keys-url at most 4m: the broker publishes a key 5m before it signs with it, a replica up to 30s late)")
	fl.StringVar(&m.BrokerURL, "broker-url", "", "URL the tunnel reports are POSTed to (…/open, …/channel, …/close, …/check)")
	fl.StringVar(&brokerTokenFile, "broker-token-file", "", "file with the bearer token of --broker-url (read again on SIGHUP: a new Gateway token without dropping tunnels)")
	fl.StringVar(&m.clientTLS.CAFile, "ca-file", "", "PEM CA bundle that verifies the broker's certificate (--keys-url, --broker-url)")
	fl.BoolVar(&m.clientTLS.InsecureHTTP, "insecure-http", false, "allow plain http:// in --keys-url and --broker-url to a host other than loopback (sends the gateway's token in clear; for a test network only)")
	fl.StringVar(&metricsTokenFile, "metrics-token-file", "", "file with the bearer token /metrics requires (default: open); read again on SIGHUP")
	fl.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	fl.DurationVar(&m.Config.IdleTimeout, "idle-timeout", time.Hour, "close a tunnel idle this long (a token's idle claim overrides)")
	fl.DurationVar(&m.Config.MaxLifetime, "max-lifetime", 24*time.Hour, "close a tunnel this long after it opened (a token may ask for less)")
	fl.DurationVar(&m.Config.ReauthorizeEvery, "reauthorize-every", gateway.DefaultReauthorizeEvery, "ask the broker this often whether each open tunnel's session is still open, and close the tunnels of ended sessions (0: never; 10s..1h); a broker that does not answer closes nothing")
	fl.DurationVar(&m.Config.MaxStartWait, "max-start-wait", 5*time.Minute, "longest a client is held while its host starts (a token's wait claim asks for up to this)")
	fl.DurationVar(&m.Config.KeepaliveInterval, "keepalive-interval", 15*time.Second, "keepalive to a held client this often")
	fl.DurationVar(&m.Config.HandshakeTimeout, "handshake-timeout", 30*time.Second, "longest wait for each packet of a client's handshake, and for its whole handshake up to the channel create")
	fl.IntVar(&m.Config.MaxTunnelsPerUser, "max-tunnels-per-user", 10, "tunnels one user may hold on this gateway")
	fl.IntVar(&m.Config.MaxTunnels, "max-tunnels", 10000, "tunnels (and handshakes) this gateway holds at most")
	fl.Float64Var(&requestRate, "request-rate", 5, "HTTP requests a second one IP address may make before any token is checked")
	fl.IntVar(&m.Config.RequestBurst, "request-burst", 20, "burst of --request-rate")
	fl.IntVar(&m.Config.MaxConnsPerAddress, "max-conns-per-address", 1000, "TCP connections one IP address (an IPv6 /64) holds at once, tunnels included (a tunnel over the HTTP transport holds two, over WebSocket one)")
	fl.IntVar(&m.Config.MaxHandshakesPerAddress, "max-handshakes-per-address", 20, "connections one IP address (an IPv6 /64) holds at once before its token is admitted")
	fl.IntVar(&m.MaxHeaderBytes, "max-header-bytes", 8<<10, "largest HTTP request head accepted (1024..1048576)")
	fl.StringSliceVar(&targetPorts, "target-ports", defaultTargetPorts, "ports a token's host may have (any: every port)")
	fl.StringSliceVar(&targetNetworks, "target-networks", nil, "CIDR networks the address the gateway connects to must lie in, e.g. 10.20.0.0/16: the first of a token's host's addresses inside one (default: any)")
	return cmd
}

// hostnameOr is the machine's host name, or def.
func hostnameOr(def string) string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return def
}

var _ io.Closer = (*GatewayMain)(nil)

func init() { rootCmd.AddCommand(newGatewayCmd()) }
