package gateway

import (
	"container/list"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/vdibroker/vdibroker/gateway/tsgu"
	"github.com/vdibroker/vdibroker/gatewaytoken"
)

// brokerTimeout bounds each call to the broker.
const brokerTimeout = 10 * time.Second

// tunnel is one client's connection through the gateway, from its first
// packet to its close: the MS-TSGU state machine and the two pumps.
type tunnel struct {
	g       *Gateway
	client  string
	started time.Time
	fr      *tsgu.Framer
	// closeConns closes the client's connection(s), which unblocks reads;
	// dropConns at once, without a WebSocket's close handshake.
	closeConns, dropConns func()
	setReadDeadline       func(time.Time) error
	// unauthElem is the tunnel's place in g.unauth, under g.mu: nil once
	// its token is accepted, it ends or it is evicted.
	unauthElem *list.Element
	// evicted is set when a new client took the tunnel's slot before its
	// token was accepted (newTunnel).
	evicted atomic.Bool

	st       tsgu.ServerState
	claims   gatewaytoken.Claims
	admitted bool // the broker admitted the token: TunnelClose is owed
	// live is admitted for other goroutines (the broker's checks): set
	// once the claims are final.
	live     atomic.Bool
	reserved bool
	reached  atomic.Bool
	answered atomic.Bool // the client's close was answered: no close packet of ours
	tmu      sync.Mutex  // guards target, watchdog and grace against end() from another goroutine
	target   net.Conn
	watchdog clock.Timer // the next check of idle time and lifetime
	grace    clock.Timer // the end of Config.OutGrace after outGone, once

	// releasePreauth gives back the client address's slot of a
	// connection without an admitted token (once): at the admission, or
	// at the end.
	releasePreauth func()

	toHost, toClient atomic.Int64
	// relayed is closed when relayToClient has returned, and so has
	// counted every packet it wrote: the client may have read the last
	// one before the count, and the close report is read after it. Nil
	// until the pump starts the relay.
	relayed chan struct{}
	// lastActive is when data last crossed, in Unix nanoseconds of the
	// gateway's clock.
	lastActive atomic.Int64
	// pumping is set when the pump takes the tunnel over from the
	// handshake.
	pumping atomic.Bool

	once   sync.Once
	reason string // why it ended, set once
	done   chan struct{}
}

// maxPreauthPacket bounds the packets of a client whose token is not
// admitted yet: the longest it needs is a tunnel create with a
// reauthentication context and a token of gatewaytoken.MaxTokenLen
// characters in UTF-16 with its NUL; a kilobyte more for fields a client
// may add. Until then a client that announces a long packet and trickles
// it holds this much, not a buffer of tsgu.MaxPacketSize.
const maxPreauthPacket = tsgu.HeaderSize + 4 + 2 + 2 + 8 + 2 + 2*(gatewaytoken.MaxTokenLen+1) + 1024

// newTunnel registers a tunnel: MaxTunnels at most, handshakes included,
// so idle anonymous connections are bounded. When the gateway holds that
// many, the oldest handshake whose token was not accepted yet (g.unauth)
// is closed, counted handshake_evicted, and gives the new one its slot;
// nil when every slot holds a tunnel whose token was. Refusing the new
// one instead let handshakes without a token, 20 an address held the
// handshake timeout each, take every slot (500 IPv6 /64s the default
// 10,000) and refuse every client. A client's token comes within a few
// round trips of its connection, so the oldest handshake is one left
// waiting, unless MaxTunnels others came in those round trips.
func (g *Gateway) newTunnel(client string, started time.Time, releasePreauth func(), r io.Reader, w io.Writer, closeConns, dropConns func(), setReadDeadline func(time.Time) error) *tunnel {
	t := &tunnel{g: g, client: client, started: started, fr: tsgu.NewFramer(r, w), releasePreauth: releasePreauth,
		closeConns: closeConns, dropConns: dropConns, setReadDeadline: setReadDeadline, done: make(chan struct{})}
	t.fr.SetMaxPacket(maxPreauthPacket)
	var evicted *tunnel
	g.mu.Lock()
	full := g.closed
	if !full && len(g.tunnels) >= g.cfg.MaxTunnels {
		if e := g.unauth.Front(); e != nil {
			// Its slot is the new one's now: it ends on its own, its
			// connections closed below, and holds no slot meanwhile.
			evicted = g.unauth.Remove(e).(*tunnel)
			evicted.unauthElem = nil
			evicted.evicted.Store(true)
			delete(g.tunnels, evicted)
		} else {
			full = true
		}
	}
	if !full {
		g.tunnels[t] = struct{}{}
		t.unauthElem = g.unauth.PushBack(t)
		g.wg.Add(1)
	}
	g.mu.Unlock()
	if evicted != nil {
		evicted.dropConns() // its handshake's read fails: it is counted there
	}
	if full {
		g.refuse("gateway_full", client)
		closeConns()
		releasePreauth()
		return nil
	}
	return t
}

