package vdibroker

import (
	"testing"
	"time"
	_ "time/tzdata" // every zone of the table loads, whatever the machine has
)

// TestWindowsTimeZones: AVD's Windows names map to CLDR's zone of
// territory 001, which evaluation loads; an IANA name is itself.
func TestWindowsTimeZones(t *testing.T) {
	for _, tc := range []struct{ tz, want string }{
		{"W. Europe Standard Time", "Europe/Berlin"},
		{"GMT Standard Time", "Europe/London"},
		{"Eastern Standard Time", "America/New_York"},
		{"Tokyo Standard Time", "Asia/Tokyo"},
		{"UTC", "Etc/UTC"},
		{"Europe/Paris", "Europe/Paris"}, // IANA names are kept
	} {
		if got := IANATimeZone(tc.tz); got != tc.want {
			t.Errorf("IANATimeZone(%q) = %q, want %q", tc.tz, got, tc.want)
		}
		loc, err := LoadTimeZone(tc.tz)
		if err != nil {
			t.Fatalf("LoadTimeZone(%q): %v", tc.tz, err)
		}
		if loc.String() != tc.want {
			t.Errorf("LoadTimeZone(%q) is %s, want %s", tc.tz, loc, tc.want)
		}
	}
	// Berlin is UTC+2 in July: 12:00 in W. Europe Standard Time is 10:00 UTC.
	loc, _ := LoadTimeZone("W. Europe Standard Time")
	if got := time.Date(2026, 7, 1, 12, 0, 0, 0, loc).UTC().Hour(); got != 10 {
		t.Errorf("12:00 W. Europe Standard Time in July is %02d:00 UTC, want 10:00", got)
	}
	for _, bad := range []string{"", "Local", "Mars Standard Time", "w. europe standard time"} {
		if _, err := LoadTimeZone(bad); err == nil {
			t.Errorf("LoadTimeZone(%q) succeeded", bad)
		}
	}
}

// TestWindowsTimeZonesAllLoad: every zone of the generated table exists
// in Go's time zone database, so no Windows name the validation accepts
// fails when a schedule is evaluated.
func TestWindowsTimeZonesAllLoad(t *testing.T) {
	if len(windowsZones) < 100 || windowsZonesCLDR == "" {
		t.Fatalf("%d Windows zones from CLDR %q", len(windowsZones), windowsZonesCLDR)
	}
	for w, z := range windowsZones {
		if _, err := time.LoadLocation(z); err != nil {
			t.Errorf("%q maps to %q, which does not load: %v", w, z, err)
		}
		if err := ValidateTimeZone("timeZone", w); err != nil {
			t.Errorf("ValidateTimeZone(%q): %v", w, err)
		}
	}
}
