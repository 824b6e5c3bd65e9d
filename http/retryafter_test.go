package http

import (
	nethttp "net/http"
	"strconv"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// FuzzRetryAfter: whatever a broker, a peer pod or a proxy sends as
// Retry-After, the wait
// taken is none or whole seconds from 1 s to maxRetryAfter, and only
// from plain digits whose number it is (no sign, no fraction, no date).
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"2", "3600", "3601", "0", "-5", "+5", "1.5", "0x10", "007", "1_0", " 5", "Wed, 21 Oct 2015 07:28:00 GMT", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d := retryAfter(v)
		if d == 0 {
			return
		}
		if d < time.Second || d > maxRetryAfter || d%time.Second != 0 {
			t.Fatalf("%q: %v, want 0 or whole seconds in 1s..%v", v, d, maxRetryAfter)
		}
		for _, r := range v {
			if r < '0' || r > '9' {
				t.Fatalf("%q, not only digits, taken as %v", v, d)
			}
		}
		if n, err := strconv.ParseUint(v, 10, 64); err != nil || time.Duration(n)*time.Second != d {
			t.Fatalf("%q taken as %v, not its number of seconds", v, d)
		}
	})
}

// TestErrorAnswerRetryAfter: the client keeps a 429's or a 503's
// Retry-After of whole seconds 1..3600, plain digits only, as the
// error's RetryAfter (the CLI's "try again in N s"); anything else, and
// any other status, is no wait at all.
func TestErrorAnswerRetryAfter(t *testing.T) {
	const body = `{"error": {"code": "TooManyRequests", "message": "slow down"}}`
	for _, tc := range []struct {
		name       string
		status     int
		retryAfter []string // the header's values, in order
		want       time.Duration
	}{
		{"429 with seconds", 429, []string{"2"}, 2 * time.Second},
		{"503 with seconds", 503, []string{"30"}, 30 * time.Second},
		{"the least", 429, []string{"1"}, time.Second},
		{"an hour, the most", 429, []string{"3600"}, time.Hour},
		{"past an hour", 429, []string{"3601"}, 0},
		{"many digits", 429, []string{"99999999999999999999"}, 0},
		{"leading zeros are digits", 503, []string{"007"}, 7 * time.Second},
		{"zero", 429, []string{"0"}, 0},
		{"negative", 429, []string{"-5"}, 0},
		{"a sign", 429, []string{"+5"}, 0},
		{"a fraction", 429, []string{"1.5"}, 0},
		{"spaces", 429, []string{" 5"}, 0},
		{"an HTTP date", 503, []string{"Wed, 21 Oct 2015 07:28:00 GMT"}, 0},
		{"hex", 429, []string{"0x10"}, 0},
		{"none", 429, nil, 0},
		{"empty", 503, []string{""}, 0},
		{"the first of two", 429, []string{"4", "9"}, 4 * time.Second},
		// Retry-After means when to try again on 429 and 503 only.
		{"409", 409, []string{"5"}, 0},
		{"500", 500, []string{"5"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &nethttp.Response{StatusCode: tc.status, Status: nethttp.StatusText(tc.status), Header: nethttp.Header{}}
			for _, v := range tc.retryAfter {
				resp.Header.Add("Retry-After", v)
			}
			err := decodeErrorAnswer(resp, []byte(body))
			if got := vdibroker.ErrorRetryAfter(err); got != tc.want {
				t.Errorf("HTTP %d, Retry-After %q: RetryAfter %v, want %v", tc.status, tc.retryAfter, got, tc.want)
			}
			if vdibroker.ErrorCode(err) != "TooManyRequests" {
				t.Errorf("code %q, want the body's", vdibroker.ErrorCode(err))
			}
		})
	}
}
