package portal_test

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/syncbuf"
	"github.com/vdibroker/vdibroker/portal"
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

// TestLaunchFileHEADTakesNothing_RU7: the mux sends a HEAD to the file's
// GET handler, and the file is handed once: a HEAD (a link checker's, a
// download manager's asking the size first) is 405 with Allow: GET and
// leaves the file for her GET, which a HEAD that took it would have lost
// (its answer has no body). A HEAD is no form: it is not refused as a
// forged one, which audited its path, the launch's id.
func TestLaunchFileHEADTakesNothing_RU7(t *testing.T) {
	rec := &refusals{}
	e := newEnv(t, func(c *portal.Config) { c.Refusals = rec })
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	launch := alice.launch(csrf, "desktop:desk")
	if s := alice.await(launch, ended); s.State != "ready" {
		t.Fatalf("alice's launch: %+v", s)
	}
	for range 2 {
		req, _ := http.NewRequest(http.MethodHead, alice.url+launch+"/file", nil)
		res, _ := alice.do(req)
		if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET" {
			t.Errorf("HEAD of the file: %d, Allow %q; want 405, Allow GET", res.StatusCode, res.Header.Get("Allow"))
		}
	}
	// Nor is it a forged form (it carries none): refused 403 as one, it
	// was recorded for the audit trail with its path, the launch's id.
	if got := rec.list(); len(got) != 0 {
		t.Errorf("HEADs recorded as refusals: %q", got)
	}
	res, body := alice.get(launch + "/file")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/x-rdp" || !strings.Contains(body, "full address:s:") {
		t.Fatalf("the file after HEADs: %d %q %q", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	// Handed once: the GET took it.
	if res, _ := alice.get(launch + "/file"); res.StatusCode != http.StatusNotFound {
		t.Errorf("the file again: %d, want 404", res.StatusCode)
	}
}

// TestHomeHEADKeepsTheFlash_RU3: her home page's GET takes the one-shot
// message her last action left (a logoff's, say) and shows it; a HEAD,
// which the mux sends to the same handler and signedIn now lets through
// as a GET without its body (a link checker's, a tab's preload), shows
// nothing, so it leaves the message for her GET: taken by the HEAD, it
// was lost to her, and she never read that her logoff was under way.
func TestHomeHEADKeepsTheFlash_RU3(t *testing.T) {
	e := newEnv(t, nil)
	c, err := e.admin.Connect(t.Context(), "desk", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	res, _ := alice.post("/portal/sessions/desk/"+c.SessionID+"/logoff", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("her logoff: %d, want 303", res.StatusCode)
	}
	next := res.Header.Get("Location")
	for range 2 {
		req, _ := http.NewRequest(http.MethodHead, alice.url+next, nil)
		if res, _ := alice.do(req); res.StatusCode != http.StatusOK {
			t.Fatalf("HEAD of her page: %d, want 200", res.StatusCode)
		}
	}
	// The Pending session ended at once: "has been logged off" (or, were
	// it still listed, "is being logged off"); either is the flash.
	_, home := alice.get(next)
	if !strings.Contains(home, `<p class="flash" id="flash"`) {
		t.Errorf("her page after HEADs of it: no flash of her logoff:\n%s", home)
	}
	// Taken by her GET: shown once.
	if _, again := alice.get(next); strings.Contains(again, `<p class="flash" id="flash"`) {
		t.Errorf("the flash shown again:\n%s", again)
	}
}
