package console

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/placement"
	"github.com/vdibroker/vdibroker/power"
)

// Check is one line of a host's "can it take a new session?" list (the
// host page's, and `vdibroker sessionhost show`'s): a state (ok, warn,
// bad or info), a short title and the sentence, which cites the rule (the
// console links it).
type Check struct {
	State, Title, Text string
}

type check = Check

// HostReport says whether the host name of pool p could take a new
// session at now, and why: the placement engine's verdict for a new user
// connecting now (made here, from hosts as the API lists them, with their
// status; nothing is stored) and the checks rule by rule. hosts are all
// the pool's hosts; name must be one of them.
func HostReport(p *vdibroker.HostPool, hosts []vdibroker.SessionHost, name string, now time.Time) (verdict Check, checks []Check) {
	var h *vdibroker.SessionHost
	for i := range hosts {
		if hosts[i].Name == name {
			h = &hosts[i]
		}
	}
	if h == nil {
		return Check{"info", "Unknown host", name + " is not a host of " + p.Name}, nil
	}
	status := h.Status
	if status == "" {
		status = vdibroker.HostStatus(h, p.HeartbeatTimeout(), now)
	}
	return hostVerdict(p, hosts, name, now), hostChecks(p, h, status, now)
}

// probeUser is the user of the host page's what-if decision: a name no
// real user can have (the API refuses control characters in names), so no
// existing session is found and no assignment matches.
const probeUser = "\x00console-probe"

// hostChecks says, rule by rule, whether h could take a new session now
// and what decides it: status and heartbeat, drain (who and when), the
// limit, the host-side thresholds, the Horizon bucket, power.
func hostChecks(p *vdibroker.HostPool, h *vdibroker.SessionHost, status string, now time.Time) []check {
	var out []check
	timeout := p.HeartbeatTimeout()
	age := "never"
	if h.LastHeartBeat != nil {
		age = durationText(now.Sub(*h.LastHeartBeat)) + " ago"
	}
	switch status {
	case vdibroker.StatusAvailable:
		out = append(out, check{"ok", "Available", fmt.Sprintf("Last heartbeat %s, within heartbeatTimeoutSeconds %d (R-H1).", age, int(timeout.Seconds()))})
	case vdibroker.StatusNeedsAssistance:
		out = append(out, check{"warn", "Needs assistance", fmt.Sprintf("The agent reports a failing health check: %q. The host still takes new sessions (R-H1). Last heartbeat %s.", h.HealthError, age)})
	case vdibroker.StatusShutdown:
		text := fmt.Sprintf("The agent said it is stopping, or a power action stopped it: no new session (R-H1, R-C3). Last heartbeat %s.", age)
		if h.PowerState == vdibroker.PowerStopped {
			text = fmt.Sprintf("Its power driver stopped it: no new session until it is started again (R-H1, R-A4). Last heartbeat %s.", age)
			if p.StartVMOnConnect {
				text += " A connect that finds no capacity may start it (startVMOnConnect)."
			}
		}
		out = append(out, check{"bad", "Shut down", text})
	default:
		text := fmt.Sprintf("No heartbeat for %s, more than heartbeatTimeoutSeconds %d: no new session until the agent is back (R-H1, R-C3).", strings.TrimSuffix(age, " ago"), int(timeout.Seconds()))
		if h.LastHeartBeat == nil {
			text = "No heartbeat ever: the host takes no session until `vdibroker agent` registers under this name and sends one (R-H1, R-C3)."
		}
		if p.StartVMOnConnect && vdibroker.PowerStateOf(h, timeout, now) == vdibroker.PowerUnknown {
			text += fmt.Sprintf(" Its power state is Unknown: a connect that finds no capacity may start it after any Stopped host, unless its driver failed in the last %d minutes (startVMOnConnect, R-A4).",
				int(power.FailedStartBackoff/time.Minute))
		}
		out = append(out, check{"bad", "Unavailable", text})
	}
	if h.AutoscaleDrain {
		out = append(out, check{"bad", "Autoscale drain", "The autoscaler drains it to stop it: no new session; an admin's drain is kept apart and not changed (R-A3)."})
	}
	if h.AllowNewSession {
		out = append(out, check{"ok", "Not drained", "allowNewSession is true: the host takes new sessions (R-C2)."})
	} else {
		who := "Drained; who drained it and when was not recorded (drained at creation, or before the broker recorded drains)"
		if h.DrainedBy != "" && h.DrainTime != nil {
			who = fmt.Sprintf("Drained by %s since %s (%s ago)", h.DrainedBy, h.DrainTime.Local().Format("2006-01-02 15:04 MST"), durationText(now.Sub(*h.DrainTime)))
		}
		text := who + ": no new session lands here; its sessions stay and their users reconnect here (R-C2, R-C1)."
		if p.HostPoolType == vdibroker.Personal {
			text = who + ": drain does not stop the assigned user, whose desktop this is (R-PE4)."
		}
		out = append(out, check{"bad", "Drained", text})
	}
	limit := p.MaxSessionLimit
	switch {
	case limit >= vdibroker.NoSessionLimit:
		out = append(out, check{"ok", "No session limit", fmt.Sprintf("%d session%s; maxSessionLimit is %d, no limit (R-C4).", h.Sessions, plural(h.Sessions), limit)})
	case h.Sessions >= limit:
		out = append(out, check{"bad", "At the limit", fmt.Sprintf("%d session%s, maxSessionLimit %d: no new session until one ends (R-C4, R-P2).", h.Sessions, plural(h.Sessions), limit)})
	default:
		out = append(out, check{"ok", "Under the limit", fmt.Sprintf("%d of %d sessions: room for %d more (R-C4).", h.Sessions, limit, limit-h.Sessions)})
	}
	if p.LoadBalancerType == vdibroker.LoadIndex {
		out = append(out, loadIndexChecks(p, h)...)
	}
	if p.HostPoolType == vdibroker.Personal {
		users := "nobody yet"
		if len(h.AssignedUsers) > 0 {
			users = strings.Join(h.AssignedUsers, ", ")
		}
		out = append(out, check{"info", "Assigned users", "Assigned to " + users + ": only they get sessions here (R-PE4)."})
	}
	out = append(out, remoteAppsCheck(h), powerCheck(p, h, now))
	return out
}

