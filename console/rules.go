package console

import (
	"fmt"
	"html/template"
	"net/http"
	"regexp"
	"strings"

	"github.com/vdibroker/vdibroker/docs"
)

// The behaviour reference (docs/behaviour.md) is served at /rules, so that
// every rule id the console shows (R-C7, R-LI3, ...) links to the rule's
// text: /rules#R-LI3. The page is rendered once from the embedded Markdown
// by the small renderer below, which knows the subset behaviour.md uses:
// headings, paragraphs, bullet lists, tables, code fences, `code`,
// **bold** and [links](...).

// ruleID is a rule id as the console and the docs cite it (the pattern of
// docs.TestRuleIDsAreDefined).
var ruleID = regexp.MustCompile(`\bR-[A-Z]+[0-9]*\b`)

// rulesPath is where the reference is served.
const rulesPath = "/rules"

// linkRules escapes s for HTML and turns each rule id in it into a link to
// the rule in the reference.
func linkRules(s string) template.HTML {
	return template.HTML(linkRulesEscaped(template.HTMLEscapeString(s)))
}

// linkRulesEscaped links rule ids in text that is already HTML.
func linkRulesEscaped(html string) string {
	return ruleID.ReplaceAllStringFunc(html, func(id string) string {
		return `<a class="rule" href="` + rulesPath + `#` + id + `" title="` + id + ` in the behaviour reference">` + id + `</a>`
	})
}

var (
	boldRe     = regexp.MustCompile(`\*\*(.+?)\*\*`)
	linkRe     = regexp.MustCompile(`\[([^\]]+)\]\(([^)]+)\)`)
	headingRe  = regexp.MustCompile(`^(#{1,4}) (.*)$`)
	definedRe  = regexp.MustCompile(`\*\*(R-[A-Z]+[0-9]*)\*\*`)
	sectionNum = regexp.MustCompile(`^(\d+)\.`)
)

// inline renders one line's inline Markdown.
func inline(s string) string {
	var b strings.Builder
	for i, part := range strings.Split(s, "`") {
		esc := template.HTMLEscapeString(part)
		if i%2 == 1 {
			b.WriteString("<code>" + esc + "</code>")
			continue
		}
		esc = boldRe.ReplaceAllString(esc, "<strong>$1</strong>")
		// Links to other Markdown files are not served: keep their text.
		esc = linkRe.ReplaceAllString(esc, "$1")
		b.WriteString(linkRulesEscaped(esc))
	}
	return b.String()
}

// renderMarkdown renders behaviour.md's Markdown subset. Each rule's
// bullet (or heading) that defines **R-…** gets the rule id as its id.
func renderMarkdown(md string) template.HTML {
	var b strings.Builder
	lines := strings.Split(md, "\n")
	var para, item []string
	inList := false
	flushPara := func() {
		if len(para) > 0 {
			b.WriteString("<p>" + inline(strings.Join(para, " ")) + "</p>\n")
			para = nil
		}
	}
	flushItem := func() {
		if item == nil {
			return
		}
		text := strings.Join(item, " ")
		id := ""
		if m := definedRe.FindStringSubmatch(text); m != nil && strings.HasPrefix(text, m[0]) {
			id = fmt.Sprintf(` id="%s"`, m[1])
		}
		b.WriteString("<li" + id + ">" + inline(text) + "</li>\n")
		item = nil
	}
	endList := func() {
		flushItem()
		if inList {
			b.WriteString("</ul>\n")
			inList = false
		}
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		switch {
		case strings.HasPrefix(line, "```"):
			flushPara()
			endList()
			b.WriteString("<pre>")
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				b.WriteString(template.HTMLEscapeString(lines[i]) + "\n")
			}
			b.WriteString("</pre>\n")
		case headingRe.MatchString(line):
			flushPara()
			endList()
			m := headingRe.FindStringSubmatch(line)
			level, text := len(m[1]), m[2]
			id := ""
			if d := definedRe.FindStringSubmatch(text); d != nil {
				id = d[1]
			} else if n := sectionNum.FindStringSubmatch(text); n != nil {
				id = "section-" + n[1]
			}
			if id != "" {
				id = fmt.Sprintf(` id="%s"`, id)
			}
			fmt.Fprintf(&b, "<h%d%s>%s</h%d>\n", level+1, id, inline(text), level+1)
		case strings.HasPrefix(line, "|"):
			flushPara()
			endList()
			b.WriteString(`<table class="grid">` + "\n")
			for row := 0; i < len(lines) && strings.HasPrefix(lines[i], "|"); i, row = i+1, row+1 {
				if row == 1 {
					continue // the |---| separator
				}
				tag := "td"
				if row == 0 {
					tag = "th"
				}
				b.WriteString("<tr>")
				for _, cell := range splitRow(lines[i]) {
					b.WriteString("<" + tag + ">" + inline(cell) + "</" + tag + ">")
				}
				b.WriteString("</tr>\n")
			}
			i--
			b.WriteString("</table>\n")
		case strings.HasPrefix(line, "- "):
			flushPara()
			flushItem()
			if !inList {
				b.WriteString("<ul>\n")
				inList = true
			}
			item = []string{strings.TrimPrefix(line, "- ")}
		case strings.TrimSpace(line) == "":
			flushPara()
			endList()
		case item != nil && strings.HasPrefix(line, "  "):
			item = append(item, strings.TrimSpace(line))
		default:
			endList()
			para = append(para, strings.TrimSpace(line))
		}
	}
	flushPara()
	endList()
	return template.HTML(b.String())
}

// splitRow splits a Markdown table row into its cells.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	cells := strings.Split(line, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

// behaviourHTML is the reference, rendered once.
var behaviourHTML = renderMarkdown(docs.Behaviour)

// rulesPage serves the behaviour reference. It needs no sign-in: it is the
// repository's documentation, with no data of the broker's.
func (c *Console) rulesPage(w http.ResponseWriter, r *http.Request) {
	_, sess := c.session(r)
	data := map[string]any{"Title": "Behaviour reference", "Nav": "rules", "Doc": behaviourHTML}
	if sess != nil {
		data["CSRF"] = sess.CSRF
		data["SignedIn"] = true
		data["SeesStoreReason"] = seesStoreReason(sess)
		data["SeesOutageReason"] = c.seesOutageReason(w, r, sess)
	}
	c.render(w, http.StatusOK, "rules", data)
}
