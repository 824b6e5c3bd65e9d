//go:build unix

package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// TestCLIPeerWaitNotAnsweringPeer_RG5: a peer that accepts the connection
// and never answers held `federation show` and `globalentitlement
// list/show` for the pod's whole --pod-timeout, and then showed it as a
// timeout. With --peer-wait (default the console's 1s) the real CLI
// against a real pod on loopback answers while the peer's call is still
// under way, the peer's row saying it is not answering and when it was
// asked, its member's error saying the same; a --peer-wait the API would
// refuse is a usage error naming the flag.
func TestCLIPeerWaitNotAnsweringPeer_RG5(t *testing.T) {
	bin := selfBin(t)
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "federation.secret")
	if err := os.WriteFile(secretFile, []byte(fedSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var calls, blocked atomic.Int64
	release := make(chan struct{})
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		blocked.Add(1)
		defer blocked.Add(-1)
		select { // accepted, never answered
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(peer.Close)
	t.Cleanup(func() { close(release) }) // before peer.Close, which waits for the handlers
	// A pod timeout far longer than any CLI run, even under -race on a
	// loaded machine: the peer's call (started by the document's put, or
	// by the first CLI run, and shared) is still under way at every read,
	// so each answer is the page wait's, never the call's timeout.
	fra1 := startPod(t, bin, dir, secretFile, "fra1", "emea", "--pod-timeout", "2m")
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "emea"}},
		Pods: []vdibroker.Pod{{Name: "fra1", Site: "emea", URL: fra1.url}, {Name: "nyc1", Site: "emea", URL: peer.URL}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "office", AllUsers: true,
			Members: []vdibroker.Member{{Pod: "fra1", HostPool: "pool-a"}, {Pod: "nyc1", HostPool: "pool-b"}}}}}
	if _, err := fra1.client.PutFederation(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (string, int) {
		t.Helper()
		out, err := exec.Command(bin, append(args, "--server", fra1.url, "--token", fedAdmin)...).CombinedOutput()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return string(out), 0
		case errors.As(err, &ee):
			return string(out), ee.ExitCode()
		}
		t.Fatalf("%v: %v", args, err)
		return "", 0
	}
	rowOf := func(out, prefix string) string {
		for l := range strings.SplitSeq(out, "\n") {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		return ""
	}
	for _, args := range [][]string{
		{"federation", "show", "--peer-wait", "200ms"},
		{"federation", "show"}, // the default, 1s
	} {
		out, code := cli(args...)
		stillBlocked := blocked.Load()
		if code != 0 || !strings.Contains(rowOf(out, "nyc1"), "not answering (asked ") {
			t.Errorf("%v: exit %d, want nyc1's row to say it is not answering:\n%s", args, code, out)
		}
		if calls.Load() == 0 || stillBlocked == 0 {
			t.Errorf("%v: the peer was called %d times, %d still blocked when the CLI answered; want the answer while its call is under way", args, calls.Load(), stillBlocked)
		}
	}
	out, code := cli("globalentitlement", "show", "--name", "office", "--peer-wait", "200ms")
	if row := rowOf(out, "nyc1"); code != 0 || !strings.Contains(row, "pool-b") || !strings.Contains(row, "not answering: no answer within 200ms") {
		t.Errorf("globalentitlement show: exit %d, want nyc1/pool-b not answering within 200ms:\n%s", code, out)
	}
	if out, code := cli("globalentitlement", "list", "--peer-wait", "200ms", "-o", "json"); code != 0 || !strings.Contains(out, "not answering: no answer within 200ms") {
		t.Errorf("globalentitlement list: exit %d, want nyc1's member not answering within 200ms:\n%s", code, out)
	}
	for _, bad := range []string{"2m", "500us", "-1s"} {
		if out, code := cli("federation", "show", "--peer-wait", bad); code != 2 || !strings.Contains(out, "--peer-wait: must be 0 (the pod timeout) or 1ms..1m, got ") {
			t.Errorf("federation show --peer-wait %s: exit %d, want 2 naming the flag and its range:\n%s", bad, code, out)
		}
	}
}