// remoteAppsCheck says whether the host can run RemoteApps, as its agent
// reports (R-E12): an application connect skips a host that cannot.
func remoteAppsCheck(h *vdibroker.SessionHost) check {
	switch h.RemoteApps {
	case vdibroker.RemoteAppsNo:
		return check{"warn", "Cannot run RemoteApps", "Its agent reports it cannot run RemoteApps (an xrdp host gives whole desktops only): application connects skip it, desktops are placed here as before (R-E12). If that is wrong, run the agent with --remote-apps yes."}
	case vdibroker.RemoteAppsYes:
		return check{"ok", "Runs RemoteApps", "Its agent reports it can run RemoteApps: applications are placed here too (R-E12)."}
	}
	return check{"info", "RemoteApps not reported", "Its agent does not say whether the host can run RemoteApps: its sessions provider cannot tell (logind, utmp, file, none), or the agent is older. Applications are placed here as before (R-E12); run the agent with --remote-apps yes or no to say."}
}

// powerCheck says where the host's power state comes from: the pool's
// power driver, or, without one, the agent's heartbeats (R-A4), so the
// page never shows "Running" beside "not reported".
func powerCheck(p *vdibroker.HostPool, h *vdibroker.SessionHost, now time.Time) check {
	timeout := p.HeartbeatTimeout()
	state := vdibroker.PowerStateOf(h, timeout, now)
	at := h.PowerStateTime
	silent := h.LastHeartBeat == nil || now.Sub(*h.LastHeartBeat) > timeout
	if state == vdibroker.PowerUnknown && silent && h.LastHeartBeat != nil && (at == nil || h.LastHeartBeat.After(*at)) {
		// Running (recorded, or read from the heartbeats) until the
		// agent fell silent: Unknown since its heartbeats timed out.
		t := h.LastHeartBeat.Add(timeout)
		at = &t
	}
	since := ""
	if at != nil {
		since = fmt.Sprintf(" since %s (%s ago)", at.Local().Format("2006-01-02 15:04 MST"), durationText(now.Sub(*at)))
	}
	if p.PowerDriver == "" {
		from := "its agent heartbeats"
		if state != vdibroker.PowerRunning {
			from = "its agent is silent or said it is stopping"
		}
		return check{"info", "Power state", fmt.Sprintf("%s%s, as far as the broker knows: %s. The pool has no power driver, so the broker can neither start nor stop it (R-A4).", state, since, from)}
	}
	st := "info"
	if state == vdibroker.PowerStopped || state == vdibroker.PowerStopping {
		st = "bad"
	}
	text := fmt.Sprintf("%s%s, from power driver %s and the agent's heartbeats (R-A4).", state, since, p.PowerDriver)
	if state == vdibroker.PowerUnknown && silent {
		text += " Its agent is silent, so nothing says the machine runs: it may have been turned off outside the broker, or its agent stopped. A start (Start, or start VM on connect) asks the driver; for a machine that runs that changes nothing until its agent is back."
	}
	if vdibroker.StartTimedOut(h, now) {
		st = "warn"
		then := "Start asks its driver again, or Stop stops it."
		if vdibroker.ShuttingDownAfterStart(h, timeout, now) {
			then = "Stop stops it."
		}
		text += " " + stuckStartText(h, timeout, now) + ": start VM on connect and the autoscaler do not start it again; " + then
	}
	return check{st, "Power state", text}
}

