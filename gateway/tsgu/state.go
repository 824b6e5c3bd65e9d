package tsgu

import "fmt"

// State is the RDG server's connection state on the HTTP transport, named
// as in MS-TSGU: a tunnel is created, authorised, then a channel to the
// target is created and data flows until the channel is closed.
type State int

// The server's states, in the order a connection passes them.
const (
	StateInitialized     State = iota // HTTP channels joined; waiting for the handshake
	StateHandshake                    // handshake answered; waiting for the tunnel create
	StateTunnelCreate                 // tunnel created; waiting for its authorisation
	StateTunnelAuthorize              // tunnel authorised; waiting for the channel create
	StateChannelCreate                // channel requested; connecting to the target
	StateOpened                       // channel open: data, keepalives, close
	StateClosed                       // ended (closed, refused or broken)
)

var stateNames = [...]string{"SERVER_STATE_INITIALIZED", "SERVER_STATE_HANDSHAKE", "SERVER_STATE_TUNNEL_CREATE",
	"SERVER_STATE_TUNNEL_AUTHORIZE", "SERVER_STATE_CHANNEL_CREATE", "SERVER_STATE_OPENED", "SERVER_STATE_CLOSED"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// ServerState is the server's state machine: Receive says whether a packet
// the client sent is allowed now; Accept and Refuse record the server's
// answer. It has no I/O and no clock.
type ServerState struct {
	state State
	// pending is the request packet last received, answered by Accept or
	// Refuse.
	pending PacketType
}

// State returns the current state.
func (s *ServerState) State() State { return s.state }

// OutOfSequenceError is a packet the client may not send in the state.
type OutOfSequenceError struct {
	State  State
	Packet PacketType
}

func (e *OutOfSequenceError) Error() string {
	return fmt.Sprintf("%v not allowed in %v", e.Packet, e.State)
}

// expected maps each state to the request that moves it on.
var expected = map[State]PacketType{
	StateInitialized:     PktHandshakeRequest,
	StateHandshake:       PktTunnelCreate,
	StateTunnelCreate:    PktTunnelAuth,
	StateTunnelAuthorize: PktChannelCreate,
}

// Receive checks a packet from the client against the state. Requests come
// one at a time in order (handshake, tunnel create, tunnel authorisation,
// channel create), each answered before the next; once opened, data,
// keepalives and a close are allowed. A keepalive is allowed from the
// handshake on. Anything else is an OutOfSequenceError and ends the
// connection (StateClosed).
func (s *ServerState) Receive(t PacketType) error {
	switch {
	case s.state == StateClosed:
	case s.pending != 0:
		// A request while the last is unanswered.
	case t == PktKeepalive && s.state != StateInitialized:
		return nil
	case s.state == StateOpened && (t == PktData || t == PktCloseChannel || t == PktCloseChannelResponse):
		if t != PktData {
			s.state = StateClosed
		}
		return nil
	case expected[s.state] == t && s.state != StateOpened:
		s.pending = t
		return nil
	}
	err := &OutOfSequenceError{State: s.state, Packet: t}
	s.state = StateClosed
	return err
}

// Accept records a successful answer to the pending request and moves on:
// the handshake to StateHandshake, the tunnel to StateTunnelCreate, its
// authorisation to StateTunnelAuthorize; a channel create goes to
// StateChannelCreate while the target is connected, and Opened ends that.
func (s *ServerState) Accept() {
	switch s.pending {
	case PktHandshakeRequest:
		s.state = StateHandshake
	case PktTunnelCreate:
		s.state = StateTunnelCreate
	case PktTunnelAuth:
		s.state = StateTunnelAuthorize
	case PktChannelCreate:
		s.state = StateChannelCreate
	}
	s.pending = 0
}

// Opened records that the channel to the target is open.
func (s *ServerState) Opened() {
	if s.state == StateChannelCreate {
		s.state = StateOpened
	}
}

// Refuse records a refused request or a broken connection: the state
// machine ends.
func (s *ServerState) Refuse() {
	s.pending = 0
	s.state = StateClosed
}
