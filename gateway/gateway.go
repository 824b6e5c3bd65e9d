package gateway

import (
	"bufio"
	"container/list"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/utils/clock"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/gateway/tsgu"
	"github.com/vdibroker/vdibroker/gatewaytoken"
)

// Path is the resource RD Gateway clients request.
const Path = "/remoteDesktopGateway/"

// The HTTP methods and header of the HTTP transport (MS-TSGU 2.2.3).
const (
	methodOut          = "RDG_OUT_DATA"
	methodIn           = "RDG_IN_DATA"
	headerConnectionID = "RDG-Connection-Id"
	headerAuthScheme   = "RDG-Auth-Scheme"
)

// Verifier checks an access token: *gatewaytoken.Keyring and
// *gatewaytoken.KeySet are Verifiers.
type Verifier interface {
	Verify(tok string, now time.Time) (gatewaytoken.Claims, error)
}

// Config configures a Gateway. Zero limits take the defaults below.
type Config struct {
	// Name is this gateway's name in the reports to the broker.
	Name string
	// NameFromCredential leaves Name out of the reports and checks (their
	// gateway empty): the broker takes the name of the gateway's Gateway
	// token (R-GW4). Name is then its name in its own log only.
	NameFromCredential bool
	Verifier           Verifier
	Broker             Broker
	Logger             *slog.Logger
	// Registry, when set, gets the gateway's metrics.
	Registry prometheus.Registerer
	// Clock drives the timers (nil: the real clock).
	Clock clock.WithTickerAndDelayedExecution
	// Dial opens the TCP connection to a host (nil: net.Dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// IdleTimeout closes a tunnel with no traffic either way for this long,
	// unless its token says otherwise (default 1 hour).
	IdleTimeout time.Duration
	// MaxLifetime closes a tunnel this long after it opened, unless its
	// token says less (default 24 hours).
	MaxLifetime time.Duration
	// ReauthorizeEvery is how often the gateway asks the broker whether
	// its open tunnels may go on (Broker.CheckTunnels), as RD Gateway's
	// session timeout re-authorizes silently: a tunnel the broker no
	// longer answers for (its session ended) is closed, reason
	// "session_ended". A broker that does not answer closes nothing.
	// 0: never.
	ReauthorizeEvery time.Duration
	// MaxStartWait bounds how long a client is held while a starting host's
	// RDP port does not answer (default 5 minutes); the token's wait claim
	// asks for up to this much.
	MaxStartWait time.Duration
	// KeepaliveInterval is how often a held client gets a keepalive packet
	// (default 15 s).
	KeepaliveInterval time.Duration
	// HandshakeTimeout bounds each step of the handshake, from a request to
	// the client's next packet, and the whole handshake up to the channel
	// create, keepalives or not (default 30 s).
	HandshakeTimeout time.Duration
	// OutGrace is how long a tunnel's IN connection is still read after
	// its OUT connection ended (default 5 s, on Clock): what the client
	// sent before it dropped both, its CloseChannel above all, was sent
	// before OUT's end and arrives within it (R-GW3: a clean close is
	// client_closed). A tunnel still open after it is aborted: a client
	// that keeps IN open, or a host that reads nothing more.
	OutGrace time.Duration
	// MaxTunnelsPerUser bounds one user's tunnels on this gateway
	// (default 10); MaxTunnels all tunnels (default 10,000).
	MaxTunnelsPerUser int
	MaxTunnels        int
	// RequestRate and RequestBurst limit the HTTP requests from one IP
	// address before any token is seen (default 5 a second, burst 20);
	// MaxAddresses bounds the addresses tracked (default 10,000). An IPv6
	// address counts by its /64, what one site or host is given.
	RequestRate  rate.Limit
	RequestBurst int
	MaxAddresses int
	// MaxHandshakesPerAddress bounds the connections one address holds
	// without an admitted token: OUT channels waiting for their IN
	// channel and handshakes (default 20).
	MaxHandshakesPerAddress int
	// MaxConnsPerAddress bounds the TCP connections one address holds
	// at once on its Listener, tunnels included (default 1,000: the
	// users of an office behind one address; a tunnel over the HTTP
	// transport holds two, its IN and OUT channels, one over WebSocket
	// one, so 500 to 1,000 tunnels).
	MaxConnsPerAddress int
	// MaxPendingChannels bounds OUT channels waiting for their IN channel
	// (default 1,000): one more closes the one waiting longest.
	MaxPendingChannels int
	// TargetPorts and TargetNetworks, when set, bound the hosts a token
	// opens, as RD Gateway's resource authorization policy does: its port
	// must be one of TargetPorts, and an address its host resolves to
	// must lie in one of TargetNetworks (the others are passed over: a
	// dual-stack host's IPv6 address, say); the gateway then connects to the
	// address it checked. Empty: any. A token's host is the address its
	// session host's agent registered, which the agent chooses.
	TargetPorts    []uint16
	TargetNetworks []netip.Prefix
	// LookupNetIP resolves a token's host name for TargetNetworks (nil:
	// net.DefaultResolver).
	LookupNetIP func(ctx context.Context, network, host string) ([]netip.Addr, error)
}