// startOffered reports whether the pool and host pages offer Start for h
// (as the API shows it, its power state read by PowerStateOf): the states
// a start is accepted from (R-A4), Stopped, Unknown, or Starting since the
// start timeout unless its agent said since that it shuts down, within
// the pool's heartbeat timeout (vdibroker.ShuttingDownAfterStart); for any
// other the API answers 409.
func startOffered(h *vdibroker.SessionHost, timeout time.Duration, now time.Time) bool {
	return h.PowerState == vdibroker.PowerStopped || h.PowerState == vdibroker.PowerUnknown ||
		vdibroker.StartTimedOut(h, now) && !vdibroker.ShuttingDownAfterStart(h, timeout, now)
}

// stuckStartText says how long a host whose start timed out
// (vdibroker.StartTimedOut) has been starting without its agent
// reporting, or that its agent said it shuts down and when Start is
// offered again (R-A4).
func stuckStartText(h *vdibroker.SessionHost, timeout time.Duration, now time.Time) string {
	n := int(now.Sub(*h.PowerStateTime) / time.Minute)
	if vdibroker.ShuttingDownAfterStart(h, timeout, now) {
		// The wait to the whole second the API's 409 names, rounded
		// up: Start is not offered before it (R-A4).
		wait := vdibroker.StartAfterShutdownFrom(h, timeout).Sub(now)
		wait = (wait + time.Second - 1).Truncate(time.Second)
		return fmt.Sprintf("It has been starting for %d minute%s, and its agent said %s ago that it is shutting down: Start is offered once its agent has been silent for longer than the heartbeat timeout, in %s",
			n, plural(n), durationText(now.Sub(*h.LastHeartBeat)), durationText(wait))
	}
	return fmt.Sprintf("It has been starting for %d minute%s without its agent reporting", n, plural(n))
}

