package console_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestAuditPage: the console's audit page lists the trail's
// entries with who did what to which target, filters by target, and is
// refused to a Reader by the API; the nav offers it to those who may read
// it only.
func TestAuditPage(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.seed()
	if _, err := e.admin.PatchSessionHost(ctx, "pool-a", "host-2", map[string]any{"allowNewSession": false}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signin(adminToken)
	page := b.get("/audit")
	wantStatus(t, page, 200)
	wantContains(t, page, "sessionhost.update", "hostpools/pool-a/sessionhosts/host-2", "hostpool.put")
	only := b.get("/audit?target=" + "hostpools/pool-a/sessionhosts/host-2")
	wantStatus(t, only, 200)
	if strings.Contains(only.body, "hostpool.put") || !strings.Contains(only.body, "sessionhost.update") {
		t.Errorf("the target filter kept other targets or lost the drain")
	}
	if !strings.Contains(b.get("/").body, `href="/audit"`) {
		t.Errorf("the admin's nav has no audit link")
	}

	reader := e.token(vdibroker.RoleReader)
	rb := e.browser()
	rb.signin(reader)
	if strings.Contains(rb.get("/").body, `href="/audit"`) {
		t.Errorf("a Reader's nav offers the audit page")
	}
	a := rb.get("/audit")
	if a.status != 403 {
		t.Errorf("a Reader's /audit = %d, want 403", a.status)
	}
	// Told what they may not do and who may, not that a change was refused.
	wantContains(t, a, "The role Reader may not read the audit trail", "is for Contributors, Helpdesk and the admin token",
		"Reader may look at host pools, hosts, sessions and scaling plans")
	if strings.Contains(a.body, "may not make this change") || strings.Contains(a.body, `id="audit-table"`) {
		t.Error("a Reader's audit page speaks of a change, or shows entries")
	}
}

// TestAuditPageNewestFirstFiltersDiff: the audit page lists newest first
// and pages on to older entries; it filters by principal, action, target
// and time range as the API does; an update shows the fields it changed,
// each before and after, not the documents as one line; a bad time is 400
// beside the form.
func TestAuditPageNewestFirstFiltersDiff(t *testing.T) {
	const pageSize = 50 // the page's size (console.auditPageSize)
	e := newEnv(t)
	ctx := context.Background()
	e.seed()
	ops, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleContributor, Subject: "ops-dana"})
	if err != nil {
		t.Fatal(err)
	}
	opsAPI := vhttp.NewClient(e.url, ops.Secret)
	if _, err := opsAPI.PatchHostPool(ctx, "pool-a", map[string]any{"maxSessionLimit": 7, "loadBalancing": map[string]any{"cpuThreshold": 80}}); err != nil {
		t.Fatal(err)
	}
	for i := range pageSize + 5 { // more than a page, newer than the patch
		if _, err := e.admin.PatchSessionHost(ctx, "pool-a", "host-2", map[string]any{"allowNewSession": i%2 == 1}); err != nil {
			t.Fatal(err)
		}
	}
	b := e.browser()
	b.signin(adminToken)
	seqs := func(a answer) []int {
		var out []int
		for _, m := range regexp.MustCompile(`data-seq="(\d+)"`).FindAllStringSubmatch(a.body, -1) {
			n, _ := strconv.Atoi(m[1])
			out = append(out, n)
		}
		return out
	}
	first := b.get("/audit")
	wantStatus(t, first, 200)
	s1 := seqs(first)
	if len(s1) != pageSize || !slices.IsSortedFunc(s1, func(a, b int) int { return b - a }) {
		t.Fatalf("page 1: %d entries %v, want %d newest first", len(s1), s1, pageSize)
	}
	all, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if newest := int(all[len(all)-1].Seq); s1[0] != newest {
		t.Errorf("page 1 starts at seq %d, want the newest, %d", s1[0], newest)
	}
	next := regexp.MustCompile(`href="(/audit\?[^"]+)" rel="next"`).FindStringSubmatch(first.body)
	if next == nil {
		t.Fatal("no link to older entries")
	}
	second := b.get(html.UnescapeString(next[1]))
	if s2 := seqs(second); len(s2) == 0 || s2[0] >= s1[len(s1)-1] {
		t.Errorf("page 2 %v does not go on below page 1's last, %d", s2, s1[len(s1)-1])
	}
	wantContains(t, second, `data-page="first"`)

	// The pool's update by ops-dana, by principal and action: its two
	// changed fields, before and after, and no field it did not change.
	a := b.get("/audit?principal=ops-dana&action=hostpool.update")
	wantStatus(t, a, 200)
	if n := len(seqs(a)); n != 1 {
		t.Fatalf("principal and action filter: %d entries, want 1", n)
	}
	wantContains(t, a, `<li data-field="maxSessionLimit"><code>maxSessionLimit</code> <del title="before">4</del> → <ins title="after">7</ins></li>`,
		`data-field="loadBalancing.cpuThreshold"`)
	if strings.Contains(a.body, `data-field="hostPoolType"`) || strings.Contains(a.body, `{&#34;`) || strings.Contains(a.body, `{"name"`) {
		t.Error("the update shows unchanged fields or raw JSON")
	}
	// The target filter, and a created entry folded.
	a = b.get("/audit?target=hostpools/pool-a&action=hostpool.put")
	wantContains(t, a, "<summary>created, ")

	// The time range: exactly the patch's instant.
	var patch *vdibroker.AuditEntry
	for _, en := range all {
		if en.Action == "hostpool.update" {
			patch = en
		}
	}
	q := url.Values{"from": {patch.Time.Format(time.RFC3339Nano)}, "to": {patch.Time.Add(time.Microsecond).Format(time.RFC3339Nano)}}
	if got := seqs(b.get("/audit?" + q.Encode())); len(got) != 1 || got[0] != int(patch.Seq) {
		t.Errorf("time range of the patch: %v, want [%d]", got, patch.Seq)
	}
	a = b.get("/audit?from=yesterday")
	wantStatus(t, a, 400)
	wantContains(t, a, `from: &#34;yesterday&#34; is not a time`, `value="yesterday"`)
}

