package http

import (
	"time"

	"github.com/vdibroker/vdibroker"
)

// Request and answer bodies of SPEC §9 that are not domain types. Server and
// Client share them, so they cannot drift apart.

// ConnectRequest is the body of POST /hostpools/{pool}/connect.
type ConnectRequest = vdibroker.ConnectRequest

// ConnectResponse answers a connect.
type ConnectResponse = vdibroker.ConnectResponse

// SessionHostRequest is the body of PUT (all fields; absent ones take their
// defaults) and PATCH (only allowNewSession, assignedUsers,
// standardFeatures, address) of a session host. Nil means absent.
type SessionHostRequest struct {
	Name             *string   `json:"name,omitempty"`
	Address          *string   `json:"address,omitempty"`
	Protocols        *[]string `json:"protocols,omitempty"`
	StandardFeatures *bool     `json:"standardFeatures,omitempty"`
	AllowNewSession  *bool     `json:"allowNewSession,omitempty"`
	AssignedUsers    *[]string `json:"assignedUsers,omitempty"`
}

// SendMessageRequest is the body of POST .../usersessions/{id}/sendmessage.
type SendMessageRequest struct {
	Message string `json:"message"`
}

// RegistrationTokenRequest is the body of POST /hostpools/{pool}/registrationtoken.
type RegistrationTokenRequest struct {
	// ExpiresInSeconds is 3600..2332800 (1 hour..27 days); absent = 3600.
	ExpiresInSeconds int `json:"expiresInSeconds"`
	// MaxHosts limits the token to that many new hosts: 1 is a one-use
	// token; 0 (absent) is no limit.
	MaxHosts int `json:"maxHosts,omitempty"`
}

// RegistrationTokenResponse is a new registration token; the secret is
// shown only here.
type RegistrationTokenResponse struct {
	ID             string    `json:"id"`
	HostPool       string    `json:"hostPool"`
	Token          string    `json:"token"`
	ExpirationTime time.Time `json:"expirationTime"`
	MaxHosts       int       `json:"maxHosts,omitempty"`
}

// TokenRequest is the body of POST /tokens.
type TokenRequest struct {
	Role    string `json:"role"` // Reader, Contributor or User
	Subject string `json:"subject"`
	// ExpiresInSeconds is 60..315360000, or 0 for a token that never expires.
	ExpiresInSeconds int `json:"expiresInSeconds,omitempty"`
	// HostPools scopes the token to these host pools (issue 15); absent
	// is every pool.
	HostPools []string `json:"hostPools,omitempty"`
}

// TokenResponse is a new API token; the secret is shown only here.
type TokenResponse struct {
	vdibroker.Token
	Secret string `json:"token"`
}