// loadIndexChecks are the R-LI checks of a LoadIndex pool's host: the
// host-side thresholds (the host's own policy over the pool's, R-LI5) and
// what keeps it out of bucket 1.
func loadIndexChecks(p *vdibroker.HostPool, h *vdibroker.SessionHost) []check {
	var out []check
	lb := p.LoadBalancing
	hostLI, hostLISource := lb.HostLoadIndexThreshold, "the pool's"
	if h.Policy.HostLoadIndexThreshold != nil {
		hostLI, hostLISource = *h.Policy.HostLoadIndexThreshold, "the host's own policy"
	}
	hostConn, hostConnSource := lb.HostConnectingSessionThreshold, "the pool's"
	if h.Policy.HostConnectingSessionThreshold != nil {
		hostConn, hostConnSource = *h.Policy.HostConnectingSessionThreshold, "the host's own policy"
	}
	switch {
	case hostLI > 0 && h.LoadIndex >= hostLI:
		out = append(out, check{"bad", "Over its host threshold", fmt.Sprintf("Load index %d ≥ hostLoadIndexThreshold %d (%s): the host refuses new sessions (R-LI2, R-LI5).", h.LoadIndex, hostLI, hostLISource)})
	case hostConn > 0 && h.ConnectingSessions >= hostConn:
		out = append(out, check{"bad", "Over its host threshold", fmt.Sprintf("%d connecting sessions ≥ hostConnectingSessionThreshold %d (%s): the host refuses new sessions (R-LI2, R-LI5).", h.ConnectingSessions, hostConn, hostConnSource)})
	case hostLI > 0 || hostConn > 0:
		out = append(out, check{"ok", "Under its host thresholds", fmt.Sprintf("Load index %d, %d connecting; host thresholds %d and %d (R-LI2).", h.LoadIndex, h.ConnectingSessions, hostLI, hostConn)})
	}
	if !h.StandardFeatures {
		out = append(out, check{"warn", "Not standard: bucket 2 at best", fmt.Sprintf("standardFeatures is false, so the host is never in bucket 1: it gets a new session only when no standard host is below loadIndexThreshold %d with fewer than %d connecting (R-LI3, R-LI4).", lb.LoadIndexThreshold, lb.ConnectingSessionThreshold)})
	}
	if h.LoadIndex >= lb.LoadIndexThreshold {
		out = append(out, check{"warn", "Over the load index threshold", fmt.Sprintf("Load index %d ≥ loadIndexThreshold %d: bucket 3 unless the threshold is raised for minServersInQueue %d (R-LI3).", h.LoadIndex, lb.LoadIndexThreshold, lb.MinServersInQueue)})
	}
	if h.ConnectingSessions >= lb.ConnectingSessionThreshold {
		out = append(out, check{"warn", "Over the connecting session threshold", fmt.Sprintf("%d connecting ≥ connectingSessionThreshold %d: bucket 3 (R-LI3).", h.ConnectingSessions, lb.ConnectingSessionThreshold)})
	}
	return out
}

// verdict is what the placement engine itself says of the host for a new
// user connecting now: the decision of a what-if Place over the pool's
// hosts as the API listed them. Nothing is stored (no dry run is sent; the
// engine runs here, on a copy).
func hostVerdict(p *vdibroker.HostPool, hosts []vdibroker.SessionHost, name string, now time.Time) check {
	if p.HostPoolType == vdibroker.Personal {
		for i := range hosts {
			if hosts[i].Name == name {
				return personalVerdict(p, &hosts[i], now)
			}
		}
	}
	hs := make([]placement.Host, len(hosts))
	for i := range hosts {
		h := placement.HostFrom(&hosts[i])
		// The API does not carry these two: the status it answered says
		// Shutdown, and the load index is taken from the last sample as is.
		h.ShuttingDown = hosts[i].Status == vdibroker.StatusShutdown
		h.MetricsSessions = h.Sessions
		hs[i] = h
	}
	pl := placement.New(placement.PoolFrom(p), hs, placement.Options{Rand: func(int) int { return 0 }, Now: func() time.Time { return now }})
	d, err := pl.Place(placement.Request{User: probeUser})
	e := d.Explain
	for i, cand := range e.Candidates {
		if cand.Host != name {
			continue
		}
		return needsAssistance(candidateVerdict(p, &e, i, cand), hosts, name)
	}
	for _, x := range e.Excluded {
		if x.Host == name {
			text := "Excluded: " + placement.ExclusionText(x) + "."
			if err != nil && e.CandidateCount == 0 {
				// The pool's refusal, as the API words it (R-C5): why
				// no host can, and what to do about that cause.
				text += " No host of the pool can take a new session: " + vdibroker.ErrorMessage(err) + " (R-C5)."
			}
			return check{"bad", "Not a candidate now", text}
		}
	}
	if len(hosts) <= placement.ExplainLimit && err == nil && e.Algorithm == vdibroker.LoadIndex && e.Bucket > 0 {
		// Every exclusion of a pool this small is listed, so the host is
		// a candidate; a LoadIndex record lists the winning bucket only.
		return check{"warn", fmt.Sprintf("A candidate behind bucket %d", e.Bucket), fmt.Sprintf("New sessions go to bucket %d while it has hosts (the decision lists that bucket's hosts); this host is in a later bucket and gets none now (R-LI3, R-LI4).", e.Bucket)}
	}
	if err != nil && e.CandidateCount == 0 {
		return check{"bad", "Not a candidate now", "No host of the pool can take a new session: " + vdibroker.ErrorMessage(err) + " (R-C5)."}
	}
	return check{"info", "Not listed", fmt.Sprintf("The decision lists the first %d candidates and exclusions of %d hosts; this host is not among them (R-C7).", placement.ExplainLimit, len(hosts))}
}

