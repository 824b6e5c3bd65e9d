package console

import (
	"fmt"
	"strings"

	"github.com/vdibroker/vdibroker/internal/hidden"
)

// The console shows what hosts, gateways, peers, identity providers and
// anonymous callers wrote (a session's user, an audit entry's target, which
// is the path an anonymous caller asked for), and html/template escapes
// markup but leaves characters a reader cannot see, or that reorder the
// text around them, as they are (R-SEC). showHidden makes each such
// character in a page's text visible as its code point, as the CLI writes
// them as escapes.

// showHidden rewrites the text of page, an html/template's output, so that
// every hidden character (hidden.Char) is a visible mark naming its code
// point. Only text between tags changes: html/template writes '<' and '>' of values as
// entities, so a raw '<' opens a tag and a raw '>' closes it. Attribute
// values (a form's hidden fields, links), and the text of a textarea,
// which a form sends back as it is, stay as they are.
func showHidden(page string) string {
	if !hidden.Has(page, hidden.Char) {
		return page
	}
	var b strings.Builder
	b.Grow(len(page))
	for i := 0; i < len(page); {
		lt := strings.IndexByte(page[i:], '<')
		if lt < 0 {
			writeShown(&b, page[i:])
			break
		}
		writeShown(&b, page[i:i+lt])
		i += lt
		end := strings.IndexByte(page[i:], '>')
		if end < 0 {
			b.WriteString(page[i:])
			break
		}
		tag := page[i : i+end+1]
		b.WriteString(tag)
		i += end + 1
		if name := tagName(tag); name == "textarea" || name == "script" || name == "style" {
			// Its content up to its end tag, as it is.
			close := strings.Index(strings.ToLower(page[i:]), "</"+name)
			if close < 0 {
				close = len(page) - i
			}
			b.WriteString(page[i : i+close])
			i += close
		}
	}
	return b.String()
}

// tagName is the lower-case name of an opening tag ("<textarea id=…>"), or
// "" for an end tag, a comment or a declaration.
func tagName(tag string) string {
	tag = strings.TrimPrefix(tag, "<")
	n := strings.IndexFunc(tag, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') })
	if n < 0 {
		n = len(tag)
	}
	return strings.ToLower(tag[:n])
}

// writeShown writes text with each hidden character as a mark: a span
// (styled as an inline code) holding "U+XXXX", titled with what it is.
func writeShown(b *strings.Builder, text string) {
	b.WriteString(hidden.Escape(text, hidden.Char, func(b *strings.Builder, r rune) {
		fmt.Fprintf(b, `<span class="hidden-char" title="a character that is not seen or that reorders the text">U+%04X</span>`, r)
	}))
}
