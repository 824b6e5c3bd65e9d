package vdibroker

import (
	"iter"
	"time"
)

// MetricsSample is a host's stored metrics sample and its R-LI6 base: the
// number of sessions whose load can be in it (SessionHost.MetricsSessions).
type MetricsSample struct {
	Metrics  *Metrics
	Sessions int
}

// SampleSession is what the R-LI6 base needs of one of a host's open
// sessions.
type SampleSession struct {
	// Pending: placed, and the agent has not reported the user's logon
	// (R-S2).
	Pending bool
	// Since is when the session came on the host: its create time (the
	// placement, or the report that adopted it).
	Since time.Time
}

// InSample reports whether s's load can be in a sample taken at sampledAt:
// it is not Pending and was on the host at or before sampledAt.
func (s SampleSession) InSample(sampledAt time.Time) bool {
	return !s.Pending && !s.Since.After(sampledAt)
}

// MaxSampleAhead is how far after the broker's clock a sample's sampledAt
// may be and still be taken as dated (Resample): a host's clock a little
// fast (Kerberos allows 5 minutes) keeps its samples' dates.
const MaxSampleAhead = 5 * time.Minute

// Resample is R-LI6's rule for the sample a host's report carries; open
// are the host's open sessions once the report is reconciled (R-S2,
// Reconcile). It is the rule's one home: the store applies it to every
// heartbeat it records, the simulator to every simulated one, and the
// load index (package loadindex) reads the base it keeps.
//
//   - No sample, or one not newer than the stored one (same or older
//     sampledAt): the stored sample and its base stay. The agent re-sends
//     its last sample with every heartbeat (every 10 s; it samples every
//     30 s); taking the repeat as new would set the base to today's count
//     and drop the estimate of the sessions placed since the sample.
//   - A newer sample: its base counts only the sessions whose load can be
//     in it (SampleSession.InSample). Sessions placed after sampledAt, or
//     still Pending, are what loadindex.Compensate estimates.
//
// A sample without sampledAt is taken as sampled at now, newer than any
// stored one. So is, and it is kept as sampled at now, a sample dated
// more than MaxSampleAhead after now: the host's clock is wrong, or its
// credential is in other hands (R-SEC). Kept as dated, every sample its
// agent took before that date (years, for a date of 9999) would be older
// than it and ignored, and the broker would go on placing users by the
// figures a rogue report chose after its host was reset and re-keyed. A
// stored sample dated past that allowance (stored before it was bounded)
// gives way to any reported one. open is read only for a newer sample.
//
// Example: a sample of 40 % CPU with 4 sessions, then 4 placements: load
// index 80 (cpuThreshold 100: 40 + 40/4 × 4). A heartbeat repeating the
// sample keeps base 4 and index 80; a new sample taken while the 4 are
// still Pending has base 4 as well.
func Resample(stored MetricsSample, reported *Metrics, now time.Time, open iter.Seq[SampleSession]) MetricsSample {
	if reported == nil {
		return stored
	}
	at := reported.SampledAt
	ahead := now.Add(MaxSampleAhead)
	switch {
	case at.IsZero():
		at = now
	case at.After(ahead):
		at = now
		dated := *reported
		dated.SampledAt = now
		reported = &dated
	case stored.Metrics != nil && !at.After(stored.Metrics.SampledAt) && !stored.Metrics.SampledAt.After(ahead):
		return stored
	}
	n := 0
	for s := range open {
		if s.InSample(at) {
			n++
		}
	}
	return MetricsSample{Metrics: reported, Sessions: n}
}