// abort ends the tunnel from outside (gateway Close, the OUT channel gone
// during the handshake or with nothing more on IN, outGone).
func (t *tunnel) abort() { t.end("aborted", 0) }

// outGone is the end of the connection the gateway writes to the client
// on: the HTTP transport's OUT channel, which the client drops with its
// IN channel at a close, or a relay's failed write. During the handshake
// it aborts the tunnel. Once the pump runs it does not end the tunnel
// itself: a clean close (CloseChannel, then both connections dropped) is
// client_closed and a drop without one client_gone, whichever connection
// the gateway saw go first; the pump reads IN on, and the tunnel is
// aborted when Config.OutGrace has passed on the gateway's clock,
// wherever the pump is then: reading a client that keeps IN open, or
// writing to a host that reads nothing, which a read deadline on IN did
// not end, so the host's connection stayed for the idle timeout (R-GW3).
func (t *tunnel) outGone() {
	if !t.pumping.Load() {
		t.abort()
		return
	}
	t.tmu.Lock()
	defer t.tmu.Unlock()
	select {
	case <-t.done: // end() stops the timer after closing done, under tmu
	default:
		if t.grace == nil {
			// A fake clock calls back with its lock held: abort on a
			// goroutine of its own, as end() stops the clock's timers.
			t.grace = t.g.cfg.Clock.AfterFunc(t.g.cfg.OutGrace, func() { go t.abort() })
		}
	}
}

// end records why the tunnel ends, tells the client with a close packet
// when status is set or the channel is open, and closes its connections,
// which ends both pumps. Only the first call counts.
func (t *tunnel) end(reason string, status uint32) {
	t.once.Do(func() {
		t.reason = reason
		close(t.done)
		if status != 0 || (t.reached.Load() && !t.answered.Load()) {
			// The client may not be reading: give the write a second.
			wrote := make(chan struct{})
			go func() { t.fr.WriteMessage(&tsgu.Close{StatusCode: status}); close(wrote) }()
			select {
			case <-wrote:
			case <-time.After(time.Second):
			}
		}
		t.closeConns()
		t.tmu.Lock()
		if t.target != nil {
			t.target.Close()
		}
		if t.watchdog != nil {
			t.watchdog.Stop()
		}
		if t.grace != nil {
			t.grace.Stop()
		}
		t.tmu.Unlock()
	})
}

// run serves the tunnel to its end.
func (t *tunnel) run() {
	if t == nil {
		return
	}
	defer t.finish()
	if !t.handshake() {
		return
	}
	t.pump()
}

