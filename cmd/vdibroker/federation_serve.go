package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker"
	"github.com/vdibroker/vdibroker/console"
	"github.com/vdibroker/vdibroker/federation"
	"github.com/vdibroker/vdibroker/federation/global"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/metrics"
)

// FederationFlags make `serve` a pod of a federation (SPEC §7).
// Without PodName the broker is no pod and the federation API answers 404.
type FederationFlags struct {
	PodName     string
	Site        string
	ExternalURL string
	SecretFile  string
	// PodTimeout bounds every pod-to-pod call (R-G5).
	PodTimeout time.Duration
	// CAFile, when set, is the PEM CA bundle pod-to-pod HTTPS calls verify
	// the peers against (a private CA, as README's TLS setup makes).
	CAFile string
	// Allow are the patterns of the URLs peers may have
	// (--federation-allow; none: https only, never to loopback or
	// link-local addresses; federation.PeerPolicy).
	Allow []string
	// WrapPodTransport, when set, wraps the pod-to-pod client's transport
	// (not a flag: bench federation counts the calls and their bytes).
	WrapPodTransport func(http.RoundTripper) http.RoundTripper

	secrets *federation.Secrets // from SecretFile, read again by reload
	roots   *x509.CertPool      // from CAFile
	policy  *federation.PeerPolicy
}

func (f *FederationFlags) addFlags(fl *pflag.FlagSet) {
	fl.StringVar(&f.PodName, "pod-name", "", "name of this pod in the federation document (empty: not a pod)")
	fl.StringVar(&f.Site, "site", "", "site of this pod; a document that puts it elsewhere is refused")
	fl.StringVar(&f.ExternalURL, "external-url", "", "URL users and peers reach this broker at (https:// behind a TLS-terminating proxy makes console cookies Secure); for a pod, a document that says otherwise is refused")
	fl.StringVar(&f.SecretFile, "federation-secret-file", "", "file holding the federation's shared secret (the same on every pod, at least 16 bytes); while a new secret replaces it, two lines: the one this pod signs with, then the other it also takes (read again on SIGHUP)")
	fl.StringVar(&f.CAFile, "federation-ca-file", "", "PEM CA bundle to verify the other pods' HTTPS certificates (default: the system's roots)")
	fl.DurationVar(&f.PodTimeout, "pod-timeout", 2*time.Second, "bound of every pod-to-pod call; a pod that does not answer in time is skipped")
	fl.StringSliceVar(&f.Allow, "federation-allow", nil, "URLs the peers of the federation document may have, as [scheme://]host[:port] patterns (host: name, *.domain, *, IP, CIDR; scheme absent: https); repeat or separate by commas (default: https only, never to loopback, link-local or unspecified addresses)")
}

// load checks the flags and reads the secret, before anything is opened.
func (f *FederationFlags) load() error {
	if f.ExternalURL != "" {
		if u, err := url.Parse(f.ExternalURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usageError{fmt.Errorf("--external-url must be an http:// or https:// URL, got %q", f.ExternalURL)}
		}
	}
	if f.PodName == "" {
		if f.Site != "" || f.SecretFile != "" || len(f.Allow) > 0 {
			return usageError{fmt.Errorf("--site, --federation-secret-file and --federation-allow need --pod-name")}
		}
		return nil
	}
	if err := vdibroker.ValidateName("pod-name", f.PodName, 1, 64); err != nil {
		return usageError{err}
	}
	policy, err := federation.ParsePeerPolicy(f.Allow)
	if err != nil {
		return usageError{err}
	}
	f.policy = policy
	if f.SecretFile == "" {
		return usageError{fmt.Errorf("--pod-name needs --federation-secret-file: pods authenticate each other with its secret")}
	}
	if f.PodTimeout <= 0 {
		return usageError{fmt.Errorf("--pod-timeout must be positive, got %s", vdibroker.DurationFlag(f.PodTimeout))}
	}
	if f.CAFile != "" {
		pool, err := loadCertPool(f.CAFile)
		if err != nil {
			return usageError{fmt.Errorf("--federation-ca-file: %w", err)}
		}
		f.roots = pool
	}
	list, err := readSecrets(f.SecretFile)
	if err != nil {
		return err
	}
	f.secrets = federation.NewSecrets(list...)
	return nil
}

