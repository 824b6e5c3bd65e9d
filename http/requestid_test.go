package http_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"

	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestRequestID_ClientChosen: a caller chooses X-Request-Id, and the id
// goes into the access log line, the answer's header and the audit row
// (R-SEC). A proxy's well-formed id (at most 64 of A-Za-z0-9._:-) is
// kept, so operators can correlate; anything else (too long, spaces,
// tabs, a folded line, other bytes) is replaced by an id of our own and
// reaches none of the three as sent. A value with control bytes never
// reaches the handler: net/http refuses the request.
func TestRequestID_ClientChosen(t *testing.T) {
	ts, logs := loggedServer(t)
	admin := vhttp.NewClient(ts.URL, adminToken)
	ours := regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

	tests := []struct {
		name string
		sent string // the header's value as written on the wire
		seen string // the value net/http hands on, if not sent: as a log line or row would show it
		keep bool
	}{
		{name: "a proxy's id", sent: "lb-7f3a.9:2_x", keep: true},
		{name: "64 characters", sent: strings.Repeat("b", 64), keep: true},
		{name: "65 characters", sent: strings.Repeat("c", 65)},
		{name: "10 KB", sent: strings.Repeat("d", 10<<10)},
		{name: "spaces", sent: "id with spaces"},
		{name: "tab", sent: "id\twith-tab"},
		{name: "not ASCII", sent: "r\xc3\xa9q-1"},
		{name: "markup", sent: "<script>x</script>"},
		{name: "percent", sent: "id%0Anext"},
		// An obsolete line fold: net/http joins the lines with a space.
		{name: "folded line", sent: "fold-a\r\n fold-b", seen: "fold-a fold-b"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := tt.seen
			if seen == "" {
				seen = tt.sent
			}
			from := len(logs.String())
			pool := fmt.Sprintf("ridp%02d", i)
			resp := rawRequest(t, ts.Listener.Addr().String(), "PUT /api/v1/hostpools/"+pool, tt.sent, "{}")
			if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
				t.Fatalf("status %d", resp.StatusCode)
			}
			got := resp.Header.Get("X-Request-Id")
			switch {
			case tt.keep && got != tt.sent:
				t.Fatalf("answer's X-Request-Id %q, want the caller's %q", got, tt.sent)
			case !tt.keep && (got == seen || !ours.MatchString(got)):
				t.Fatalf("answer's X-Request-Id %.80q: want one of our own", got)
			}
			// The audit row carries the answer's id, and, unless kept,
			// nothing of the sent one.
			rows, err := admin.ListAudit(t.Context(), vhttp.AuditQuery{Target: "hostpools/" + pool})
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 1 || rows[0].RequestID != got {
				t.Fatalf("audit rows of %s: %d; want one with request id %q", pool, len(rows), got)
			}
			raw, _ := json.Marshal(rows)
			if !tt.keep && strings.Contains(string(raw), jsonString(seen)) {
				t.Errorf("audit row holds the sent id: %.200s", raw)
			}
			// The log lines (access and audit) carry it too:
			// written before the handler returns, so before net/http
			// flushes the (buffered) answer this test has read.
			l := logs.String()[from:]
			if !strings.Contains(l, `"request_id":"`+got+`"`) {
				t.Errorf("log lacks our id %q:\n%.500s", got, l)
			}
			if !tt.keep && (strings.Contains(l, jsonString(seen)) || strings.Contains(l, seen)) {
				t.Errorf("log holds the sent id:\n%.500s", l)
			}
		})
	}

	// Control bytes (a newline cannot be sent in a value; ESC, NUL and
	// DEL can be): refused by net/http before any handler runs, so
	// nothing of them is logged, answered or audited.
	for _, sent := range []string{"esc-\x1b[31mred", "nul-\x00-x", "del-\x7f-x"} {
		from := len(logs.String())
		resp := rawRequest(t, ts.Listener.Addr().String(), "PUT /api/v1/hostpools/ridctl", sent, "{}")
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%q: status %d, want net/http's 400", sent, resp.StatusCode)
		}
		if id := resp.Header.Get("X-Request-Id"); strings.Contains(id, sent) {
			t.Errorf("%q: answered as X-Request-Id %q", sent, id)
		}
		if l := logs.String()[from:]; strings.Contains(l, sent) || strings.Contains(l, jsonString(sent)) {
			t.Errorf("%q: logged:\n%s", sent, l)
		}
	}
	if rows, err := admin.ListAudit(t.Context(), vhttp.AuditQuery{Target: "hostpools/ridctl"}); err != nil || len(rows) != 0 {
		t.Errorf("audit rows of the refused requests: %d, %v", len(rows), err)
	}
}

// rawRequest sends requestLine with X-Request-Id: id exactly as given
// (net/http's client refuses to send what a hostile caller sends) and
// the admin token, and reads the answer.
func rawRequest(t *testing.T, addr, requestLine, id, body string) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	method, _, _ := strings.Cut(requestLine, " ")
	fmt.Fprintf(conn, "%s HTTP/1.1\r\nHost: broker\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nX-Request-Id: %s\r\nConnection: close\r\n\r\n%s",
		requestLine, adminToken, len(body), id, body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// jsonString is s as a JSON log line or answer writes it, without quotes.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
