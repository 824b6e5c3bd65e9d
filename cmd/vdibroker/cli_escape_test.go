package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// unsafeForTerminal are runes a terminal acts on rather than shows: ESC
// (the start of every CSI sequence), the one-byte CSI of C1, DEL, and a
// right-to-left override that reorders what follows it on the line.
var unsafeForTerminal = []string{"\x1b", "\u009b", "\x7f", "\u202e", "\u200b"}

// TestCLIAuditEscapesTerminalControls: an anonymous caller chooses the path
// of a refused request, which the audit trail records as its target
// (R-SEC); `vdibroker audit list` must not hand its control characters to
// the admin's terminal in any output format (they would clear the screen,
// recolour or rewrite the lines above, or forge entries), and must show
// them as escapes so the admin still sees the path asked for.
func TestCLIAuditEscapesTerminalControls(t *testing.T) {
	b := startCLIBroker(t)
	// %1B[2J clears the screen, %C2%9B is CSI in one character, %7F DEL,
	// %E2%80%AE the right-to-left override, %E2%80%8B a zero-width space.
	resp, err := http.Get(b.m.URL() + "/api/v1/hostpools/esc%1B%5B2J%C2%9B31m%7F%E2%80%AEfake%E2%80%8B/sessionhosts")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("anonymous GET: %d, want 401", resp.StatusCode)
	}
	want := "hostpools/esc\x1b[2J\u009b31m\x7f\u202efake\u200b/sessionhosts"
	for _, format := range []string{"table", "tsv", "json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			out, err := runAuditCLI(t, b, "list", "--output", format)
			if err != nil {
				t.Fatalf("audit list: %v\n%s", err, out)
			}
			if !strings.Contains(out, "hostpools/esc") {
				t.Fatalf("the refused request is not listed:\n%s", out)
			}
			for _, r := range unsafeForTerminal {
				if strings.Contains(out, r) {
					t.Errorf("output holds %q raw:\n%q", r, out)
				}
			}
			if !strings.Contains(out, `\x1b[2J`) && !strings.Contains(out, `\u001b[2J`) {
				t.Errorf("output does not show ESC as an escape:\n%q", out)
			}
			// json and yaml are for programs: escaped, the value read
			// back is still the exact target recorded.
			var list []struct {
				Target string `json:"target" yaml:"target"`
			}
			switch format {
			case "json":
				err = json.Unmarshal([]byte(out), &list)
			case "yaml":
				err = yaml.Unmarshal([]byte(out), &list)
			default:
				return
			}
			if err != nil || len(list) != 1 || list[0].Target != want {
				t.Errorf("%s read back: %v %q, want target %q", format, err, list, want)
			}
		})
	}
}

// TestCLIErrorLineEscapesTerminalControls: the "error:" line shows the
// server's message, which may quote what a host, a peer pod or an
// identity provider said; its control characters are escaped as in a
// table (R-SEC).
func TestCLIErrorLineEscapesTerminalControls(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error": {"code": "NotFound", "message": "pool x\u001b[2J\u009b31m\u202efake not found"}}`))
	}))
	defer srv.Close()
	r := runCLI(t, "hostpool", "show", "--name", "xyz", "--server", srv.URL, "--token", "t")
	if r.code == 0 || !strings.Contains(r.stderr, "error:") || !strings.Contains(r.stderr, `\x1b[2J`) {
		t.Fatalf("exit %d, stderr %q: want the error with ESC escaped", r.code, r.stderr)
	}
	for _, u := range unsafeForTerminal {
		if strings.Contains(r.stderr, u) {
			t.Errorf("stderr holds %q raw: %q", u, r.stderr)
		}
	}
}

// TestCLIHostReportEscapesTerminalControls: `sessionhost show` writes,
// under its table, who drained the host: the principal's subject, which
// may hold a bidirectional control (a token's subject) or anything an
// identity provider put in its sub claim; it is escaped as in the
// table (R-SEC).
func TestCLIHostReportEscapesTerminalControls(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "bidipool")
	b.addHost("bidipool", "bidih1")
	secret := strings.TrimSpace(b.ok("token", "create", "--role", "Contributor", "--subject", "ops\u202eevil", "--query", "token", "-o", "tsv"))
	if r := runCLI(t, "sessionhost", "update", "--host-pool", "bidipool", "--name", "bidih1", "--allow-new-session", "false",
		"--server", b.m.URL(), "--token", secret); r.code != 0 {
		t.Fatalf("drain: exit %d: %s", r.code, r.stderr)
	}
	out := b.ok("sessionhost", "show", "--host-pool", "bidipool", "--name", "bidih1")
	if !strings.Contains(out, `ops\u202eevil`) {
		t.Fatalf("the report does not name who drained the host, escaped:\n%q", out)
	}
	for _, u := range unsafeForTerminal {
		if strings.Contains(out, u) {
			t.Errorf("output holds %q raw:\n%q", u, out)
		}
	}
}

