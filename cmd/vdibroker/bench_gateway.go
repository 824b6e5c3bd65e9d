package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"fmt"
	"io"
	"math/big"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker/gateway"
	"github.com/vdibroker/vdibroker/gatewaytoken"
	"github.com/vdibroker/vdibroker/internal/cputime"
)

// benchGatewayOptions are the flags of bench gateway.
type benchGatewayOptions struct {
	duration   time.Duration // of each side of each round
	rounds     int
	counts     []int
	streams    []string // "plain", "tls"
	measures   []string // "to-host", "to-client", "rtt", "paced"
	interval   time.Duration
	ws         bool
	cpuProfile string
	memProfile string
	// gatewayCPUProfile is the CPU profile of the gateway process.
	gatewayCPUProfile string
}

// The measurements, in the order they run.
var gatewayMeasures = []string{"to-host", "to-client", "rtt", "paced"}

// newBenchGatewayCmd measures what the gateway costs an RDP stream against
// a direct connection to the same target on loopback, side by side.
func newBenchGatewayCmd() *cobra.Command {
	opt := benchGatewayOptions{}
	cmd := &cobra.Command{
		Use:   "gateway [--duration 300ms] [--rounds 10] [--tunnels 1,100] [--streams plain,tls] [--websocket]",
		Short: "Throughput, added latency and memory per tunnel of the RD Gateway against direct connections on loopback",
		Long: `gateway starts an RD Gateway on 127.0.0.1 with TLS in a process of its own, and in
this process a session host with a sink, a source and an echo service and the
clients. For each --tunnels count N and each --streams kind it compares N direct
connections with N tunnels:

  plain  the host's stream is plain TCP: direct TCP against the same bytes
         through the gateway (the client speaks MS-TSGU over TLS to the gateway).
  tls    the host's stream is TLS, as an RDP session's is: direct TLS to the host
         against the same TLS stream carried through the gateway.

Each measurement runs in --rounds rounds of --duration directly and --duration
through tunnels, the order alternating round by round, so that load from other
processes falls on both alike. A throughput round opens fresh connections (nothing
left in flight from the round before); the round trips run on the same N direct
connections and N tunnels throughout, taking turns:

  to-host    each connection writes 32 KiB blocks; bytes the host received a second.
  to-client  the host writes 32 KiB blocks; bytes the client read a second.
  rtt        each connection sends 64 bytes, waits for their echo, again at once:
             the connections keep the CPU busy (closed loop).
  paced      each connection sends 64 bytes every --interval (starts spread out)
             and waits for their echo; a send held up by the previous round trip
             counts from when it was due, so waiting in line is not left out.

Throughput rows give the medians, the median of the rounds' ratios gateway/direct
(and their range) and the CPU time per GB moved: direct (clients and host), through
the gateway (clients, host and gateway) and of the gateway process alone. Latency
rows give p50 and p99 of all round trips, the added p99 (the median over rounds of
the gateway's p99 minus the direct p99 of the same round, and its range) and the
CPU time per round trip likewise. The gateway's read and write system calls per MB
and per round trip (Linux) are counts other processes do not disturb. Memory: heap and stacks held per open idle
connection, direct in this process, tunnels in the gateway process.

Targets (issue): ratio >= 0.8, added p99 < 1 ms at 100 tunnels.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opt.validate(); err != nil {
				return usageError{err}
			}
			if opt.cpuProfile != "" {
				stop, err := startCPUProfile(opt.cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			if err := runBenchGateway(cmd.Context(), cmd.OutOrStdout(), opt); err != nil {
				return err
			}
			if opt.memProfile != "" {
				return writeAllocsProfile(opt.memProfile)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&opt.duration, "duration", 300*time.Millisecond, "length of each side (direct, gateway) of each round")
	fl.IntVar(&opt.rounds, "rounds", 10, "rounds of each measurement (1..100)")
	fl.IntSliceVar(&opt.counts, "tunnels", []int{1, 100}, "concurrent connections of each run (1..1000)")
	fl.StringSliceVar(&opt.streams, "streams", []string{"plain", "tls"}, "the host's stream: plain, tls")
	fl.StringSliceVar(&opt.measures, "measure", gatewayMeasures, "measurements: to-host, to-client, rtt, paced")
	fl.DurationVar(&opt.interval, "interval", 10*time.Millisecond, "time between a connection's sends in the paced measurement (1ms..1s)")
	fl.BoolVar(&opt.ws, "websocket", false, "tunnel over the WebSocket variant instead of two HTTP connections")
	fl.StringVar(&opt.cpuProfile, "cpu-profile", "", "write a CPU profile of this process (clients, host) to this file")
	fl.StringVar(&opt.memProfile, "mem-profile", "", "write an allocation profile of this process to this file")
	fl.StringVar(&opt.gatewayCPUProfile, "gateway-cpu-profile", "", "write a CPU profile of the gateway process to this file")
	cmd.AddCommand(newBenchGatewayProcessCmd())
	return cmd
}

func (o *benchGatewayOptions) validate() error {
	switch {
	case o.duration < 100*time.Millisecond || o.duration > 10*time.Minute:
		return fmt.Errorf("--duration: must be 100ms..10m, got %v", o.duration)
	case o.rounds < 1 || o.rounds > 100:
		return fmt.Errorf("--rounds: must be 1..100, got %d", o.rounds)
	case o.interval < time.Millisecond || o.interval > time.Second:
		return fmt.Errorf("--interval: must be 1ms..1s, got %v", o.interval)
	}
	for _, n := range o.counts {
		if n < 1 || n > 1000 {
			return fmt.Errorf("--tunnels: each count must be 1..1000, got %d", n)
		}
	}
	for _, s := range o.streams {
		if s != "plain" && s != "tls" {
			return fmt.Errorf("--streams: want plain or tls, got %q", s)
		}
	}
	for _, m := range o.measures {
		if !slices.Contains(gatewayMeasures, m) {
			return fmt.Errorf("--measure: want %s, got %q", strings.Join(gatewayMeasures, ", "), m)
		}
	}
	return nil
}

func writeAllocsProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// The session host's services; a connection names one in its first byte.
const (
	serviceSink   = 'S' // reads and discards
	serviceSource = 'R' // writes 32 KiB blocks until the connection ends
	serviceEcho   = 'E' // writes back what it reads
)

// benchHost is the session host: one listener whose streams are plain TCP
// and one whose streams are TLS.
type benchHost struct {
	plain, tls net.Listener
	tlsConfig  *tls.Config
	received   atomic.Int64 // bytes the sink read
	active     sync.WaitGroup
}

func startBenchHost(cert tls.Certificate) (*benchHost, error) {
	h := &benchHost{tlsConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	var err error
	if h.plain, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	if h.tls, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		h.plain.Close()
		return nil, err
	}
	go h.serve(h.plain, false)
	go h.serve(h.tls, true)
	return h, nil
}

func (h *benchHost) addr(stream string) string {
	if stream == "tls" {
		return h.tls.Addr().String()
	}
	return h.plain.Addr().String()
}

func (h *benchHost) close() { h.plain.Close(); h.tls.Close() }

func (h *benchHost) serve(ln net.Listener, withTLS bool) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		h.active.Add(1)
		go func() {
			defer h.active.Done()
			defer c.Close()
			if withTLS {
				c = tls.Server(c, h.tlsConfig)
			}
			var svc [1]byte
			if _, err := io.ReadFull(c, svc[:]); err != nil {
				return
			}
			buf := make([]byte, 32<<10)
			switch svc[0] {
			case serviceSink:
				for {
					n, err := c.Read(buf)
					h.received.Add(int64(n))
					if err != nil {
						return
					}
				}
			case serviceSource:
				for {
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			case serviceEcho:
				// Read and Write, as an RDP server does (io.Copy would
				// splice a TCP connection to itself through a pipe).
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}
		}()
	}
}

// benchGateway is the gateway under test, in a process of its own as it
// is deployed (so its CPU time and memory are its own), its session host
// in this process and the credentials of its clients.
type benchGateway struct {
	proc      *exec.Cmd
	ctl       io.WriteCloser // the gateway process's standard input: its commands
	answers   *bufio.Reader
	addr      string
	host      *benchHost
	signer    *gatewaytoken.Signer
	ws        bool
	clientTLS *tls.Config
}

// startBenchGateway starts `vdibroker bench gateway process` and the
// session host.
func startBenchGateway(ws bool, cpuProfile string) (*benchGateway, error) {
	b := &benchGateway{ws: ws, clientTLS: &tls.Config{InsecureSkipVerify: true}} // our own certificates, just made
	var err error
	if b.signer, err = gatewaytoken.GenerateSigner("bench"); err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"bench", "gateway", "process", "--public-key", base64.StdEncoding.EncodeToString(b.signer.PublicKey())}
	if cpuProfile != "" {
		args = append(args, "--cpu-profile", cpuProfile)
	}
	b.proc = exec.Command(exe, args...)
	b.proc.Stderr = os.Stderr
	if b.ctl, err = b.proc.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := b.proc.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := b.proc.Start(); err != nil {
		return nil, err
	}
	b.answers = bufio.NewReader(out)
	line, err := b.answers.ReadString('\n')
	if err != nil {
		b.stop()
		return nil, fmt.Errorf("gateway process: no address on its output (%q): %v", line, err)
	}
	b.addr = strings.TrimSpace(line)
	cert, err := benchCert()
	if err != nil {
		b.stop()
		return nil, err
	}
	if b.host, err = startBenchHost(cert); err != nil {
		b.stop()
		return nil, err
	}
	return b, nil
}

// stop ends the gateway process: it closes its gateway (and writes its
// profile) when its standard input closes.
func (b *benchGateway) stop() {
	b.ctl.Close()
	done := make(chan struct{})
	go func() { b.proc.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		b.proc.Process.Kill()
		<-done
	}
}

func (b *benchGateway) close() {
	b.stop()
	b.host.close()
}

// ask sends the gateway process a command (cpu, mem, tunnels) and returns
// its answer, a number.
func (b *benchGateway) ask(what string) int64 {
	if _, err := fmt.Fprintln(b.ctl, what); err != nil {
		return -1
	}
	line, err := b.answers.ReadString('\n')
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// newBenchGatewayProcessCmd is the gateway of bench gateway in a process of
// its own: it prints its address, then answers one number a line to the
// commands on its standard input (cpu: its CPU time in ns; mem: heap and
// stacks held after a GC; tunnels: open tunnels) and stops when that
// closes.
func newBenchGatewayProcessCmd() *cobra.Command {
	var publicKey, cpuProfile string
	cmd := &cobra.Command{
		Use:    "process --public-key KEY",
		Short:  "The gateway process of bench gateway",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := base64.StdEncoding.DecodeString(publicKey)
			if err != nil || len(key) != ed25519.PublicKeySize {
				return usageError{fmt.Errorf("--public-key: want the base64 of an Ed25519 public key")}
			}
			ks, err := gatewaytoken.NewKeySet(map[string]ed25519.PublicKey{"bench": key})
			if err != nil {
				return err
			}
			gw, err := gateway.New(gateway.Config{Name: "bench", Verifier: ks, Broker: &gateway.MemoryBroker{},
				RequestRate: 1e6, RequestBurst: 1e6, MaxHandshakesPerAddress: 1e6, MaxTunnelsPerUser: 10000})
			if err != nil {
				return err
			}
			cert, err := benchCert()
			if err != nil {
				return err
			}
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			ln := gw.Listener(inner, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}})
			srv := &http.Server{Handler: gw, ReadHeaderTimeout: 10 * time.Second}
			go srv.Serve(ln)
			defer func() { srv.Close(); gw.Close() }()
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, ln.Addr())
			sc := bufio.NewScanner(cmd.InOrStdin())
			for sc.Scan() {
				var n int64
				switch sc.Text() {
				case "cpu":
					n = int64(cputime.Process())
				case "syscalls":
					n = readWriteSyscalls()
				case "mem":
					n = int64(heldMemory())
				case "tunnels":
					n = int64(gw.Stats().Tunnels)
				}
				fmt.Fprintln(out, n)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&publicKey, "public-key", "", "base64 of the Ed25519 key tokens are signed with")
	cmd.Flags().StringVar(&cpuProfile, "cpu-profile", "", "write a CPU profile of the gateway to this file")
	return cmd
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

// open opens n connections to the host's service on the given stream:
// direct, or each through its own tunnel.
func (b *benchGateway) open(ctx context.Context, n int, stream string, service byte, tunnel bool) ([]net.Conn, error) {
	target := b.host.addr(stream)
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
			c, err := b.dial(ctx, target, tunnel)
			if err == nil && stream == "tls" {
				tc := tls.Client(c, b.clientTLS)
				c = tc
				err = tc.HandshakeContext(ctx)
			}
			if err == nil {
				_, err = c.Write([]byte{service})
			}
			if c != nil {
				conns[i] = c
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

func (b *benchGateway) dial(ctx context.Context, target string, tunnel bool) (net.Conn, error) {
	if !tunnel {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", target)
	}
	now := time.Now()
	tok, err := b.signer.Sign(gatewaytoken.Claims{ID: gatewaytoken.NewID(), User: "bench", Session: "s", Pool: "p",
		Host: target, NotBefore: now.Unix(), Expiry: now.Add(time.Hour).Unix()})
	if err != nil {
		return nil, err
	}
	c, err := gateway.Dial(ctx, gateway.DialConfig{Gateway: b.addr, TLSConfig: b.clientTLS, Token: tok, Target: target, WebSocket: b.ws})
	if err != nil {
		return nil, err
	}
	return tunnelConn{c}, nil
}

// settle waits until the host has served every connection of the last
// measurement and the gateway holds no tunnel, so that one side's teardown
// does not run into the other side's measurement.
func (b *benchGateway) settle(conns []net.Conn) {
	closeAll(conns)
	done := make(chan struct{})
	go func() { b.host.active.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
	for deadline := time.Now().Add(10 * time.Second); b.ask("tunnels") > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// tunnelConn makes a ClientConn a net.Conn for the measurements (only
// Read, Write and Close do anything).
type tunnelConn struct{ *gateway.ClientConn }

func (tunnelConn) LocalAddr() net.Addr              { return benchAddr{} }
func (tunnelConn) RemoteAddr() net.Addr             { return benchAddr{} }
func (tunnelConn) SetDeadline(time.Time) error      { return nil }
func (tunnelConn) SetReadDeadline(time.Time) error  { return nil }
func (tunnelConn) SetWriteDeadline(time.Time) error { return nil }

type benchAddr struct{}

func (benchAddr) Network() string { return "tunnel" }
func (benchAddr) String() string  { return "tunnel" }

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}

// sample is one side of one round of a measurement.
type sample struct {
	bytes int64           // moved (throughput)
	rtts  []time.Duration // sorted round trips (latency)
	cpu   time.Duration   // this process's CPU time (clients, host) during the measurement
	gwCPU time.Duration   // the gateway process's
	gwSys int64           // the gateway process's read and write system calls
	wall  time.Duration
}

func (s sample) rate() float64 { return float64(s.bytes) / s.wall.Seconds() }

// measure runs one side of one round of a throughput measurement: n
// fresh connections (nothing left in flight from the round before) to the
// sink or the source, for d.
func (b *benchGateway) measure(ctx context.Context, kind, stream string, n int, tunnel bool, d time.Duration) (sample, error) {
	service := byte(serviceSink)
	if kind == "to-client" {
		service = serviceSource
	}
	conns, err := b.open(ctx, n, stream, service, tunnel)
	if err != nil {
		return sample{}, fmt.Errorf("open %d connections (%s, tunnel %v): %w", n, stream, tunnel, err)
	}
	defer b.settle(conns)
	received := b.host.received.Load()
	t := b.startClock()
	var s sample
	if kind == "to-host" {
		writeFor(conns, d)
		s.bytes = b.host.received.Load() - received
	} else {
		s.bytes = readFor(conns, d)
	}
	t.stop(&s)
	return s, nil
}

// roundTripSample runs one side of one round of a latency measurement on
// connections to the echo service.
func (b *benchGateway) roundTripSample(conns []net.Conn, d, interval time.Duration) sample {
	t := b.startClock()
	s := sample{rtts: roundTrips(conns, d, interval)}
	t.stop(&s)
	return s
}

// clocks are the CPU times of both processes and the wall time at the start
// of a measurement.
type clocks struct {
	b          *benchGateway
	cpu, gwCPU time.Duration
	gwSys      int64
	wall       time.Time
}

func (b *benchGateway) startClock() clocks {
	return clocks{b: b, gwSys: b.ask("syscalls"), gwCPU: time.Duration(b.ask("cpu")), cpu: cputime.Process(), wall: time.Now()}
}

func (c clocks) stop(s *sample) {
	s.wall = time.Since(c.wall)
	s.cpu = cputime.Process() - c.cpu
	s.gwCPU = time.Duration(c.b.ask("cpu")) - c.gwCPU
	s.gwSys = c.b.ask("syscalls") - c.gwSys
}

// writeFor writes 32 KiB blocks on every connection for d.
func writeFor(conns []net.Conn, d time.Duration) {
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	block := make([]byte, 32<<10)
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if _, err := c.Write(block); err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// readFor reads every connection for d; the bytes read.
func readFor(conns []net.Conn, d time.Duration) int64 {
	var total atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 32<<10)
			for time.Now().Before(stop) {
				n, err := c.Read(buf)
				total.Add(int64(n))
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return total.Load()
}

// roundTrips sends 64 bytes and waits for their echo on every connection
// for d: at once again (interval 0), or every interval from a random
// start, a round trip counting from when its send was due. The round
// trips, sorted.
func roundTrips(conns []net.Conn, d, interval time.Duration) []time.Duration {
	var mu sync.Mutex
	var all []time.Duration
	start := time.Now()
	stop := start.Add(d)
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg, back := make([]byte, 64), make([]byte, 64)
			var mine []time.Duration
			due := start
			if interval > 0 {
				due = start.Add(mathrand.N(interval))
			}
			for due.Before(stop) {
				// A send on time counts from when it went out (a timer's
				// late wake-up is not the connection's); a send held up by
				// the previous round trip counts from when it was due.
				t0 := due
				if wait := time.Until(due); wait > 0 || interval == 0 {
					time.Sleep(wait)
					t0 = time.Now()
				}
				if _, err := c.Write(msg); err != nil {
					break
				}
				if _, err := io.ReadFull(c, back); err != nil {
					break
				}
				mine = append(mine, time.Since(t0))
				if due = due.Add(interval); interval == 0 {
					due = time.Now()
				}
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

func median[T int64 | float64 | time.Duration](s []T) T {
	if len(s) == 0 {
		return 0
	}
	s = slices.Clone(s)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// heldMemory is heap in use plus stacks after a GC.
func heldMemory() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// memoryPerConn opens n idle connections to the sink and returns the heap
// and stacks each holds: in this process (client and host) for direct
// connections, in the gateway process for tunnels.
func (b *benchGateway) memoryPerConn(ctx context.Context, n int, stream string, tunnel bool) (int64, error) {
	held := func() int64 { return int64(heldMemory()) }
	if tunnel {
		held = func() int64 { return b.ask("mem") }
	}
	// A first round opens what pools and the heap keep once made.
	conns, err := b.open(ctx, n, stream, serviceSink, tunnel)
	if err != nil {
		return 0, err
	}
	b.settle(conns)
	before := held()
	conns, err = b.open(ctx, n, stream, serviceSink, tunnel)
	if err != nil {
		return 0, err
	}
	per := (held() - before) / int64(n)
	b.settle(conns)
	return per, nil
}

func runBenchGateway(ctx context.Context, out io.Writer, opt benchGatewayOptions) error {
	b, err := startBenchGateway(opt.ws, opt.gatewayCPUProfile)
	if err != nil {
		return err
	}
	defer b.close()
	transport := "two HTTP/1.1 connections (RDG_OUT_DATA + RDG_IN_DATA)"
	if opt.ws {
		transport = "WebSocket"
	}
	fmt.Fprintf(out, "gateway on %s (its own process), TLS, transport %s; %d rounds of %v a side; GOMAXPROCS %d; load average at the start %s\n",
		b.addr, transport, opt.rounds, opt.duration, runtime.GOMAXPROCS(0), loadAverage())

	var thr, lat, mem strings.Builder
	thrW := tabwriter.NewWriter(&thr, 0, 0, 2, ' ', tabwriter.AlignRight)
	latW := tabwriter.NewWriter(&lat, 0, 0, 2, ' ', tabwriter.AlignRight)
	memW := tabwriter.NewWriter(&mem, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(thrW, "stream\tconns\tdirection\tdirect MB/s\tgateway MB/s\tratio\t(min-max)\tCPU s/GB: direct\tthrough gateway\tof which gateway\tgateway syscalls/MB\t")
	fmt.Fprintln(latW, "stream\tconns\tload\tdirect p50\tp99\tgateway p50\tp99\tadded p50\tadded p99\t(min..max)\tround trips\tCPU µs/rt: direct\tthrough gateway\tof which gateway\tgateway syscalls/rt\t")
	fmt.Fprintln(memW, "stream\tconns\tdirect B/conn (client and host)\tgateway B/tunnel (gateway process)\t")
	for _, n := range opt.counts {
		for _, stream := range opt.streams {
			var held [2]int64
			for i, tunnel := range []bool{false, true} {
				if held[i], err = b.memoryPerConn(ctx, n, stream, tunnel); err != nil {
					return err
				}
			}
			fmt.Fprintf(memW, "%s\t%d\t%d\t%d\t\n", stream, n, held[0], held[1])
			for _, kind := range opt.measures {
				var rounds [][2]sample
				if kind == "to-host" || kind == "to-client" {
					if rounds, err = b.throughputRounds(ctx, kind, stream, n, opt); err != nil {
						return err
					}
					throughputRow(thrW, stream, n, kind, rounds)
					continue
				}
				if rounds, err = b.latencyRounds(ctx, kind, stream, n, opt); err != nil {
					return err
				}
				latencyRow(latW, stream, n, kind, opt.interval, rounds)
			}
		}
	}
	for _, w := range []*tabwriter.Writer{thrW, latW, memW} {
		w.Flush()
	}
	fmt.Fprintf(out, "\nthroughput (bytes moved a second; medians over rounds):\n%s\nround trips of 64 bytes:\n%s\nmemory held per idle connection:\n%s\nload average at the end %s\n",
		thr.String(), lat.String(), mem.String(), loadAverage())
	return nil
}

// readWriteSyscalls is how many read and write system calls this process
// has made (Linux's /proc/self/io; 0 elsewhere): unlike CPU time, a count
// that other processes on the machine do not change.
func readWriteSyscalls() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	var n int64
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok && (k == "syscr" || k == "syscw") {
			c, _ := strconv.ParseInt(v, 10, 64)
			n += c
		}
	}
	return n
}

// loadAverage is the machine's 1, 5 and 15 minute load average, where
// the system tells it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// sides is the order of a round's sides (false direct, true gateway): it
// alternates, so drift in the machine's load does not favour one side.
func sides(round int) []bool { return []bool{round%2 == 1, round%2 == 0} }

func side(tunnel bool) int {
	if tunnel {
		return 1
	}
	return 0
}

// throughputRounds measures throughput in rounds, each on fresh connections.
func (b *benchGateway) throughputRounds(ctx context.Context, kind, stream string, n int, opt benchGatewayOptions) ([][2]sample, error) {
	var rounds [][2]sample
	for r := range opt.rounds {
		var pair [2]sample
		for _, tunnel := range sides(r) {
			s, err := b.measure(ctx, kind, stream, n, tunnel, opt.duration)
			if err != nil {
				return nil, err
			}
			pair[side(tunnel)] = s
		}
		rounds = append(rounds, pair)
	}
	return rounds, nil
}

// latencyRounds measures round trips in rounds on the same n direct
// connections and n tunnels, open throughout, the sides taking turns.
func (b *benchGateway) latencyRounds(ctx context.Context, kind, stream string, n int, opt benchGatewayOptions) ([][2]sample, error) {
	var conns [2][]net.Conn
	defer func() { b.settle(append(conns[0], conns[1]...)) }()
	for _, tunnel := range []bool{false, true} {
		c, err := b.open(ctx, n, stream, serviceEcho, tunnel)
		if err != nil {
			return nil, fmt.Errorf("open %d connections (%s, tunnel %v): %w", n, stream, tunnel, err)
		}
		conns[side(tunnel)] = c
	}
	interval := time.Duration(0)
	if kind == "paced" {
		interval = opt.interval
	}
	var rounds [][2]sample
	for r := range opt.rounds {
		var pair [2]sample
		for _, tunnel := range sides(r) {
			pair[side(tunnel)] = b.roundTripSample(conns[side(tunnel)], opt.duration, interval)
		}
		rounds = append(rounds, pair)
	}
	return rounds, nil
}

func throughputRow(w io.Writer, stream string, n int, kind string, rounds [][2]sample) {
	var direct, gw, ratio, cpuD, cpuG, cpuGW, sys []float64
	perGB := func(cpu time.Duration, bytes int64) float64 { return cpu.Seconds() / (float64(bytes) / 1e9) }
	for _, p := range rounds {
		direct = append(direct, p[0].rate())
		gw = append(gw, p[1].rate())
		ratio = append(ratio, p[1].rate()/p[0].rate())
		cpuD = append(cpuD, perGB(p[0].cpu, p[0].bytes))
		cpuG = append(cpuG, perGB(p[1].cpu+p[1].gwCPU, p[1].bytes))
		cpuGW = append(cpuGW, perGB(p[1].gwCPU, p[1].bytes))
		sys = append(sys, float64(p[1].gwSys)/(float64(p[1].bytes)/1e6))
	}
	fmt.Fprintf(w, "%s\t%d\t%s\t%.0f\t%.0f\t%.2f\t(%.2f-%.2f)\t%.2f\t%.2f\t%.2f\t%.0f\t\n", stream, n, kind,
		median(direct)/1e6, median(gw)/1e6, median(ratio), slices.Min(ratio), slices.Max(ratio), median(cpuD), median(cpuG), median(cpuGW), median(sys))
}

func latencyRow(w io.Writer, stream string, n int, kind string, interval time.Duration, rounds [][2]sample) {
	var all [2][]time.Duration
	var added []time.Duration
	var cpuD, cpuG, cpuGW, sys []float64
	perRT := func(cpu time.Duration, rtts []time.Duration) float64 {
		return float64(cpu.Nanoseconds()) / 1e3 / float64(max(1, len(rtts)))
	}
	count := 0
	for _, p := range rounds {
		all[0] = append(all[0], p[0].rtts...)
		all[1] = append(all[1], p[1].rtts...)
		cpuD = append(cpuD, perRT(p[0].cpu, p[0].rtts))
		cpuG = append(cpuG, perRT(p[1].cpu+p[1].gwCPU, p[1].rtts))
		cpuGW = append(cpuGW, perRT(p[1].gwCPU, p[1].rtts))
		sys = append(sys, float64(p[1].gwSys)/float64(max(1, len(p[1].rtts))))
		count += len(p[1].rtts)
		added = append(added, quantile(p[1].rtts, .99)-quantile(p[0].rtts, .99))
	}
	slices.Sort(all[0])
	slices.Sort(all[1])
	load := "closed loop"
	if kind == "paced" {
		load = "every " + interval.String()
	}
	us := func(d time.Duration) string { return d.Round(time.Microsecond).String() }
	fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t(%s..%s)\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t\n", stream, n, load,
		us(quantile(all[0], .5)), us(quantile(all[0], .99)), us(quantile(all[1], .5)), us(quantile(all[1], .99)),
		us(quantile(all[1], .5)-quantile(all[0], .5)), us(median(added)), us(slices.Min(added)), us(slices.Max(added)),
		count, median(cpuD), median(cpuG), median(cpuGW), median(sys))
}