func (c *Config) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	defInt := func(d *int, v int) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.IdleTimeout, time.Hour)
	def(&c.MaxLifetime, 24*time.Hour)
	def(&c.MaxStartWait, 5*time.Minute)
	def(&c.KeepaliveInterval, 15*time.Second)
	def(&c.HandshakeTimeout, 30*time.Second)
	def(&c.OutGrace, 5*time.Second)
	defInt(&c.MaxTunnelsPerUser, 10)
	defInt(&c.MaxTunnels, 10_000)
	defInt(&c.RequestBurst, 20)
	defInt(&c.MaxAddresses, 10_000)
	defInt(&c.MaxPendingChannels, 1000)
	defInt(&c.MaxHandshakesPerAddress, 20)
	defInt(&c.MaxConnsPerAddress, 1000)
	if c.RequestRate <= 0 {
		c.RequestRate = 5
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second}
		c.Dial = d.DialContext
	}
	if c.Name == "" {
		c.Name = "gateway"
	}
	if c.LookupNetIP == nil {
		c.LookupNetIP = net.DefaultResolver.LookupNetIP
	}
}

// The range of Config.ReauthorizeEvery, besides 0 (never), and the
// commands' default: a session the broker ended loses its tunnel within a
// minute, for one call a minute per 500 tunnels.
const (
	DefaultReauthorizeEvery = time.Minute
	MinReauthorizeEvery     = 10 * time.Second
	MaxReauthorizeEvery     = time.Hour
)

// ValidateReauthorizeEvery checks d for the flag named flag: 0, or
// MinReauthorizeEvery..MaxReauthorizeEvery.
func ValidateReauthorizeEvery(flag string, d time.Duration) error {
	if d != 0 && (d < MinReauthorizeEvery || d > MaxReauthorizeEvery) {
		return fmt.Errorf("%s: must be 0 (never) or %s..%s, got %s", flag, vdibroker.DurationFlag(MinReauthorizeEvery), vdibroker.DurationFlag(MaxReauthorizeEvery), vdibroker.DurationFlag(d))
	}
	return nil
}

// Gateway serves the HTTP transport of MS-TSGU. It is an http.Handler; the
// server it runs in must allow hijacking (HTTP/1.1).
type Gateway struct {
	cfg     Config
	m       *metrics
	ctx     context.Context
	cancel  context.CancelFunc
	logRate *rate.Limiter

	mu      sync.Mutex
	closed  bool
	pending map[string]*pendingOut // OUT channels by RDG-Connection-Id
	// pendingAge holds the pending OUT channels in their arrival order,
	// oldest first: a full table closes its front in O(1).
	pendingAge *list.List
	limiters   map[string]*addrLimiter
	// limiterAge holds the limiters' addresses, the one seen last first:
	// a full table forgets its back in O(1), not by scanning it under mu
	// for each new address.
	limiterAge *list.List
	tunnels    map[*tunnel]struct{}
	// unauth holds the tunnels whose token was not accepted yet, the
	// handshakes, oldest first: a full gateway closes its front for a
	// new client (newTunnel).
	unauth  *list.List
	perUser map[string]int
	wg      sync.WaitGroup

	// preauth counts each address's connections without an admitted
	// token (pending OUT channels, handshakes), under mu; an entry lives
	// as long as a connection, so the map is bounded as they are.
	preauth map[string]int
	// checkBatch is the most tunnels one check asks about
	// (vdibroker.MaxTunnelCheck; tests lower it).
	checkBatch int
	// closes are the close reports to send again (closes.go).
	closes closeRetries
}

