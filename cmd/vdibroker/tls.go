package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// certReloader serves the certificate in certFile and keyFile, read again
// when either file changes (checked at most once a second of its clock,
// at a handshake) or on SIGHUP, so a renewed certificate takes effect
// without a restart and without dropping connections. A file that does
// not parse keeps the previous certificate and is logged.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger
	clock             clock.PassiveClock // when the files were last looked at

	mu      sync.Mutex
	cert    *tls.Certificate
	modTime time.Time
	checked time.Time
	stop    func()
}

// newCertReloader loads the pair and watches it on clk (nil: the real
// clock; a test steps a fake one past the second between looks).
func newCertReloader(certFile, keyFile string, log *slog.Logger, clk clock.PassiveClock) (*certReloader, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	r := &certReloader{certFile: certFile, keyFile: keyFile, log: log, clock: clk}
	if err := r.load(); err != nil {
		return nil, err
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				if err := r.load(); err != nil {
					log.Error("reload TLS certificate on SIGHUP", "err", err)
				} else {
					log.Info("reloaded TLS certificate on SIGHUP", "cert", certFile)
				}
			case <-done:
				return
			}
		}
	}()
	r.stop = func() { signal.Stop(hup); close(done) }
	return r, nil
}

// load reads the pair and records the newer of the files' times.
func (r *certReloader) load() error {
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate %s / key %s: %w", r.certFile, r.keyFile, err)
	}
	mt := newest(r.certFile, r.keyFile)
	r.mu.Lock()
	r.cert, r.modTime, r.checked = &cert, mt, r.clock.Now()
	r.mu.Unlock()
	return nil
}

func newest(files ...string) time.Time {
	var t time.Time
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.ModTime().After(t) {
			t = fi.ModTime()
		}
	}
	return t
}

// GetCertificate is tls.Config.GetCertificate.
func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	now := r.clock.Now()
	stale := now.Sub(r.checked) > time.Second
	if stale {
		r.checked = now
	}
	cert, mt := r.cert, r.modTime
	r.mu.Unlock()
	if stale && newest(r.certFile, r.keyFile).After(mt) {
		if err := r.load(); err != nil {
			r.log.Error("reload changed TLS certificate; keeping the previous one", "err", err)
		} else {
			r.log.Info("reloaded changed TLS certificate", "cert", r.certFile)
			r.mu.Lock()
			cert = r.cert
			r.mu.Unlock()
		}
	}
	return cert, nil
}

func (r *certReloader) Close() {
	if r.stop != nil {
		r.stop()
	}
}

// loadCertPool reads PEM certificates (a CA bundle) from file.
func loadCertPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

// clientTLSOptions are the TLS flags of the agent and the CLI.
type clientTLSOptions struct {
	CAFile, CertFile, KeyFile string
	// InsecureHTTP allows http:// to hosts other than loopback.
	InsecureHTTP bool
}

// httpClient returns an HTTP client for server: HTTPS verified against
// CAFile (else the system's roots), presenting CertFile/KeyFile when set
// (mTLS). Plain http:// is refused unless server is on loopback or
// InsecureHTTP is set, since the credentials would cross the network in
// clear.
func (o clientTLSOptions) httpClient(server string, timeout time.Duration) (*http.Client, error) {
	return o.httpClientFor("--server", server, timeout)
}

// httpClientFor is httpClient for the URL of flag, which its errors name
// (the gateway's --keys-url and --broker-url).
func (o clientTLSOptions) httpClientFor(flag, server string, timeout time.Duration) (*http.Client, error) {
	u, err := url.Parse(server)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, usageError{fmt.Errorf("%s %q: want a URL such as https://broker.example.com:8443", flag, server)}
	}
	if u.Scheme == "http" && !o.InsecureHTTP && !isLoopback(u.Hostname()) {
		return nil, usageError{fmt.Errorf("%s %q: plain http:// to a host other than loopback would send tokens in clear; use https:// (with --ca-file for a private CA) or pass --insecure-http", flag, server)}
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		pool, err := loadCertPool(o.CAFile)
		if err != nil {
			return nil, usageError{fmt.Errorf("--ca-file: %w", err)}
		}
		cfg.RootCAs = pool
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, usageError{errors.New("--client-cert and --client-key go together")}
	}
	if o.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, usageError{fmt.Errorf("--client-cert/--client-key: %w", err)}
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	return &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: refuseRedirect}, nil
}

// refuseRedirect follows no redirect (R-SEC): Go's client keeps the
// Authorization header on a redirect to the same host name on another
// port or scheme, plain http:// included (past the check of --server
// above), and a 307 or 308 sends the body (a registration token) on to
// any address. The broker's API and a gateway's keys never redirect.
func refuseRedirect(req *http.Request, _ []*http.Request) error {
	loc := strings.ToValidUTF8(req.URL.Redacted(), "?")
	if len(loc) > 200 {
		loc = loc[:200] + "…"
	}
	return redirectRefused{fmt.Sprintf("the server redirected to %s, which is not followed, so no token goes there: give the URL it serves at", loc)}
}

// redirectRefused is refuseRedirect's error: the server answered, with a
// redirect, so the CLI does not call it unreachable (fail).
type redirectRefused struct{ msg string }

func (e redirectRefused) Error() string { return e.msg }

// isLoopback reports whether host names this machine's loopback.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