// readSecrets reads a federation secret file (federation.ParseSecrets).
func readSecrets(file string) ([][]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read federation secret: %w", err)
	}
	list, err := federation.ParseSecrets(b)
	if err != nil {
		return nil, fmt.Errorf("federation secret file %s: %w", file, err)
	}
	return list, nil
}

// reload reads the secret file again (SIGHUP), so that a new secret
// replaces the old one pod by pod without a restart (R-G5): calls this pod
// makes from now on are signed with its first secret, calls it takes may
// be signed with any. A file that does not read keeps the secrets in force
// and says why.
func (f *FederationFlags) reload(log *slog.Logger) {
	if f.secrets == nil {
		return
	}
	list, err := readSecrets(f.SecretFile)
	if err != nil {
		log.Error("SIGHUP: federation secrets kept", "err", err)
		return
	}
	was := f.secrets.Fingerprints()
	f.secrets.Set(list)
	fp := f.secrets.Fingerprints()
	log.Warn("SIGHUP: federation secrets read", "file", f.SecretFile, "secrets", len(list),
		"signs", fp[0], "takes", strings.Join(fp, ","), "signed", was[0], "took", strings.Join(was, ","))
}

// logSecrets logs the secrets a pod started with, by fingerprint: a
// process started while the secret is being rotated is on the step its
// file was at.
func (f *FederationFlags) logSecrets(log *slog.Logger) {
	if f.secrets == nil {
		return
	}
	fp := f.secrets.Fingerprints()
	log.Info("federation secrets", "file", f.SecretFile, "secrets", len(fp), "signs", fp[0], "takes", strings.Join(fp, ","))
}

// federation returns the federation service of a pod on svc, with apps
// for its global application entitlements (R-E9), or nil without
// --pod-name.
func (f *FederationFlags) federation(svc *broker.Service, apps global.Applications, log *slog.Logger) vdibroker.FederationService {
	if f.PodName == "" {
		return nil
	}
	return global.New(global.Config{
		Connect: svc, Applications: apps, Hosts: svc, Sessions: svc, Store: svc.Store(), Logger: log,
		Pod: f.PodName, Site: f.Site, URL: f.ExternalURL,
		Peers:                   f.podClient(),
		PeerPolicy:              f.policy,
		PodTimeout:              f.PodTimeout,
		ObserveConnect:          metrics.ObserveGlobalConnect,
		ObservePodCall:          metrics.ObservePodCall,
		OutagePlacementsWaiting: svc.OutagePlacementsWaiting,
	})
}

// startDirectory runs the pod's session directory passes (R-G1) until the
// returned stop is called; a broker that is not a pod runs none.
func startDirectory(fs vdibroker.FederationService) (stop func()) {
	g, ok := fs.(*global.Service)
	if !ok {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.RunDirectory(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// registry adds the federation metrics to reg.
func (f *FederationFlags) registry(reg *prometheus.Registry) *prometheus.Registry {
	metrics.RegisterFederation(reg)
	return reg
}

// addConsole adds the console's federation page when --pod-name is set.
// Its changes reach the other pods through the pod-to-pod client, signed
// with the federation secret, never with the signed-in user's token: only
// the URLs --federation-allow allows, trusting --federation-ca-file, no
// redirect, no proxy (R-SEC); each within --pod-timeout, as every
// pod-to-pod call (R-G5): a peer that takes the connection and never
// answers holds the administrator's page that long, not 10 s.
func (f *FederationFlags) addConsole(c *console.Console) {
	if f.PodName != "" {
		c.EnableFederation(console.FederationConfig{Pods: f.podClient(), Timeout: f.PodTimeout})
	}
}

// podClient is the pod-to-pod client: signed as this pod, verifying peers
// against --federation-ca-file when given.
func (f *FederationFlags) podClient() *vhttp.PodClient {
	peers := vhttp.NewPodClient(f.PodName, nil)
	peers.Secrets = f.secrets
	if f.roots != nil {
		peers.HTTPClient.Transport.(*http.Transport).TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: f.roots}
	}
	peers.Restrict(f.policy)
	if f.WrapPodTransport != nil {
		peers.HTTPClient.Transport = f.WrapPodTransport(peers.HTTPClient.Transport)
	}
	return peers
}
