package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker/gateway"
	"github.com/vdibroker/vdibroker/gatewaytoken"
)

// newBenchGatewayCmd measures what the gateway costs an RDP stream: bulk
// throughput and round-trip latency through a tunnel against a direct TCP
// connection to the same target on loopback, side by side, and the memory
// a tunnel holds.
func newBenchGatewayCmd() *cobra.Command {
	var duration time.Duration
	var counts []int
	var ws bool
	cmd := &cobra.Command{
		Use:   "gateway [--duration 5s] [--tunnels 1,100] [--websocket]",
		Short: "Throughput, added latency and memory per tunnel of the RD Gateway against direct TCP on loopback",
		Long: `gateway starts, in this process, an RD Gateway on 127.0.0.1 with TLS, a sink and
an echo server as the session host, and for each --tunnels count N runs:

  throughput  N connections each writing 32 KiB blocks to the sink for --duration,
              directly over TCP, then each through its own tunnel (the client speaks
              MS-TSGU's HTTP transport, TLS included); the ratio gateway/direct;
  latency     N connections each sending 64 bytes to the echo server and waiting for
              them, again and again for --duration; p50 and p99 of both and the
              p99 the gateway adds;
  memory      heap and stacks held per open idle tunnel (client and gateway both in
              this process) against per direct connection.

Targets (issue): ratio >= 0.8, added p99 < 1 ms at 100 tunnels.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if duration < 100*time.Millisecond || duration > 10*time.Minute {
				return usageError{fmt.Errorf("--duration: must be 100ms..10m, got %v", duration)}
			}
			for _, n := range counts {
				if n < 1 || n > 1000 {
					return usageError{fmt.Errorf("--tunnels: each count must be 1..1000, got %d", n)}
				}
			}
			return runBenchGateway(cmd.Context(), cmd.OutOrStdout(), duration, counts, ws)
		},
	}
	cmd.Flags().DurationVar(&duration, "duration", 5*time.Second, "length of each measured phase")
	cmd.Flags().IntSliceVar(&counts, "tunnels", []int{1, 100}, "concurrent connections of each run (1..1000)")
	cmd.Flags().BoolVar(&ws, "websocket", false, "tunnel over the WebSocket variant instead of two HTTP connections")
	return cmd
}

type benchGateway struct {
	gw          *gateway.Gateway
	srv         *http.Server
	addr        string
	sink, echo  string
	signer      *gatewaytoken.Signer
	ws          bool
	clientTLS   *tls.Config
	closeServer func()
}

func startBenchGateway(ws bool) (*benchGateway, error) {
	b := &benchGateway{ws: ws, clientTLS: &tls.Config{InsecureSkipVerify: true}} // our own certificate, just made
	var err error
	if b.signer, err = gatewaytoken.GenerateSigner("bench"); err != nil {
		return nil, err
	}
	ks, err := gatewaytoken.NewKeySet(map[string]ed25519.PublicKey{"bench": b.signer.PublicKey()})
	if err != nil {
		return nil, err
	}
	b.gw, err = gateway.New(gateway.Config{Name: "bench", Verifier: ks, Broker: &gateway.MemoryBroker{},
		RequestRate: 1e6, RequestBurst: 1e6, MaxTunnelsPerUser: 10000})
	if err != nil {
		return nil, err
	}
	cert, err := benchCert()
	if err != nil {
		return nil, err
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}})
	if err != nil {
		return nil, err
	}
	b.addr = ln.Addr().String()
	b.srv = &http.Server{Handler: b.gw, ReadHeaderTimeout: 10 * time.Second}
	go b.srv.Serve(ln)
	sinkLn, err := benchTarget(func(c net.Conn) { io.Copy(io.Discard, c) })
	if err != nil {
		return nil, err
	}
	echoLn, err := benchTarget(func(c net.Conn) { io.Copy(c, c) })
	if err != nil {
		return nil, err
	}
	b.sink, b.echo = sinkLn.Addr().String(), echoLn.Addr().String()
	b.closeServer = func() { b.srv.Close(); b.gw.Close(); sinkLn.Close(); echoLn.Close() }
	return b, nil
}

func benchTarget(serve func(net.Conn)) (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { serve(c); c.Close() }()
		}
	}()
	return ln, nil
}

// benchCert is a throwaway self-signed certificate for 127.0.0.1.
func benchCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// open opens n connections to target: direct TCP, or tunnels.
func (b *benchGateway) open(ctx context.Context, n int, target string, tunnel bool) ([]net.Conn, error) {
	conns := make([]net.Conn, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if !tunnel {
				c, err := net.Dial("tcp", target)
				conns[i] = c
				errs <- err
				return
			}
			now := time.Now()
			tok, err := b.signer.Sign(gatewaytoken.Claims{ID: gatewaytoken.NewID(), User: "bench", Session: "s", Pool: "p",
				Host: target, NotBefore: now.Unix(), Expiry: now.Add(time.Hour).Unix()})
			if err != nil {
				errs <- err
				return
			}
			c, err := gateway.Dial(ctx, gateway.DialConfig{Gateway: b.addr, TLSConfig: b.clientTLS, Token: tok, Target: target, WebSocket: b.ws})
			if err == nil {
				conns[i] = tunnelConn{c}
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			closeAll(conns)
			return nil, err
		}
	}
	return conns, nil
}

// tunnelConn makes a ClientConn a net.Conn for the measurements (only
// Read, Write and Close are used).
type tunnelConn struct{ *gateway.ClientConn }

func (tunnelConn) LocalAddr() net.Addr              { return nil }
func (tunnelConn) RemoteAddr() net.Addr             { return nil }
func (tunnelConn) SetDeadline(time.Time) error      { return nil }
func (tunnelConn) SetReadDeadline(time.Time) error  { return nil }
func (tunnelConn) SetWriteDeadline(time.Time) error { return nil }
func (c tunnelConn) Close() error                   { return c.ClientConn.Close() }
func (c tunnelConn) Read(p []byte) (int, error)     { return c.ClientConn.Read(p) }
func (c tunnelConn) Write(p []byte) (int, error)    { return c.ClientConn.Write(p) }

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}

// throughput writes 32 KiB blocks on every connection for d; bytes a second.
func throughput(conns []net.Conn, d time.Duration) float64 {
	var total atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	block := make([]byte, 32<<10)
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				n, err := c.Write(block)
				total.Add(int64(n))
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return float64(total.Load()) / d.Seconds()
}

// latency sends 64 bytes and waits for their echo on every connection for
// d; the round trips, sorted.
func latency(conns []net.Conn, d time.Duration) []time.Duration {
	var mu sync.Mutex
	var all []time.Duration
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg, back := make([]byte, 64), make([]byte, 64)
			var mine []time.Duration
			for time.Now().Before(stop) {
				t0 := time.Now()
				if _, err := c.Write(msg); err != nil {
					break
				}
				if _, err := io.ReadFull(c, back); err != nil {
					break
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(all)
	return all
}

func quantile(s []time.Duration, q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// heldMemory is heap in use plus stacks after a GC.
func heldMemory() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

func runBenchGateway(ctx context.Context, out io.Writer, d time.Duration, counts []int, ws bool) error {
	b, err := startBenchGateway(ws)
	if err != nil {
		return err
	}
	defer b.closeServer()
	transport := "two HTTP/1.1 connections (RDG_OUT_DATA + RDG_IN_DATA)"
	if ws {
		transport = "WebSocket"
	}
	fmt.Fprintf(out, "gateway on %s, TLS, transport %s; %v per phase; GOMAXPROCS %d\n\n", b.addr, transport, d, runtime.GOMAXPROCS(0))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "conns\tdirect MB/s\tgateway MB/s\tratio\tdirect p50\tdirect p99\tgateway p50\tgateway p99\tadded p99\tdirect B/conn\tgateway B/tunnel\t")
	for _, n := range counts {
		row := make(map[bool][]any)
		for _, tunnel := range []bool{false, true} {
			before := heldMemory()
			sinks, err := b.open(ctx, n, b.sink, tunnel)
			if err != nil {
				return fmt.Errorf("open %d connections (tunnel %v): %w", n, tunnel, err)
			}
			held := (int64(heldMemory()) - int64(before)) / int64(n)
			rate := throughput(sinks, d)
			closeAll(sinks)
			echoes, err := b.open(ctx, n, b.echo, tunnel)
			if err != nil {
				return fmt.Errorf("open %d connections (tunnel %v): %w", n, tunnel, err)
			}
			rtts := latency(echoes, d)
			closeAll(echoes)
			row[tunnel] = []any{rate, quantile(rtts, .5), quantile(rtts, .99), held}
		}
		dr, gr := row[false], row[true]
		fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%.2f\t%v\t%v\t%v\t%v\t%v\t%d\t%d\t\n", n,
			dr[0].(float64)/1e6, gr[0].(float64)/1e6, gr[0].(float64)/dr[0].(float64),
			dr[1].(time.Duration).Round(time.Microsecond), dr[2].(time.Duration).Round(time.Microsecond),
			gr[1].(time.Duration).Round(time.Microsecond), gr[2].(time.Duration).Round(time.Microsecond),
			(gr[2].(time.Duration) - dr[2].(time.Duration)).Round(time.Microsecond), dr[3], gr[3])
	}
	return tw.Flush()
}