// TestCLIPlacementShowEscapesTerminalControls: placement show writes the
// decision record in words, which name the user (a user name may hold a
// bidirectional control: only control characters are refused in it) and
// quote what the hosts reported; it is escaped as a table is (R-SEC).
func TestCLIPlacementShowEscapesTerminalControls(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "bidiplace")
	b.addHost("bidiplace", "bidip1")
	id := strings.TrimSpace(b.ok("connect", "--host-pool", "bidiplace", "--user", "ops\u202eevil", "--query", "sessionId", "-o", "tsv"))
	out := b.ok("placement", "show", "--host-pool", "bidiplace", "--session", id)
	if !strings.Contains(out, `ops\u202eevil`) {
		t.Fatalf("the record does not name the user, escaped:\n%q", out)
	}
	for _, u := range unsafeForTerminal {
		if strings.Contains(out, u) {
			t.Errorf("output holds %q raw:\n%q", u, out)
		}
	}
}

// TestJSONLogEscapesTerminalControls: serve --log-format json writes
// each audit entry and access line, whose target and path an anonymous
// caller chooses; encoding/json leaves DEL, C1 (U+009B, a CSI in one
// character) and the bidi controls raw, which act on the terminal of an
// admin reading the log (kubectl logs). They are written as \uXXXX, which
// a log pipeline reads back as the same value (R-SEC).
func TestJSONLogEscapesTerminalControls(t *testing.T) {
	l := &logFlags{format: "json", level: "info"}
	var buf strings.Builder
	log, err := l.logger(&buf)
	if err != nil {
		t.Fatal(err)
	}
	target := "hostpools/esc\x1b[2J\u009b31m\x7f\u202efake\u200b/sessionhosts"
	log.Info("audit", "target", target, "entry", struct{ Target string }{target})
	for _, u := range unsafeForTerminal {
		if strings.Contains(buf.String(), u) {
			t.Errorf("the log holds %q raw:\n%q", u, buf.String())
		}
	}
	var line struct {
		Target string                  `json:"target"`
		Entry  struct{ Target string } `json:"entry"`
	}
	if err := json.Unmarshal([]byte(buf.String()), &line); err != nil || line.Target != target || line.Entry.Target != target {
		t.Errorf("the line read back: %v %+v, want target %q", err, line, target)
	}
}

// TestEscapesAboveU10000: a character no one sees may lie above U+FFFF (a
// tag character, U+E0067, hides text after a name; U+1D173 is a musical
// format control). json writes it as a UTF-16 pair, since JSON's \u takes
// four digits (\ue0067 reads back as U+E006 then "7"), yaml as \U, and
// tables as its Go escape \U000e0067; json and yaml read back the exact
// value (R-SEC).
func TestEscapesAboveU10000(t *testing.T) {
	value := "alice\U000E0067\U000E0069\U0001D173"
	raw, err := json.Marshal(map[string]string{"user": value})
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			var out strings.Builder
			var got struct {
				User string `json:"user" yaml:"user"`
			}
			if format == "json" {
				err = writeJSON(&out, raw)
			} else {
				err = writeYAML(&out, raw)
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.ContainsAny(out.String(), "\U000E0067\U000E0069\U0001D173") {
				t.Errorf("%s holds a hidden character raw: %q", format, out.String())
			}
			if format == "json" {
				err = json.Unmarshal([]byte(out.String()), &got)
			} else {
				err = yaml.Unmarshal([]byte(out.String()), &got)
			}
			if err != nil || got.User != value {
				t.Errorf("%s read back %q (%v) from %q, want %q", format, got.User, err, out.String(), value)
			}
		})
	}
	if got, want := escapeTerminal(value, ""), `alice\U000e0067\U000e0069\U0001d173`; got != want {
		t.Errorf("escapeTerminal(%q) = %q, want %q", value, got, want)
	}
}

// TestCLIErrorLineEscapesBytesOfAProxy: the "error:" line quotes the body
// of an answer that is not the broker's (a proxy's); a byte there that is
// not UTF-8, a lone 0x9b, is a CSI to a terminal that reads bytes (a
// Latin-1 locale). It is shown as \x9b, as an ESC is as \x1b (R-SEC).
func TestCLIErrorLineEscapesBytesOfAProxy(t *testing.T) {
	for _, body := range []string{"bad gateway \x9b2J", "bad gateway \x9b2J\x1b[31m"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte(body))
		}))
		r := runCLI(t, "hostpool", "show", "--name", "xyz", "--server", srv.URL, "--token", "t")
		srv.Close()
		if r.code == 0 || !strings.Contains(r.stderr, `bad gateway \x9b2J`) || strings.Contains(r.stderr, "\x9b") {
			t.Errorf("body %q: exit %d, stderr %q: want the byte 0x9b shown as \\x9b", body, r.code, r.stderr)
		}
	}
}

// TestJSONEscapesBytesNotUTF8: JSON text a server sent with a byte that
// is not UTF-8 is written with \ufffd there, which a decoder reads as it
// would the byte, not with the byte raw (R-SEC).
func TestJSONEscapesBytesNotUTF8(t *testing.T) {
	var out strings.Builder
	if err := writeJSON(&out, []byte("{\"user\": \"a\x9b2J\"}")); err != nil {
		t.Fatal(err)
	}
	var got struct{ User string }
	if strings.Contains(out.String(), "\x9b") || json.Unmarshal([]byte(out.String()), &got) != nil || got.User != "a\ufffd2J" {
		t.Errorf("writeJSON: %q, read back %q", out.String(), got.User)
	}
}
