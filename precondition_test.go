package vdibroker_test

import (
	"net/http"
	"strconv"
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
