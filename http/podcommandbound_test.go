package http_test

import (
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestPodSessionCommandsBounded_RG5 (R-U3, R-SEC): a peer's logoff or
// disconnect of a session here (POST /api/v1/pod/sessions/command,
// signed) is an audit entry of this pod's, even when it asks again for a
// command still queued (R-S4: each asker has her entry), and the pod
// asked bounded its principals only. A holder of the federation secret
// signing as a pod of the document, asking for the disconnect of one
// Active session over and over, wrote an entry at each call, as fast as
// the nonce budget allows (60,000 a minute). PodSessionCommandsPerPod
// are taken at once, then 429 with Retry-After, recorded at most once;
// another pod's are not refused for it, and the pod is taken again once
// its bucket refilled.
func TestPodSessionCommandsBounded_RG5(t *testing.T) {
	envs := fedPods(t, 3, 1, 5, vdibroker.DistributionNone)
	far := envs[1]
	far.clock.Freeze() // the bucket refills by pod1's clock alone
	id := far.mustConnect("office-pod1", "alice").SessionID
	far.heartbeat("pod1-h001", vdibroker.AgentSession{ID: "1", User: "alice", State: vdibroker.StateActive})
	pod1 := vdibroker.Pod{Name: "pod1", URL: far.urls[0]}
	disconnect := func(from string) error {
		_, err := vhttp.NewPodClient(from, []byte(testFedSecret)).SessionCommand(t.Context(), pod1,
			vdibroker.PodSessionCommandRequest{User: "alice", ID: id, HostPools: []string{"office-pod1"}, Command: vdibroker.CommandDisconnect})
		return err
	}
	audited := func() int {
		t.Helper()
		list, err := far.admin.ListAudit(t.Context(), vhttp.AuditQuery{Action: "usersession.disconnect", Target: "hostpools/office-pod1/usersessions/" + id})
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	for i := range vhttp.PodSessionCommandsPerPod {
		if err := disconnect("pod0"); err != nil {
			t.Fatalf("pod0's disconnect %d of %d: %v", i+1, vhttp.PodSessionCommandsPerPod, err)
		}
	}
	for range 20 {
		err := disconnect("pod0")
		wantCode(t, err, vdibroker.ETooManyRequests, "pod pod0 logs off or disconnects sessions here faster than 600 a minute")
	}
	// The disconnects taken, each an entry; the 20 refusals from one
	// address are counted, one written at most (RecordRefusal).
	if got := audited(); got < vhttp.PodSessionCommandsPerPod || got > vhttp.PodSessionCommandsPerPod+1 {
		t.Errorf("%d usersession.disconnect entries after %d disconnects and 20 refused, want %d or one more", got, vhttp.PodSessionCommandsPerPod, vhttp.PodSessionCommandsPerPod)
	}
	// Through pod0's own API, what pod1 refuses pod0 is said with pod1's
	// Retry-After, 503 PodUnavailable: an administrator reads pod1's
	// bound, an end user is not sent to an administrator for it (it is
	// all of pod0's users' bound, not hers), and both know when to try
	// again.
	near := envs[0]
	path := "/api/v1/users/alice/globalsessions/pod1/" + id + "/disconnect"
	for _, tc := range []struct{ who, token, want, not string }{
		{"the admin", adminToken, "faster than 600 a minute", ""},
		{"alice", near.userToken("alice", nil), "takes no more logoffs and disconnects from this pod for now", "administrator"},
	} {
		res, ve, raw := rawDoAt(t, near.urls[0], "POST", path, tc.token, "{}")
		if res.StatusCode != 503 || ve == nil || ve.Code != vdibroker.EPodUnavailable || res.Header.Get("Retry-After") != "1" ||
			!strings.Contains(ve.Message, tc.want) || tc.not != "" && strings.Contains(ve.Message, tc.not) {
			t.Errorf("%s's disconnect through pod0 while pod1 refuses pod0: %d Retry-After %q %s; want 503 PodUnavailable, Retry-After 1, saying %q",
				tc.who, res.StatusCode, res.Header.Get("Retry-After"), raw, tc.want)
		}
	}
	if err := disconnect("pod2"); err != nil {
		t.Errorf("pod2's disconnect while pod0 is refused: %v", err)
	}
	far.clock.Advance(time.Second / 10) // one call's worth of the bucket (600 a minute)
	if err := disconnect("pod0"); err != nil {
		t.Errorf("pod0's disconnect once its bucket refilled: %v", err)
	}
}
