package vdibroker

import (
	"fmt"
	"strings"
	"time"
)

//go:generate go run ./internal/windowszones -cldr-core 48.2.0 -o windowszones_gen.go

// A scaling plan's time zone is an IANA name ("Europe/Berlin") or, as
// Azure Virtual Desktop writes them, a Windows name ("W. Europe Standard
// Time"). The plan keeps the name its admin gave, so what they read back
// is what they wrote; schedules are evaluated in the IANA zone CLDR maps
// the Windows name to (windowsZones, generated from CLDR's windowsZones
// data: the zone of territory 001).

// IANATimeZone returns the IANA zone of tz: the Windows name's zone when
// tz is a Windows name ("W. Europe Standard Time" is "Europe/Berlin"), tz
// itself otherwise. It does not check that the zone exists
// (LoadTimeZone does).
func IANATimeZone(tz string) string {
	if z, ok := windowsZones[tz]; ok {
		return z
	}
	return tz
}

// IsWindowsTimeZone reports whether tz is a Windows time-zone name.
func IsWindowsTimeZone(tz string) bool {
	_, ok := windowsZones[tz]
	return ok
}

// LoadTimeZone returns the location of a plan's time zone, an IANA or a
// Windows name. "Local" and "" are refused: they would be the broker's own
// zone (UTC for ""), which differs between replicas.
func LoadTimeZone(tz string) (*time.Location, error) {
	if tz == "" || tz == "Local" {
		return nil, fmt.Errorf("time zone %q: not an IANA or Windows time zone", tz)
	}
	return time.LoadLocation(IANATimeZone(tz))
}

// ValidateTimeZone checks a time zone name for field: an IANA name
// ("Europe/Berlin", "UTC") or a Windows name ("W. Europe Standard Time").
// "Local" is refused: it would be the broker's own zone, which differs
// between replicas.
func ValidateTimeZone(field, tz string) error {
	const want = "an IANA time zone such as Europe/Berlin or UTC, or a Windows time zone such as W. Europe Standard Time"
	switch tz {
	case "":
		return FieldError(field, "is required: %s", want)
	case "Local":
		return FieldError(field, "must be %s, not Local (the broker's zone)", want)
	}
	if _, err := LoadTimeZone(tz); err != nil {
		if w := windowsZoneFold(tz); w != "" {
			return FieldError(field, "must be %s, got %q: did you mean %q?", want, tz, w)
		}
		return FieldError(field, "must be %s, got %q", want, tz)
	}
	return nil
}

// windowsZoneFold returns the Windows name that equals tz but for case
// and surrounding spaces ("" when none does).
func windowsZoneFold(tz string) string {
	tz = strings.TrimSpace(tz)
	for w := range windowsZones {
		if strings.EqualFold(w, tz) {
			return w
		}
	}
	return ""
}
