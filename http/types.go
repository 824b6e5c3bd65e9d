package http

import "github.com/vdibroker/vdibroker"

// Request and answer bodies of SPEC §9 that are not domain types. Server and
// Client share them, so they cannot drift apart.

// ConnectRequest is the body of POST /hostpools/{pool}/connect.
type ConnectRequest = vdibroker.ConnectRequest

// ConnectResponse answers a connect.
type ConnectResponse = vdibroker.ConnectResponse

// SessionHostRequest is the body of PUT and PATCH of a session host.
type SessionHostRequest = vdibroker.SessionHostRequest

// SendMessageRequest is the body of POST .../usersessions/{id}/sendmessage
// and .../sessionhosts/{host}/sendmessage.
type SendMessageRequest struct {
	Message string `json:"message"`
}

// RegistrationTokenRequest is the body of POST /hostpools/{pool}/registrationtoken.
type RegistrationTokenRequest = vdibroker.RegistrationTokenRequest

// RegistrationTokenResponse is a new registration token; the secret is
// shown only here.
type RegistrationTokenResponse = vdibroker.RegistrationTokenResponse

// TokenRequest is the body of POST /tokens.
type TokenRequest = vdibroker.TokenRequest

// TokenResponse is a new API token; the secret is shown only here.
type TokenResponse = vdibroker.TokenResponse
