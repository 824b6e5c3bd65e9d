package vdibroker

import (
	"strings"
	"testing"
	"time"
)

// TestParseConnectWait (R-U4): a Go duration or whole seconds, from 0 to
// the start timeout; anything else is InvalidArgument on field wait,
// naming the range.
func TestParseConnectWait(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 0, "0": 0, "90": 90 * time.Second, "90s": 90 * time.Second, "2m": 2 * time.Minute,
		"1m30s": 90 * time.Second, "600": MaxConnectWait, "10m": MaxConnectWait} {
		if got, err := ParseConnectWait(in); err != nil || got != want {
			t.Errorf("ParseConnectWait(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"abc", "-1", "-1s", "+5s", "601", "10m1s", "1e9", "90 s", " 90", strings.Repeat("9", 40), "1h"} {
		_, err := ParseConnectWait(in)
		if ErrorCode(err) != EInvalid || ErrorField(err) != "wait" || !strings.Contains(err.Error(), "from 0s to 10m0s") {
			t.Errorf("ParseConnectWait(%q): %v; want InvalidArgument on wait naming the range", in, err)
		}
	}
}

// FuzzParseConnectWait: whatever a client sends as ?wait=, the answer is
// a wait within 0..MaxConnectWait or an error on field wait.
func FuzzParseConnectWait(f *testing.F) {
	for _, s := range []string{"", "90", "90s", "2m", "-1s", "601", "1e9", "9223372036854775807", "1h1m", "+0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseConnectWait(s)
		if err != nil {
			if ErrorField(err) != "wait" {
				t.Errorf("%q: error on field %q: %v", s, ErrorField(err), err)
			}
			return
		}
		if d < 0 || d > MaxConnectWait {
			t.Errorf("%q: wait %v out of 0..%v", s, d, MaxConnectWait)
		}
	})
}

// FuzzParseResourceID (R-U5): a resource id from a form or a path reads
// back into the resource it names, whose id is the input again; anything
// else is an error on the field given.
func FuzzParseResourceID(f *testing.F) {
	for _, s := range []string{"desktop:p1", "app:apps/word", "global:g", "app:apps", "desktop:", "x:y", "global:a/b", "app:a/b/c", "desktop:p 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		r, app, err := ParseResourceID("resource", id)
		if err != nil {
			if ErrorField(err) != "resource" {
				t.Errorf("%q: error on field %q: %v", id, ErrorField(err), err)
			}
			return
		}
		var again string
		switch {
		case r.GlobalEntitlement != "":
			again = GlobalID(r.GlobalEntitlement)
		case r.ApplicationGroup != "":
			again = AppID(r.ApplicationGroup, app)
		default:
			again = DesktopID(r.HostPool)
		}
		if again != id {
			t.Errorf("%q read back as %+v %q, whose id is %q", id, r, app, again)
		}
		if p := ConnectPath(r); !strings.HasPrefix(p, "/api/v1/") || !strings.HasSuffix(p, "/connect") || strings.Count(p, "/") != 5 {
			t.Errorf("%q: connect path %q", id, p)
		}
	})
}
