package portal_test

import (
	"context"
	"encoding/json"
	"html"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/console"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/syncbuf"
	"github.com/vdibroker/vdibroker/internal/webguard"
	"github.com/vdibroker/vdibroker/portal"
)

// TestLaunch_RU1_RU7: alice's page lists exactly her resources (the
// feed, R-U5), not bob's; opening her desktop hands its .rdp file once,
// as application/x-rdp named after the desktop, to her browser only:
// bob's browser, signed in, gets neither the status nor the file, and
// neither does a second browser of alice's own (R-U7). The launch is in
// the audit trail.
func TestLaunch_RU1_RU7(t *testing.T) {
	e := newEnv(t, nil)
	alice, bob := e.browser(), e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	bobCSRF := bob.signIn(e.userToken("bob"))
	_, home := alice.get("/portal/")
	for _, want := range []string{`data-id="desktop:desk"`, "Office desktop", `data-id="desktop:cold"`, "Cold lab", portal.Prefix + "icons/desktop.svg"} {
		if !strings.Contains(home, want) {
			t.Errorf("alice's page lacks %q", want)
		}
	}
	if strings.Contains(home, "desktop:other") || strings.Contains(home, "Bob&#39;s desktop") {
		t.Errorf("alice's page lists bob's desktop")
	}
	// Not in her feed: refused, nothing launched.
	res, page := alice.post("/portal/launch", url.Values{"csrf": {csrf}, "resource": {"desktop:other"}})
	refusedRequest := res.Header.Get("X-Request-Id")
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("alice opening bob's desktop: %d, want 404", res.StatusCode)
	}
	// The reference of its audit entry (below), for her helpdesk: most
	// often her assignment went since her page was shown.
	// The page cannot know whether it was hers when it was shown: it
	// says both, in each language (German and Arabic at the end).
	if !strings.Contains(page, "That is not, or no longer, one of your desktops or apps. Reference for your helpdesk: "+refusedRequest) {
		t.Errorf("the refusal's page does not give its reference %s:\n%s", refusedRequest, page)
	}
	if res, _ := alice.post("/portal/launch", url.Values{"csrf": {csrf}, "resource": {"nonsense"}}); res.StatusCode != http.StatusBadRequest {
		t.Errorf("a resource id of no form: %d, want 400", res.StatusCode)
	}

	launch := alice.launch(csrf, "desktop:desk")
	s := alice.await(launch, ended)
	if s.State != "ready" || s.File != launch+"/file" {
		t.Fatalf("alice's launch: %+v", s)
	}
	// Another signed-in user, and another browser of alice's: not theirs.
	for who, b := range map[string]*browser{"bob": bob, "alice's other browser": e.browser()} {
		if who != "bob" {
			b.signIn(e.userToken("alice"))
		}
		if code, _ := b.status(launch); code != http.StatusNotFound {
			t.Errorf("%s reads alice's launch: %d, want 404", who, code)
		}
		if res, body := b.get(launch + "/file"); res.StatusCode != http.StatusNotFound || strings.Contains(body, "full address") {
			t.Errorf("%s fetches alice's file: %d", who, res.StatusCode)
		}
	}
	_ = bobCSRF
	res, body := alice.get(launch + "/file")
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/x-rdp" ||
		res.Header.Get("Content-Disposition") != `attachment; filename="Office desktop.rdp"` ||
		!strings.Contains(body, "full address:s:desk-") {
		t.Fatalf("the file: %d %q %q\n%s", res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Content-Disposition"), body)
	}
	// Single-use. She who clicks the page's download link after the
	// file came by itself, or reloads the page, is told why there is no
	// file and what to do, not that the launch "was never yours".
	for _, path := range []string{launch + "/file", launch} {
		res, page := alice.get(path)
		if res.StatusCode != http.StatusNotFound || strings.Contains(page, "never yours") ||
			!strings.Contains(page, "a launch hands its connection file only once") || !strings.Contains(page, "Open the desktop or app again") {
			t.Errorf("%s after the file was handed: %d, want 404 saying it is handed once and to open it again:\n%s", path, res.StatusCode, page)
		}
	}
	// Audited: the launch, and before it the refused one of bob's
	// desktop (R-U7).
	list, err := e.admin.ListAudit(context.Background(), vhttp.AuditQuery{Action: "portal.launch"})
	if err != nil || len(list) != 2 || list[1].Principal.Name != "alice" || list[1].HostPool != "desk" || list[1].Outcome != vdibroker.AuditOK {
		t.Fatalf("audit of the launches: %+v, %v", list, err)
	}
	if r := list[0]; r.Principal.Name != "alice" || r.Outcome != vdibroker.AuditRefused || r.Target != "portal/resources/desktop:other" ||
		!strings.Contains(r.Error, "not in alice's feed") || refusedRequest == "" || r.RequestID != refusedRequest {
		t.Errorf("audit of the refused launch of bob's desktop (request %q): %+v", refusedRequest, r)
	}
	if list[1].RequestID == "" {
		t.Errorf("the launch's audit entry names no request")
	}
	for lang, want := range map[string]string{
		"de": "Das ist nicht oder nicht mehr einer Ihrer Desktops oder Apps.",
		"ar": "هذا ليس، أو لم يعد، من أسطح المكتب أو التطبيقات الخاصة بك.",
	} {
		alice.get("/portal/?lang=" + lang)
		if _, page := alice.post("/portal/launch", url.Values{"csrf": {csrf}, "resource": {"desktop:other"}}); !strings.Contains(page, want) {
			t.Errorf("the refusal's page in %s lacks %q:\n%s", lang, want, page)
		}
	}
}

// TestOwnSessions_RU3: alice sees her session with its host and state
// and logs it off; bob, signed in, cannot log off or disconnect it (the
// API refuses, 403) and nothing changes.
func TestOwnSessions_RU3(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	c := e.activeAtDesk("alice")
	alice, bob := e.browser(), e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	bobCSRF := bob.signIn(e.userToken("bob"))
	_, home := alice.get("/portal/")
	// The session is named by what she opened (the desktop's friendly
	// name), not the pool behind it.
	if !strings.Contains(home, `data-session="`+c.SessionID+`"`) || !strings.Contains(home, ">"+c.SessionHost+"<") || !strings.Contains(home, ">Active<") ||
		!regexp.MustCompile(`<td role="cell" class="name"><bdi id="session-\d+">Office desktop</bdi></td>`).MatchString(home) {
		t.Fatalf("alice's sessions lack %s on %s:\n%s", c.SessionID, c.SessionHost, home)
	}
	// Log off asks first, naming the session (portal.js; R-U3).
	if !strings.Contains(home, "/logoff\" data-confirm=\"Log off \u2068Office desktop\u2069? Anything not saved in it will be lost.\">") {
		t.Errorf("alice's Log off does not ask first, naming the session:\n%s", home)
	}
	if _, de := alice.get("/portal/?lang=de"); !strings.Contains(de, "data-confirm=\"\u2068Office desktop\u2069 abmelden? Alles, was darin nicht gespeichert ist, geht verloren.\">") {
		t.Errorf("in German, Log off does not ask in German:\n%s", de)
	}
	alice.get("/portal/?lang=en") // her language again for what follows
	if _, bobs := bob.get("/portal/"); strings.Contains(bobs, c.SessionID) {
		t.Errorf("bob's page lists alice's session")
	}
	for _, act := range []string{"logoff", "disconnect"} {
		res, _ := bob.post("/portal/sessions/desk/"+c.SessionID+"/"+act, url.Values{"csrf": {bobCSRF}, "confirm": {"yes"}})
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("bob's %s of alice's session: %d, want 403", act, res.StatusCode)
		}
	}
	active := vdibroker.AgentSession{ID: "1", User: "alice", State: vdibroker.StateActive}
	if cmds := e.heartbeat(c.SessionHost, active); len(cmds) != 0 {
		t.Fatalf("commands for alice's host after bob's tries: %+v", cmds)
	}
	// Without the CSRF token, or from another site: refused.
	if res, _ := alice.post("/portal/sessions/desk/"+c.SessionID+"/logoff", url.Values{}); res.StatusCode != http.StatusForbidden {
		t.Errorf("logoff without the CSRF token: %d", res.StatusCode)
	}
	res, _ := alice.post("/portal/sessions/desk/"+c.SessionID+"/logoff", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/portal/?off="+c.SessionID {
		t.Fatalf("alice's logoff: %d", res.StatusCode)
	}
	if cmds := e.heartbeat(c.SessionHost, active); len(cmds) != 1 || cmds[0].Type != vdibroker.CommandLogoff || cmds[0].SessionID != c.SessionID {
		t.Fatalf("commands for alice's host after her logoff: %+v", cmds)
	}
	// Her host has not logged it off yet (it still reports it): the page
	// lists it, so it says the logoff is under way, not done; a page
	// saying "was logged off" over the session still listed Active reads
	// as a logoff that failed.
	if _, home := alice.get("/portal/"); !strings.Contains(home, "The session is being logged off.") ||
		strings.Contains(home, "was logged off") || !strings.Contains(home, `data-session="`+c.SessionID+`"`) {
		t.Errorf("the page after her logoff, the host not done yet: want it under way and the session listed:\n%s", home)
	}
	list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "usersession.logoff"})
	if err != nil || len(list) == 0 || list[len(list)-1].Principal.Name != "alice" || list[len(list)-1].Outcome != vdibroker.AuditOK {
		t.Errorf("the logoff's audit entry: %+v, %v", list, err)
	}
}

