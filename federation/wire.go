package federation

import "github.com/vdibroker/vdibroker"

// The bodies of the pod-to-pod API (R-G5). Every call is signed (Sign) and
// answered only to a pod holding the federation secret.

// LoadsPath is GET: the facts of every member pool this pod has in the
// global entitlements of its document (LoadsResponse).
const LoadsPath = "/api/v1/pod/loads"

// SessionsPath is POST SessionsRequest: the user's open sessions in the
// named pools of this pod (SessionsResponse).
const SessionsPath = "/api/v1/pod/sessions"

// ConnectPath is POST ConnectRequest: connect the user into a pool of this
// pod through its own connect path (a pool connect's answer; 201 when a
// session was made).
const ConnectPath = "/api/v1/pod/connect"

// LoadsResponse is a pod's summary of its member pools.
type LoadsResponse struct {
	Pod        string      `json:"pod"`
	Site       string      `json:"site"`
	Generation int64       `json:"generation"`
	Pools      []PoolFacts `json:"pools"`
}

// SessionsRequest asks for a user's open sessions in some pools.
type SessionsRequest struct {
	User      string   `json:"user"`
	HostPools []string `json:"hostPools"`
}

// SessionsResponse lists them.
type SessionsResponse struct {
	Sessions []*vdibroker.UserSession `json:"sessions"`
}

// ConnectRequest asks a pod to connect a user into one of its pools on
// behalf of a global entitlement.
type ConnectRequest struct {
	GlobalEntitlement string `json:"globalEntitlement"`
	HostPool          string `json:"hostPool"`
	User              string `json:"user"`
	DryRun            bool   `json:"dryRun,omitempty"`
}
