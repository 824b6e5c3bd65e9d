package portal

import (
	"fmt"
	"mime"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

var verbRE = regexp.MustCompile(`%[a-z]`)

// TestCatalogueComplete_RU6: every message id has a text in every
// language, with the same verbs as the English one (a German text
// missing its %s would print "%!s(MISSING)" or drop the argument), and
// every plural message has an "other" case in every language.
func TestCatalogueComplete_RU6(t *testing.T) {
	for id, byLang := range messages {
		want := verbRE.FindAllString(byLang["en"], -1)
		for _, code := range langCodes {
			text, ok := byLang[code]
			if !ok || text == "" {
				t.Errorf("message %q has no %s text", id, code)
				continue
			}
			if got := verbRE.FindAllString(text, -1); !slices.Equal(got, want) {
				t.Errorf("message %q in %s has verbs %v, English %v", id, code, got, want)
			}
		}
		for code := range byLang {
			if !knownLang(code) {
				t.Errorf("message %q has a text in %q, no language of the portal", id, code)
			}
		}
	}
	for id, byLang := range pluralMessages {
		for _, code := range langCodes {
			cases := byLang[code]
			if len(cases) == 0 || len(cases)%2 != 0 || cases[len(cases)-2] != "other" {
				t.Errorf("plural message %q in %s: cases %q, want pairs ending with other", id, code, cases)
			}
		}
	}
}

// TestTemplatesUseKnownIDs_RU6: every id a template or the code asks
// for is in the catalogue (a missing one would show the bare id).
func TestTemplatesUseKnownIDs_RU6(t *testing.T) {
	idRE := regexp.MustCompile(`\.T "([a-zA-Z.]+)"|T\(\s*"([a-zA-Z.]+)"|"((?:error|launch|flash)\.[a-zA-Z]+)"`)
	files, _ := templateFS.ReadDir("templates")
	var srcs []string
	for _, f := range files {
		b, _ := templateFS.ReadFile("templates/" + f.Name())
		srcs = append(srcs, string(b))
	}
	for _, name := range []string{"portal.go", "launch.go"} {
		b, err := readFile(name)
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, b)
	}
	n := 0
	for _, src := range srcs {
		for _, m := range idRE.FindAllStringSubmatch(src, -1) {
			id := m[1] + m[2] + m[3]
			n++
			if _, ok := messages[id]; !ok {
				if _, ok := pluralMessages[id]; !ok {
					t.Errorf("id %q is used but not in the catalogue", id)
				}
			}
		}
	}
	if n < 30 {
		t.Errorf("found only %d uses of message ids: the pattern no longer matches the code", n)
	}
	// Computed ids: kinds and states.
	for _, id := range []string{"kind.Desktop", "kind.RemoteApp", "state.Active", "state.Disconnected", "state.Pending"} {
		if _, ok := messages[id]; !ok {
			t.Errorf("computed id %q is not in the catalogue", id)
		}
	}
}

// TestPlurals_RU6: the plural forms follow each language's rules.
func TestPlurals_RU6(t *testing.T) {
	for _, c := range []struct {
		code string
		n    int
		want string
	}{
		{"en", 1, "You have 1 desktop or app."},
		{"en", 3, "You have 3 desktops and apps."},
		{"de", 1, "Sie haben 1 Desktop oder App."},
		{"pt", 2, "Tem 2 ambientes de trabalho e aplicações."},
		{"ar", 2, "لديك موردان."},
	} {
		if got := newLang(c.code).T("resources.count", c.n); got != c.want {
			t.Errorf("%s %d: %q, want %q", c.code, c.n, got, c.want)
		}
	}
	// The gateway file's minutes (serve --gateway-token-ttl, 1..60):
	// German's singular, Arabic's dual (no number), few (3..10) and
	// many (11..99, the singular noun).
	for _, c := range []struct {
		code string
		n    int
		want string
	}{
		{"en", 1, "only within 1 minute."},
		{"de", 1, "nur innerhalb von 1 Minute."},
		{"de", 60, "nur innerhalb von 60 Minuten."},
		{"ar", 1, "وخلال دقيقة واحدة فقط."},
		{"ar", 2, "وخلال دقيقتين فقط."},
		{"ar", 10, "وخلال ١٠ دقائق فقط."},
		{"ar", 15, "وخلال ١٥ دقيقة فقط."},
	} {
		if got := newLang(c.code).T("launch.gatewayOnce", c.n); !strings.Contains(got, c.want) {
			t.Errorf("launch.gatewayOnce %s %d: %q, want it to say %q", c.code, c.n, got, c.want)
		}
	}
	if got := fmt.Sprint(matchAccept("pt-BR,pt;q=0.9")); got != "pt" {
		t.Errorf("pt-BR matched %q", got)
	}
}

