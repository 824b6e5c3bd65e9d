package vdibroker

import (
	"context"
	"time"
)

// Power states of a session host (R-A4): what the host's power
// driver last said, or what the broker asked of it. Hosts without a power
// driver are Running while their agent heartbeats and Unknown otherwise,
// and so are hosts recorded Running (PowerStateOf).
const (
	PowerRunning  = "Running"
	PowerStarting = "Starting"
	PowerStopping = "Stopping"
	PowerStopped  = "Stopped"
	PowerUnknown  = "Unknown"
)

// PowerStore is the store's part of power management (R-A4): a host's
// power state and its autoscale drain (R-A3), which is kept apart from an
// admin's drain (allowNewSession) so that neither clears the other. Its
// methods are audited when ctx carries an entry (WithAudit).
type PowerStore interface {
	// SetPowerState records host's power state (one of the Power*
	// constants) at now. With from given, it is written only while the
	// recorded state is one of them ("" counts as Unknown), so that a
	// status poll cannot undo a start asked after it; changed says whether
	// it was written. NotFound when the host is not.
	SetPowerState(ctx context.Context, pool, host, state string, now time.Time, from ...string) (h *SessionHost, changed bool, err error)
	// RestartStart records host Starting anew at now while it is
	// recorded Starting since startedBy or earlier (an admin's start of
	// a host whose start timed out, StartTimedOut) and its agent has not
	// heartbeated since that record at silentSince or later (one that
	// did said it shuts down, ShuttingDownAfterStart); the condition is
	// the write's own, so admins on any replica restart it once, and not
	// after such a heartbeat landed. changed says whether it was
	// written. NotFound when the host is not.
	RestartStart(ctx context.Context, pool, host string, startedBy, silentSince, now time.Time) (h *SessionHost, changed bool, err error)
	// SetAutoscaleDrain sets or clears host's autoscale drain (R-A3). It
	// never changes allowNewSession (an admin's drain), and new sessions
	// are refused while either drain is on (the connect's conditional
	// write checks both).
	SetAutoscaleDrain(ctx context.Context, pool, host string, on bool) (*SessionHost, error)
}

// PowerStateOf is h's power state as the API, the console, the
// autoscaler and start VM on connect read it (R-A4): the recorded one,
// or, when no driver has spoken and the broker never asked (a pool
// without a power driver), Running while the agent heartbeats within
// timeout and Unknown otherwise. A recorded Running is read the same
// way: only a heartbeat records it (PowerAfterHeartbeat), so once the
// agent is silent for longer than timeout nothing says the machine still
// runs (turned off outside the broker, a power cut, or a crashed agent)
// and it reads Unknown, as a host of a pool without a driver does.
func PowerStateOf(h *SessionHost, timeout time.Duration, now time.Time) string {
	heartbeats := h.LastHeartBeat != nil && now.Sub(*h.LastHeartBeat) <= timeout
	switch {
	case h.PowerState == PowerRunning && !heartbeats:
		return PowerUnknown
	case h.PowerState != "":
		return h.PowerState
	case heartbeats && !h.ShuttingDown:
		return PowerRunning
	}
	return PowerUnknown
}

// StartTimedOut reports whether h is recorded Starting since
// HostStartTimeout or longer before now: its agent never heartbeated
// after the start (its machine did not come up, or its agent is broken),
// or only to say it shuts down (ShuttingDownAfterStart).
// Start VM on connect and the autoscaler no longer count it as capacity to
// come and never start it again; an admin's start is accepted for it, as
// for a Stopped or Unknown host (R-A4).
func StartTimedOut(h *SessionHost, now time.Time) bool {
	return h.PowerState == PowerStarting && h.PowerStateTime != nil && now.Sub(*h.PowerStateTime) >= HostStartTimeout
}

// ShuttingDownAfterStart reports whether h, recorded Starting, heard
// from its agent after that record and within timeout of now: a heartbeat
// leaves a Starting host Starting only when it says its agent shuts down
// (PowerAfterHeartbeat), so its machine is going down, and a start asked
// now would reach it shutting down. An admin's start of a host whose start
// timed out is refused then, and accepted once the agent has been silent
// for timeout (R-A4). Start VM on connect and the autoscaler do not count
// it as capacity to come meanwhile (they start another host; a Personal
// user whose own host it is is told it shuts down), R-A2, R-A4. A
// heartbeat before the record (the host's last before it was stopped and
// started) counts for nothing.
func ShuttingDownAfterStart(h *SessionHost, timeout time.Duration, now time.Time) bool {
	return h.PowerState == PowerStarting && h.PowerStateTime != nil && h.LastHeartBeat != nil &&
		h.LastHeartBeat.After(*h.PowerStateTime) && now.Sub(*h.LastHeartBeat) <= timeout
}

// StartAfterShutdownFrom is from when an admin's start of h, refused while
// ShuttingDownAfterStart, is accepted if its agent stays silent: the first
// whole second after its last heartbeat plus timeout (R-A4). At that
// heartbeat plus timeout to the instant it is still refused (its agent is
// heard within timeout, as PowerStateOf reads it), so a time shown to the
// second, and a wait rounded up to one, are accepted when they come.
func StartAfterShutdownFrom(h *SessionHost, timeout time.Duration) time.Time {
	return h.LastHeartBeat.Add(timeout).Truncate(time.Second).Add(time.Second).UTC()
}

// SilentRunning reports whether h is recorded Running but reads Unknown
// by PowerStateOf (its agent silent for longer than timeout): start VM on
// connect and the autoscaler start such a host after the other Unknown
// ones (R-A4), as its machine may still run with a crashed agent.
func SilentRunning(h *SessionHost, timeout time.Duration, now time.Time) bool {
	return h.PowerState == PowerRunning && PowerStateOf(h, timeout, now) == PowerUnknown
}

// AgentSilent reports whether h's agent has been silent for longer than
// timeout while the broker could hear it: no heartbeat within timeout of
// now, and heardSince (the broker's start, or the end of its last store
// outage) older than timeout too. Start VM on connect and the autoscaler
// start a host for its silence only then (R-A4): right after a broker's
// restart every host's last heartbeat in the store may be old, and its
// agent's next one has not landed yet.
func AgentSilent(h *SessionHost, timeout time.Duration, heardSince, now time.Time) bool {
	last := heardSince
	if h.LastHeartBeat != nil && h.LastHeartBeat.After(last) {
		last = *h.LastHeartBeat
	}
	return now.Sub(last) > timeout
}

// PowerAfterHeartbeat is h's recorded power state after a heartbeat at now
// (R-A4): an agent that heartbeats runs, so Starting and Unknown become
// Running. Stopped and Stopping become Running only when the heartbeat
// comes more than timeout after the state was recorded (the host was
// started outside the broker, or the stop failed): the heartbeats just
// after a stop are the agent's last ones before the power went. A
// heartbeat saying the agent is shutting down changes nothing, and ""
// stays "" (PowerStateOf reads it from the heartbeat).
func PowerAfterHeartbeat(h *SessionHost, timeout time.Duration, shuttingDown bool, now time.Time) string {
	if shuttingDown {
		return h.PowerState
	}
	switch h.PowerState {
	case PowerStarting, PowerUnknown:
		return PowerRunning
	case PowerStopped, PowerStopping:
		if h.PowerStateTime == nil || now.Sub(*h.PowerStateTime) > timeout {
			return PowerRunning
		}
	}
	return h.PowerState
}
