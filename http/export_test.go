package http

import (
	"context"
	"time"

	"github.com/vdibroker/vdibroker/internal/ratelimit"
)

// HeartbeatBuckets is how many heartbeat rate buckets s holds (R-SEC).
func HeartbeatBuckets(s *Server) int { return s.heartbeats.Len() }

// UserWriteBuckets is how many end users' write buckets s holds (R-SEC).
func UserWriteBuckets(s *Server) int { return s.userWrites.Len() }

// BoundUserWriteBuckets gives s a write budget of at most max buckets,
// for a test of a full map (before any request).
func BoundUserWriteBuckets(s *Server, max int) {
	s.userWrites = ratelimit.NewBounded(UserWritesPerSecond, UserWriteBurst, max)
}

// KeepReadMarkOn is s.KeepReadMark with the test's ticks; moved is
// called after each move was logged.
func KeepReadMarkOn(ctx context.Context, s *Server, ticks <-chan time.Time, moved func()) {
	s.keepReadMark(ctx, ticks, moved)
}

// BoundNewHosts gives s's registration tokens a burst of new hosts of
// burst, the rate unchanged (R-SEC).
func BoundNewHosts(s *Server, burst int) {
	s.newHosts = ratelimit.New(NewHostsPerTokenPerMinute/60.0, burst)
}

// NewHostBuckets is how many registration tokens have a bucket of new
// hosts in s (R-SEC).
func NewHostBuckets(s *Server) int { return s.newHosts.Len() }

// NewHostsSpent reports whether registration token id's new hosts are
// spent in s at its clock, making no bucket (R-SEC).
func NewHostsSpent(s *Server, id string) bool { return s.newHosts.Spent(id, s.now()) }