// TestReconnectDisconnected_RU3_RC1: a Disconnected session named by a
// desktop has a Reconnect button that opens that desktop again, and the
// launch's file reaches the session's own host (R-C1) with no new
// session; an Active one has none.
func TestReconnectDisconnected_RU3_RC1(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	c, err := e.admin.Connect(ctx, "desk", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	button := `<input type="hidden" name="resource" value="desktop:desk"><button type="submit" class="reconnect" id="reconnect-0" aria-labelledby="reconnect-0 session-0">Reconnect</button>`
	e.heartbeat(c.SessionHost, vdibroker.AgentSession{ID: "1", User: "alice", State: vdibroker.StateActive})
	if _, home := alice.get("/portal/"); strings.Contains(home, button) || !strings.Contains(home, ">Active<") {
		t.Fatalf("an Active session: want no Reconnect:\n%s", home)
	}
	e.heartbeat(c.SessionHost, vdibroker.AgentSession{ID: "1", User: "alice", State: vdibroker.StateDisconnected})
	if _, home := alice.get("/portal/"); !strings.Contains(home, button) {
		t.Fatalf("a Disconnected session: no Reconnect:\n%s", home)
	}
	launch := alice.launch(csrf, "desktop:desk")
	if s := alice.await(launch, ended); s.State != "ready" {
		t.Fatalf("reconnect: %+v", s)
	}
	if res, body := alice.get(launch + "/file"); res.StatusCode != 200 || !strings.Contains(body, "full address:s:"+c.Address) {
		t.Errorf("the reconnect's file: %d, want %s in\n%s", res.StatusCode, c.Address, body)
	}
	list, err := e.admin.UserSessions(ctx, "alice")
	if err != nil || len(list) != 1 || list[0].ID != c.SessionID {
		t.Errorf("sessions after the reconnect: %+v, %v; want alice's one", list, err)
	}
}

// TestLaunchWaitsForStartingHost_RU4: cold's one host is stopped; alice's
// launch starts it (R-A4) and waits, its status saying the desktop is
// starting; the host's first heartbeat takes her session and the
// launch is ready, without another request of hers.
func TestLaunchWaitsForStartingHost_RU4(t *testing.T) {
	e := newEnv(t, nil)
	e.freeze() // how long she has waited is the test's to move
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	if h, err := e.admin.GetSessionHost(context.Background(), "cold", "cold-1"); err != nil || h.PowerState != vdibroker.PowerStopped {
		t.Fatalf("cold-1 before: %+v, %v; want Stopped", h, err)
	}
	launch := alice.launch(csrf, "desktop:cold")
	s := alice.await(launch, func(s launchStatus) bool {
		return s.State != "waiting" || s.Title == "Starting a computer for \u2068Cold lab\u2069"
	})
	if s.State != "waiting" || !strings.Contains(s.Message, "\u2068cold-1\u2069 is starting") || s.Waited != "" {
		h, _ := e.admin.GetSessionHost(context.Background(), "cold", "cold-1")
		_, f := alice.get(launch + "/file")
		t.Fatalf("while cold-1 starts, at once (no \"Waiting for 0 seconds\"): %+v\nhost %+v\n%s", s, h, f)
	}
	e.advance(5 * time.Second)
	if _, s := alice.status(launch); s.Waited != "Waiting for 5 seconds." {
		t.Errorf("five seconds on: waited %q, want \"Waiting for 5 seconds.\"", s.Waited)
	}
	_, page := alice.get(launch, "Accept-Language", "de")
	if !strings.Contains(page, "Ein Computer für \u2068Cold lab\u2069 wird gestartet") || !strings.Contains(page, `<progress id="launch-progress"`) {
		t.Errorf("the German launch page:\n%s", page)
	}
	h, err := e.admin.GetSessionHost(context.Background(), "cold", "cold-1")
	if err != nil || h.PowerState != vdibroker.PowerStarting {
		t.Fatalf("cold-1: %+v, %v; want Starting", h, err)
	}
	e.heartbeat("cold-1")
	s = alice.await(launch, ended)
	if s.State != "ready" {
		t.Fatalf("after cold-1's heartbeat: %+v", s)
	}
	// The page says what to do with the file, not its title again.
	if !strings.Contains(s.Title, "is ready") || !strings.Contains(s.Message, "Remote Desktop client") {
		t.Errorf("the ready launch: title %q, message %q", s.Title, s.Message)
	}
	if res, body := alice.get(launch + "/file"); res.StatusCode != 200 || !strings.Contains(body, "full address:s:cold-1.example.test") {
		t.Fatalf("the file: %d %s", res.StatusCode, body)
	}
}

// TestLaunchStartingSaysTheAnswersWait_RU4_RA4: alice's launch waits
// its MaxWait (1 s here) for cold-1 starting, whose agent never
// heartbeats; the broker answers HostStarting with Retry-After 30 (R-A4),
// and the failed launch says to try again in 30 seconds, the answer's
// wait, not a guess of its own, in each of the portal's languages (its
// status, which the page's script shows, and the page itself).
func TestLaunchStartingSaysTheAnswersWait_RU4_RA4(t *testing.T) {
	e := newEnv(t, func(c *portal.Config) { c.MaxWait = time.Second })
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	launch := alice.launch(csrf, "desktop:cold")
	s := alice.await(launch, ended)
	const want = "A session host for \u2068Cold lab\u2069 is still starting. Try again in 30 seconds."
	if s.State != "failed" || !strings.HasPrefix(s.Message, want) {
		t.Fatalf("the launch once its wait is over: %+v; want failed, saying %q", s, want)
	}
	for lang, want := range map[string]string{
		"de": "Ein Sitzungshost für \u2068Cold lab\u2069 wird noch gestartet. Versuchen Sie es in 30 Sekunden erneut.",
		"pt": "Um anfitrião de sessão para \u2068Cold lab\u2069 ainda está a iniciar. Tente novamente dentro de 30 segundos.",
		"ar": "لا يزال مضيف جلسات لـ \u2068Cold lab\u2069 قيد التشغيل. حاول مرة أخرى بعد ٣٠ ثانية.",
	} {
		res, page := alice.get(launch+"?lang="+lang, "Accept-Language", lang)
		if res.StatusCode != http.StatusOK || !strings.Contains(page, want) {
			t.Errorf("the launch's page in %s: %d, want it to say %q:\n%s", lang, res.StatusCode, want, page)
		}
	}
}

// startedDesk makes alice's own desktop "My desk", mine-1 in the
// Personal pool mine (start VM on connect, heartbeat timeout 90 s),
// stopped and then started by an administrator: Starting from e's now,
// its last heartbeat older than the stop.
func startedDesk(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	e.pool("mine", map[string]any{"hostPoolType": "Personal", "personalDesktopAssignmentType": "Automatic",
		"powerDriver": "sim", "startVMOnConnect": true, "heartbeatTimeoutSeconds": 90}, 1)
	if _, err := e.admin.PatchSessionHost(ctx, "mine", "mine-1", map[string]any{"assignedUsers": []string{"alice"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.PutApplicationGroup(ctx, "mine-desktop", map[string]any{"hostPool": "mine", "applicationGroupType": "Desktop",
		"friendlyName": "My desk", "assignments": map[string]any{"users": []string{"alice"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.StopSessionHost(ctx, "mine", "mine-1", false); err != nil {
		t.Fatal(err)
	}
	e.advance(5 * time.Minute) // its last heartbeat is older than the stop
	if _, err := e.admin.StartSessionHost(ctx, "mine", "mine-1"); err != nil {
		t.Fatal(err)
	}
}

// goingDownIn30 are the words of a launch answered that the computer of
// alice's own desktop "My desk" is restarting or shutting down
// (ReasonDesktopGoingDown, R-A4), with a Retry-After of 30 s, in each of
// the portal's languages: not that no session host can take it.
var goingDownIn30 = map[string]string{
	"en": "The computer of \u2068My desk\u2069 is restarting or shutting down. Try again in 30 seconds. If it does not come back, tell your helpdesk.",
	"de": "Der Computer von \u2068My desk\u2069 wird neu gestartet oder heruntergefahren. Versuchen Sie es in 30 Sekunden erneut. Ist er nicht bald wieder verfügbar, wenden Sie sich an Ihren Helpdesk.",
	"pt": "O computador de \u2068My desk\u2069 está a reiniciar ou a encerrar. Tente novamente dentro de 30 segundos. Se não voltar a ficar disponível, contacte o seu helpdesk.",
	"ar": "جارٍ إعادة تشغيل جهاز الكمبيوتر الخاص بـ \u2068My desk\u2069 أو إيقاف تشغيله. حاول مرة أخرى بعد ٣٠ ثانية. إذا لم يصبح متاحًا من جديد، فأبلغ مكتب الدعم.",
}

// wantGoingDownIn30 checks that alice's failed launch says goingDownIn30,
// its status in English and its page in each language, and never the
// words for the pool's capacity.
func wantGoingDownIn30(t *testing.T, alice *browser, launch string, s launchStatus) {
	t.Helper()
	wantFailedSaying(t, alice, launch, "the launch", s, goingDownIn30,
		"says no session host can take it", []string{"No session host", "kein Sitzungshost", "nenhum anfitrião", "لا يستطيع أي مضيف"})
}

// launchGoingDown has mine-1's agent say that its machine goes down,
// and checks that alice's launch of her desktop then says goingDownIn30
// (wantGoingDownIn30). It returns her browser and its CSRF token.
func launchGoingDown(t *testing.T, e *env) (*browser, string) {
	t.Helper()
	if _, err := e.admin.Heartbeat(t.Context(), e.creds["mine-1"], &vdibroker.HeartbeatRequest{ShuttingDown: true}); err != nil {
		t.Fatal(err)
	}
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	launch := alice.launch(csrf, "desktop:mine")
	wantGoingDownIn30(t, alice, launch, alice.await(launch, ended))
	return alice, csrf
}

// wantFailedSaying checks that alice's launch, what for the failure's
// message, s its status, failed saying words: its status in English,
// followed by the reference for her helpdesk, and its page in each of
// the portal's languages; and that its page has none of wrong, which
// tells her what wrongTells says.
func wantFailedSaying(t *testing.T, alice *browser, launch, what string, s launchStatus, words map[string]string, wrongTells string, wrong []string) {
	t.Helper()
	if s.State != "failed" || !strings.HasPrefix(s.Message, words["en"]+" Reference for your helpdesk: ") {
		t.Fatalf("%s: %+v; want failed, saying %q and the reference", what, s, words["en"])
	}
	for _, lang := range []string{"de", "pt", "ar", "en"} { // English last: the choice is remembered
		res, page := alice.get(launch+"?lang="+lang, "Accept-Language", lang)
		if want := words[lang]; res.StatusCode != http.StatusOK || !strings.Contains(page, want) {
			t.Errorf("the launch's page in %s: %d, want it to say %q:\n%s", lang, res.StatusCode, want, page)
		}
		for _, w := range wrong {
			if strings.Contains(page, w) {
				t.Errorf("the launch's page in %s %s (%q):\n%s", lang, wrongTells, w, page)
			}
		}
	}
}

// TestLaunchShuttingDownSaysTheAnswersWait_RA4: alice's own desktop in
// a Personal pool (start VM on connect, heartbeat timeout 90 s) was
// started and its agent then said that its machine shuts down. Her
// launch is answered NoCapacity with a Retry-After until the machine is
// down (90 or 91 s from that heartbeat, R-A4), but at most 30 s, and the
// reason DesktopGoingDown: the failed launch says that the computer of
// her desktop is restarting or shutting down, to try again in 30
// seconds, not "in a few minutes", and to tell her helpdesk only if it
// does not come back; not that no session host can take it, in each of
// the portal's languages (its status, which the page's script shows,
// and the page itself).
func TestLaunchShuttingDownSaysTheAnswersWait_RA4(t *testing.T) {
	e := newEnv(t, nil)
	startedDesk(t, e)
	launchGoingDown(t, e)
}

// TestLaunchDesktopGoingDown_RU4_RA4: alice's own desktop in a Personal
// pool (start VM on connect, heartbeat timeout 90 s) runs, and its agent
// says that its machine goes down: a restart or a shutdown from within
// the machine. Her launch then is told that its computer is restarting
// or shutting down and to try again in 30 seconds (R-A4), in each
// language, and once it is back (its agent reports again) her launch
// lands on it. A launch held for her desktop starting (R-U4) whose agent
// then says its machine goes down is decided again at once and ends
// with the same words, not held on, nor told that no session host can
// take it.
func TestLaunchDesktopGoingDown_RU4_RA4(t *testing.T) {
	t.Run("running", func(t *testing.T) {
		e := newEnv(t, nil)
		ctx := context.Background()
		startedDesk(t, e)
		e.heartbeat("mine-1") // up: recorded Running
		if h, err := e.admin.GetSessionHost(ctx, "mine", "mine-1"); err != nil || h.PowerState != vdibroker.PowerRunning {
			t.Fatalf("mine-1 after its heartbeat: %+v, %v; want Running", h, err)
		}
		alice, csrf := launchGoingDown(t, e)
		// It restarted: back, her launch lands on it.
		e.advance(30 * time.Second)
		e.heartbeat("mine-1")
		launch := alice.launch(csrf, "desktop:mine")
		if s := alice.await(launch, ended); s.State != "ready" {
			t.Fatalf("her launch once it is back: %+v; want ready", s)
		}
	})
	t.Run("held", func(t *testing.T) {
		e := newEnv(t, nil)
		ctx := context.Background()
		startedDesk(t, e)
		alice := e.browser()
		csrf := alice.signIn(e.userToken("alice"))
		launch := alice.launch(csrf, "desktop:mine")
		if s := alice.await(launch, func(s launchStatus) bool {
			return s.State != "waiting" || s.Title == "Starting a computer for \u2068My desk\u2069"
		}); s.State != "waiting" {
			t.Fatalf("her launch while her desktop starts: %+v; want held, waiting", s)
		}
		if _, err := e.admin.Heartbeat(ctx, e.creds["mine-1"], &vdibroker.HeartbeatRequest{ShuttingDown: true}); err != nil {
			t.Fatal(err)
		}
		wantGoingDownIn30(t, alice, launch, alice.await(launch, ended))
	})
}

// TestLaunchDesktopNeedsHelpdesk_RA4: alice's own desktop in a
// Personal pool (start VM on connect, heartbeat timeout 90 s) was
// started, and 9 minutes into its start its agent said that its machine
// shuts down. A reboot says the same and is back within the heartbeat
// timeout, so her launch is told that its computer is restarting or
// shutting down and to try again in 30 seconds (the Retry-After until
// its machine is down, 91 s, at most 30), not yet to ask her
// helpdesk. Once it is down, its start timed out, no connect of hers
// starts it again (R-A4), only an administrator's: her launch then is
// not told to try again but that her desktop's computer did not start or
// has shut down, that opening it again does not start it, and to ask her
// helpdesk, in each of the portal's languages (before, that was "try
// again in a few minutes").
func TestLaunchDesktopNeedsHelpdesk_RA4(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	startedDesk(t, e)
	e.advance(vdibroker.HostStartTimeout - time.Minute)
	alice, csrf := launchGoingDown(t, e)
	e.advance(2 * time.Minute) // its machine is down; its start timed out
	words := map[string]string{
		"en": "The computer of \u2068My desk\u2069 did not start or has shut down, and opening it again will not start it. Ask your helpdesk to start it for you.",
		"de": "Der Computer von \u2068My desk\u2069 ist nicht gestartet oder wurde heruntergefahren, und erneutes Öffnen startet ihn nicht. Bitten Sie Ihren Helpdesk, ihn für Sie zu starten.",
		"pt": "O computador de \u2068My desk\u2069 não chegou a iniciar ou foi encerrado, e abri-lo novamente não o inicia. Peça ao seu helpdesk que o inicie por si.",
		"ar": "جهاز الكمبيوتر الخاص بـ \u2068My desk\u2069 لم يبدأ أو تم إيقاف تشغيله، ولن يشغّله فتحه مرة أخرى. اطلب من مكتب الدعم تشغيله لك.",
	}
	launch := alice.launch(csrf, "desktop:mine")
	wantFailedSaying(t, alice, launch, "the launch, down, its start timed out", alice.await(launch, ended), words,
		"tells her to try again", []string{"Try again", "Versuchen Sie es", "Tente novamente", "حاول مرة أخرى"})
	if list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "portal.launch"}); err != nil || len(list) < 2 ||
		!strings.Contains(list[len(list)-1].Error, "an administrator can start it again") {
		t.Errorf("the refusal's audit entry: %+v %v; want the administrator's words", list, err)
	}
}

// TestLaunchBounds_RU7: a sign-in has at most MaxLaunchesPerSession
// launches at once (429 past it), and the page's forms need the CSRF
// token from this site.
func TestLaunchBounds_RU7(t *testing.T) {
	e := newEnv(t, func(c *portal.Config) { c.MaxLaunchesPerSession = 2 })
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	alice.launch(csrf, "desktop:desk")
	alice.launch(csrf, "desktop:desk")
	if res, _ := alice.post("/portal/launch", url.Values{"csrf": {csrf}, "resource": {"desktop:desk"}}); res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a third launch: %d, want 429", res.StatusCode)
	}
	if res, _ := alice.post("/portal/launch", url.Values{"csrf": {"x" + csrf}, "resource": {"desktop:desk"}}); res.StatusCode != http.StatusForbidden {
		t.Errorf("a launch with a wrong CSRF token: %d, want 403", res.StatusCode)
	}
	req, _ := http.NewRequest("POST", e.url+"/portal/launch", strings.NewReader(url.Values{"csrf": {csrf}, "resource": {"desktop:desk"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	if res, err := alice.c.Do(req); err != nil || res.StatusCode != http.StatusForbidden {
		t.Errorf("a launch from another site: %v, %v; want 403", res, err)
	}
	// Signed out: the page sends to the sign-in, a POST is refused.
	anon := e.browser()
	if res, _ := anon.get("/portal/"); res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/portal/signin?next=") {
		t.Errorf("signed out: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	if res, _ := anon.post("/portal/launch", url.Values{"resource": {"desktop:desk"}}); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("a launch signed out: %d, want 401", res.StatusCode)
	}
}

// TestSignin_RU2: the token form wants its CSRF cookie, refuses a
// token that is not a User's (the console is for administrators) and a
// bad one; the session cookie is HttpOnly, SameSite=Lax, scoped to
// /portal/; the anonymous paths are limited per address (429).
func TestSignin_RU2(t *testing.T) {
	rec := &refusals{}
	e := newEnv(t, func(c *portal.Config) { c.AnonymousBurst = 8; c.Refusals = rec })
	b := e.browser()
	if res, _ := b.post("/portal/signin", url.Values{"csrf": {"x"}, "token": {e.userToken("alice")}}); res.StatusCode != http.StatusForbidden {
		t.Errorf("a sign-in without the form's cookie: %d", res.StatusCode)
	}
	for name, tok := range map[string]string{"admin": adminToken, "forged": "vdbt_forged-0123456789abcdef"} {
		_, page := b.get("/portal/signin")
		m := csrfRE.FindStringSubmatch(page)
		res, _ := b.post("/portal/signin", url.Values{"csrf": {m[1]}, "token": {tok}})
		if res.StatusCode == http.StatusSeeOther || strings.Contains(res.Header.Get("Set-Cookie"), "vdibroker_portal=") {
			t.Errorf("%s token signed in: %d %v", name, res.StatusCode, res.Cookies())
		}
	}
	// Each refused sign-in is recorded (R-U7), with the caller's address
	// and why: the CSRF failure, the admin token (not an end user's), the
	// forged one.
	if got := rec.list(); len(got) != 3 || !strings.Contains(strings.Join(got, "\n"), "CSRF") {
		t.Errorf("refused sign-ins recorded: %q; want three, the first for its CSRF check", got)
	} else {
		for _, r := range got {
			if !strings.HasPrefix(r, "portal/token 127.0.0.1 ") {
				t.Errorf("refusal %q: want kind portal/token from 127.0.0.1", r)
			}
		}
	}
	_, page := b.get("/portal/signin")
	// Without single sign-on the token is the only way in: no "Or".
	if strings.Contains(page, "signin-oidc") || strings.Contains(page, "Or sign in") || !strings.Contains(page, "Sign in with the access token your administrator gave you") {
		t.Errorf("the sign-in page without single sign-on:\n%s", page)
	}
	m := csrfRE.FindStringSubmatch(page)
	res, _ := b.post("/portal/signin", url.Values{"csrf": {m[1]}, "token": {e.userToken("alice")}, "next": {"//evil.example/"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/portal/" {
		t.Fatalf("sign-in with a next of another site: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	var sess *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "vdibroker_portal" {
			sess = c
		}
	}
	if sess == nil || !sess.HttpOnly || sess.SameSite != http.SameSiteLaxMode || sess.Path != "/portal/" {
		t.Fatalf("session cookie: %+v", sess)
	}
	if got := res.Header.Get("Content-Security-Policy"); got != webguard.CSP {
		t.Errorf("CSP %q", got)
	}
	for path, ctype := range map[string]string{"/portal/static/portal.css": "text/css", "/portal/static/portal.js": "text/javascript",
		vdibroker.IconDesktopPath: "image/svg+xml", vdibroker.IconRemoteAppPath: "image/svg+xml"} {
		if res, _ := b.get(path); res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), ctype) {
			t.Errorf("%s: %d %s", path, res.StatusCode, res.Header.Get("Content-Type"))
		}
	}
	// A folder of them is not listed (R-SEC): the portal's own 404 page.
	for _, path := range []string{"/portal/static/", "/portal/icons/", "/portal/static/icons/", "/portal/static/portal.css/"} {
		if res, page := b.get(path); res.StatusCode != http.StatusNotFound || strings.Contains(page, `href="portal.css"`) || strings.Contains(page, `href="desktop.svg"`) {
			t.Errorf("%s: %d, a listing or no 404 page:\n%s", path, res.StatusCode, page)
		}
	}
	limited := false
	for range 20 {
		if res, _ := e.browser().get("/portal/signin"); res.StatusCode == http.StatusTooManyRequests {
			limited = true
			break
		}
	}
	if !limited {
		t.Errorf("20 anonymous sign-in pages from one address were not limited")
	}
}

// TestLanguage_RU6: Accept-Language picks German ("de-AT"), ?lang=ar
// picks Arabic right to left and is remembered; an unknown language is
// English.
func TestLanguage_RU6(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser()
	if _, page := b.get("/portal/signin", "Accept-Language", "de-AT,de;q=0.9,en;q=0.5"); !strings.Contains(page, `<html lang="de" dir="ltr">`) || !strings.Contains(page, "Anmelden") {
		t.Errorf("German sign-in page:\n%s", page)
	}
	if _, page := b.get("/portal/signin", "Accept-Language", "ja"); !strings.Contains(page, `<html lang="en" dir="ltr">`) {
		t.Errorf("Japanese asked: not English")
	}
	if _, page := b.get("/portal/signin?lang=ar", "Accept-Language", "de"); !strings.Contains(page, `<html lang="ar" dir="rtl">`) || !strings.Contains(page, "تسجيل الدخول") {
		t.Errorf("Arabic sign-in page:\n%s", page)
	}
	if _, page := b.get("/portal/signin", "Accept-Language", "de"); !strings.Contains(page, `<html lang="ar" dir="rtl">`) {
		t.Errorf("the choice of Arabic was not remembered")
	}
}

// refusals records the portal's refused sign-ins: "kind addr detail".
type refusals struct {
	mu  sync.Mutex
	got []string
}

func (r *refusals) Refused(_ context.Context, kind, addr, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, kind+" "+addr+" "+detail)
}

func (r *refusals) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// TestLaunchAcrossReplicas_RU4_RU7: two replicas on one database and a
// browser a load balancer sends to either. Alice's launch made through
// replica A shows its progress (cold-1 starting) and then its file
// through replica B; B hands the file and A then does not: once across
// replicas. Of two replicas asked for a file at the same moment, exactly
// one hands it. The database holds neither the launch's id nor its file
// in clear, and bob on B reads nothing of it.
func TestLaunchAcrossReplicas_RU4_RU7(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	other := e.replica()
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	aliceB := alice.at(other)
	bob := e.browser().at(other)
	bob.signIn(e.userToken("bob"))

	launch := alice.launch(csrf, "desktop:cold")
	s := aliceB.await(launch, func(s launchStatus) bool {
		return s.State != "waiting" || s.Title == "Starting a computer for \u2068Cold lab\u2069"
	})
	if s.State != "waiting" || !strings.Contains(s.Message, "\u2068cold-1\u2069 is starting") || s.Percent < 0 {
		t.Fatalf("the launch on the other replica while cold-1 starts: %+v", s)
	}
	e.heartbeat("cold-1")
	if s = aliceB.await(launch, ended); s.State != "ready" || s.File != launch+"/file" {
		t.Fatalf("the launch on the other replica after cold-1's heartbeat: %+v", s)
	}
	secret := strings.TrimPrefix(launch, portal.Prefix+"launches/")
	var cookie string
	for _, c := range alice.c.Jar.Cookies(mustURL(t, e.url+portal.Prefix)) {
		if c.Name == "vdibroker_portal" {
			cookie = c.Value
		}
	}
	row, err := e.st.PortalLaunch(ctx, vdibroker.HashSecret(secret), vdibroker.HashSecret(cookie), time.Now())
	if err != nil {
		t.Fatalf("the launch's row: %v", err)
	}
	if row.IDHash == secret || len(row.Sealed) == 0 || strings.Contains(string(row.Sealed), "full address") {
		t.Errorf("the database holds the launch's id or file in clear: %+v", row)
	}
	if code, _ := bob.status(launch); code != http.StatusNotFound {
		t.Errorf("bob on the other replica reads alice's launch: %d", code)
	}
	if res, _ := bob.get(launch + "/file"); res.StatusCode != http.StatusNotFound {
		t.Errorf("bob on the other replica fetches alice's file: %d", res.StatusCode)
	}
	res, body := aliceB.get(launch + "/file")
	if res.StatusCode != 200 || !strings.Contains(body, "full address:s:cold-1.example.test") {
		t.Fatalf("the file from the other replica: %d %s", res.StatusCode, body)
	}
	if res, _ := alice.get(launch + "/file"); res.StatusCode != http.StatusNotFound {
		t.Errorf("the file again from the first replica: %d, want 404", res.StatusCode)
	}

	// Both replicas asked at once: one file.
	launch = alice.launch(csrf, "desktop:desk")
	alice.await(launch, ended)
	codes := make(chan int, 2)
	var wg sync.WaitGroup
	for _, b := range []*browser{alice, aliceB} {
		wg.Go(func() {
			res, err := b.c.Get(b.url + launch + "/file")
			if err != nil {
				codes <- 0
				return
			}
			res.Body.Close()
			codes <- res.StatusCode
		})
	}
	wg.Wait()
	close(codes)
	var got []int
	for c := range codes {
		got = append(got, c)
	}
	slices.Sort(got)
	if !slices.Equal(got, []int{http.StatusOK, http.StatusNotFound}) {
		t.Errorf("a file asked of both replicas at once: %v, want one 200 and one 404", got)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestLaunchRemoteAppAndGlobal_RU1_RE9: a RemoteApp published to alice
// and a global desktop entitlement of hers are on her page and open from
// it: the app's file starts the application (remoteapplicationprogram),
// the global one's file reaches a host of its member pool; bob sees and
// opens neither. Her sessions are named after what she opened.
func TestLaunchRemoteAppAndGlobal_RU1_RE9(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	if _, err := e.admin.PutApplicationGroup(ctx, "desk-apps", map[string]any{"hostPool": "desk", "applicationGroupType": "RemoteApp",
		"assignments": map[string]any{"users": []string{"alice"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.PutApplication(ctx, "desk-apps", "word", map[string]any{"friendlyName": "Word", "filePath": `C:\Program Files\Word\word.exe`,
		"showInPortal": true}); err != nil {
		t.Fatal(err)
	}
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "s0"}},
		Pods: []vdibroker.Pod{{Name: "pod0", Site: "s0", URL: e.url}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "everywhere", Scope: vdibroker.ScopeAllSites,
			SessionDistribution: vdibroker.DistributionSessionCount, Users: []string{"alice"},
			Members: []vdibroker.Member{{Pod: "pod0", HostPool: "other"}}}}}
	if _, err := e.admin.PutFederation(ctx, doc); err != nil {
		t.Fatal(err)
	}
	alice, bob := e.browser(), e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	bobCSRF := bob.signIn(e.userToken("bob"))
	_, home := alice.get("/portal/")
	for _, want := range []string{`data-id="app:desk-apps/word"`, ">Word<", `data-id="global:everywhere"`, portal.Prefix + "icons/remoteapp.svg"} {
		if !strings.Contains(home, want) {
			t.Errorf("alice's page lacks %q", want)
		}
	}
	if _, page := bob.get("/portal/"); strings.Contains(page, "desk-apps") || strings.Contains(page, "everywhere") {
		t.Errorf("bob's page lists alice's app or global entitlement")
	}
	for _, id := range []string{"app:desk-apps/word", "global:everywhere"} {
		if res, _ := bob.post("/portal/launch", url.Values{"csrf": {bobCSRF}, "resource": {id}}); res.StatusCode != http.StatusNotFound {
			t.Errorf("bob opening %s: %d, want 404", id, res.StatusCode)
		}
	}
	for id, want := range map[string]string{
		"app:desk-apps/word": "remoteapplicationprogram:s:||word",
		"global:everywhere":  "full address:s:other-1.example.test",
	} {
		launch := alice.launch(csrf, id)
		if s := alice.await(launch, ended); s.State != "ready" {
			t.Fatalf("%s: %+v", id, s)
		}
		res, body := alice.get(launch + "/file")
		if res.StatusCode != 200 || !strings.Contains(body, want) {
			t.Errorf("%s's file: %d, want %q in\n%s", id, res.StatusCode, want, body)
		}
	}
	// Her sessions are named by what she opened (R-U3): the global
	// entitlement's, in its member pool, by the entitlement.
	_, home = alice.get("/portal/")
	for _, want := range []string{`<td role="cell" class="name"><bdi id="session-\d+">Office desktop</bdi></td><td role="cell" class="host" data-label="Host"><bdi>desk-`, `<td role="cell" class="name"><bdi id="session-\d+">everywhere</bdi></td><td role="cell" class="host" data-label="Host"><bdi>other-`} {
		if !regexp.MustCompile(want).MatchString(home) {
			t.Errorf("alice's sessions lack %q:\n%s", want, home)
		}
	}
}

// TestRefusedLaunchesBounded_RU7_RSEC: a signed-in user asking again and
// again for a resource not in her feed has her refused launches
// recorded within the bound of a credential's refusals (R-SEC,
// vdibroker.PrincipalRefusalsPerWindow whole a window, the rest counted
// into one summary), not one entry each: each such request costs her one
// API call, and written one by one they filled the store at the rate she
// sent them.
func TestRefusedLaunchesBounded_RU7_RSEC(t *testing.T) {
	e := newEnv(t, nil)
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	const tries = vdibroker.PrincipalRefusalsPerWindow + 5
	for range tries {
		if res, _ := alice.post("/portal/launch", url.Values{"csrf": {csrf}, "resource": {"desktop:other"}}); res.StatusCode != http.StatusNotFound {
			t.Fatalf("alice opening bob's desktop: %d, want 404", res.StatusCode)
		}
	}
	list, err := e.admin.ListAudit(t.Context(), vhttp.AuditQuery{Action: "portal.launch"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != vdibroker.PrincipalRefusalsPerWindow {
		t.Errorf("%d refused launches wrote %d entries, want %d (the rest counted)", tries, len(list), vdibroker.PrincipalRefusalsPerWindow)
	}
	// The window closes: the next refusal writes the summary of the
	// 5 counted, naming alice's credential.
	e.advance(vdibroker.RefusalWindow + time.Second)
	alice.post("/portal/launch", url.Values{"csrf": {csrf}, "resource": {"desktop:other"}})
	sums, err := e.admin.ListAudit(t.Context(), vhttp.AuditQuery{Action: vdibroker.RefusalSummaryAction})
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 1 || sums[0].Principal.Name != "alice" || !strings.Contains(sums[0].Error, "5 more refused requests") || !strings.Contains(sums[0].Error, "portal.launch") {
		t.Errorf("the summary of the window: %+v, want one of alice's 5 more portal.launch refusals", sums)
	}
}

// TestOtherPodsSessions_RU3_RG1: alice's session in pod1 (a member pool
// of her global entitlements) is on pod0's page, named by the desktop
// entitlement (not the application one before it), in another pod (of
// pod0's site), with
// Log off (pod1's, asked through pod0's API) and Reconnect while it is Disconnected, whose launch reaches
// it (R-G1), but not when the entitlement's scope from pod0 leaves pod1
// out. With pod1 gone the page is still served and says some sessions
// could not be read.
func TestOtherPodsSessions_RU3_RG1(t *testing.T) {
	e, far, doc := twoPods(t,
		// An application of the same pool, first in the document: the
		// session is named by the desktop, as one of this pod's is.
		vdibroker.GlobalEntitlement{Name: "Calc", Kind: vdibroker.KindApplication, Application: "calc", Scope: vdibroker.ScopeAllSites,
			SessionDistribution: vdibroker.DistributionSessionCount, Users: []string{"alice"},
			Members: []vdibroker.Member{{Pod: "pod1", HostPool: "other"}}},
		vdibroker.GlobalEntitlement{Name: "Anywhere", Scope: vdibroker.ScopeAllSites,
			SessionDistribution: vdibroker.DistributionSessionCount, Users: []string{"alice"},
			Members: []vdibroker.Member{{Pod: "pod0", HostPool: "other"}, {Pod: "pod1", HostPool: "other"}}})
	ctx := context.Background()
	c, err := far.admin.Connect(ctx, "other", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	far.heartbeat(c.SessionHost, vdibroker.AgentSession{ID: "7", User: "alice", State: vdibroker.StateDisconnected})

	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	_, home := alice.get("/portal/")
	row := regexp.MustCompile(`(?s)<tr role="row" data-session="` + c.SessionID + `" data-pool="other" data-pod="pod1">.*?</tr>`).FindString(home)
	for _, want := range []string{`">Anywhere</bdi></td>`, `<td role="cell" class="host" data-label="Host"><bdi>` + c.SessionHost + `</bdi></td>`, ">Disconnected<",
		`<input type="hidden" name="resource" value="global:Anywhere"><button type="submit" class="reconnect"`} {
		if !strings.Contains(row, want) {
			t.Errorf("alice's session on pod1 lacks %q; row %q in\n%s", want, row, home)
		}
	}
	if strings.Contains(row, `class="elsewhere"`) {
		t.Errorf("alice's session on pod1, of pod0's site, is marked as elsewhere: %q", row)
	}
	// Log off through pod0's API, which asks pod1; no Disconnect of a
	// Disconnected session; nothing of pod0's own sessions' paths.
	if !strings.Contains(row, `<form method="post" action="/portal/globalsessions/pod1/`+c.SessionID+`/logoff" data-confirm=`) ||
		strings.Contains(row, "/portal/sessions/") || strings.Contains(row, "disconnect") {
		t.Errorf("pod1's session: want Log off through /portal/globalsessions/pod1/, no Disconnect: %s", row)
	}
	if strings.Contains(home, `id="sessions-unread"`) {
		t.Errorf("every pod answered, yet the page says some sessions could not be read")
	}
	// Within the pod only, pod0's connect through Anywhere looks in pod0
	// alone and would make a new session there (R-G1): the row is still
	// named by it, without Reconnect, and says why.
	for _, scope := range []string{vdibroker.ScopeWithinPod, vdibroker.ScopeAllSites} {
		doc.Generation++
		doc.GlobalEntitlements[1].Scope = scope
		putFederation(t, doc, e, far)
		if scope != vdibroker.ScopeWithinPod {
			break
		}
		_, home := alice.get("/portal/")
		row := regexp.MustCompile(`(?s)<tr role="row" data-session="` + c.SessionID + `" data-pool="other" data-pod="pod1">.*?</tr>`).FindString(home)
		if !strings.Contains(row, `">Anywhere</bdi></td>`) || strings.Contains(row, `class="reconnect"`) || strings.Contains(row, `name="session"`) ||
			!hasRowNote(row, "noreconnect", "Cannot be reconnected from here") {
			t.Errorf("within pod0 alone, alice's session on pod1: want it named Anywhere, without Reconnect, saying why: row %q in\n%s", row, home)
		}
	}
	launch := alice.launch(csrf, "global:Anywhere")
	if s := alice.await(launch, ended); s.State != "ready" {
		t.Fatalf("reconnect through the entitlement: %+v", s)
	}
	if res, body := alice.get(launch + "/file"); res.StatusCode != 200 || !strings.Contains(body, "full address:s:"+c.Address) {
		t.Errorf("the reconnect's file: %d, want pod1's %s in\n%s", res.StatusCode, c.Address, body)
	}

	far.close()
	res, home := alice.get("/portal/")
	if res.StatusCode != 200 || !strings.Contains(home, `id="sessions-unread"`) || strings.Contains(home, c.SessionID) {
		t.Errorf("with pod1 gone: %d, want the page, without pod1's session, saying some could not be read:\n%s", res.StatusCode, home)
	}
}

// TestOtherPodsSessionsWhere_RU3_RU6: alice's session in pod2, of
// another site than pod0's, is on pod0's page marked "At another site",
// in each of the portal's languages; hers in pod1, of pod0's site, is
// not marked (to her it is here: "pod" is the administrators' word).
func TestOtherPodsSessionsWhere_RU3_RU6(t *testing.T) {
	secret := []byte("portal-test-federation-secret")
	e := newEnvWith(t, nil, "pod0", secret)
	near := newEnvWith(t, nil, "pod1", secret)
	far := newEnvAt(t, nil, "pod2", "s1", secret)
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "s0"}, {Name: "s1"}},
		Pods: []vdibroker.Pod{{Name: "pod0", Site: "s0", URL: e.url}, {Name: "pod1", Site: "s0", URL: near.url}, {Name: "pod2", Site: "s1", URL: far.url}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "Anywhere", Scope: vdibroker.ScopeAllSites, Users: []string{"alice"},
			Members: []vdibroker.Member{{Pod: "pod1", HostPool: "other"}, {Pod: "pod2", HostPool: "other"}}}}}
	putFederation(t, doc, e, near, far)
	ids := map[string]string{}
	for pod, at := range map[string]*env{"pod1": near, "pod2": far} {
		c, err := at.admin.Connect(t.Context(), "other", vhttp.ConnectRequest{User: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		ids[pod] = c.SessionID
	}
	alice := e.browser()
	alice.signIn(e.userToken("alice"))
	for _, tc := range []struct{ lang, otherSite string }{
		{"en", "At another site"},
		{"de", "An einem anderen Standort"},
		{"pt", "Noutro local"},
		{"ar", "في موقع آخر"},
	} {
		_, home := alice.get("/portal/?lang=" + tc.lang)
		for pod, want := range map[string]string{"pod1": "", "pod2": tc.otherSite} {
			row := regexp.MustCompile(`(?s)<tr role="row" data-session="` + ids[pod] + `" data-pool="other" data-pod="` + pod + `">.*?</tr>`).FindString(home)
			if row == "" || want == "" && strings.Contains(row, `class="elsewhere"`) ||
				want != "" && !hasRowNote(row, "elsewhere", want+`</span>`) {
				t.Errorf("%s: alice's session in %s: want it marked %q (none: not marked); row %q", tc.lang, pod, want, row)
			}
		}
	}
}

// TestOtherPodsLogoff_RU3_RU1: alice, signed in at pod0's portal in
// German, disconnects and logs off her Active session in pod1 from "My
// sessions" (CSRF-protected form posts, as her own pod's): pod1's agent
// gets each command, and the page says so in her language, as of a
// session of her own pod (not "at the other site": pod1 is of pod0's
// site, and her row says "In another pod"). bob's session
// in pod1, posted to by her, is refused with nothing queued. With pod1
// gone, her logoff is answered with her page, saying in her language
// that the other site did not answer.
func TestOtherPodsLogoff_RU3_RU1(t *testing.T) {
	e, far, _ := twoPods(t, vdibroker.GlobalEntitlement{Name: "Anywhere", Scope: vdibroker.ScopeAllSites,
		SessionDistribution: vdibroker.DistributionSessionCount, Users: []string{"alice", "bob"},
		Members: []vdibroker.Member{{Pod: "pod0", HostPool: "other"}, {Pod: "pod1", HostPool: "other"}}})
	ctx := context.Background()
	mine, err := far.admin.Connect(ctx, "other", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	bobs, err := far.admin.Connect(ctx, "other", vhttp.ConnectRequest{User: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	active := []vdibroker.AgentSession{{ID: "7", User: "alice", State: vdibroker.StateActive}, {ID: "8", User: "bob", State: vdibroker.StateActive}}
	far.heartbeat(mine.SessionHost, active...)
	commands := func(id string) []string {
		t.Helper()
		var out []string
		for _, c := range far.heartbeat(mine.SessionHost, active...) {
			if c.SessionID == id {
				out = append(out, c.Type)
			}
		}
		return out
	}

	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	_, home := alice.get("/portal/?lang=de")
	at := "/portal/globalsessions/pod1/" + mine.SessionID
	for _, want := range []string{`action="` + at + `/logoff"`, `action="` + at + `/disconnect"`} {
		if !strings.Contains(home, want) {
			t.Errorf("alice's Active session on pod1 lacks %q in\n%s", want, home)
		}
	}
	if res, _ := alice.post(at+"/logoff", url.Values{}); res.StatusCode != http.StatusForbidden {
		t.Errorf("a logoff without the CSRF token: %d, want 403", res.StatusCode)
	}
	for _, step := range []struct{ act, command, flash, to string }{
		// pod1 is of pod0's site: the row says "In einem anderen Pod", so
		// the page does not say the session is at another site.
		{"disconnect", vdibroker.CommandDisconnect, "Die Sitzung wird getrennt. Ihr Status hier ändert sich, sobald ihr Host das erledigt hat.", "/portal/"},
		// A logoff's page names the session, shown as logging off.
		{"logoff", vdibroker.CommandLogoff, "Die Sitzung wird abgemeldet. Sie verschwindet aus dieser Liste, sobald ihr Host das erledigt hat.", "/portal/?off=" + mine.SessionID},
	} {
		res, _ := alice.post(at+"/"+step.act, url.Values{"csrf": {csrf}, "confirm": {"yes"}})
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != step.to {
			t.Fatalf("alice's %s of her session on pod1: %d %s", step.act, res.StatusCode, res.Header.Get("Location"))
		}
		if got := commands(mine.SessionID); !slices.Equal(got, []string{step.command}) {
			t.Errorf("pod1's agent after alice's %s: %v, want %s", step.act, got, step.command)
		}
		if _, home := alice.get("/portal/"); !strings.Contains(home, step.flash) || strings.Contains(home, "anderen Standort") {
			t.Errorf("no word of the %s in German (%q) in\n%s", step.act, step.flash, home)
		}
	}

	res, page := alice.post("/portal/globalsessions/pod1/"+bobs.SessionID+"/logoff", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	if res.StatusCode != http.StatusNotFound || !strings.Contains(page, "Diese Sitzung ist bereits beendet oder gehört nicht Ihnen.") {
		t.Errorf("alice's logoff of bob's session on pod1: %d, want 404 in her words:\n%s", res.StatusCode, page)
	}
	if got := commands(bobs.SessionID); len(got) != 0 {
		t.Errorf("bob's session got %v after alice's try, want nothing", got)
	}

	far.close()
	res, _ = alice.post(at+"/logoff", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("alice's logoff with pod1 gone: %d, want her page again", res.StatusCode)
	}
	res, home = alice.get("/portal/")
	// Not "try again in a few minutes": a pod that cannot do it for
	// another pod (an older release) will not in a few minutes either.
	if res.StatusCode != http.StatusOK || !strings.Contains(home, "Diese Sitzung kann von hier aus gerade nicht abgemeldet oder getrennt werden") ||
		!strings.Contains(home, "in der Sitzung selbst beenden") || strings.Contains(home, "in einigen Minuten") {
		t.Errorf("with pod1 gone: %d, want her page saying the session cannot be ended from here now:\n%s", res.StatusCode, home)
	}
}

// TestReconnectTheRowsSession_RU3_RG1: alice has three Disconnected
// sessions in the member pools of her global desktop "Anywhere": in desk
// and other of pod0, and in other of pod1. Her global connect alone
// would reconnect the first found (R-G1: desk's, in pod0), whichever row
// she clicked; Reconnect on each row reaches that row's session (desk's through
// desk's own desktop, poolDesktop): its id
// in the launch's audit entry, its host in the file. A launch naming
// bob's session, or a malformed one, does not reach it.
func TestReconnectTheRowsSession_RU3_RG1(t *testing.T) {
	e, far, _ := twoPods(t, vdibroker.GlobalEntitlement{Name: "Anywhere", Scope: vdibroker.ScopeAllSites,
		SessionDistribution: vdibroker.DistributionNone, Users: []string{"alice"},
		Members: []vdibroker.Member{{Pod: "pod0", HostPool: "desk"}, {Pod: "pod0", HostPool: "other"}, {Pod: "pod1", HostPool: "other"}}})
	ctx := context.Background()
	open := func(at *env, pool, user string) *vhttp.ConnectResult {
		t.Helper()
		c, err := at.admin.Connect(ctx, pool, vhttp.ConnectRequest{User: user})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := open(e, "desk", "alice")
	second := open(e, "other", "alice")
	third := open(far, "other", "alice")
	bobs := open(e, "other", "bob")
	// Their hosts report them Disconnected (R-S2).
	disconnected := func(user string) vdibroker.AgentSession {
		return vdibroker.AgentSession{ID: user, User: user, State: vdibroker.StateDisconnected}
	}
	e.heartbeat(first.SessionHost, disconnected("alice"))
	e.heartbeat(second.SessionHost, disconnected("alice"), disconnected("bob"))
	far.heartbeat(third.SessionHost, disconnected("alice"))

	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	_, home := alice.get("/portal/")
	// reconnect posts the Reconnect form of the session's row, as a click
	// does, and returns the launch's file and its audit entry's session.
	hidden := regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
	reconnect := func(form url.Values) (file, session string) {
		t.Helper()
		res, body := alice.post("/portal/launch", form)
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("reconnect %v: %d %s", form, res.StatusCode, body)
		}
		launch := res.Header.Get("Location")
		if s := alice.await(launch, ended); s.State != "ready" {
			t.Fatalf("reconnect %v: %+v", form, s)
		}
		_, file = alice.get(launch + "/file")
		list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "portal.launch", RequestID: res.Header.Get("X-Request-Id")})
		if err != nil || len(list) != 1 {
			t.Fatalf("the launch's audit entry: %v %v", list, err)
		}
		var after struct {
			SessionID string `json:"sessionId"`
		}
		json.Unmarshal(list[0].After, &after)
		return file, after.SessionID
	}
	for _, tc := range []struct {
		name string
		want *vhttp.ConnectResult
		pod  string
		// resource: desk's own desktop for its session (poolDesktop),
		// the global one for a session only it names.
		resource string
	}{
		{"the first row", first, "", "desktop:desk"},
		{"the second row, in another member pool of pod0", second, "", "global:Anywhere"},
		{"the third row, in pod1", third, "pod1", "global:Anywhere"},
	} {
		row := regexp.MustCompile(`(?s)<tr role="row" data-session="` + tc.want.SessionID + `"[^>]*>.*?</tr>`).FindString(home)
		form := regexp.MustCompile(`(?s)<form method="post" action="/portal/launch">(.*?)</form>`).FindStringSubmatch(row)
		if form == nil {
			t.Fatalf("%s: no Reconnect in row %q of\n%s", tc.name, row, home)
		}
		values := url.Values{}
		for _, m := range hidden.FindAllStringSubmatch(form[1], -1) {
			values.Set(m[1], html.UnescapeString(m[2]))
		}
		if values.Get("resource") != tc.resource {
			t.Errorf("%s: Reconnect opens %q, want %s", tc.name, values.Get("resource"), tc.resource)
		}
		file, session := reconnect(values)
		if session != tc.want.SessionID || !strings.Contains(file, "full address:s:"+tc.want.Address) {
			t.Errorf("%s: the launch reached session %s, want %s on %s (%s); file\n%s", tc.name, session, tc.want.SessionID, tc.want.SessionHost, tc.pod, file)
		}
	}
	// bob's session named: alice's first, as without (R-G1).
	file, session := reconnect(url.Values{"csrf": {csrf}, "resource": {"global:Anywhere"}, "session": {bobs.SessionID}, "pool": {"other"}})
	if session != first.SessionID || !strings.Contains(file, "full address:s:"+first.Address) {
		t.Errorf("a launch naming bob's session reached %s, want alice's first %s", session, first.SessionID)
	}
	for _, form := range []url.Values{
		{"session": {" x"}, "pool": {"other"}},
		{"session": {second.SessionID}},
		{"session": {second.SessionID}, "pool": {"other"}, "pod": {"pod/1"}},
	} {
		form.Set("csrf", csrf)
		form.Set("resource", "global:Anywhere")
		if res, _ := alice.post("/portal/launch", form); res.StatusCode != http.StatusBadRequest {
			t.Errorf("a launch naming a malformed session %v: %d, want 400", form, res.StatusCode)
		}
	}
	for _, s := range []*vhttp.ConnectResult{first, second, bobs} {
		got, err := e.admin.GetUserSession(ctx, s.HostPool, s.SessionID)
		if err != nil || got.State != vdibroker.StateDisconnected {
			t.Errorf("session %s after the reconnects: %+v %v; want it open as it was (no agent said otherwise)", s.SessionID, got, err)
		}
	}
}

// TestReconnectTheRowsSessionPersonal_RU3_RC1: alice has a Disconnected
// session on each of her two hosts of a MultiplePersistent pool, both
// named by its desktop; Reconnect on the second row reaches the second
// (sessionId, R-C1), where opening the desktop reaches the first host's
// (R-PE3).
func TestReconnectTheRowsSessionPersonal_RU3_RC1(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.pool("multi", map[string]any{"hostPoolType": "Personal", "loadBalancerType": "MultiplePersistent", "personalDesktopAssignmentType": "Direct"}, 2)
	if _, err := e.admin.PutApplicationGroup(ctx, "multi-desktop", map[string]any{"hostPool": "multi", "applicationGroupType": "Desktop",
		"friendlyName": "Lab desktops", "assignments": map[string]any{"users": []string{"alice"}}}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, h := range []string{"multi-1", "multi-2"} {
		if _, err := e.admin.PatchSessionHost(ctx, "multi", h, map[string]any{"assignedUsers": []string{"alice"}}); err != nil {
			t.Fatal(err)
		}
		c, err := e.admin.Connect(ctx, "multi", vhttp.ConnectRequest{User: "alice", SessionHost: h})
		if err != nil {
			t.Fatal(err)
		}
		e.heartbeat(h, vdibroker.AgentSession{ID: "1", User: "alice", State: vdibroker.StateDisconnected})
		ids = append(ids, c.SessionID)
	}
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	_, home := alice.get("/portal/")
	row := regexp.MustCompile(`(?s)<tr role="row" data-session="` + ids[1] + `"[^>]*>.*?</tr>`).FindString(home)
	form := regexp.MustCompile(`(?s)<form method="post" action="/portal/launch">(.*?)</form>`).FindStringSubmatch(row)
	if form == nil {
		t.Fatalf("no Reconnect in the second row %q of\n%s", row, home)
	}
	values := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`).FindAllStringSubmatch(form[1], -1) {
		values.Set(m[1], html.UnescapeString(m[2]))
	}
	if values.Get("resource") != "desktop:multi" || values.Get("csrf") != csrf {
		t.Fatalf("the second row's Reconnect: %v, want desktop:multi with the page's CSRF token", values)
	}
	res, _ := alice.post("/portal/launch", values)
	launch := res.Header.Get("Location")
	if s := alice.await(launch, ended); s.State != "ready" {
		t.Fatalf("reconnect: %+v", s)
	}
	if _, file := alice.get(launch + "/file"); !strings.Contains(file, "full address:s:multi-2.example.test") {
		t.Errorf("the second row's Reconnect: want its host multi-2 in the file\n%s", file)
	}
	list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "portal.launch", RequestID: res.Header.Get("X-Request-Id")})
	if err != nil || len(list) != 1 || !strings.Contains(string(list[0].After), `"sessionId":"`+ids[1]+`"`) {
		t.Errorf("the launch's audit entry: %+v %v; want session %s", list, err, ids[1])
	}
}

// TestLaunchFailureInUsersWords_RU4: a launch that finds no capacity
// tells the user in her words what to do, not the pool's hosts, drains
// and limits, which stay in the refusal's audit entry for her helpdesk;
// the page's progress bar goes.
func TestLaunchFailureInUsersWords_RU4(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.drain("desk", "desk-1", "desk-2")
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	launch := alice.launch(csrf, "desktop:desk")
	s := alice.await(launch, ended)
	// No Retry-After in a drained pool's answer: the words without a
	// number.
	if s.State != "failed" || !strings.Contains(s.Message, "No session host can take \u2068Office desktop\u2069 right now. Try again in a few minutes;") ||
		strings.Contains(s.Message, "desk-") || strings.Contains(strings.ToLower(s.Message), "drain") {
		t.Errorf("a launch without capacity: %+v; want the user's words, no hosts or drains", s)
	}
	if _, page := alice.get(launch); !strings.Contains(page, `<progress id="launch-progress" max="100" value="0" aria-labelledby="launch-title" hidden>`) {
		t.Errorf("the failed launch's page keeps its progress bar:\n%s", page)
	}
	list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "portal.launch"})
	if err != nil || len(list) == 0 || !strings.HasPrefix(list[len(list)-1].Error, "NoCapacity: ") || !strings.Contains(list[len(list)-1].Error, "drain") {
		t.Errorf("the refusal's audit entry: %+v %v; want NoCapacity with the pool's detail", list, err)
	}
}

// TestLaunchReferenceFindsTheRefusal_RU7: the helpdesk, given only the
// reference a user reads out from a failed launch ("Reference for your
// helpdesk: ..."), finds the launch's audit entry by it alone
// (?requestId=, `vdibroker audit list --request-id`), and the entry says
// why and what to change (R-C5: the drained hosts, resume them). Before,
// the audit trail took no request id: she had to list every portal.launch
// and search the JSON, or have the broker's log.
func TestLaunchReferenceFindsTheRefusal_RU7(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.drain("desk", "desk-1", "desk-2")
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	// The drains and her sign-in are entries of other requests, which
	// must not answer the reference.
	s := alice.await(alice.launch(csrf, "desktop:desk"), ended)
	_, ref, ok := strings.Cut(s.Message, "Reference for your helpdesk: ")
	if s.State != "failed" || !ok || ref == "" {
		t.Fatalf("the failed launch: %+v; want a reference", s)
	}
	list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{RequestID: ref})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("audit entries of request %s: %d, want the launch's one: %+v", ref, len(list), list)
	}
	a := list[0]
	if a.Action != "portal.launch" || a.Principal.Name != "alice" || a.Target != "hostpools/desk/connect" ||
		!strings.HasPrefix(a.Error, "NoCapacity: ") || !strings.Contains(a.Error, "drained") || !strings.Contains(a.Error, "allowNewSession true") {
		t.Errorf("the entry of request %s: %+v; want alice's refused launch in desk, saying its hosts are drained and how to resume them", ref, a)
	}
}

// TestSigninRefusalNamesItsRequest_RSEC: a refused sign-in's audit entry
// (action signin, written by the bounded refusal audit) names the
// request that was refused, as the access log line and the reference the
// portal shows beside a refused single sign-on do, so her helpdesk finds
// why by that reference (audit list --request-id). Before, the entry had
// no request id: the reference led to a log line with a status and no
// reason.
func TestSigninRefusalNamesItsRequest_RSEC(t *testing.T) {
	e := newEnv(t, func(c *portal.Config) { c.Refusals = &console.AuditRefusals{Audit: c.Audit} })
	b := e.browser()
	b.get("/portal/signin")
	res, _ := b.post("/portal/signin", url.Values{"csrf": {"not-the-form's"}, "token": {e.userToken("alice")}})
	ref := res.Header.Get("X-Request-Id")
	if res.StatusCode != http.StatusForbidden || ref == "" {
		t.Fatalf("a sign-in with a stale form: %d, request id %q", res.StatusCode, ref)
	}
	list, err := e.admin.ListAudit(t.Context(), vhttp.AuditQuery{RequestID: ref})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Action != "signin" || list[0].Target != "portal/token" || list[0].Outcome != vdibroker.AuditRefused ||
		!strings.Contains(list[0].Error, "CSRF") {
		t.Errorf("audit entries of request %s: %+v; want the refused sign-in, saying why", ref, list)
	}
}

// TestLaunchFailureReferenceIsTheRequest_RU4_RU7: a launch refused for a
// reason the portal has no words for gives the user a reference, the
// X-Request-Id of her launch, which names the launch's refused audit
// entry (portal.launch) and a log line, where the connect's own message
// is; the message is on none of her pages.
func TestLaunchFailureReferenceIsTheRequest_RU4_RU7(t *testing.T) {
	const detail = "host desk-1 is being re-imaged by the ops team"
	var logged syncbuf.Buffer
	e := newEnv(t, func(c *portal.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logged, nil))
		api := c.API
		c.API = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/connect") {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusConflict)
				w.Write([]byte(`{"error":{"code":"Conflict","message":"` + detail + `"}}`))
				return
			}
			api.ServeHTTP(w, r)
		})
	})
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	res, body := alice.post("/portal/launch", url.Values{"csrf": {csrf}, "resource": {"desktop:desk"}})
	ref, launch := res.Header.Get("X-Request-Id"), res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther || ref == "" || !strings.HasPrefix(launch, "/portal/launches/") {
		t.Fatalf("launch: %d %q %q %s", res.StatusCode, ref, launch, body)
	}
	s := alice.await(launch, ended)
	if s.State != "failed" || !strings.HasSuffix(s.Message, "Reference for your helpdesk: "+ref) || strings.Contains(s.Message, detail) {
		t.Errorf("the failed launch: %+v; want the reference %s, not the connect's message", s, ref)
	}
	if _, page := alice.get(launch); !strings.Contains(page, ref) || strings.Contains(page, "re-imaged") {
		t.Errorf("the failed launch's page does not give %s, or gives the connect's message:\n%s", ref, page)
	}
	list, err := e.admin.ListAudit(t.Context(), vhttp.AuditQuery{Action: "portal.launch"})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, a := range list {
		if a.RequestID == ref {
			found = true
			if a.Outcome != vdibroker.AuditRefused || a.Error != "Conflict: "+detail {
				t.Errorf("the launch's entry: %+v, want refused with the connect's message", a)
			}
		}
	}
	if !found {
		t.Errorf("no portal.launch entry has request id %s: %+v", ref, list)
	}
	var line map[string]any
	for l := range strings.SplitSeq(logged.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["request_id"] == ref {
			line = m
		}
	}
	if line == nil || line["err"] != detail || line["code"] != "Conflict" || line["user"] != "alice" {
		t.Errorf("the log line of request %s: %v, want the connect's message:\n%s", ref, line, logged.String())
	}
}

// TestRefusalsInUsersWords_RU6: what the portal says when it refuses is
// in the page's language and the user's words (R-U6): a wrong and an
// expired access token, a logoff of a session that ended since her page
// was shown, an API call that fails for a reason the portal has no words
// for; never the API's English message, which names pools, sessions and
// token expiry times (the administrator's: in the log, by the request
// id the page gives). A user entitled to nothing is told whom to ask.
func TestRefusalsInUsersWords_RU6(t *testing.T) {
	e := newEnv(t, nil)
	de := []string{"Accept-Language", "de"}
	signin := func(b *browser, token string) (int, string) {
		t.Helper()
		_, page := b.get("/portal/signin", de...)
		req, _ := http.NewRequest("POST", b.url+"/portal/signin", strings.NewReader(url.Values{"csrf": {csrfRE.FindStringSubmatch(page)[1]}, "token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.url)
		req.Header.Set(de[0], de[1])
		res, body := b.do(req)
		return res.StatusCode, body
	}
	expiring, err := e.admin.CreateToken(t.Context(), vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: "alice", ExpiresInSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	e.advance(2 * time.Minute)
	for name, token := range map[string]string{"wrong": "vdbt_0123456789abcdef0123456789abcdef", "expired": expiring.Secret} {
		code, page := signin(e.browser(), token)
		if code != http.StatusUnauthorized || !strings.Contains(page, "Dieses Zugriffstoken ist ungültig oder abgelaufen.") ||
			strings.Contains(page, "invalid token") || strings.Contains(page, "expired at") {
			t.Errorf("sign-in with a %s token: %d\n%s", name, code, page)
		}
		// A screen reader reads the refusal with the field it is about.
		if !strings.Contains(page, `<p class="error" id="error">`) || !regexp.MustCompile(`<input type="password" id="token"[^>]* aria-invalid="true" aria-describedby="error">`).MatchString(page) {
			t.Errorf("sign-in with a %s token: the token field is not described by the refusal:\n%s", name, page)
		}
	}

	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	req, _ := http.NewRequest("POST", alice.url+"/portal/sessions/desk/01nosuchsession/logoff", strings.NewReader(url.Values{"csrf": {csrf}, "confirm": {"yes"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", alice.url)
	req.Header.Set(de[0], de[1])
	res, page := alice.do(req)
	if res.StatusCode != http.StatusNotFound || !strings.Contains(page, "Diese Sitzung ist bereits beendet") ||
		strings.Contains(page, "01nosuchsession") || strings.Contains(page, `"desk"`) || strings.Contains(page, "not found") {
		t.Errorf("logoff of a session that ended: %d\n%s", res.StatusCode, page)
	}

	// A refusal the portal has no words for: the page gives its request
	// id, which names the log line with the API's message.
	var logged syncbuf.Buffer
	const detail = "pool desk is being rebuilt by the ops team"
	e2 := newEnv(t, func(c *portal.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logged, nil))
		api := c.API
		c.API = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodDelete {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusConflict)
				w.Write([]byte(`{"error":{"code":"Conflict","message":"` + detail + `"}}`))
				return
			}
			api.ServeHTTP(w, r)
		})
	})
	alice2 := e2.browser()
	csrf = alice2.signIn(e2.userToken("alice"))
	res, page = alice2.post("/portal/sessions/desk/01any/logoff", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	ref := res.Header.Get("X-Request-Id")
	if res.StatusCode != http.StatusConflict || ref == "" || !strings.Contains(page, "That did not work.") ||
		!strings.Contains(page, "Reference for your helpdesk: "+ref) || strings.Contains(page, "rebuilt") {
		t.Errorf("a refusal without words of its own: %d (request %s)\n%s", res.StatusCode, ref, page)
	}
	if !strings.Contains(logged.String(), `"request_id":"`+ref+`"`) || !strings.Contains(logged.String(), detail) {
		t.Errorf("no log line of request %s with the API's message:\n%s", ref, logged.String())
	}

	carol := e.browser()
	carol.signIn(e.userToken("carol"))
	if _, home := carol.get("/portal/"); !regexp.MustCompile(`<p id="no-resources">[^<]*Ask your helpdesk`).MatchString(home) {
		t.Errorf("the page of a user entitled to nothing does not say whom to ask:\n%s", home)
	}
}

// TestScreenReaderNames_RU1: a screen reader moving from button to
// button hears what each acts on ("Open Office desktop", "Log off Office
// desktop"), not a row of bare "Open"s: each button is labelled by
// itself and the name of its resource or session. On the launch page the
// message is a live region, read out when the script changes it (ready,
// failed), the progress bar is named by the title, and the note that the
// broker cannot be reached is an alert.
func TestScreenReaderNames_RU1(t *testing.T) {
	e := newEnv(t, nil)
	c, err := e.admin.Connect(t.Context(), "desk", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	e.heartbeat(c.SessionHost, vdibroker.AgentSession{ID: "1", User: "alice", State: vdibroker.StateActive})
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	_, home := alice.get("/portal/")
	got := map[string][]string{}
	buttonRE := regexp.MustCompile(`<button type="submit" class="(open|logoff|disconnect|reconnect)"([^>]*)>`)
	for _, m := range buttonRE.FindAllStringSubmatch(home, -1) {
		id := regexp.MustCompile(`id="([^"]+)"`).FindStringSubmatch(m[2])
		by := regexp.MustCompile(`aria-labelledby="([^"]+)"`).FindStringSubmatch(m[2])
		if id == nil || by == nil {
			t.Errorf("button %s has no id or aria-labelledby", m[0])
			continue
		}
		ids := strings.Fields(by[1])
		if len(ids) != 2 || ids[0] != id[1] {
			t.Errorf("button %s: want it labelled by itself and its resource or session", m[0])
			continue
		}
		name := regexp.MustCompile(`id="` + regexp.QuoteMeta(ids[1]) + `"[^>]*>([^<]*)<`).FindStringSubmatch(home)
		if name == nil {
			t.Errorf("button %s: no element %s", m[0], ids[1])
			continue
		}
		got[m[1]] = append(got[m[1]], name[1])
	}
	slices.Sort(got["open"])
	if want := []string{"Cold lab", "Office desktop"}; !slices.Equal(got["open"], want) {
		t.Errorf("the Open buttons name %q, want %q", got["open"], want)
	}
	for _, b := range []string{"logoff", "disconnect"} {
		if want := []string{"Office desktop"}; !slices.Equal(got[b], want) {
			t.Errorf("the %s buttons name %q, want %q", b, got[b], want)
		}
	}

	_, page := alice.get(alice.launch(csrf, "desktop:cold"))
	for _, want := range []string{`<p id="launch-message" role="status">`, `<p id="launch-note" class="note" role="alert"></p>`,
		`aria-labelledby="launch-title"`, `data-lost="Lost contact with the service. Trying again…"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the launch page lacks %s:\n%s", want, page)
		}
	}
}

// TestPageTitles_RU1: each page's <title> says what the page is before
// the portal's name (WCAG 2.4.2): the sign-in page, an error, a launch;
// the home page is the portal itself. One title for every page leaves a
// screen reader's user, and anyone with several tabs, guessing.
func TestPageTitles_RU1(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser()
	titleRE := regexp.MustCompile(`<title>([^<]*)</title>`)
	title := func(page string) string {
		if m := titleRE.FindStringSubmatch(page); m != nil {
			return m[1]
		}
		return ""
	}
	_, page := b.get("/portal/signin")
	if got, want := title(page), "Sign in – Your desktops and apps"; got != want {
		t.Errorf("the sign-in page's title %q, want %q", got, want)
	}
	csrf := b.signIn(e.userToken("alice"))
	if _, page := b.get("/portal/"); title(page) != "Your desktops and apps" {
		t.Errorf("the home page's title %q", title(page))
	}
	if _, page := b.get("/portal/nowhere"); title(page) != "Something went wrong – Your desktops and apps" {
		t.Errorf("an error page's title %q", title(page))
	}
	launch := b.launch(csrf, "desktop:desk")
	b.await(launch, ended)
	if _, page := b.get(launch, "Accept-Language", "de"); title(page) != "Ihre Verbindungsdatei für \u2068Office desktop\u2069 ist bereit. – Ihre Desktops und Apps" {
		t.Errorf("a ready launch's title %q", title(page))
	}
}

// TestLanguageLinksReachAPage_RU6: the language links of a page that
// answers a form (a refused logoff) lead to a page in that language, not
// to the form's path, which has no page ("There is no such page"); the
// sign-in page's keep where she was going.
func TestLanguageLinksReachAPage_RU6(t *testing.T) {
	e := newEnv(t, nil)
	hrefRE := regexp.MustCompile(`<a lang="de" href="([^"]+)"`)
	b := e.browser()
	_, page := b.get("/portal/signin?next=%2Fportal%2F%3Fx%3D1")
	if m := hrefRE.FindStringSubmatch(page); m == nil || html.UnescapeString(m[1]) != "?next=%2Fportal%2F%3Fx%3D1&lang=de" {
		t.Errorf("the sign-in page's German link: %q", m)
	}
	_, page = b.get("/portal/signin/oidc/callback?code=c0de&state=s7a7e")
	if m := hrefRE.FindStringSubmatch(page); m == nil || html.UnescapeString(m[1]) != "/portal/signin?lang=de" {
		t.Errorf("a single sign-on callback's German link: %q, want the sign-in page's", m)
	}
	csrf := b.signIn(e.userToken("alice"))
	res, page := b.post("/portal/sessions/desk/01nosuchsession/logoff", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	m := hrefRE.FindStringSubmatch(page)
	if res.StatusCode != http.StatusNotFound || m == nil {
		t.Fatalf("a refused logoff: %d, links %q", res.StatusCode, m)
	}
	link, err := url.Parse(b.url + "/portal/sessions/desk/01nosuchsession/logoff")
	if err != nil {
		t.Fatal(err)
	}
	link = link.ResolveReference(mustURL(t, html.UnescapeString(m[1])))
	if res, page := b.get(link.RequestURI()); res.StatusCode != http.StatusOK || !strings.Contains(page, `<html lang="de"`) {
		t.Errorf("the refused logoff's German link %s: %d\n%s", link.RequestURI(), res.StatusCode, page)
	}
}

// TestFullPortal_RSEC (R-SEC, "Web sessions"; R-U2): a portal holding
// its most sign-ins refuses the next user in her words, with a reference
// for her helpdesk, and tells the administrator in one log line a minute
// what raises the bound, however many are refused; a sign-out makes room.
func TestFullPortal_RSEC(t *testing.T) {
	var logged syncbuf.Buffer
	clk := clocktesting.NewFakeClock(time.Now())
	e := newEnv(t, func(c *portal.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logged, nil))
		c.SessionLimits = vdibroker.WebSessionLimits{PerPrincipal: 16, Window: time.Minute, PerArea: 2}
		c.Clock = clk
	})
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	e.browser().signIn(e.userToken("bob"))
	refused := func(who string) string {
		t.Helper()
		b := e.browser()
		_, page := b.get("/portal/signin")
		m := csrfRE.FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no CSRF token on the sign-in page")
		}
		res, body := b.post("/portal/signin", url.Values{"csrf": {m[1]}, "token": {e.userToken(who)}, "next": {"/portal/"}})
		if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "as many people signed in as it is set to take") {
			t.Errorf("%s's sign-in into a full portal: %d %s", who, res.StatusCode, body)
		}
		if ref := res.Header.Get("X-Request-Id"); ref == "" || !strings.Contains(body, ref) {
			t.Errorf("%s's refusal names no reference (X-Request-Id %q)", who, ref)
		}
		return body
	}
	refused("carol")
	refused("dave")
	if n := strings.Count(logged.String(), "--portal-max-signins"); n != 1 {
		t.Errorf("the full portal was logged %d times for two refusals, want once:\n%s", n, logged.String())
	}
	clk.Step(time.Minute)
	refused("erin")
	if n := strings.Count(logged.String(), "--portal-max-signins"); n != 2 {
		t.Errorf("a minute later: logged %d times, want twice", n)
	}
	if res, _ := alice.post("/portal/signout", url.Values{"csrf": {csrf}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("alice's sign-out: %d", res.StatusCode)
	}
	e.browser().signIn(e.userToken("carol"))
	// Her sign-out is in the audit trail, as her sign-in is (R-SEC).
	if list, err := e.admin.ListAudit(context.Background(), vhttp.AuditQuery{Action: "signout", Principal: "alice"}); err != nil || len(list) != 1 {
		t.Errorf("alice's sign-out in the audit trail: %+v, %v; want one entry", list, err)
	}
}

// putFederation gives each pod of envs its copy of doc.
func putFederation(t *testing.T, doc *vdibroker.Federation, envs ...*env) {
	t.Helper()
	for _, x := range envs {
		d := *doc
		if _, err := x.admin.PutFederation(t.Context(), &d); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSessionSinceItsState_RU3: the sessions list's "Since", beside its
// "State", is when the session took that state: a session made at 09:00
// and disconnected two hours later reads "Disconnected" since 11:00, not
// since it was made.
func TestSessionSinceItsState_RU3(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	c := e.activeAtDesk("alice")
	e.advance(2 * time.Hour)
	e.heartbeat(c.SessionHost, vdibroker.AgentSession{ID: "1", User: "alice", State: vdibroker.StateDisconnected})
	list, err := e.admin.UserSessions(ctx, "alice")
	if err != nil || len(list) != 1 {
		t.Fatalf("alice's sessions: %+v, %v", list, err)
	}
	s := list[0]
	if s.StateTime.Sub(s.CreateTime) < 2*time.Hour {
		t.Fatalf("the session was made %s and disconnected %s: want two hours apart", s.CreateTime, s.StateTime)
	}
	alice := e.browser()
	alice.signIn(e.userToken("alice"))
	_, home := alice.get("/portal/")
	at := func(t time.Time) string {
		return `datetime="` + t.UTC().Format("2006-01-02T15:04:05Z") + `">` + t.UTC().Format("2006-01-02 15:04 UTC") + `</time>`
	}
	if !strings.Contains(home, at(s.StateTime)) || strings.Contains(home, at(s.CreateTime)) {
		t.Errorf("the page's Since: want %s (its disconnect), not %s (its start):\n%s", at(s.StateTime), at(s.CreateTime), home)
	}
}

// twoPods starts pod0 and pod1 of site s0, each a portal on its own
// broker (newEnvWith), and puts on both a federation document of them
// with entitlements, which it returns.
func twoPods(t *testing.T, entitlements ...vdibroker.GlobalEntitlement) (e, far *env, doc *vdibroker.Federation) {
	t.Helper()
	secret := []byte("portal-test-federation-secret")
	e = newEnvWith(t, nil, "pod0", secret)
	far = newEnvWith(t, nil, "pod1", secret)
	doc = &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "s0"}},
		Pods:               []vdibroker.Pod{{Name: "pod0", Site: "s0", URL: e.url}, {Name: "pod1", Site: "s0", URL: far.url}},
		GlobalEntitlements: entitlements}
	putFederation(t, doc, e, far)
	return e, far, doc
}

// TestReconnectLocalRowOutOfGlobalScope_RU3_RC1_RG1: alice's Disconnected
// session in pod0's "desk" is named on her page by two desktops, the
// global "Anywhere" (desk is its member, but its scope, WithinSite from
// her home site s1, leaves pod0 out) and desk's own "Office desktop".
// Reconnect on the row reaches that session (desk's desktop, naming it,
// R-C1), not a new session in pod1 (the global connect from pod0 looks
// only in s1, R-G1, and would make one there).
func TestReconnectLocalRowOutOfGlobalScope_RU3_RC1_RG1(t *testing.T) {
	secret := []byte("portal-test-federation-secret")
	e := newEnvWith(t, nil, "pod0", secret)
	far := newEnvAt(t, nil, "pod1", "s1", secret)
	ctx := context.Background()
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "s0"}, {Name: "s1"}},
		Pods:      []vdibroker.Pod{{Name: "pod0", Site: "s0", URL: e.url}, {Name: "pod1", Site: "s1", URL: far.url}},
		HomeSites: []vdibroker.HomeSite{{User: "alice", Site: "s1"}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "Anywhere", Scope: vdibroker.ScopeWithinSite, UseHomeSite: true,
			SessionDistribution: vdibroker.DistributionNone, Users: []string{"alice"},
			Members: []vdibroker.Member{{Pod: "pod0", HostPool: "desk"}, {Pod: "pod1", HostPool: "other"}}}}}
	putFederation(t, doc, e, far)
	mine, err := e.admin.Connect(ctx, "desk", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	e.heartbeat(mine.SessionHost, vdibroker.AgentSession{ID: "1", User: "alice", State: vdibroker.StateDisconnected})

	alice := e.browser()
	alice.signIn(e.userToken("alice"))
	_, home := alice.get("/portal/")
	row := regexp.MustCompile(`(?s)<tr role="row" data-session="` + mine.SessionID + `"[^>]*>.*?</tr>`).FindString(home)
	form := regexp.MustCompile(`(?s)<form method="post" action="/portal/launch">(.*?)</form>`).FindStringSubmatch(row)
	if form == nil {
		t.Fatalf("no Reconnect in alice's row %q of\n%s", row, home)
	}
	values := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`).FindAllStringSubmatch(form[1], -1) {
		values.Set(m[1], html.UnescapeString(m[2]))
	}
	res, body := alice.post("/portal/launch", values)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("reconnect %v: %d %s", values, res.StatusCode, body)
	}
	launch := res.Header.Get("Location")
	if s := alice.await(launch, ended); s.State != "ready" {
		t.Fatalf("reconnect %v: %+v", values, s)
	}
	list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "portal.launch", RequestID: res.Header.Get("X-Request-Id")})
	if err != nil || len(list) != 1 || !strings.Contains(string(list[0].After), `"sessionId":"`+mine.SessionID+`"`) {
		t.Errorf("Reconnect of alice's desk row (form %v): audit %+v %v; want her session %s reconnected", values, list, err, mine.SessionID)
	}
	if l, err := far.admin.UserSessions(ctx, "alice"); err != nil || len(l) != 0 {
		t.Errorf("alice's sessions in pod1 after the Reconnect of her row in pod0: %d %v, want none", len(l), err)
	}
}

// TestFailedLaunchesHoldNoLaunchSlot_RU7: a launch that failed is over:
// it does not count against the sign-in's launches at once. A user told
// "no session host can take it, try again" who tries again twice, or who
// then opens another desktop, is not refused with "too many launches
// under way" while none is. Her failed launches are still bounded: only
// the newest MaxLaunchesPerSession-1 are kept (their pages say why they
// failed), older ones go.
func TestFailedLaunchesHoldNoLaunchSlot_RU7(t *testing.T) {
	e := newEnv(t, func(c *portal.Config) { c.MaxLaunchesPerSession = 2 })
	ctx := context.Background()
	e.drain("desk", "desk-1", "desk-2")
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	var failed []string
	for i := range 4 {
		res, body := alice.post("/portal/launch", url.Values{"csrf": {csrf}, "resource": {"desktop:desk"}})
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("try %d of a desktop without capacity: %d %s; want 303, her earlier tries failed", i+1, res.StatusCode, body)
		}
		l := res.Header.Get("Location")
		if s := alice.await(l, ended); s.State != "failed" {
			t.Fatalf("try %d: %+v; want failed", i+1, s)
		}
		failed = append(failed, l)
	}
	// The newest failures still say why (the one kept when the last was
	// made, and the last); the oldest are forgotten.
	for _, l := range failed[2:] {
		if code, s := alice.status(l); code != 200 || s.State != "failed" {
			t.Errorf("a newest failed launch %s: %d %+v", l, code, s)
		}
	}
	for _, l := range failed[:2] {
		if res, _ := alice.get(l + "/status"); res.StatusCode != http.StatusNotFound {
			t.Errorf("an older failed launch %s: %d, want 404 (forgotten)", l, res.StatusCode)
		}
	}
	// Capacity back: her desktop opens, and so does a second launch.
	for _, h := range []string{"desk-1", "desk-2"} {
		if _, err := e.admin.PatchSessionHost(ctx, "desk", h, map[string]any{"allowNewSession": true}); err != nil {
			t.Fatal(err)
		}
	}
	alice.launch(csrf, "desktop:desk")
	alice.launch(csrf, "desktop:cold")
	// Two under way (or not fetched): the sign-in's bound holds.
	if res, _ := alice.post("/portal/launch", url.Values{"csrf": {csrf}, "resource": {"desktop:desk"}}); res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a third launch with two under way: %d, want 429", res.StatusCode)
	}
}

// TestExpiredSigninPageLeadsToSignin_RU2_RU6: a sign-in that expired
// while her page was open is told so, and the page's one link is "Sign
// in" to the sign-in page, not "Back to your desktops and apps" (which
// only led there).
func TestExpiredSigninPageLeadsToSignin_RU2_RU6(t *testing.T) {
	e := newEnv(t, nil)
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	e.advance(30 * 24 * time.Hour)
	res, page := alice.post("/portal/launch", url.Values{"csrf": {csrf}, "resource": {"desktop:desk"}})
	if res.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "Your sign-in has expired") ||
		!strings.Contains(page, `<a href="/portal/signin" id="back">Sign in</a>`) || strings.Contains(page, "Back to your desktops and apps") {
		t.Errorf("a launch after her sign-in expired: %d\n%s\nwant 401 saying so, with a link to sign in", res.StatusCode, page)
	}
	// Her access token deleted while she is signed in: the portal's own
	// sign-in still holds, the API refuses the token (401), and the page
	// says so alike, leading to the sign-in page.
	tok, err := e.admin.CreateToken(t.Context(), vhttp.TokenRequest{Role: vdibroker.RoleUser, Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	again := e.browser()
	csrf = again.signIn(tok.Secret)
	if err := e.admin.DeleteToken(t.Context(), tok.ID); err != nil {
		t.Fatal(err)
	}
	res, page = again.post("/portal/sessions/desk/01nosuchsession/logoff", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	if res.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "Your sign-in has expired") ||
		!strings.Contains(page, `<a href="/portal/signin" id="back">Sign in</a>`) || strings.Contains(page, "Back to your desktops and apps") {
		t.Errorf("a logoff with her token deleted: %d\n%s\nwant 401 saying her sign-in expired, with a link to sign in", res.StatusCode, page)
	}
}

// TestNoReconnectWhereItCannotReach_RU3_RG1: alice's Disconnected
// session in pod0's "other" (no desktop of hers: bob's pool) is named
// only by her global desktop "Anywhere", whose scope from pod0
// (WithinSite, from her home site s1) leaves pod0 out: its connect
// passes the session over and makes a new one in pod1 (R-G1). Her row
// offers no Reconnect but Log off, and says why, in each of the
// portal's languages. With a second global desktop whose scope takes in
// pod0, the row's Reconnect goes through that one and reaches her
// session.
func TestNoReconnectWhereItCannotReach_RU3_RG1(t *testing.T) {
	secret := []byte("portal-test-federation-secret")
	e := newEnvWith(t, nil, "pod0", secret)
	far := newEnvAt(t, nil, "pod1", "s1", secret)
	ctx := context.Background()
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "s0"}, {Name: "s1"}},
		Pods:      []vdibroker.Pod{{Name: "pod0", Site: "s0", URL: e.url}, {Name: "pod1", Site: "s1", URL: far.url}},
		HomeSites: []vdibroker.HomeSite{{User: "alice", Site: "s1"}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "Anywhere", Scope: vdibroker.ScopeWithinSite, UseHomeSite: true,
			SessionDistribution: vdibroker.DistributionNone, Users: []string{"alice"},
			Members: []vdibroker.Member{{Pod: "pod0", HostPool: "other"}, {Pod: "pod1", HostPool: "other"}}}}}
	putFederation(t, doc, e, far)
	mine, err := e.admin.Connect(ctx, "other", vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	e.heartbeat(mine.SessionHost, vdibroker.AgentSession{ID: "1", User: "alice", State: vdibroker.StateDisconnected})

	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	rowRE := regexp.MustCompile(`(?s)<tr role="row" data-session="` + mine.SessionID + `"[^>]*>.*?</tr>`)
	for _, tc := range []struct{ lang, why string }{
		{"en", "Cannot be reconnected from here"},
		{"de", "Kann von hier aus nicht wieder verbunden werden"},
		{"pt", "Não é possível voltar a ligar a partir daqui"},
		{"ar", "لا يمكن إعادة الاتصال بها من هنا"},
	} {
		_, home := alice.get("/portal/?lang=" + tc.lang)
		row := rowRE.FindString(home)
		if !strings.Contains(row, `">Anywhere</bdi></td>`) || strings.Contains(row, `class="reconnect"`) || !strings.Contains(row, `class="logoff"`) ||
			!hasRowNote(row, "noreconnect", tc.why) {
			t.Errorf("%s: alice's row, named only by a desktop that cannot reach it: want no Reconnect, Log off, and why (%q):\n%s", tc.lang, tc.why, row)
		}
	}
	alice.get("/portal/?lang=en")
	// Why: what the row offered before, opened, reaches no session of
	// hers but makes one in pod1 (R-G1).
	res, _ := alice.post("/portal/launch", url.Values{"csrf": {csrf}, "resource": {"global:Anywhere"}, "session": {mine.SessionID}, "pool": {"other"}})
	if s := alice.await(res.Header.Get("Location"), ended); s.State != "ready" {
		t.Fatalf("opening Anywhere naming her session: %+v", s)
	}
	if l, err := far.admin.UserSessions(ctx, "alice"); err != nil || len(l) != 1 {
		t.Errorf("alice's sessions in pod1 after opening Anywhere naming hers in pod0: %d %v, want the new one", len(l), err)
	}

	// A global desktop whose scope takes in pod0: Reconnect through it.
	doc.Generation++
	doc.GlobalEntitlements = append(doc.GlobalEntitlements, vdibroker.GlobalEntitlement{Name: "Everywhere", Scope: vdibroker.ScopeAllSites,
		SessionDistribution: vdibroker.DistributionNone, Users: []string{"alice"}, Members: []vdibroker.Member{{Pod: "pod0", HostPool: "other"}}})
	putFederation(t, doc, e, far)
	_, home := alice.get("/portal/")
	row := rowRE.FindString(home)
	form := regexp.MustCompile(`(?s)<form method="post" action="/portal/launch">(.*?)</form>`).FindStringSubmatch(row)
	if form == nil || strings.Contains(row, `id="noreconnect-`) {
		t.Fatalf("with Everywhere, alice's row: want Reconnect and no word against it:\n%s", row)
	}
	values := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`).FindAllStringSubmatch(form[1], -1) {
		values.Set(m[1], html.UnescapeString(m[2]))
	}
	if values.Get("resource") != "global:Everywhere" {
		t.Errorf("Reconnect opens %q, want global:Everywhere", values.Get("resource"))
	}
	res, _ = alice.post("/portal/launch", values)
	if s := alice.await(res.Header.Get("Location"), ended); s.State != "ready" {
		t.Fatalf("Reconnect: %+v", s)
	}
	list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "portal.launch", RequestID: res.Header.Get("X-Request-Id")})
	if err != nil || len(list) != 1 || !strings.Contains(string(list[0].After), `"sessionId":"`+mine.SessionID+`"`) {
		t.Errorf("Reconnect through Everywhere: audit %+v %v; want her session %s", list, err, mine.SessionID)
	}
}

// hasTileNote says whether html has an unavailable resource's note
// (its text starting with text): a stop of the Tab key, a note (role)
// named by the resource's name and described by its text, which is its
// content too, not hidden: a screen reader reading the page reads it
// once, and says it once as the focus reaches the note, after the
// resource's name (R-U5).
func hasTileNote(html, text string) bool {
	re := regexp.MustCompile(`<p class="unavailable" id="unavailable-(\d+)" role="note" tabindex="0" aria-labelledby="resource-(\d+)" aria-describedby="unavailable-text-(\d+)"[^>]*><span id="unavailable-text-(\d+)">` + regexp.QuoteMeta(text))
	for _, m := range re.FindAllStringSubmatch(html, -1) {
		if m[1] == m[2] && m[2] == m[3] && m[3] == m[4] {
			return true
		}
	}
	return false
}

// hasRowNote says whether a session's row has the note of class (its
// text starting with text) as plain text, no stop of the Tab key nor
// hidden, that describes every button of the row (aria-describedby): a
// keyboard user hears it with the button she reaches, a screen reader
// reading the page reads it once (R-U3).
func hasRowNote(row, class, text string) bool {
	m := regexp.MustCompile(`<span class="` + class + `" id="(` + class + `-\d+)">` + regexp.QuoteMeta(text)).FindStringSubmatch(row)
	buttons := regexp.MustCompile(`<button [^>]*>`).FindAllString(row, -1)
	if m == nil || len(buttons) == 0 {
		return false
	}
	for _, b := range buttons {
		d := regexp.MustCompile(`aria-describedby="([^"]*)"`).FindStringSubmatch(b)
		if d == nil || !slices.Contains(strings.Fields(d[1]), m[1]) {
			return false
		}
	}
	return true
}