type addrLimiter struct {
	lim  *rate.Limiter
	elem *list.Element // in limiterAge, of the address's key
}

// pendingOut is an OUT channel waiting for its IN channel.
type pendingOut struct {
	conn    net.Conn
	client  string
	started time.Time
	timer   clock.Timer
	elem    *list.Element // in pendingAge, of the connection id
	// release gives back the address's handshake slot, once; the tunnel
	// takes it over when the IN channel comes.
	release func()
}

// New returns a gateway; Verifier and Broker are required.
func New(cfg Config) (*Gateway, error) {
	if cfg.Verifier == nil || cfg.Broker == nil {
		return nil, errors.New("gateway: Verifier and Broker are required")
	}
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	g := &Gateway{cfg: cfg, m: newMetrics(cfg.Registry), ctx: ctx, cancel: cancel,
		logRate:    rate.NewLimiter(20, 100),
		pending:    map[string]*pendingOut{},
		pendingAge: list.New(),
		limiters:   map[string]*addrLimiter{},
		limiterAge: list.New(),
		preauth:    map[string]int{},
		tunnels:    map[*tunnel]struct{}{},
		unauth:     list.New(),
		perUser:    map[string]int{},

		checkBatch: vdibroker.MaxTunnelCheck,
	}
	if cfg.ReauthorizeEvery > 0 {
		// The ticker starts now, not when the goroutine runs: a check is
		// due ReauthorizeEvery after New on the gateway's clock.
		tk := cfg.Clock.NewTicker(cfg.ReauthorizeEvery)
		g.wg.Add(1)
		go g.tickLoop(tk, g.reauthorize)
	}
	return g, nil
}

// tickLoop runs f at each tick of tk until Close: the check of the open
// tunnels every ReauthorizeEvery, the close reports sent again.
func (g *Gateway) tickLoop(tk clock.Ticker, f func()) {
	defer g.wg.Done()
	defer tk.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-tk.C():
			f()
		}
	}
}

// reauthorize asks the broker about every admitted tunnel, in batches of
// vdibroker.MaxTunnelCheck, and ends those it does not let go on: their
// session ended, or the broker no longer knows the tunnel. A batch the
// broker does not answer (unreachable, 5xx, its store down, an older
// broker's 404) keeps its tunnels and those of the batches after it: an
// outage of the broker must not cut every user off.
func (g *Gateway) reauthorize() {
	g.mu.Lock()
	var ts []*tunnel
	for t := range g.tunnels {
		if t.live.Load() {
			ts = append(ts, t)
		}
	}
	g.mu.Unlock()
	for len(ts) > 0 {
		batch := ts[:min(len(ts), g.checkBatch)]
		ts = ts[len(batch):]
		evs := make([]TunnelEvent, len(batch))
		for i, t := range batch {
			evs[i] = t.event()
		}
		ctx, cancel := context.WithTimeout(g.ctx, brokerTimeout)
		open, err := g.cfg.Broker.CheckTunnels(ctx, g.reportName(), evs)
		cancel()
		if err != nil {
			if g.ctx.Err() != nil {
				return // closing
			}
			// The broker that did not answer this batch (unreachable, an
			// older one's 404, 5xx) would not answer the next either:
			// the round ends here, one call and one line per
			// ReauthorizeEvery, not one per batch each waiting its
			// timeout. The batches are drawn from a map, so another
			// round asks about others first.
			g.m.checks.WithLabelValues("failed").Inc()
			g.cfg.Logger.Warn("check of open tunnels with the broker failed; they stay open", "tunnels", len(batch)+len(ts), "err", cut(err.Error(), 200))
			return
		}
		goOn := make(map[string]bool, len(open))
		for _, id := range open {
			goOn[id] = true
		}
		for _, t := range batch {
			if !goOn[t.claims.ID] {
				g.cfg.Logger.Info("the broker ended the tunnel's session: closing the tunnel", "tokenId", t.claims.ID,
					"user", t.claims.User, "session", t.claims.Session, "host", t.claims.Host, "client", t.client)
				// end waits up to a second for the client to take the
				// close packet: not one tunnel after the other here.
				go t.end("session_ended", tsgu.EProxySessionTimeout)
			}
		}
		g.m.checks.WithLabelValues("answered").Inc()
	}
}

