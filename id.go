package vdibroker

import (
	"encoding/hex"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// NewID returns a new identifier for a stored row: user sessions (placed,
// outage-placed and adopted alike), commands, API tokens and registration
// tokens. It is a UUIDv7 written as 32 lowercase hex digits without dashes:
// 48 bits of Unix milliseconds, then a sub-millisecond sequence and random
// bits. IDs made one after another in a process are strictly increasing,
// and IDs of different replicas sort by their millisecond, so
//
//   - paging by ID (?after=, SessionFilter.After) lists rows oldest first
//     and a view's catch-up reads exactly the sessions newer than the last
//     it read;
//   - inserts append to the right edge of the primary key's B-tree instead
//     of dirtying a random page each (which doubled the pages a group
//     commit writes on SQLite).
//
// An ID names a row; it is not a secret (its first digits are a time).
// Secrets (token and credential secrets) and request IDs are not made here.
func NewID() string {
	u, err := uuid.NewV7()
	if err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	return hex.EncodeToString(u[:])
}

// IDTime returns the millisecond an ID of NewID was made in (its first 12
// hex digits); ok is false for an ID of another shape (a test's "s1", say).
func IDTime(id string) (t time.Time, ok bool) {
	if len(id) != 32 {
		return time.Time{}, false
	}
	ms, err := strconv.ParseUint(id[:12], 16, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(int64(ms)), true
}