// finish releases what the tunnel held and reports its close.
func (t *tunnel) finish() {
	t.end("closed", 0)
	if t.relayed != nil {
		// end closed both connections, so the relay's read or write
		// fails now: wait for it to count what it wrote.
		<-t.relayed
	}
	g := t.g
	if t.admitted {
		g.m.open.Dec()
		g.m.closed.WithLabelValues(t.reason).Inc()
		ev := t.event()
		ev.BytesToHost, ev.BytesToClient, ev.Reason, ev.Reached = t.toHost.Load(), t.toClient.Load(), t.reason, t.reached.Load()
		ev.SentAt = g.cfg.Clock.Now()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(g.ctx), brokerTimeout)
		if err := g.cfg.Broker.TunnelClose(ctx, ev); err != nil {
			switch {
			case finalRefusal(err):
				g.cfg.Logger.Error("report tunnel close to the broker: refused", "tokenId", t.claims.ID, "err", err)
			case g.ctx.Err() != nil:
				// Closing: no round will send it again.
				g.cfg.Logger.Error("report tunnel close to the broker (the gateway is stopping: not sent again)", "tokenId", t.claims.ID, "err", err)
			default:
				g.keepClose(ev)
				g.cfg.Logger.Warn("report tunnel close to the broker failed; sent again later", "tokenId", t.claims.ID, "err", err)
			}
		}
		cancel()
		g.cfg.Logger.Info("tunnel closed", "tokenId", t.claims.ID, "user", t.claims.User, "session", t.claims.Session,
			"host", t.claims.Host, "client", t.client, "reason", t.reason, "bytesToHost", ev.BytesToHost,
			"bytesToClient", ev.BytesToClient, "duration", g.cfg.Clock.Since(t.started).Round(time.Millisecond))
	}
	if t.reserved {
		g.release(t.claims.User)
	}
	t.releasePreauth()
	g.mu.Lock()
	delete(g.tunnels, t)
	if t.unauthElem != nil {
		g.unauth.Remove(t.unauthElem)
		t.unauthElem = nil
	}
	g.mu.Unlock()
	g.wg.Done()
}

// accepted takes t, whose token verified, off the handshakes a new
// client may evict, and says whether it still holds its slot (it was not
// evicted before). From here its user's limits bound it: a token's
// holder, not anyone.
func (g *Gateway) accepted(t *tunnel) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t.unauthElem == nil {
		return false
	}
	g.unauth.Remove(t.unauthElem)
	t.unauthElem = nil
	return true
}

func (t *tunnel) event() TunnelEvent {
	c := t.claims
	return TunnelEvent{TokenID: c.ID, User: c.User, Session: c.Session, Pool: c.Pool, Host: c.Host,
		Client: t.client, Gateway: t.g.reportName(), At: t.g.cfg.Clock.Now(), Expiry: time.Unix(c.Expiry, 0)}
}

// refuse counts and logs the refusal, answers the pending request with
// it, and ends the tunnel. Counted first: a client that has read its
// refusal finds it in the metrics.
func (t *tunnel) refuse(reason string, answer tsgu.Message, attrs ...any) {
	if t.claims.ID != "" {
		attrs = append(attrs, "tokenId", t.claims.ID, "user", t.claims.User, "session", t.claims.Session)
	}
	t.g.refuse(reason, t.client, attrs...)
	if answer != nil {
		t.fr.WriteMessage(answer)
	}
	t.st.Refuse()
	t.end(reason, 0)
}