// Close ends every tunnel and pending channel and waits for their reports
// to the broker. Requests after Close are refused.
func (g *Gateway) Close() error {
	g.mu.Lock()
	g.closed = true
	for id, p := range g.pending {
		p.timer.Stop()
		p.conn.Close()
		g.dropPendingLocked(id, p)
		defer p.release() // takes g.mu
	}
	for t := range g.tunnels {
		t.abort()
	}
	g.mu.Unlock()
	g.cancel()
	g.wg.Wait()
	if n := g.pendingCloses(); n > 0 {
		g.cfg.Logger.Warn("close reports the broker did not take are lost with the gateway's stop: the broker counts their tunnels for their users up to a day", "reports", n)
	}
	return nil
}

// refuse counts and logs a refusal. Every string from the client is cut
// and the log lines themselves are rate limited: a flood of bad requests
// costs a counter, not the disk.
func (g *Gateway) refuse(reason, client string, attrs ...any) {
	g.m.refusals.WithLabelValues(reason).Inc()
	if !g.logRate.AllowN(g.cfg.Clock.Now(), 1) {
		g.m.logDrops.Inc()
		return
	}
	g.cfg.Logger.Warn("gateway refused", append([]any{"reason", reason, "client", client}, attrs...)...)
}

// cut shortens a string that came from outside for a log line.
func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// addrKey is what the per-address limits count a client's address as:
// an IPv4 address itself, an IPv6 address by its /64, as one site or host
// is given a /64 at least and could otherwise pass each limit 2^64 times.
func addrKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}

// allow applies the per-address rate limit of anonymous requests. The
// table of addresses is bounded: when full, the address seen longest ago
// is forgotten, in O(1) (limiterAge). An address forgotten so starts
// again with a full burst: a client holding more addresses than the
// table has a burst on each of them anyway. Refusing the new address
// instead let such a client, one IPv6 /48 (65,536 /64s), keep the table
// full and every other client out; finding the oldest by a scan of the
// table, under mu, cost each request of a new address a scan of 10,000.
func (g *Gateway) allow(ip string) bool {
	now := g.cfg.Clock.Now()
	key := addrKey(ip)
	g.mu.Lock()
	defer g.mu.Unlock()
	l, ok := g.limiters[key]
	if ok {
		g.limiterAge.MoveToFront(l.elem)
	} else {
		if len(g.limiters) >= g.cfg.MaxAddresses {
			delete(g.limiters, g.limiterAge.Remove(g.limiterAge.Back()).(string))
		}
		l = &addrLimiter{lim: rate.NewLimiter(g.cfg.RequestRate, g.cfg.RequestBurst), elem: g.limiterAge.PushFront(key)}
		g.limiters[key] = l
	}
	return l.lim.AllowN(now, 1)
}

// enterPreauth takes one of the address's slots for a connection without
// an admitted token, and returns the function that gives it back (once);
// nil when the address holds MaxHandshakesPerAddress already.
func (g *Gateway) enterPreauth(ip string) func() {
	key := addrKey(ip)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.preauth[key] >= g.cfg.MaxHandshakesPerAddress {
		return nil
	}
	g.preauth[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			if g.preauth[key] <= 1 {
				delete(g.preauth, key)
			} else {
				g.preauth[key]--
			}
		})
	}
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// validConnectionID accepts the GUIDs clients send ({xxxxxxxx-...}) and
// nothing long or odd.
func validConnectionID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '-' || c == '{' || c == '}') {
			return false
		}
	}
	return true
}

