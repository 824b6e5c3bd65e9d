package store

import (
	"context"
	"fmt"
	"time"

	"github.com/vdibroker/vdibroker"
)

// issueTime returns the update time of a write of a host pool, an
// application group, an application or a scaling plan, whose ETag it is
// (R-E13): now, or past the last time issued to any of them by any
// replica (etag_clock, a row this transaction locks until it commits).
// No two writes share an ETag then, not even an object's last write and
// the create of the object made again under its name after a delete,
// whose own clock may be behind (another replica, a clock stepped back)
// or tick coarsely: a tag read before the delete never matches the new
// object. after, when not zero, is the object's update time before this
// write, which the new one passes too.
func (t *tx) issueTime(ctx context.Context, now, after time.Time) (time.Time, error) {
	if !after.IsZero() && !now.After(after) {
		now = after.Add(time.Nanosecond)
	}
	var last int64
	err := t.row(ctx, `UPDATE etag_clock SET last = CASE WHEN last < ? THEN ? ELSE last + 1 END WHERE id = 1 RETURNING last`,
		ns(now), ns(now)).Scan(&last)
	if err != nil {
		return time.Time{}, fmt.Errorf("issue an update time: %w", err)
	}
	return fromNS(last), nil
}

// checkPre checks a write's precondition (R-E13) on what, which exists
// or not; updated reads its update time when it does.
func checkPre(pre vdibroker.Precondition, what string, exists bool, updated func() time.Time) error {
	var ut time.Time
	if exists {
		ut = updated()
	}
	return pre.Check(what, exists, ut)
}

// missing answers a write of what, which is not there (notFound, its
// NotFound): PreconditionFailed when pre wants it to exist (If-Match, as
// a PUT's), else notFound.
func missing(pre vdibroker.Precondition, what string, notFound error) error {
	if err := pre.Check(what, false, time.Time{}); err != nil {
		return err
	}
	return notFound
}
