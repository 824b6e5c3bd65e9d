package gateway

import (
	"crypto/tls"
	"net"
	"sync"
)

// Listener returns the TLS listener the gateway's server runs on, over
// the TCP listener ln: the one way to make it, so that what runs
// (`vdibroker gateway`, `serve --gateway-listen`) is what `bench gateway`
// measures. Its connections are bounded per address before their TLS
// handshake (limitListener) and write each packet in one socket write
// (newListener).
func (g *Gateway) Listener(ln net.Listener, config *tls.Config) net.Listener {
	return newListener(g.limitListener(ln), config)
}

// limitListener returns ln accepting at most MaxConnsPerAddress
// connections at once from one address (an IPv6 address by its /64, as
// the other per-address limits): a connection over it is closed as soon
// as it is accepted, counted as conns_per_address. It wraps the TCP
// listener, under the TLS one: the limit then holds before any TLS
// handshake or request head is read, which is where an address without
// any token could otherwise hold connections without bound (each for the
// server's ReadHeaderTimeout).
func (g *Gateway) limitListener(ln net.Listener) net.Listener {
	return &connLimiter{Listener: ln, g: g, open: map[string]int{}}
}

type connLimiter struct {
	net.Listener
	g    *Gateway
	mu   sync.Mutex
	open map[string]int // connections by addrKey; an entry lives as long as one
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := c.RemoteAddr().String()
		if h, _, err := net.SplitHostPort(ip); err == nil {
			ip = h
		}
		key := addrKey(ip)
		l.mu.Lock()
		full := l.open[key] >= l.g.cfg.MaxConnsPerAddress
		if !full {
			l.open[key]++
		}
		l.mu.Unlock()
		if full {
			c.Close()
			l.g.refuse("conns_per_address", ip)
			continue
		}
		return &limitedConn{Conn: c, l: l, key: key}, nil
	}
}

// limitedConn gives its address's slot back when it is closed.
type limitedConn struct {
	net.Conn
	l    *connLimiter
	key  string
	once sync.Once
}

func (c *limitedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		defer c.l.mu.Unlock()
		if c.l.open[c.key] <= 1 {
			delete(c.l.open, c.key)
		} else {
			c.l.open[c.key]--
		}
	})
	return c.Conn.Close()
}
