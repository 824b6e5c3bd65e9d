package federation

// The paths of the pod-to-pod API (R-G5); its bodies are the root's
// (vdibroker.PodLoads and the others). Every call is signed (Sign) and
// answered only to a pod holding the federation secret.

// LoadsPath is GET: the facts of every member pool this pod has in the
// global entitlements of its document (vdibroker.PodLoads).
const LoadsPath = "/api/v1/pod/loads"

// SessionsPath is POST vdibroker.PodSessionsRequest: the user's open
// sessions in the named pools of this pod (vdibroker.PodSessions).
const SessionsPath = "/api/v1/pod/sessions"

// ConnectPath is POST vdibroker.PodConnectRequest: connect the user into
// a pool of this pod through its own connect path (a pool connect's
// answer; 201 when a session was made).
const ConnectPath = "/api/v1/pod/connect"

// DirectoryPath is POST vdibroker.PodDirectoryRequest: register the
// calling pod's users with open sessions at their directory pod (R-G1);
// 204.
const DirectoryPath = "/api/v1/pod/directory"

// LookupPath is POST vdibroker.PodLookupRequest: which pods hold the
// user's open sessions, as this pod's directory knows
// (vdibroker.PodLookup).
const LookupPath = "/api/v1/pod/directory/lookup"

// SessionCommandPath is POST vdibroker.PodSessionCommandRequest: log off
// or disconnect one of the user's open sessions in a member pool of this
// pod, as its own API does (R-U3 across the federation; the queued
// vdibroker.Command, 202).
const SessionCommandPath = "/api/v1/pod/sessions/command"

// DocumentPath is PUT vdibroker.PodDocumentRequest: store the federation
// document a peer's console wrote there, as this pod's PUT
// /api/v1/federation does (the stored document; 200, or 201 for this
// pod's first). Only a pod of the document this pod holds may send one.
const DocumentPath = "/api/v1/pod/federation"