// handshake runs the packets up to the open channel (MS-TSGU 3.3.5):
// handshake, tunnel create with the token, tunnel authorisation, channel
// create to the token's host. It reports whether the channel opened.
func (t *tunnel) handshake() bool {
	g := t.g
	// The whole handshake up to the channel create is bounded on the
	// gateway's clock, not only each packet: keepalives are allowed from
	// the handshake on, and would otherwise hold a connection without a
	// token, and its slot of MaxTunnels, for ever.
	var expired atomic.Bool
	timer := g.cfg.Clock.AfterFunc(g.cfg.HandshakeTimeout, func() {
		expired.Store(true)
		t.closeConns() // the read below fails; nothing here reads the clock
	})
	defer timer.Stop()
	for t.st.State() != tsgu.StateOpened {
		t.setReadDeadline(time.Now().Add(g.cfg.HandshakeTimeout))
		m, err := t.fr.ReadMessage()
		if err != nil {
			reason := "protocol_error"
			var ne net.Error
			switch {
			case t.evicted.Load():
				reason = "handshake_evicted"
			case expired.Load(), errors.As(err, &ne) && ne.Timeout():
				reason = "handshake_timeout"
			case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
				reason = "client_gone"
			}
			t.refuse(reason, nil, "state", t.st.State().String(), "err", cut(err.Error(), 160))
			return false
		}
		if err := t.st.Receive(m.Type()); err != nil {
			t.refuse("protocol_error", nil, "err", err.Error())
			return false
		}
		switch m := m.(type) {
		case *tsgu.Keepalive:
		case *tsgu.HandshakeRequest:
			if m.VerMajor != 1 || m.ExtendedAuth&tsgu.ExtendedAuthPAA == 0 {
				t.refuse("unsupported_auth", &tsgu.HandshakeResponse{ErrorCode: tsgu.EProxyUnsupportedAuthenticationMth, VerMajor: 1},
					"version", m.VerMajor, "extendedAuth", m.ExtendedAuth)
				return false
			}
			t.fr.WriteMessage(&tsgu.HandshakeResponse{VerMajor: 1, ExtendedAuth: tsgu.ExtendedAuthPAA})
			t.st.Accept()
		case *tsgu.TunnelCreate:
			if !t.authorize(m) {
				return false
			}
		case *tsgu.TunnelAuth:
			t.fr.WriteMessage(&tsgu.TunnelAuthResponse{
				FieldsPresent: tsgu.TunnelAuthResponseFieldRedirFlags | tsgu.TunnelAuthResponseFieldIdleTimeout,
				RedirFlags:    tsgu.RedirEnableAll, IdleTimeout: uint32(t.idleTimeout() / time.Minute)})
			t.st.Accept()
		case *tsgu.ChannelCreate:
			// A starting host's wait has bounds of its own.
			timer.Stop()
			if !t.openChannel(m) {
				return false
			}
		default:
			t.refuse("protocol_error", nil, "packet", m.Type().String())
			return false
		}
	}
	t.setReadDeadline(time.Time{})
	return true
}

// authorize checks the token of a tunnel create packet, takes a slot for
// its user and asks the broker to admit its id once.
func (t *tunnel) authorize(m *tsgu.TunnelCreate) bool {
	g := t.g
	denied := &tsgu.TunnelResponse{ServerVersion: 1, StatusCode: tsgu.EProxyCookieAuthenticationDenied}
	if m.FieldsPresent&tsgu.TunnelFieldPAACookie == 0 || m.PAACookieString() == "" {
		t.refuse("no_token", &tsgu.TunnelResponse{ServerVersion: 1, StatusCode: tsgu.EProxyCookieBadPacket})
		return false
	}
	claims, err := g.cfg.Verifier.Verify(m.PAACookieString(), g.cfg.Clock.Now())
	if errors.Is(err, gatewaytoken.ErrNoKeys) {
		// Started before its broker, the gateway has not read the keys
		// yet (R-GW6): the token may be good; the gateway cannot say.
		t.refuse("keys_unavailable", &tsgu.TunnelResponse{ServerVersion: 1, StatusCode: tsgu.EProxyInternalError})
		return false
	}
	if err != nil {
		reason := gatewaytoken.Reason(err)
		if reason == "" {
			reason = "malformed"
		}
		t.refuse("token_"+reason, denied, "err", cut(err.Error(), 160))
		return false
	}
	t.claims = claims
	if !g.accepted(t) {
		t.refuse("handshake_evicted", nil)
		return false
	}
	if reason := g.reserve(claims.User); reason != "" {
		t.refuse(reason, &tsgu.TunnelResponse{ServerVersion: 1, StatusCode: tsgu.EProxyMaxConnectionsReached})
		return false
	}
	t.reserved = true
	ctx, cancel := context.WithTimeout(g.ctx, brokerTimeout)
	err = g.cfg.Broker.TunnelOpen(ctx, t.event())
	cancel()
	switch {
	case errors.Is(err, ErrTokenUsed):
		t.refuse("token_reused", denied)
		return false
	case errors.Is(err, ErrUserLimit):
		t.refuse("user_limit", &tsgu.TunnelResponse{ServerVersion: 1, StatusCode: tsgu.EProxyMaxConnectionsReached})
		return false
	case errors.Is(err, ErrNotAdmitted):
		t.refuse("broker_refused", denied, "err", cut(err.Error(), 160))
		return false
	case errors.Is(err, ErrCredentialRefused):
		// The broker refused this gateway's credential, not the
		// client's token (R-GW4): a deleted token, another gateway's,
		// a role that may not report. Nothing the user can mend.
		t.refuse("credential_refused", &tsgu.TunnelResponse{ServerVersion: 1, StatusCode: tsgu.EProxyInternalError}, "err", cut(err.Error(), 320))
		return false
	case err != nil:
		t.refuse("broker_unavailable", &tsgu.TunnelResponse{ServerVersion: 1, StatusCode: tsgu.EProxyInternalError}, "err", cut(err.Error(), 160))
		return false
	}
	t.admitted = true
	t.live.Store(true)
	t.fr.SetMaxPacket(0) // a channel create may name many resources
	t.releasePreauth()   // the user's limits count it from now on
	g.m.open.Inc()
	var id [4]byte
	rand.Read(id[:])
	t.fr.WriteMessage(&tsgu.TunnelResponse{ServerVersion: 1,
		FieldsPresent: tsgu.TunnelResponseFieldTunnelID | tsgu.TunnelResponseFieldCaps,
		TunnelID:      binary.LittleEndian.Uint32(id[:]), Caps: m.Caps & tsgu.CapIdleTimeout})
	t.st.Accept()
	g.cfg.Logger.Info("tunnel authorised", "tokenId", claims.ID, "user", claims.User, "session", claims.Session,
		"pool", claims.Pool, "host", claims.Host, "client", t.client)
	return true
}

