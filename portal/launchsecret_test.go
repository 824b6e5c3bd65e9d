package portal_test

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker/internal/syncbuf"
)

// TestLaunchIDNotInTheAccessLog_RSEC_RU7: a launch's id is its secret
// (its file is sealed under it), and its page polls its status with the
// id in the path: the server's access log, which operators read and ship
// elsewhere, writes those paths with the id left out
// (/portal/launches/{id}/status), for the page, the status and the file
// alike, and holds the id nowhere.
func TestLaunchIDNotInTheAccessLog_RSEC_RU7(t *testing.T) {
	e := newEnv(t, nil)
	var logs syncbuf.Buffer
	e.logger = slog.New(slog.NewJSONHandler(&logs, nil))
	alice := e.browser().at(e.replica())
	csrf := alice.signIn(e.userToken("alice"))
	launch := alice.launch(csrf, "desktop:desk")
	if s := alice.await(launch, ended); s.State != "ready" {
		t.Fatalf("alice's launch: %+v", s)
	}
	alice.get(launch)
	if res, _ := alice.get(launch + "/file"); res.StatusCode != http.StatusOK {
		t.Fatalf("the file: %d", res.StatusCode)
	}
	// A path the mux cleans (and redirects) holds the id all the same.
	alice.get(strings.Replace(launch, "/launches/", "/launches//", 1) + "/status")
	id := strings.TrimPrefix(launch, "/portal/launches/")
	if strings.Contains(logs.String(), id) {
		t.Errorf("the log holds the launch's id %s:\n%s", id, logs.String())
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var line struct{ Msg, Path string }
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("a log line: %v: %s", err, sc.Text())
		}
		if line.Msg == "request" {
			seen[line.Path] = true
		}
	}
	// The lines are there, the id left out: what operators need to read
	// (which launch route, how often) is kept.
	for _, want := range []string{"/portal/launch", "/portal/launches/{id}", "/portal/launches/{id}/status", "/portal/launches/{id}/file"} {
		if !seen[want] {
			t.Errorf("no access line of %s; the paths logged: %v", want, seen)
		}
	}
}
