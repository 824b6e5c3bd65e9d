package http_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestPodConnectRetryAfter_RG1: a peer pod's refusal of a global
// connect's member connect keeps its Retry-After when it is a 429 or a
// 503 of a vdibroker pod: a member pool whose host is starting
// (HostStarting, R-A4) says when to try again there alone, and the
// global decision repeats it. Any other refusal, or an answer that is
// not a vdibroker pod's, carries none.
func TestPodConnectRetryAfter_RG1(t *testing.T) {
	const starting = `{"error":{"code":"HostStarting","message":"host pool \"west\" has no capacity now; session host \"w-01\" is starting"}}`
	for _, tc := range []struct {
		name, header string
		status       int
		body         string
		want         time.Duration
	}{
		{"host starting", "30", 503, starting, 30 * time.Second},
		{"too many", "2", 429, `{"error":{"code":"TooManyRequests","message":"slow down"}}`, 2 * time.Second},
		{"host starting, no Retry-After", "", 503, starting, 0},
		{"a conflict's header is not taken", "30", 409, `{"error":{"code":"Conflict","message":"changed"}}`, 0},
		{"not a vdibroker answer", "5", 503, `busy`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peer := refusingPeer(t, tc.header, tc.status, tc.body)
			_, err := vhttp.NewPodClient("pod1", []byte(testFedSecret)).Connect(t.Context(), vdibroker.Pod{Name: "pod0", URL: peer.URL},
				vdibroker.PodConnectRequest{})
			if err == nil {
				t.Fatal("a refusal answered no error")
			}
			if got := vdibroker.ErrorRetryAfter(err); got != tc.want {
				t.Errorf("Retry-After %q: RetryAfter %v, want %v (%v)", tc.header, got, tc.want, err)
			}
		})
	}
}

// TestPodConnectReason_RA4: a peer pod's refusal keeps its error's
// reason when it has the API's form (a member pool's Personal desktop
// that only an administrator's start brings back,
// ReasonStartByAdministrator, which the portal of the pod she connected
// to says in her words); one of another shape (spaces, a colon, control
// characters, past 64 characters) is not taken.
func TestPodConnectReason_RA4(t *testing.T) {
	body := func(reason string) string {
		r, _ := json.Marshal(reason)
		return `{"error":{"code":"NoCapacity","message":"session host \"w-01\", assigned to alice, was started 11m0s ago","reason":` + string(r) + `}}`
	}
	for _, tc := range []struct{ name, reason, want string }{
		{"an administrator's start", vdibroker.ReasonStartByAdministrator, vdibroker.ReasonStartByAdministrator},
		{"a newer pod's reason", "SomethingNew2", "SomethingNew2"},
		{"none", "", ""},
		{"words", "Start By Administrator", ""},
		{"a colon", "A:b", ""},
		{"a control character", "Start\u0007", ""},
		{"too long", "A" + strings.Repeat("b", 64), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peer := refusingPeer(t, "", 503, body(tc.reason))
			_, err := vhttp.NewPodClient("pod1", []byte(testFedSecret)).Connect(t.Context(), vdibroker.Pod{Name: "pod0", URL: peer.URL},
				vdibroker.PodConnectRequest{})
			if vdibroker.ErrorCode(err) != vdibroker.ENoCapacity || vdibroker.ErrorReason(err) != tc.want {
				t.Errorf("reason %q: %q %q (%v), want NoCapacity %q", tc.reason, vdibroker.ErrorCode(err), vdibroker.ErrorReason(err), err, tc.want)
			}
		})
	}
}
