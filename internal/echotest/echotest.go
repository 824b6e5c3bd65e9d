// Package echotest is a TCP echo server on loopback: a session host's RDP
// port in the tests of a gateway's tunnels, which must carry every byte
// both ways.
package echotest

import (
	"io"
	"net"
	"testing"
)

// Listen starts an echo server on 127.0.0.1 for the test's life and
// returns its address.
func Listen(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}