// TestTryAgain_RA4: a failed launch's wait, from its answer's
// Retry-After, in each language: whole seconds under a minute, else
// minutes rounded up (never sooner than the broker said), with each
// language's plural forms (Arabic's dual, few 3..10, many 11..99, in
// its own digits).
func TestTryAgain_RA4(t *testing.T) {
	for _, c := range []struct {
		code string
		wait time.Duration
		want string
	}{
		{"en", 30 * time.Second, "Try again in 30 seconds."}, // HostStarting's Retry-After
		{"en", time.Second, "Try again in 1 second."},
		{"en", 59 * time.Second, "Try again in 59 seconds."},
		{"en", time.Minute, "Try again in 1 minute."},
		{"en", 91 * time.Second, "Try again in 2 minutes."}, // 1.52 minutes, up
		{"de", 30 * time.Second, "Versuchen Sie es in 30 Sekunden erneut."},
		{"de", time.Minute, "Versuchen Sie es in 1 Minute erneut."},
		{"pt", 30 * time.Second, "Tente novamente dentro de 30 segundos."},
		{"pt", 3 * time.Minute, "Tente novamente dentro de 3 minutos."},
		{"ar", 30 * time.Second, "حاول مرة أخرى بعد ٣٠ ثانية."},
		{"ar", 2 * time.Second, "حاول مرة أخرى بعد ثانيتين."},
		{"ar", 5 * time.Second, "حاول مرة أخرى بعد ٥ ثوانٍ."},
		{"ar", 2 * time.Minute, "حاول مرة أخرى بعد دقيقتين."},
	} {
		if got := tryAgain(newLang(c.code), c.wait); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.code, c.wait, got, c.want)
		}
	}
}

// TestFileName: a friendly name as a file name the user recognises.
func TestFileName(t *testing.T) {
	for in, want := range map[string]string{
		"Office desktop":       "Office desktop.rdp",
		"Büro/Labor":           "Büro_Labor.rdp",
		`..\..\etc"passwd`:     "etc_passwd.rdp",
		"":                     "desktop.rdp",
		"سطح المكتب":           "سطح المكتب.rdp",
		"a\r\nContent-Type: x": "a__Content-Type_ x.rdp",
		// Parentheses stay: the demo's pools are named so, and a
		// file "Developer workstations _depth-first.rdp" is not the
		// name the user clicked.
		"Developer workstations (depth-first)": "Developer workstations (depth-first).rdp",
		// So do commas, apostrophes and '&': "Bob_s desktop" is not
		// what she clicked either.
		"Office desktops (breadth-first, autoscaled)": "Office desktops (breadth-first, autoscaled).rdp",
		"Bob's desktop":     "Bob's desktop.rdp",
		"Sales & Marketing": "Sales & Marketing.rdp",
		"Bob's Büro, Köln":  "Bob's Büro, Köln.rdp",
	} {
		if got := fileName(in); got != want {
			t.Errorf("fileName(%q) = %q, want %q", in, got, want)
		}
		// The name reaches the browser whole through Content-Disposition.
		_, params, err := mime.ParseMediaType(mime.FormatMediaType("attachment", map[string]string{"filename": want}))
		if err != nil || params["filename"] != want {
			t.Errorf("Content-Disposition of %q: %q, %v", want, params["filename"], err)
		}
	}
}

func readFile(name string) (string, error) {
	b, err := os.ReadFile(name)
	return string(b), err
}

