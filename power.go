package vdibroker

// Power states of a session host (issue 17, R-A4): what the host's power
// driver last said, or what the broker asked of it. Hosts without a power
// driver are Running while their agent heartbeats and Unknown otherwise.
const (
	PowerRunning  = "Running"
	PowerStarting = "Starting"
	PowerStopping = "Stopping"
	PowerStopped  = "Stopped"
	PowerUnknown  = "Unknown"
)

// PowerStore is the store's part of power management (issue 17): a host's
// power state and its autoscale drain (R-A3), which is kept apart from an
// admin's drain (allowNewSession) so that neither clears the other. Its
// methods are added by the power work; see power.go's history.
type PowerStore interface {
}
