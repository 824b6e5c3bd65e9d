package vdibroker

import "time"

// ConnectRequest is a connect (SPEC §4, §9): a user asks for a desktop in a
// host pool. The broker service answers it; the HTTP API and its client
// carry it as the body of POST /hostpools/{pool}/connect.
type ConnectRequest struct {
	User   string `json:"user"`
	DryRun bool   `json:"dryRun,omitempty"`
	// SessionHost names the host for MultiplePersistent pools (R-PE3).
	SessionHost string `json:"sessionHost,omitempty"`
	// SessionID, when set, names the user's session in the pool the
	// connect should reconnect (R-C1) when the user has several (a
	// MultiplePersistent pool's, or one a host reported): taken if it is
	// the user's open one there that R-C1 would answer, else the connect
	// answers as without it (R-C1's own choice, or a new session). The
	// user portal's Reconnect of one row of "My sessions" sends it
	// (R-U3), as a global connect does for the session it found (R-G1).
	SessionID string `json:"sessionId,omitempty"`
	// RemoteApp, set by the entitlement service for an application
	// connect (never read from a client's body), makes the answer's .rdp
	// file open that application (R-E7).
	RemoteApp *RemoteApp `json:"-"`
	// Wait, set from the call's ?wait= (never from a body), holds a
	// connect answered HostStarting until the host takes the session, at
	// most this long and the broker's bounds (R-U4).
	Wait time.Duration `json:"-"`
}

// ConnectResponse answers a connect: the user's session (new, Pending, or
// the existing one on reconnect) and how to reach it. A dry run has no
// SessionID (R-C8).
type ConnectResponse struct {
	SessionID   string `json:"sessionId,omitempty"`
	User        string `json:"user"`
	HostPool    string `json:"hostPool"`
	SessionHost string `json:"sessionHost"`
	Address     string `json:"address"`
	State       string `json:"state"`
	Reconnect   bool   `json:"reconnect"`
	DryRun      bool   `json:"dryRun"`
	// RDPFile is the text of an .rdp file an RDP client opens (CRLF lines).
	RDPFile string `json:"rdpFile"`
	// Gateway is the RD gateway the file sends the client through (the
	// file holds its access token, R-GW1); empty: straight to the host.
	Gateway string `json:"gateway,omitempty"`
}

// ValidateConnect checks a connect's fields (R-P4 style: the field and the
// allowed form are named).
func ValidateConnect(req *ConnectRequest) error {
	if err := ValidateUser("user", req.User); err != nil {
		return err
	}
	if req.SessionHost != "" {
		if err := ValidateName("sessionHost", req.SessionHost, MinHostNameLen, MaxHostNameLen); err != nil {
			return err
		}
	}
	if req.SessionID != "" {
		if err := ValidateText("sessionId", req.SessionID, MaxSessionIDLen); err != nil {
			return err
		}
	}
	return nil
}

// MaxSessionIDLen bounds a session id a caller names (NewID makes 32 hex
// digits; an older broker's ids are no longer).
const MaxSessionIDLen = 64