// needsAssistance qualifies a candidate's verdict when its agent reports a
// failing health check (R-H1 NeedsAssistance): the host still takes new
// sessions, as AVD's do, but an agent that cannot see its sessions, for
// one, leaves users placed there Pending until pendingTimeoutSeconds (R-S3).
// "Next in line" alone would send an administrator looking elsewhere.
func needsAssistance(v check, hosts []vdibroker.SessionHost, name string) check {
	i := slices.IndexFunc(hosts, func(h vdibroker.SessionHost) bool { return h.Name == name })
	if i < 0 || hosts[i].Status != vdibroker.StatusNeedsAssistance {
		return v
	}
	h := &hosts[i]
	if v.State == "ok" {
		v.State = "warn"
	}
	v.Title += ", but it needs assistance"
	v.Text += fmt.Sprintf(" Its agent reports %q: new sessions still land here (R-H1); if the agent cannot see its sessions, they stay Pending until pendingTimeoutSeconds (R-S3). Drain it until the agent is fixed (R-C2).", h.HealthError)
	return v
}

// personalVerdict is the verdict of a personal pool's host, which is not
// a question of load: whose desktop it is (R-PE1..R-PE4).
func personalVerdict(p *vdibroker.HostPool, h *vdibroker.SessionHost, now time.Time) check {
	status := h.Status
	if status == "" {
		status = vdibroker.HostStatus(h, p.HeartbeatTimeout(), now)
	}
	switch {
	case !vdibroker.Placeable(status):
		return check{"bad", "Not available", fmt.Sprintf("The host is %s: nobody's connect lands here until it is back (R-H1, R-C3).", status)}
	case len(h.AssignedUsers) > 0:
		return check{"ok", "Assigned", fmt.Sprintf("Assigned to %s: their connects land here, drained or not (R-PE4).", strings.Join(h.AssignedUsers, ", "))}
	case p.PersonalDesktopAssignmentType == vdibroker.Direct:
		return check{"info", "Unassigned", "Nobody is assigned: in a Direct pool only an admin assigns it (R-PE2)."}
	case !h.AllowNewSession:
		return check{"bad", "Unassigned and drained", "No new user is given a drained host (R-C2, R-PE1)."}
	}
	return check{"ok", "Unassigned", "The next user without a desktop may be given it at their first connect (R-PE1)."}
}