// openChannel checks the client's target against the token's host and
// connects to it, holding the client while a starting host does not answer.
func (t *tunnel) openChannel(m *tsgu.ChannelCreate) bool {
	g := t.g
	host, port, _ := gatewaytoken.SplitHostPort(t.claims.Host)
	match := m.Protocol == tsgu.ProtocolRDP && m.Port == port && matchHost(m.Resources, host)
	if !match {
		t.refuse("target_mismatch", &tsgu.ChannelResponse{ErrorCode: tsgu.EProxyRAPAccessDenied},
			"requested", cut(fmt.Sprintf("%s:%d", strings.Join(m.Resources, ","), m.Port), 160), "allowed", t.claims.Host)
		return false
	}
	addr, err := t.allowedTarget(host, port)
	if err != nil {
		t.refuse("target_not_allowed", &tsgu.ChannelResponse{ErrorCode: tsgu.EProxyRAPAccessDenied},
			"host", t.claims.Host, "err", cut(err.Error(), 160))
		return false
	}
	t.st.Accept()
	wait := min(time.Duration(t.claims.StartWaitSeconds)*time.Second, g.cfg.MaxStartWait)
	conn, err := t.dialHost(addr, wait)
	if err != nil {
		select {
		case <-t.done:
			return false
		default:
		}
		t.refuse("target_unreachable", &tsgu.ChannelResponse{ErrorCode: tsgu.EProxyTSConnectFailed}, "err", cut(err.Error(), 160))
		return false
	}
	t.tmu.Lock()
	t.target = conn
	t.tmu.Unlock()
	select {
	case <-t.done: // aborted while dialling: end() may not have seen the target
		conn.Close()
		return false
	default:
	}
	if err := t.fr.WriteMessage(&tsgu.ChannelResponse{FieldsPresent: tsgu.ChannelResponseFieldChannelID, ChannelID: 1}); err != nil {
		t.end("client_gone", 0)
		return false
	}
	t.st.Opened()
	t.reached.Store(true)
	g.m.handshake.Observe(g.cfg.Clock.Since(t.started).Seconds())
	ctx, cancel := context.WithTimeout(g.ctx, brokerTimeout)
	if err := g.cfg.Broker.ChannelOpen(ctx, t.event()); err != nil {
		g.cfg.Logger.Error("report channel open to the broker", "tokenId", t.claims.ID, "err", err)
	}
	cancel()
	g.cfg.Logger.Info("tunnel reached its host", "tokenId", t.claims.ID, "host", t.claims.Host, "client", t.client)
	return true
}

