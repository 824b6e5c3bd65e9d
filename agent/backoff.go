package agent

import (
	"math/rand/v2"
	"time"
)

// backoff spaces retries against an unreachable broker: base, 2×base, 4×base
// … up to max, each with "equal jitter" (a uniform draw between half the step
// and the full step) so a fleet of agents that lost the broker together does
// not come back in lock step.
type backoff struct {
	base, max time.Duration
	rand      *rand.Rand
	n         int
}

// next returns the delay before the next retry.
func (b *backoff) next() time.Duration {
	d := b.base
	for i := 0; i < b.n && d < b.max; i++ {
		d *= 2
	}
	if d > b.max {
		d = b.max
	}
	b.n++
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + time.Duration(b.rand.Int64N(int64(d-half)+1))
}

// reset starts over after a success.
func (b *backoff) reset() { b.n = 0 }
