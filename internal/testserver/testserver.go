// Package testserver wires an HTTP server to a broker service of its own on
// a store, as cmd/vdibroker's serve does, for the tests of the packages
// that serve or call the API (http, console, metrics, loadgen, demo).
package testserver

import (
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker"
	"github.com/vdibroker/vdibroker/broker/outage"
	"github.com/vdibroker/vdibroker/entitlement"
	"github.com/vdibroker/vdibroker/federation"
	"github.com/vdibroker/vdibroker/federation/global"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/identity"
	"github.com/vdibroker/vdibroker/power"
)

// Config is what a test varies: the store and the settings of the broker
// service and of the server (see broker.Config and http.Config).
type Config struct {
	Store  vdibroker.Store
	Logger *slog.Logger
	// Clock is the broker service's (nil = the real clock); Now, when
	// set instead, is the real clock with another time: a test's clock
	// moved forward by hand, whose tickers tick in real time.
	Clock               clock.WithTicker
	Now                 func() time.Time
	Rand                func(n int) int
	AdminToken          string
	MaintenanceInterval time.Duration
	ObservePlacement    func(algorithm string, d time.Duration)
	StoreTimeout        time.Duration
	Retention           time.Duration
	AgentClientCert     bool
	PowerDrivers        power.Set
	OIDC                *identity.Provider
	// Pod, when set, makes the server a pod of a federation (see
	// global.Config): its site, its peers, the bound of a pod-to-pod call
	// and the federation's secret.
	Pod              string
	Site             string
	Peers            vdibroker.PodClient
	PodTimeout       time.Duration
	FederationSecret []byte
	// OneProcessStore: the store is this server's alone (a SQLite one),
	// as http.Config.OneProcessStore; its read mark is kept in Store, as
	// serve keeps it, and ReadsFrom is http.Config.ReadsFrom.
	OneProcessStore bool
	ReadsFrom       time.Time
	// Gateway is the broker's RD gateway side (broker.GatewayConfig).
	Gateway broker.GatewayConfig
	// AfterTick is called at the end of each maintenance tick
	// (broker.Config.AfterTick).
	AfterTick func()
	// OutagePlacement is broker.Config.OutagePlacement (R-OUT2).
	OutagePlacement outage.Placement
}

// Server is an HTTP server on its own broker service; Close stops the
// service (not the store).
type Server struct {
	*vhttp.Server
	Broker       *broker.Service
	Entitlements *entitlement.Service
	Federation   *global.Service // nil unless Config.Pod is set
}

// New returns a server on a new broker service on cfg.Store.
func New(cfg Config) *Server {
	clk := cfg.Clock
	if clk == nil && cfg.Now != nil {
		clk = skewed{now: cfg.Now}
	}
	svc := broker.New(broker.Config{Store: cfg.Store, Logger: cfg.Logger, Clock: clk, Rand: cfg.Rand,
		MaintenanceInterval: cfg.MaintenanceInterval, ObservePlacement: cfg.ObservePlacement,
		StoreTimeout: cfg.StoreTimeout, Retention: cfg.Retention, PowerDrivers: cfg.PowerDrivers, Gateway: cfg.Gateway,
		AfterTick: cfg.AfterTick, OutagePlacement: cfg.OutagePlacement})
	services := svc.Services()
	// The entitlement service around the broker's connect (R-E3), as
	// serve wires it.
	ents := entitlement.New(entitlement.Config{Store: svc.Store(), Connect: svc, Logger: cfg.Logger, Clock: clk, Pod: cfg.Pod})
	services.Connect, services.Entitlements = ents, ents
	var fed *global.Service
	if cfg.Pod != "" {
		fed = global.New(global.Config{Connect: svc, Applications: ents, Hosts: svc, Sessions: svc, Store: svc.Store(), Logger: cfg.Logger,
			Pod: cfg.Pod, Site: cfg.Site, Peers: cfg.Peers, PodTimeout: cfg.PodTimeout, OutagePlacementsWaiting: svc.OutagePlacementsWaiting,
			Clock: clk})
		services.Federation = fed
	}
	var marks federation.Marks
	if cfg.OneProcessStore {
		marks = cfg.Store
	}
	srv := vhttp.NewServer(vhttp.Config{Services: services, FederationSecrets: federation.NewSecrets(cfg.FederationSecret), OneProcessStore: cfg.OneProcessStore,
		ReadsFrom: cfg.ReadsFrom, ReadMarks: marks, Logger: cfg.Logger, Now: cfg.Now,
		AdminToken: cfg.AdminToken, AgentClientCert: cfg.AgentClientCert, OIDC: cfg.OIDC})
	return &Server{Server: srv, Broker: svc, Entitlements: ents, Federation: fed}
}

// Close stops the broker service.
func (s *Server) Close() error { return s.Broker.Close() }

// skewed is the real clock with another Now.
type skewed struct {
	clock.RealClock
	now func() time.Time
}

func (c skewed) Now() time.Time                  { return c.now() }
func (c skewed) Since(t time.Time) time.Duration { return c.now().Sub(t) }