// TestArgumentsIsolated_RU6: a name in a sentence is set apart by FSI and
// PDI, so that it cannot reorder the sentence in either direction of
// writing (an Arabic name on an English page, "Notepad++" on an
// Arabic one); a reference her helpdesk is given is not, so that a copy
// of it is the id; numbers are not; the caller's arguments stay as they
// were.
func TestArgumentsIsolated_RU6(t *testing.T) {
	ar, en := newLang("ar"), newLang("en")
	if got, want := ar.T("launch.ready", "Notepad++"), "ملف الاتصال الخاص بـ \u2068Notepad++\u2069 جاهز."; got != want {
		t.Errorf("ar launch.ready = %q, want %q", got, want)
	}
	if got, want := en.T("signedInAs", "سارة"), "Signed in as \u2068سارة\u2069"; got != want {
		t.Errorf("en signedInAs = %q, want %q", got, want)
	}
	if got, want := en.T("launch.reference", verbatim("3925f7d73b9275be")), "Reference for your helpdesk: 3925f7d73b9275be"; got != want {
		t.Errorf("a reference = %q, want %q", got, want)
	}
	if got := en.T("launch.waited", 5); strings.ContainsAny(got, "\u2068\u2069") {
		t.Errorf("a number is isolated: %q", got)
	}
	args := []any{"Office"}
	en.T("launch.ready", args...)
	if args[0] != "Office" {
		t.Errorf("T changed its caller's argument to %q", args[0])
	}
}

// TestArgumentIsolateCloses_RU6: a name's own isolate controls cannot
// end T's isolate early nor keep it open past the name (UAX #9, BD9): a
// PDI the name has without an isolate of its own would close the FSI, so
// that an override after it ("\u2069\u202e") reversed the rest of the
// sentence, her helpdesk reference included; an isolate the name opens
// would take the PDI, leaving the sentence after it in the name's
// isolate. The one is dropped, the other closed; balanced ones stay.
func TestArgumentIsolateCloses_RU6(t *testing.T) {
	en := newLang("en")
	for _, tc := range []struct{ name, arg, want string }{
		{"a PDI of its own, then an override", "Office\u2069\u202eevil", "\u2068Office\u202eevil\u2069"},
		{"an isolate left open", "\u2067مكتب", "\u2068\u2067مكتب\u2069\u2069"},
		{"balanced isolates", "a\u2066b\u2069c", "\u2068a\u2066b\u2069c\u2069"},
		{"a PDI first, two opened", "\u2069\u2066\u2068x", "\u2068\u2066\u2068x\u2069\u2069\u2069"},
		{"plain", "Office", "\u2068Office\u2069"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := en.T("launch.ready", tc.arg)
			want := "Your connection file for " + tc.want + " is ready."
			if got != want {
				t.Errorf("launch.ready of %q = %q, want %q", tc.arg, got, want)
			}
			// Whatever the name holds, the FSI before it is matched by
			// the PDI after it, not by one inside.
			arg := strings.TrimSuffix(strings.TrimPrefix(got, "Your connection file for "), " is ready.")
			if n := matchingPDI([]rune(arg)); n != len([]rune(arg))-1 {
				t.Errorf("%q: the FSI is matched at rune %d, want the last (%d)", arg, n, len([]rune(arg))-1)
			}
		})
	}
}

// matchingPDI is the index of the PDI matching the isolate initiator at
// rs[0] (UAX #9, BD9), -1 if none.
func matchingPDI(rs []rune) int {
	depth := 0
	for i, r := range rs {
		switch r {
		case '\u2066', '\u2067', '\u2068':
			depth++
		case '\u2069':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return -1
}

// TestButtonsOfOnePageDiffer_RU6: the buttons and links a page shows
// together say different things in every language: the header's *Sign
// out* (of the portal) and a session's *Log off* (of her desktop) were
// both "Abmelden" on the German page, side by side on a phone.
func TestButtonsOfOnePageDiffer_RU6(t *testing.T) {
	home := []string{"signout", "open", "reconnect", "logoff", "disconnect"}
	for _, code := range langCodes {
		seen := map[string]string{}
		for _, id := range home {
			text := messages[id][code]
			if other, ok := seen[text]; ok {
				t.Errorf("in %s, %q and %q both read %q", code, other, id, text)
			}
			seen[text] = id
		}
	}
}
