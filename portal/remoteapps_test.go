package portal_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestApplicationNoHostRunsInUsersWords_RE12_RU6: an application whose
// pool has no host that can run RemoteApps is refused, and the user reads
// why in her language (German here), with the reference her helpdesk
// finds the refusal's audit entry by; no host or pool name is shown.
func TestApplicationNoHostRunsInUsersWords_RE12_RU6(t *testing.T) {
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
	no := false
	for _, h := range []string{"desk-1", "desk-2"} {
		if _, err := e.admin.Heartbeat(ctx, e.creds[h], &vdibroker.HeartbeatRequest{RemoteApps: &no}); err != nil {
			t.Fatal(err)
		}
	}
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	alice.get("/portal/?lang=de") // her choice, kept in a cookie
	launch := alice.launch(csrf, "app:desk-apps/word")
	s := alice.await(launch, ended)
	ref := regexp.MustCompile(`Referenz für Ihren Helpdesk: (\S+)$`).FindStringSubmatch(s.Message)
	if s.State != "failed" || !strings.HasPrefix(s.Message, "\u2068Word\u2069 kann nicht als App geöffnet werden: Die Computer, auf denen sie angeboten wird, können nur ganze Desktops anzeigen.") ||
		ref == nil || strings.Contains(s.Message, "desk-") || strings.Contains(s.Message, `"desk"`) || strings.Contains(s.Message, "RemoteApp") {
		t.Fatalf("the refused launch: %+v; want her German words and a reference", s)
	}
	list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "portal.launch"})
	if err != nil || len(list) == 0 {
		t.Fatalf("audit: %+v %v", list, err)
	}
	last := list[len(list)-1]
	if !strings.HasPrefix(last.Error, "RemoteAppUnsupported: ") || !strings.Contains(last.Error, `"desk"`) || last.RequestID != ref[1] {
		t.Errorf("the refusal's audit entry: %+v; want RemoteAppUnsupported naming the pool, request id %s", last, ref[1])
	}
}

// TestAppOnStartingHostIsNoDesktop_RU4_RU6: an application whose pool
// must start a host first (R-A4) is waited for as a desktop is, and its
// page names what she opened: not "Your desktop is starting" over Paint,
// in any language.
func TestAppOnStartingHostIsNoDesktop_RU4_RU6(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	if _, err := e.admin.PutApplicationGroup(ctx, "cold-apps", map[string]any{"hostPool": "cold", "applicationGroupType": "RemoteApp",
		"assignments": map[string]any{"users": []string{"alice"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.PutApplication(ctx, "cold-apps", "paint", map[string]any{"friendlyName": "Paint", "filePath": `C:\Windows\mspaint.exe`,
		"showInPortal": true}); err != nil {
		t.Fatal(err)
	}
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	launch := alice.launch(csrf, "app:cold-apps/paint")
	s := alice.await(launch, func(s launchStatus) bool { return s.State != "waiting" || s.Waited != "" })
	if s.State != "waiting" || s.Title != "Starting a computer for \u2068Paint\u2069" || !strings.Contains(s.Message, "\u2068cold-1\u2069 is starting") {
		t.Fatalf("while cold-1 starts for Paint: %+v", s)
	}
	for lang, want := range map[string]string{"de": "Ein Computer für \u2068Paint\u2069 wird gestartet", "pt": "A iniciar um computador para \u2068Paint\u2069",
		"ar": "جارٍ تشغيل جهاز كمبيوتر لـ \u2068Paint\u2069"} {
		if _, page := alice.get(launch, "Accept-Language", lang); !strings.Contains(page, `<h1 id="launch-title">`+want+`</h1>`) {
			t.Errorf("the %s page of Paint on a starting host lacks %q:\n%s", lang, want, page)
		}
	}
}

// TestUnavailableAppTile_RE12_RU5_RU6: an application her feed marks
// unavailable (its pool's hosts all cannot run RemoteApps) is shown with
// no Open button and a note in her language that it cannot be opened now
// and to tell her helpdesk, a stop of the Tab key (its browser test
// tabs to it); the desktop of the same pool, and an
// application of a pool whose host did not say, keep theirs. Posted
// anyway (a page from before), the launch is refused as before.
func TestUnavailableAppTile_RE12_RU5_RU6(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	for _, a := range []struct{ pool, app, name string }{{"desk", "word", "Word"}, {"cold", "paint", "Paint"}} {
		if _, err := e.admin.PutApplicationGroup(ctx, a.pool+"-apps", map[string]any{"hostPool": a.pool, "applicationGroupType": "RemoteApp",
			"assignments": map[string]any{"users": []string{"alice"}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.admin.PutApplication(ctx, a.pool+"-apps", a.app, map[string]any{"friendlyName": a.name, "filePath": `C:\Apps\` + a.app + `.exe`,
			"showInPortal": true}); err != nil {
			t.Fatal(err)
		}
	}
	no := false
	for _, h := range []string{"desk-1", "desk-2"} {
		if _, err := e.admin.Heartbeat(ctx, e.creds[h], &vdibroker.HeartbeatRequest{RemoteApps: &no}); err != nil {
			t.Fatal(err)
		}
	}
	alice := e.browser()
	csrf := alice.signIn(e.userToken("alice"))
	tile := func(page, id string) string {
		t.Helper()
		_, rest, ok := strings.Cut(page, `data-id="`+id+`"`)
		tile, _, ok2 := strings.Cut(rest, "</li>")
		if !ok || !ok2 {
			t.Fatalf("no tile %s on the page:\n%s", id, page)
		}
		return tile
	}
	for lang, note := range map[string]string{
		"en": "Cannot be opened right now. Tell your helpdesk.",
		"de": "Kann gerade nicht geöffnet werden. Wenden Sie sich an Ihren Helpdesk.",
		"pt": "Não é possível abrir neste momento. Contacte o seu helpdesk.",
		"ar": "لا يمكن فتحه الآن. أبلغ مكتب الدعم.",
	} {
		_, page := alice.get("/portal/?lang=" + lang)
		word := tile(page, "app:desk-apps/word")
		if strings.Contains(word, "<form") || strings.Contains(word, "<button") || !strings.Contains(word, `data-unavailable="RemoteAppUnsupported"`) ||
			!hasTileNote(word, note+`</span></p>`) {
			t.Errorf("%s: Word's tile offers Open, or lacks the note %q:\n%s", lang, note, word)
		}
		for _, id := range []string{"desktop:desk", "app:cold-apps/paint"} {
			if other := tile(page, id); !strings.Contains(other, `class="open"`) || strings.Contains(other, "unavailable") {
				t.Errorf("%s: %s's tile lacks its Open button:\n%s", lang, id, other)
			}
		}
	}
	// A page from before posts it anyway: refused as before.
	alice.get("/portal/?lang=en")
	if s := alice.await(alice.launch(csrf, "app:desk-apps/word"), ended); s.State != "failed" ||
		!strings.HasPrefix(s.Message, "\u2068Word\u2069 cannot be opened as an app") {
		t.Errorf("Word launched anyway: %+v", s)
	}
}