// TestPagesShowHiddenCharacters_RSEC: what an anonymous caller put into
// the audit trail (the path it asked for, with a right-to-left override
// and an escape) and a user name with a zero-width space after it reach
// the console's pages with those characters shown as code points, not as
// text that reads like another target or another user.
func TestPagesShowHiddenCharacters_RSEC(t *testing.T) {
	e := newEnv(t)
	e.seed("alice\u200b")
	resp, err := http.Get(e.url + "/api/v1/hostpools/x%E2%80%AEgnp.exe%1B%5B2J/sessionhosts")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("anonymous GET: %d, want 401", resp.StatusCode)
	}
	b := e.browser()
	b.signin(adminToken)
	audit := b.get("/audit")
	wantStatus(t, audit, 200)
	wantContains(t, audit, "hostpools/x"+hiddenMark("202E")+"gnp.exe"+hiddenMark("001B")+"[2J/sessionhosts")
	sessions := b.get("/sessions")
	wantStatus(t, sessions, 200)
	wantContains(t, sessions, "alice"+hiddenMark("200B"))
	for _, page := range []answer{audit, sessions} {
		if text := textOf(page.body); strings.ContainsAny(text, "\u202e\x1b\u200b") {
			t.Errorf("a page's text holds a hidden character raw: %q", text)
		}
	}
}

func hiddenMark(code string) string {
	return `<span class="hidden-char" title="a character that is not seen or that reorders the text">U+` + code + `</span>`
}

// TestAuditPageByRequestID: the audit page finds an entry by its request
// id, the reference the user portal shows a user beside a refusal, which
// a helpdesk in the console is given (R-U7); the form keeps it.
func TestAuditPageByRequestID(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.seed()
	if _, err := e.admin.PatchSessionHost(ctx, "pool-a", "host-2", map[string]any{"allowNewSession": false}); err != nil {
		t.Fatal(err)
	}
	list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "sessionhost.update"})
	if err != nil || len(list) == 0 {
		t.Fatalf("the drain's entry: %v %v", list, err)
	}
	ref := list[len(list)-1].RequestID
	b := e.browser()
	b.signin(adminToken)
	a := b.get("/audit?requestId=" + url.QueryEscape(ref))
	wantStatus(t, a, 200)
	rows := regexp.MustCompile(`data-action="([^"]+)"`).FindAllStringSubmatch(a.body, -1)
	if len(rows) != 1 || rows[0][1] != "sessionhost.update" {
		t.Errorf("/audit?requestId=%s: rows %q, want the drain's alone", ref, rows)
	}
	wantContains(t, a, `id="requestId" name="requestId" value="`+ref+`"`)
}
