package store_test

import (
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/store"
)

// TestDatabaseTime: the database server's clock, read between two
// readings of this machine's (PostgreSQL here runs on this machine), to
// SQLite's millisecond; replicas compare theirs with it
// (vdibroker.ClockTolerance).
func TestDatabaseTime(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		s := tg.open(t, store.Options{})
		for range 3 {
			before := time.Now()
			got, err := s.DatabaseTime(t.Context())
			after := time.Now()
			if err != nil {
				t.Fatal(err)
			}
			if got.Before(before.Truncate(time.Millisecond)) || got.After(after) || got.Location() != time.UTC {
				t.Fatalf("the database's clock read %s, between %s and %s on this machine's; want within, in UTC", got, before, after)
			}
		}
	})
}
