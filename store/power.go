package store

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
)

// SetPowerState implements vdibroker.PowerStore (R-A4).
func (s *DB) SetPowerState(ctx context.Context, pool, host, state string, now time.Time, from ...string) (*vdibroker.SessionHost, bool, error) {
	if !slices.Contains(powerStates, state) {
		return nil, false, vdibroker.FieldError("powerState", "must be one of Running, Starting, Stopping, Stopped, Unknown; got %q", state)
	}
	cond, args := "", []any(nil)
	if len(from) > 0 {
		cond = ` AND (CASE WHEN power_state = '' THEN 'Unknown' ELSE power_state END) IN (?` + strings.Repeat(`, ?`, len(from)-1) + `)`
		for _, f := range from {
			args = append(args, f)
		}
	}
	return s.setPowerState(ctx, pool, host, state, now, cond, args...)
}

// RestartStart implements vdibroker.PowerStore (R-A4).
func (s *DB) RestartStart(ctx context.Context, pool, host string, startedBy, silentSince, now time.Time) (*vdibroker.SessionHost, bool, error) {
	// No heartbeat after the Starting record at silentSince or later
	// (vdibroker.ShuttingDownAfterStart).
	return s.setPowerState(ctx, pool, host, vdibroker.PowerStarting, now,
		` AND power_state = ? AND power_state_time > 0 AND power_state_time <= ?
		AND (last_heartbeat IS NULL OR last_heartbeat <= power_state_time OR last_heartbeat < ?)`,
		vdibroker.PowerStarting, ns(startedBy), ns(silentSince))
}

// setPowerState records state at now while the host's row meets cond (SQL
// ANDed to the UPDATE's WHERE, with its args), and says whether it did.
func (s *DB) setPowerState(ctx context.Context, pool, host, state string, now time.Time, cond string, condArgs ...any) (*vdibroker.SessionHost, bool, error) {
	var out *vdibroker.SessionHost
	changed := false
	err := s.write(ctx, func(t *tx) error {
		h, err := t.getHost(ctx, pool, host, true)
		if err != nil {
			return err
		}
		before := *h
		// The condition is the UPDATE's own: on PostgreSQL a writer that
		// waited for another's lock sees the row that one left (a read
		// of the joined host row before the wait may be older), so two
		// replicas cannot both claim one stopped host.
		q := `UPDATE session_hosts SET power_state = ?, power_state_time = ? WHERE host_pool = ? AND name = ?` + cond
		args := append([]any{state, ns(now), pool, host}, condArgs...)
		t.touch(pool, host)
		n, err := t.exec(ctx, q, args...)
		if err != nil {
			return err
		}
		if n == 0 {
			// Nothing changed, so nothing is recorded: a refusal is the
			// caller's to record.
			t.audit = nil
			out, err = t.getHost(ctx, pool, host, false)
			return err
		}
		if err := t.syncNewSessionsAllowed(ctx, pool, host); err != nil {
			return err
		}
		if out, err = t.getHost(ctx, pool, host, false); err != nil {
			return err
		}
		t.audited(&before, out)
		changed = true
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