// ServeHTTP answers the RD Gateway requests.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := g.cfg.Clock.Now()
	ip := clientIP(r)
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		http.Error(w, "gateway closing", http.StatusServiceUnavailable)
		return
	}
	if !g.allow(ip) {
		g.refuse("rate_limited", ip)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many requests", http.StatusTooManyRequests)
		return
	}
	if r.URL.Path != Path {
		g.refuse("not_found", ip, "path", cut(r.URL.Path, 64))
		http.NotFound(w, r)
		return
	}
	if r.Method != methodOut && r.Method != methodIn {
		g.refuse("bad_method", ip, "method", cut(r.Method, 32))
		w.Header().Set("Allow", methodOut+", "+methodIn)
		http.Error(w, "RD Gateway: RDG_OUT_DATA or RDG_IN_DATA", http.StatusMethodNotAllowed)
		return
	}
	id := r.Header.Get(headerConnectionID)
	if !validConnectionID(id) {
		g.refuse("bad_request", ip, "connectionId", cut(id, 64))
		http.Error(w, "RDG-Connection-Id: want the client's GUID", http.StatusBadRequest)
		return
	}
	// Only pluggable authentication: the access token comes in the tunnel
	// create packet. A client offering another scheme is told which one.
	if !strings.EqualFold(r.Header.Get(headerAuthScheme), "PAA") {
		g.refuse("unsupported_auth", ip, "scheme", cut(r.Header.Get(headerAuthScheme), 32))
		w.Header().Set("WWW-Authenticate", "PAA")
		http.Error(w, "this gateway accepts only an access token (gatewayaccesstoken, RDG-Auth-Scheme: PAA)", http.StatusUnauthorized)
		return
	}
	switch {
	case r.Method == methodOut && headerHasToken(r.Header, "Upgrade", "websocket"):
		g.serveWebSocket(w, r, ip, start)
	case r.Method == methodOut:
		g.serveOut(w, r, id, ip, start)
	default:
		g.serveIn(w, r, id, ip)
	}
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// serveOut takes the OUT channel: 200 OK with no length and a 10-byte seed
// (FreeRDP skips exactly 10 bytes; MS-TSGU 3.3.5.1 speaks of a random body
// of limited size), then the connection carries the server's packets. It
// waits for its IN channel under the same RDG-Connection-Id.
func (g *Gateway) serveOut(w http.ResponseWriter, r *http.Request, id, ip string, start time.Time) {
	if g.refuseFull(w, ip) {
		return
	}
	g.mu.Lock()
	_, dup := g.pending[id]
	g.mu.Unlock()
	if dup {
		g.refuse("duplicate_channel", ip)
		http.Error(w, "cannot take this channel now", http.StatusServiceUnavailable)
		return
	}
	release := g.enterPreauth(ip)
	if release == nil {
		g.refuseBusy(w, ip)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		release()
		g.refuse("no_hijack", ip)
		return
	}
	// Registered before the answer goes out: the client opens its IN
	// channel as soon as it has read the answer.
	p := &pendingOut{conn: conn, client: ip, started: start, release: release}
	g.mu.Lock()
	if _, dup := g.pending[id]; dup || g.closed {
		g.mu.Unlock()
		conn.Close()
		release()
		return
	}
	// MaxPendingChannels waiting: the one waiting longest makes room, in
	// O(1) (pendingAge). A client's IN channel follows its OUT channel
	// within a few round trips, so the oldest is one left waiting unless
	// 1,000 others came in those round trips; refusing the new one
	// instead let such channels, a few addresses' worth, refuse every
	// client of this transport.
	var evicted *pendingOut
	if len(g.pending) >= g.cfg.MaxPendingChannels {
		oldID := g.pendingAge.Front().Value.(string)
		evicted = g.pending[oldID]
		g.dropPendingLocked(oldID, evicted)
	}
	g.pending[id] = p
	p.elem = g.pendingAge.PushBack(id)
	p.timer = g.cfg.Clock.AfterFunc(g.cfg.HandshakeTimeout, func() {
		if g.takePending(id, p) {
			g.refuse("no_in_channel", ip)
			conn.Close()
			release()
		}
	})
	g.mu.Unlock()
	if evicted != nil {
		evicted.timer.Stop()
		evicted.conn.Close()
		evicted.release()
		g.refuse("pending_full", evicted.client)
	}
	seed := make([]byte, 10)
	rand.Read(seed)
	brw.WriteString("HTTP/1.1 200 OK\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n")
	brw.Write(seed)
	if err := brw.Flush(); err != nil && g.takePending(id, p) {
		p.timer.Stop()
		conn.Close()
		release()
	}
}

