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
// which a form sends back as it is, stay as they are; so do a script's and
// a style's. Where markup is not parsed or would break the element (a
// title, whose text is the tab's; an inline SVG chart, where a span ends
// the drawing) the mark is text alone: [U+200B].
func showHidden(page string) string {
	if !hidden.Has(page, hidden.Char) {
		return page
	}
	var b strings.Builder
	b.Grow(len(page))
	inSVG := false
	for i := 0; i < len(page); {
		lt := strings.IndexByte(page[i:], '<')
		if lt < 0 {
			writeShown(&b, page[i:], inSVG)
			break
		}
		writeShown(&b, page[i:i+lt], inSVG)
		i += lt
		end := strings.IndexByte(page[i:], '>')
		if end < 0 {
			b.WriteString(page[i:])
			break
		}
		tag := page[i : i+end+1]
		b.WriteString(tag)
		i += end + 1
		switch name := tagName(tag); name {
		case "textarea", "script", "style", "title":
			// Its content up to its end tag: as it is, or with text marks
			// in a title.
			close := indexEndTag(page[i:], name)
			if name == "title" {
				writeShown(&b, page[i:i+close], true)
			} else {
				b.WriteString(page[i : i+close])
			}
			i += close
		case "svg":
			inSVG = true
		case "/svg":
			inSVG = false
		}
	}
	return b.String()
}

// tagName is the lower-case name of a tag ("<textarea id=…>" is
// "textarea"), with a slash before an end tag's ("</svg>" is "/svg"), ""
// for a comment or a declaration.
func tagName(tag string) string {
	tag = strings.TrimPrefix(tag, "<")
	slash := ""
	if strings.HasPrefix(tag, "/") {
		slash, tag = "/", tag[1:]
	}
	n := strings.IndexFunc(tag, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') })
	if n < 0 {
		n = len(tag)
	}
	if n == 0 {
		return ""
	}
	return slash + strings.ToLower(tag[:n])
}

// indexEndTag returns where the end tag of element name (lower case) first
// starts in s, in any case ("</TEXTAREA >"), or len(s) if it does not. The
// name is compared byte by byte: strings.ToLower of the whole text would
// change its length (İ, an invalid byte) and so every offset after it.
func indexEndTag(s, name string) int {
	for i := 0; ; {
		j := strings.Index(s[i:], "</")
		if j < 0 {
			return len(s)
		}
		i += j
		rest := s[i+2:]
		if len(rest) >= len(name) && asciiEqualFold(rest[:len(name)], name) {
			// The name ends there: "</titles>" closes no title.
			if len(rest) == len(name) || strings.IndexByte("\t\n\f\r />", rest[len(name)]) >= 0 {
				return i
			}
		}
		i += 2
	}
}

// asciiEqualFold reports whether s is lower, a lower-case ASCII word, in
// any case of its ASCII letters.
func asciiEqualFold(s, lower string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// writeShown writes text with each hidden character as a mark: a span
// (styled as an inline code) holding "U+XXXX", titled with what it is, or
// with plain, "[U+XXXX]" where markup is not wanted.
func writeShown(b *strings.Builder, text string, plain bool) {
	b.WriteString(hidden.Escape(text, hidden.Char, func(b *strings.Builder, r rune) {
		if plain {
			fmt.Fprintf(b, `[U+%04X]`, r)
			return
		}
		fmt.Fprintf(b, `<span class="hidden-char" title="a character that is not seen or that reorders the text">U+%04X</span>`, r)
	}))
}
