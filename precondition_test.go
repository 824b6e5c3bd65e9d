package vdibroker_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// TestPreconditionStrongCompare_RE13: If-Match compares entity tags
// strongly (RFC 9110 8.8.3.2), character by character: only the tag a
// GET answered, "<Unix ns>", matches the object; another spelling of the
// same number ("+n", "0n") is a tag the broker did not make and never
// matches, nor does a weak one.
func TestPreconditionStrongCompare_RE13(t *testing.T) {
	updated := time.Unix(1_700_000_000, 123456789)
	n := strconv.FormatInt(updated.UnixNano(), 10)
	check := func(ifMatch string) error {
		t.Helper()
		h := http.Header{}
		h.Set("If-Match", ifMatch)
		pre, err := vdibroker.ParsePrecondition(h)
		if err != nil {
			t.Fatalf("If-Match %s: %v", ifMatch, err)
		}
		return pre.Check(`application group "g"`, true, updated)
	}
	if err := check(vdibroker.ETag(updated)); err != nil {
		t.Errorf("the object's own ETag %s: %v", vdibroker.ETag(updated), err)
	}
	if err := check(`"1", ` + vdibroker.ETag(updated)); err != nil {
		t.Errorf("a list with the object's ETag: %v", err)
	}
	for _, tag := range []string{`"+` + n + `"`, `"0` + n + `"`, `W/"` + n + `"`, `"` + n + `0"`} {
		if err := check(tag); vdibroker.ErrorCode(err) != vdibroker.EPreconditionFailed {
			t.Errorf("If-Match %s on the object of ETag %q: %v, want PreconditionFailed", tag, n, err)
		}
	}
}

// TestPreconditionMessages_RE13: each refusal says what was found and
// that nothing was written; If-Match on an object that is not there does
// not claim it existed when read (If-Match: * names no read).
func TestPreconditionMessages_RE13(t *testing.T) {
	const what = `application group "g"`
	for _, c := range []struct {
		name    string
		pre     vdibroker.Precondition
		exists  bool
		present []string
	}{
		{"If-None-Match over one", vdibroker.Precondition{Absent: true}, true, []string{what, "exists already", "not replaced"}},
		{"If-Match on none", vdibroker.Precondition{Exists: true}, false, []string{what, "does not exist", "nothing was written"}},
		{"stale If-Match", vdibroker.Precondition{Exists: true, Versions: []time.Time{time.Unix(0, 1)}}, true,
			[]string{what, "changed since it was read", "nothing was written", "read it again"}},
	} {
		err := c.pre.Check(what, c.exists, time.Unix(0, 2))
		if vdibroker.ErrorCode(err) != vdibroker.EPreconditionFailed {
			t.Fatalf("%s: %v, want PreconditionFailed", c.name, err)
		}
		for _, s := range c.present {
			if !strings.Contains(vdibroker.ErrorMessage(err), s) {
				t.Errorf("%s: %q lacks %q", c.name, vdibroker.ErrorMessage(err), s)
			}
		}
	}
}