// refuseFull answers 503 a request for a tunnel while the gateway holds
// MaxTunnels tunnels whose token was accepted, and says whether it did:
// before the OUT channel's 200 or the WebSocket's upgrade, where the
// client reads an answer, not at newTunnel's own check (an IN channel's,
// whose answer the client does not read), which closes the connections
// with nothing to say why. While a slot holds a handshake without an
// accepted token, newTunnel takes it for the new client.
func (g *Gateway) refuseFull(w http.ResponseWriter, ip string) bool {
	g.mu.Lock()
	full := len(g.tunnels) >= g.cfg.MaxTunnels && g.unauth.Len() == 0
	g.mu.Unlock()
	if !full {
		return false
	}
	g.refuse("gateway_full", ip)
	http.Error(w, "the gateway holds the most tunnels it may", http.StatusServiceUnavailable)
	return true
}

// refuseBusy answers a request of an address that holds
// MaxHandshakesPerAddress connections without an admitted token.
func (g *Gateway) refuseBusy(w http.ResponseWriter, ip string) {
	g.refuse("address_handshakes", ip)
	w.Header().Set("Retry-After", "1")
	http.Error(w, "too many handshakes from this address", http.StatusTooManyRequests)
}

// takePending removes the pending OUT channel p of id, if it is still
// there, and says whether it was.
func (g *Gateway) takePending(id string, p *pendingOut) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending[id] != p {
		return false
	}
	g.dropPendingLocked(id, p)
	return true
}

// dropPendingLocked removes the pending OUT channel p of id; g.mu is
// held and p is g.pending[id].
func (g *Gateway) dropPendingLocked(id string, p *pendingOut) {
	delete(g.pending, id)
	g.pendingAge.Remove(p.elem)
}

// serveIn takes the IN channel. Its first request (no body) is answered
// 200 at once, as after an authentication exchange; the request the client
// then sends with a chunked (or very long) body is the channel itself,
// joined to the waiting OUT channel of the same RDG-Connection-Id from the
// same address.
func (g *Gateway) serveIn(w http.ResponseWriter, r *http.Request, id, ip string) {
	chunked := len(r.TransferEncoding) > 0 && r.TransferEncoding[0] == "chunked"
	if !chunked && r.ContentLength <= 0 {
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
		return
	}
	g.mu.Lock()
	p, ok := g.pending[id]
	if ok && p.client == ip {
		g.dropPendingLocked(id, p)
		p.timer.Stop()
	}
	g.mu.Unlock()
	if !ok || p.client != ip {
		g.refuse("no_out_channel", ip)
		http.Error(w, "no OUT channel with this RDG-Connection-Id from this address", http.StatusBadRequest)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		p.conn.Close()
		p.release()
		return
	}
	var body = httputil.NewChunkedReader(brw.Reader)
	if !chunked {
		body = &limitedReader{r: brw.Reader, n: r.ContentLength}
	}
	out := p.conn
	closeConns := func() { conn.Close(); out.Close() }
	t := g.newTunnel(ip, p.started, p.release, body, batched(out, out), closeConns, closeConns, conn.SetReadDeadline)
	if t == nil {
		return
	}
	// The client writes nothing more on OUT; its end there ends the tunnel
	// (outGone: once what the client sent on IN before it is read).
	go func() {
		var b [1]byte
		for {
			if _, err := out.Read(b[:]); err != nil {
				t.outGone()
				return
			}
		}
	}()
	// The tunnel runs on its own goroutine, so that this one returns and
	// the server's state of the request (its buffers, and a stack grown by
	// the TLS handshake) is not held for the tunnel's life.
	go t.run()
}

