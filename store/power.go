package store

import (
	"context"
	"slices"
	"time"

	"github.com/vdibroker/vdibroker"
)

// SetPowerState implements vdibroker.PowerStore (issue 17, R-A4).
func (s *DB) SetPowerState(ctx context.Context, pool, host, state string, now time.Time, from ...string) (*vdibroker.SessionHost, bool, error) {
	if !slices.Contains(powerStates, state) {
		return nil, false, vdibroker.FieldError("powerState", "must be one of Running, Starting, Stopping, Stopped, Unknown; got %q", state)
	}
	var out *vdibroker.SessionHost
	changed := false
	err := s.write(ctx, func(t *tx) error {
		h, err := t.getHost(ctx, pool, host, true)
		if err != nil {
			return err
		}
		cur := h.PowerState
		if cur == "" {
			cur = vdibroker.PowerUnknown
		}
		if len(from) > 0 && !slices.Contains(from, cur) {
			// Nothing changed, so nothing is recorded: a refusal is the
			// caller's to record.
			t.audit = nil
			out = h
			return nil
		}
		before := *h
		t.touch(pool, host)
		if _, err := t.exec(ctx, `UPDATE session_hosts SET power_state = ?, power_state_time = ? WHERE host_pool = ? AND name = ?`,
			state, ns(now), pool, host); err != nil {
			return err
		}
		at := fromNS(ns(now))
		h.PowerState, h.PowerStateTime = state, &at
		t.audited(&before, h)
		out, changed = h, true
		return nil
	})
	if err != nil {
		return nil, false, wrap(err, "set power state of %s/%s", pool, host)
	}
	return out, changed, nil
}

var powerStates = []string{vdibroker.PowerRunning, vdibroker.PowerStarting, vdibroker.PowerStopping, vdibroker.PowerStopped, vdibroker.PowerUnknown}

// SetAutoscaleDrain implements vdibroker.PowerStore (R-A3).
func (s *DB) SetAutoscaleDrain(ctx context.Context, pool, host string, on bool) (*vdibroker.SessionHost, error) {
	var out *vdibroker.SessionHost
	err := s.write(ctx, func(t *tx) error {
		h, err := t.getHost(ctx, pool, host, true)
		if err != nil {
			return err
		}
		before := *h
		t.touch(pool, host)
		if _, err := t.exec(ctx, `UPDATE session_hosts SET autoscale_drain = ? WHERE host_pool = ? AND name = ?`, on, pool, host); err != nil {
			return err
		}
		if err := t.syncNewSessionsAllowed(ctx, pool, host); err != nil {
			return err
		}
		h.AutoscaleDrain = on
		t.audited(&before, h)
		out = h
		return nil
	})
	if err != nil {
		return nil, wrap(err, "set autoscale drain of %s/%s", pool, host)
	}
	return out, nil
}