// allowedTarget checks the token's host against TargetPorts and
// TargetNetworks and returns the address to connect to: the token's host
// when no network is set, else the first of the addresses it resolves to
// that lies in one (so a name that resolves again elsewhere is not
// connected to). The others are passed over, not refused: a dual-stack
// host's name resolves to its IPv6 address too, outside networks that
// name the hosts' IPv4 ones, and connecting only to an address inside
// opens nothing the networks do not allow.
func (t *tunnel) allowedTarget(host string, port uint16) (string, error) {
	g := t.g
	if len(g.cfg.TargetPorts) > 0 && !slices.Contains(g.cfg.TargetPorts, port) {
		return "", fmt.Errorf("port %d is not one of the gateway's target ports", port)
	}
	if len(g.cfg.TargetNetworks) == 0 {
		return t.claims.Host, nil
	}
	addrs := []netip.Addr{}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		addrs = append(addrs, a)
	} else {
		ctx, cancel := context.WithTimeout(g.ctx, brokerTimeout)
		addrs, err = g.cfg.LookupNetIP(ctx, "ip", host)
		cancel()
		if err != nil || len(addrs) == 0 {
			return "", fmt.Errorf("resolve %s: %v", host, err)
		}
	}
	for _, a := range addrs {
		a = a.Unmap()
		if slices.ContainsFunc(g.cfg.TargetNetworks, func(p netip.Prefix) bool { return p.Contains(a) }) {
			return netip.AddrPortFrom(a, port).String(), nil
		}
	}
	return "", fmt.Errorf("%s (%s) is outside the gateway's target networks", host, cut(fmt.Sprint(addrs), 100))
}

// matchHost says whether one of the client's names for its target is the
// token's host (names compare without case).
func matchHost(resources []string, host string) bool {
	for _, r := range resources {
		if strings.EqualFold(strings.Trim(r, "[]"), host) {
			return true
		}
	}
	return false
}

// Backoff of the connects to a starting host.
const (
	firstBackoff = 250 * time.Millisecond
	maxBackoff   = 5 * time.Second
)

