package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/power"
)

// The demo's autoscale: the office pool names the power driver "demo",
// and a scaling plan covers it. The driver is power.Simulated for the
// states, and the fleet makes them real for the broker: a stopped host's
// agent stops (its last heartbeat says Shutdown) and its users are gone;
// a started host's agent runs again once the simulated boot is over, as
// a VM's agent would after a power-on.

// DriverName is the name of the fleet's power driver in the pools'
// powerDriver.
const DriverName = "demo"

// autoscalePool is the pool the demo's scaling plan covers.
const autoscalePool = "office-breadth"

// AutoscalePlan is the name of the demo's scaling plan.
const AutoscalePlan = "office-hours"

// stoppedAtStart are the office hosts powered off before the first users
// arrive: the plan's ramp-up starts them again as the pool fills. Two
// hosts run (office-08 is drained by "an admin", which the autoscaler
// leaves alone): the first wave of users takes them past the plan's
// ramp-up threshold, so the first evaluation starts a host.
var stoppedAtStart = []string{"office-03", "office-04", "office-05", "office-06", "office-07"}

// driver is the demo's power driver.
type driver struct {
	sim   *power.Simulated
	fleet *Fleet
}

var _ power.Driver = (*driver)(nil)

func (d *driver) Start(ctx context.Context, t power.Target) error {
	if err := d.sim.Start(ctx, t); err != nil {
		return err
	}
	// The agent comes up when the simulated boot is over.
	time.AfterFunc(d.sim.StartDelay, func() { d.fleet.powerOn(t.Pool, t.Host) })
	return nil
}

func (d *driver) Stop(ctx context.Context, t power.Target) error {
	if err := d.sim.Stop(ctx, t); err != nil {
		return err
	}
	d.fleet.powerOff(t.Pool, t.Host)
	return nil
}

func (d *driver) Status(ctx context.Context, t power.Target) (string, error) {
	return d.sim.Status(ctx, t)
}

// PowerDrivers returns the fleet's power driver, for the broker's
// --power-config drivers (serve's Main.PowerDrivers): the broker must
// know it before Start creates the pool that names it.
func (f *Fleet) PowerDrivers() power.Set {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.driver == nil {
		delay := f.PowerStartDelay
		if delay <= 0 {
			delay = 20 * time.Second
		}
		f.driver = &driver{sim: &power.Simulated{StartDelay: delay}, fleet: f}
	}
	return power.Set{DriverName: f.driver}
}

// powerOn runs the host's agent, unless it runs or the fleet is closed;
// after a stop, once the stopped run has sent its last heartbeat. The
// agent keeps its credential in memory, so it heartbeats at once without
// registering again.
func (f *Fleet) powerOn(pool, host string) {
	h := f.byName[pool+"/"+host]
	if h == nil {
		return
	}
	f.mu.Lock()
	prev := h.done
	f.mu.Unlock()
	if prev != nil {
		<-prev
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || h.stop != nil {
		return
	}
	ctx, cancel := context.WithCancel(f.run)
	done := make(chan struct{})
	h.stop, h.done = cancel, done
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer close(done)
		if err := h.agent.Run(ctx); err != nil {
			f.Logger.Error("demo: agent stopped", "host", h.name, "err", err)
		}
	}()
}

// powerOff stops the host's agent (it sends its last heartbeat, Shutdown,
// without the caller waiting for it: the caller may be the broker's own
// stop) and its users' sessions end with it.
func (f *Fleet) powerOff(pool, host string) {
	h := f.byName[pool+"/"+host]
	if h == nil {
		return
	}
	f.mu.Lock()
	if h.stop != nil {
		h.stop()
		h.stop = nil
	}
	f.mu.Unlock()
	h.mu.Lock()
	users := make([]string, 0, len(h.sessions))
	for u := range h.sessions {
		users = append(users, u)
	}
	clear(h.sessions)
	h.mu.Unlock()
	f.mu.Lock()
	for _, u := range users {
		delete(f.users, u)
	}
	f.mu.Unlock()
}

// setupAutoscale powers off stoppedAtStart through the broker (as an admin
// would: the hosts are recorded Stopped) and puts the scaling plan on the
// office pool, in the machine's time zone, so that ramp-up began a minute
// ago, peak comes in 4 minutes, ramp-down in 8 (it drains and stops hosts)
// and off-peak in 12: within a minute the autoscaler starts hosts for the
// arriving users, and the console's autoscale page shows why.
func (f *Fleet) setupAutoscale(ctx context.Context) error {
	for _, h := range stoppedAtStart {
		if _, err := f.client.StopSessionHost(ctx, autoscalePool, h, false); err != nil {
			return fmt.Errorf("stop %s: %w", h, err)
		}
	}
	zone := localZone()
	loc, err := vdibroker.LoadTimeZone(zone)
	if err != nil {
		return fmt.Errorf("time zone %s: %w", zone, err)
	}
	start := time.Now().In(loc).Truncate(time.Minute).Add(-time.Minute)
	at := func(m int) string { return start.Add(time.Duration(m) * time.Minute).Format("15:04") }
	plan := map[string]any{
		"description": "vdibroker demo: office hours compressed into 12 minutes, from the start of the demo",
		"timeZone":    zone, "hostPoolType": vdibroker.Pooled, "hostPools": []string{autoscalePool},
		"schedules": []map[string]any{{
			"name":                         "demo",
			"daysOfWeek":                   vdibroker.DaysOfWeek,
			"rampUpStartTime":              at(0),
			"rampUpMinimumHostsPct":        25,
			"rampUpCapacityThresholdPct":   50,
			"peakStartTime":                at(5),
			"peakMinimumHostsPct":          50,
			"rampDownStartTime":            at(9),
			"rampDownMinimumHostsPct":      25,
			"rampDownCapacityThresholdPct": 90,
			"rampDownForceLogoffUsers":     true,
			"rampDownWaitTimeMinutes":      1,
			"rampDownNotificationMessage":  "This desktop shuts down in a minute: save your work.",
			"offPeakStartTime":             at(13),
			"offPeakMaximumHostsPct":       50,
		}},
	}
	if _, err := f.client.PutScalingPlan(ctx, AutoscalePlan, plan); err != nil {
		return fmt.Errorf("scaling plan: %w", err)
	}
	return nil
}

// localZone is the machine's IANA time zone: TZ when it names one, else
// the zone /etc/localtime links to, else UTC. (time.Local's name is
// "Local", which a plan refuses.)
func localZone() string {
	if tz := strings.TrimPrefix(os.Getenv("TZ"), ":"); tz != "" {
		if _, err := vdibroker.LoadTimeZone(tz); err == nil {
			return tz
		}
	}
	if target, err := os.Readlink("/etc/localtime"); err == nil {
		if _, zone, ok := strings.Cut(filepath.ToSlash(target), "zoneinfo/"); ok {
			if _, err := vdibroker.LoadTimeZone(zone); err == nil {
				return zone
			}
		}
	}
	return "UTC"
}