type limitedReader struct {
	r *bufio.Reader
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("IN channel: content length used up")
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// serveWebSocket takes the WebSocket variant: one connection both ways.
// FreeRDP 2.11 sends a Sec-WebSocket-Key that is not the base64 of 16
// bytes (RFC 6455 asks for one; IIS does not check): the library is handed
// a well-formed stand-in and the answer carries the accept value of the
// client's own key, which FreeRDP checks.
func (g *Gateway) serveWebSocket(w http.ResponseWriter, r *http.Request, ip string, start time.Time) {
	key := r.Header.Get("Sec-WebSocket-Key")
	if key == "" || len(key) > 64 {
		g.refuse("bad_request", ip, "websocketKey", cut(key, 64))
		http.Error(w, "Sec-WebSocket-Key missing or too long", http.StatusBadRequest)
		return
	}
	if g.refuseFull(w, ip) {
		return
	}
	release := g.enterPreauth(ip)
	if release == nil {
		g.refuseBusy(w, ip)
		return
	}
	r.Header.Set("Sec-WebSocket-Key", base64.StdEncoding.EncodeToString(make([]byte, 16)))
	r.Method = http.MethodGet // the library upgrades GET requests only
	fixer := &acceptFixer{ResponseWriter: w, accept: websocketAccept(key)}
	c, err := websocket.Accept(fixer, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		release()
		g.refuse("bad_request", ip, "websocket", cut(err.Error(), 120))
		return
	}
	nc := websocket.NetConn(g.ctx, c, websocket.MessageBinary)
	// Evicted, the handshake gets no WebSocket close: its peer would be
	// waited for, 5 s, with its slot given away.
	t := g.newTunnel(ip, start, release, nc, batched(nc, fixer.conn), func() { nc.Close() }, func() { fixer.conn.Close(); nc.Close() }, nc.SetReadDeadline)
	go t.run() // as in serveIn
}

// acceptFixer sets the Sec-WebSocket-Accept of the client's real key as
// the 101 answer goes out.
type acceptFixer struct {
	http.ResponseWriter
	accept string
	conn   net.Conn // the hijacked connection
}

func (a *acceptFixer) WriteHeader(code int) {
	if code == http.StatusSwitchingProtocols {
		a.Header().Set("Sec-WebSocket-Accept", a.accept)
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *acceptFixer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(a.ResponseWriter).Hijack()
	a.conn = conn
	return conn, brw, err
}

// websocketAccept is RFC 6455's Sec-WebSocket-Accept of key.
func websocketAccept(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// reserve takes a tunnel slot for user: at most MaxTunnelsPerUser each and
// MaxTunnels in all. Users are counted by vdibroker.FoldUser, as the
// broker compares them (R-E5).
func (g *Gateway) reserve(user string) (reason string) {
	user = vdibroker.FoldUser(user)
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.closed:
		return "closing"
	// MaxTunnels is held by newTunnel, which counts this tunnel already:
	// counting it here again refused the last slot.
	case g.perUser[user] >= g.cfg.MaxTunnelsPerUser:
		return "user_limit"
	}
	g.perUser[user]++
	return ""
}

func (g *Gateway) release(user string) {
	user = vdibroker.FoldUser(user)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.perUser[user] <= 1 {
		delete(g.perUser, user)
	} else {
		g.perUser[user]--
	}
}

// Stats is a snapshot of the gateway's tunnels.
type Stats struct {
	Tunnels, PendingChannels, Addresses int
	// Preauth is the connections without an admitted token (pending OUT
	// channels and handshakes), of PreauthAddresses addresses.
	Preauth, PreauthAddresses int
}

// Stats returns how many tunnels, pending OUT channels and rate-limited
// addresses the gateway holds.
func (g *Gateway) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := Stats{Tunnels: len(g.tunnels), PendingChannels: len(g.pending), Addresses: len(g.limiters), PreauthAddresses: len(g.preauth)}
	for _, n := range g.preauth {
		st.Preauth += n
	}
	return st
}

// reportName is the gateway's name in its reports: none when the broker
// takes it from the gateway's credential.
func (g *Gateway) reportName() string {
	if g.cfg.NameFromCredential {
		return ""
	}
	return g.cfg.Name
}

func (g *Gateway) String() string { return fmt.Sprintf("gateway %s", g.cfg.Name) }