// dialHost connects to addr, the token's host. With wait > 0 a refused or
// unanswered connect is retried with backoff until wait has passed, and
// the client gets a keepalive every KeepaliveInterval meanwhile, so it
// keeps waiting (MS-TSGU's keepalive packet).
func (t *tunnel) dialHost(addr string, wait time.Duration) (net.Conn, error) {
	g := t.g
	clk := g.cfg.Clock
	deadline := clk.Now().Add(wait)
	lastKeepalive := clk.Now()
	backoff := firstBackoff
	for {
		ctx, cancel := context.WithTimeout(g.ctx, 10*time.Second)
		conn, err := g.cfg.Dial(ctx, "tcp", addr)
		cancel()
		if err == nil {
			return conn, nil
		}
		if clk.Now().Add(backoff).After(deadline) {
			return nil, err
		}
		select {
		case <-clk.After(backoff):
		case <-t.done:
			return nil, errors.New("tunnel ended while waiting for the host")
		}
		if clk.Since(lastKeepalive) >= g.cfg.KeepaliveInterval {
			if err := t.fr.WriteMessage(&tsgu.Keepalive{}); err != nil {
				return nil, fmt.Errorf("keepalive to the client: %w", err)
			}
			lastKeepalive = clk.Now()
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func (t *tunnel) idleTimeout() time.Duration {
	if s := t.claims.IdleSeconds; s > 0 {
		return time.Duration(s) * time.Second
	}
	return t.g.cfg.IdleTimeout
}

func (t *tunnel) lifetime() time.Duration {
	if s := t.claims.LifetimeSeconds; s > 0 {
		return min(time.Duration(s)*time.Second, t.g.cfg.MaxLifetime)
	}
	return t.g.cfg.MaxLifetime
}

// pump carries the RDP stream both ways until either end closes, the
// tunnel idles or outlives its lifetime.
func (t *tunnel) pump() {
	g := t.g
	t.watch()
	t.pumping.Store(true) // after the handshake's last read deadline
	t.relayed = make(chan struct{})
	go func() {
		defer close(t.relayed)
		t.relayToClient()
	}()
	for {
		p, err := t.fr.ReadPacket()
		if err != nil {
			t.end("client_gone", 0) // or aborted before, at OutGrace's end
			return
		}
		h, _ := tsgu.ParseHeader(p)
		if err := t.st.Receive(h.Type); err != nil {
			t.g.refuse("protocol_error", t.client, "tokenId", t.claims.ID, "err", err.Error())
			t.end("protocol_error", tsgu.EProxyInternalError)
			return
		}
		switch h.Type {
		case tsgu.PktData:
			data, err := tsgu.DataPayload(p)
			if err != nil {
				t.end("protocol_error", tsgu.EProxyInternalError)
				return
			}
			if _, err := t.target.Write(data); err != nil {
				t.end("host_closed", 0)
				return
			}
			t.toHost.Add(int64(len(data)))
			g.m.toHost.Add(float64(len(data)))
			t.lastActive.Store(g.cfg.Clock.Now().UnixNano())
		case tsgu.PktCloseChannel:
			t.fr.WriteMessage(&tsgu.Close{Response: true})
			t.answered.Store(true)
			t.end("client_closed", 0)
			return
		case tsgu.PktCloseChannelResponse:
			t.end("client_closed", 0)
			return
		}
	}
}

// Sizes of the host's data read at once, the payload of one data packet:
// a quiet host is waited for with a small buffer; a full read of that
// takes a large one from a pool for the reads after it, which goes back
// after quietReads reads in a row that the small one would have held.
const (
	smallRead  = 4 << 10
	largeRead  = tsgu.MaxDataSize
	quietReads = 8
)

// relayBufs hold the data packets relayed to clients.
var relayBufs = sync.Pool{New: func() any { b := make([]byte, tsgu.DataHeaderSize+largeRead); return &b }}

// relayToClient carries the host's stream to the client: each read from
// the host lands in the payload of a data packet, whose header is then
// written in front of it, and the packet goes out in one write.
func (t *tunnel) relayToClient() {
	g := t.g
	small := make([]byte, tsgu.DataHeaderSize+smallRead)
	var large *[]byte
	defer func() {
		if large != nil {
			relayBufs.Put(large)
		}
	}()
	buf, quiet := small, 0
	for {
		n, err := t.target.Read(buf[tsgu.DataHeaderSize:])
		if n > 0 {
			if werr := t.fr.WritePacket(tsgu.PutDataHeader(buf, n)); werr != nil {
				// The pump says why: a close the client sent before
				// it dropped its connections is still read.
				t.outGone()
				return
			}
			t.toClient.Add(int64(n))
			g.m.toClient.Add(float64(n))
			t.lastActive.Store(g.cfg.Clock.Now().UnixNano())
		}
		if err != nil {
			t.end("host_closed", 0)
			return
		}
		switch {
		case large == nil && n == smallRead: // the host has more to say
			large = relayBufs.Get().(*[]byte)
			buf, quiet = *large, 0
		case large != nil && n > smallRead:
			quiet = 0
		case large != nil:
			if quiet++; quiet == quietReads { // the host is quiet again
				relayBufs.Put(large)
				large, buf = nil, small
			}
		}
	}
}

// watch closes the tunnel when it has carried nothing for its idle timeout
// or has lived its lifetime, checked on the gateway's clock by a timer (a
// goroutine waiting on a ticker would hold a stack per tunnel).
func (t *tunnel) watch() {
	clk := t.g.cfg.Clock
	idle, life := t.idleTimeout(), t.lifetime()
	every := min(idle/4, life/4, 30*time.Second)
	opened := clk.Now()
	t.lastActive.CompareAndSwap(0, opened.UnixNano())
	var check func()
	arm := func() {
		t.tmu.Lock()
		defer t.tmu.Unlock()
		select {
		case <-t.done: // end() stops the timer after closing done, under tmu
		default:
			// A fake clock calls back with its lock held: check on a
			// goroutine of its own, which may read the clock.
			t.watchdog = clk.AfterFunc(every, func() { go check() })
		}
	}
	check = func() {
		now := clk.Now()
		switch {
		case now.Sub(time.Unix(0, t.lastActive.Load())) >= idle:
			t.end("idle_timeout", tsgu.EProxySessionTimeout)
		case now.Sub(opened) >= life:
			t.end("lifetime", tsgu.EProxySessionTimeout)
		default:
			arm()
		}
	}
	arm()
}
