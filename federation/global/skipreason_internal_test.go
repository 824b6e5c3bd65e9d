package global

import (
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
)

// TestSkipReasonSaysWhenToTryAgain_RG1: a member pool passed over
// because its host is starting (HostStarting, R-A4) is listed in the
// global decision with when to try again, which the pool's answer says
// in its Retry-After alone; a refusal without one says nothing of it.
func TestSkipReasonSaysWhenToTryAgain_RG1(t *testing.T) {
	starting := `host pool "west" has no capacity now; session host "w-01" is starting`
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"host starting, Retry-After 30",
			&vdibroker.Error{Code: vdibroker.EHostStarting, Message: starting, RetryAfter: 30 * time.Second},
			"HostStarting: " + starting + " (try again in 30 s)"},
		// A part of a second is a whole second more, as the CLI says it.
		{"a part of a second", &vdibroker.Error{Code: vdibroker.EHostStarting, Message: starting, RetryAfter: 1500 * time.Millisecond},
			"HostStarting: " + starting + " (try again in 2 s)"},
		{"no Retry-After (an older pod's answer)", &vdibroker.Error{Code: vdibroker.EHostStarting, Message: starting},
			"HostStarting: " + starting},
		{"no capacity", vdibroker.Errorf(vdibroker.ENoCapacity, "full"), federation.SkipNoCapacity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := skipReason(tc.err); got != tc.want {
				t.Errorf("skipReason: %q, want %q", got, tc.want)
			}
		})
	}
}
