package tsgu

import (
	"errors"
	"testing"
)

// TestServerStateSequence: the normal sequence of MS-TSGU 4.2.1 passes
// through every state in order.
func TestServerStateSequence(t *testing.T) {
	var s ServerState
	step := func(p PacketType, want State) {
		t.Helper()
		if err := s.Receive(p); err != nil {
			t.Fatalf("Receive(%v) in %v: %v", p, s.State(), err)
		}
		s.Accept()
		if s.State() != want {
			t.Fatalf("after %v: %v, want %v", p, s.State(), want)
		}
	}
	step(PktHandshakeRequest, StateHandshake)
	if err := s.Receive(PktKeepalive); err != nil || s.State() != StateHandshake {
		t.Fatalf("keepalive in %v: %v", s.State(), err)
	}
	step(PktTunnelCreate, StateTunnelCreate)
	step(PktTunnelAuth, StateTunnelAuthorize)
	step(PktChannelCreate, StateChannelCreate)
	s.Opened()
	if s.State() != StateOpened {
		t.Fatalf("after Opened: %v", s.State())
	}
	for range 3 {
		if err := s.Receive(PktData); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Receive(PktCloseChannel); err != nil || s.State() != StateClosed {
		t.Fatalf("close: %v in %v", err, s.State())
	}
}

// TestServerStateRefuses: a packet out of its turn closes the state
// machine: data before the channel is open (a client trying to reach the
// target without authorisation), a second tunnel, a request while the last
// is unanswered, anything after the close.
func TestServerStateRefuses(t *testing.T) {
	tests := []struct {
		name   string
		before []PacketType
		bad    PacketType
	}{
		{"data before anything", nil, PktData},
		{"keepalive before the handshake", nil, PktKeepalive},
		{"channel before the tunnel", []PacketType{PktHandshakeRequest}, PktChannelCreate},
		{"data before the channel", []PacketType{PktHandshakeRequest, PktTunnelCreate, PktTunnelAuth}, PktData},
		{"second handshake", []PacketType{PktHandshakeRequest}, PktHandshakeRequest},
		{"second tunnel", []PacketType{PktHandshakeRequest, PktTunnelCreate}, PktTunnelCreate},
		{"server packet from the client", []PacketType{PktHandshakeRequest}, PktTunnelResponse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s ServerState
			for _, p := range tt.before {
				if err := s.Receive(p); err != nil {
					t.Fatal(err)
				}
				s.Accept()
			}
			var oos *OutOfSequenceError
			if err := s.Receive(tt.bad); !errors.As(err, &oos) || s.State() != StateClosed {
				t.Fatalf("Receive(%v) = %v in %v, want OutOfSequenceError and closed", tt.bad, err, s.State())
			}
			if err := s.Receive(PktKeepalive); err == nil {
				t.Fatal("a closed state machine accepted a keepalive")
			}
		})
	}
	// A request while the previous is unanswered.
	var s ServerState
	s.Receive(PktHandshakeRequest)
	if err := s.Receive(PktTunnelCreate); err == nil {
		t.Fatal("tunnel create accepted before the handshake was answered")
	}
}
