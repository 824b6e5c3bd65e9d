package vdibroker

import (
	"strings"
	"time"
)

// DurationFlag is d as an administrator types it in a duration flag
// (Go's syntax, which takes no days): time.Duration's String without the
// zero units it ends with, so a hint or a range names 720h, 10m, 1h30m or
// 24h, not 720h0m0s or 10m0s. What a flag reads it as is d again.
func DurationFlag(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