// candidateVerdict says where candidate i stands in the decision e.
func candidateVerdict(p *vdibroker.HostPool, e *placement.Explain, i int, cand placement.Candidate) check {
	n := e.CandidateCount
	switch e.Algorithm {
	case vdibroker.BreadthFirst:
		half := (n + 1) / 2
		if i < half {
			return check{"ok", "A candidate now", fmt.Sprintf("Rank %d of %d candidates by session count: among the %d least loaded, each picked with probability 1/%d (R-BF2).", i+1, n, half, half)}
		}
		return check{"warn", "A candidate, not picked now", fmt.Sprintf("Rank %d of %d candidates by session count: outside the %d least loaded, so it gets no new session until the others fill (R-BF2).", i+1, n, half)}
	case vdibroker.DepthFirst:
		if i == 0 {
			return check{"ok", "Next in line", fmt.Sprintf("The candidate with the most sessions (%d): the next new session goes here (R-DF2).", cand.Sessions)}
		}
		return check{"warn", "A candidate, after others", fmt.Sprintf("Rank %d of %d: depth-first fills the %d hosts before it to maxSessionLimit first (R-DF2).", i+1, n, i)}
	case vdibroker.LoadIndex:
		if cand.Bucket > e.Bucket && e.Bucket > 0 {
			return check{"warn", fmt.Sprintf("Bucket %d, behind bucket %d", cand.Bucket, e.Bucket), fmt.Sprintf("Load index %d, %d connecting. New sessions go to bucket %d while it has hosts, so this host gets none now (R-LI3, R-LI4).", cand.LoadIndex, cand.Connecting, e.Bucket)}
		}
		text := fmt.Sprintf("Bucket %d, load index %d, %d connecting: it takes its turn in bucket %d (R-LI3, R-LI4).", cand.Bucket, cand.LoadIndex, cand.Connecting, cand.Bucket)
		if e.RaisedThreshold > 0 {
			text += fmt.Sprintf(" The threshold is raised to %d for minServersInQueue %d.", e.RaisedThreshold, p.LoadBalancing.MinServersInQueue)
		}
		return check{"ok", fmt.Sprintf("A candidate in bucket %d", cand.Bucket), text}
	}
	return check{"ok", "A candidate now", fmt.Sprintf("Rank %d of %d candidates (R-C7).", i+1, n)}
}

// hostPage shows one host: why it does or does not take new sessions, its
// sessions, its recent placements and its last hour.
func (c *Console) hostPage(rq *request) {
	c.renderHost(rq, http.StatusOK, "")
}

// renderHost shows the host page with an optional error banner (an API
// refusal of an action on the host, with its status).
func (c *Console) renderHost(rq *request, code int, banner string) {
	ctx := rq.r.Context()
	poolName, name := rq.r.PathValue("pool"), rq.r.PathValue("host")
	p, err := rq.api.getPool(ctx, poolName)
	if err != nil {
		c.apiError(rq, err)
		return
	}
	h, err := rq.api.getHost(ctx, poolName, name)
	if err != nil {
		c.apiError(rq, err)
		return
	}
	hosts, err := rq.api.listHosts(ctx, poolName)
	if err != nil {
		c.apiError(rq, err)
		return
	}
	const shown = 100
	sessions, next, err := rq.api.sessionsPage(ctx, poolName, sessionQuery{SessionHost: name, Limit: shown})
	if err != nil {
		c.apiError(rq, err)
		return
	}
	now := c.now()
	status := c.hostStatus(h, &p.HostPool)
	c.hostHist.record(now, poolName, name, hostSample(h))
	// Recent placements: an adopted session (R-S2) was never placed and
	// has no decision record to link to.
	recent := slices.DeleteFunc(slices.Clone(sessions), func(s vdibroker.UserSession) bool { return s.Adopted })
	slices.SortFunc(recent, func(a, b vdibroker.UserSession) int {
		return cmp.Or(b.CreateTime.Compare(a.CreateTime), cmp.Compare(a.ID, b.ID))
	})
	recent = recent[:min(len(recent), 10)]
	rows := make([]sessionRow, len(sessions))
	for i, s := range sessions {
		rows[i] = sessionRow{UserSession: s, Since: durationText(now.Sub(s.StateTime))}
	}
	recentRows := make([]sessionRow, len(recent))
	for i, s := range recent {
		recentRows[i] = sessionRow{UserSession: s, Since: durationText(now.Sub(s.CreateTime))}
	}
	age := "never"
	if h.LastHeartBeat != nil {
		age = durationText(now.Sub(*h.LastHeartBeat)) + " ago"
	}
	hist := c.hostHist.series(poolName, name)
	c.page(rq, code, "host", map[string]any{
		"Title": name + " · " + poolName, "Nav": "overview", "Error": banner,
		"Pool": p, "Host": h, "Status": status, "HeartbeatAge": age, "CanStart": startOffered(h, p.HeartbeatTimeout(), now),
		"Verdict":  hostVerdict(&p.HostPool, hosts, name, now),
		"Checks":   hostChecks(&p.HostPool, h, status, now),
		"Sessions": rows, "MoreSessions": next != "", "Recent": recentRows,
		"History": timeChartLabeled(hist, now, time.Hour, "Sessions, CPU and memory of "+name+" over the last hour"),
	})
}
