package console

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The console shows what hosts, gateways, peers, identity providers and
// anonymous callers wrote (a session's user, an audit entry's target, which
// is the path an anonymous caller asked for), and html/template escapes
// markup but leaves characters a reader cannot see, or that reorder the
// text around them, as they are (R-SEC): "alice" followed by a zero-width
// space is another user than alice and reads the same, and a right-to-left
// override makes "…\u202Egnp.exe" read "…exe.png". showHidden makes each such
// character in a page's text visible as its code point, as the CLI writes
// them as escapes (cli_output.go's terminalUnsafe).

// hiddenChar reports whether r, between prev and next (utf8.RuneError at
// the text's ends), is a character a reader cannot see or that moves
// other characters: the control characters but tab and line breaks, the
// bidirectional controls, and the invisible format characters (zero-width
// space, word joiner, byte order mark, soft hyphen, Hangul fillers, tag
// characters and the like). The zero-width joiner and non-joiner are
// written within words of scripts that join (Persian, Arabic, the Indic
// scripts, emoji sequences): they are shown only beside a space, an end of
// the text, another hidden character, or a letter of the scripts that
// never use them (Latin, Greek, Cyrillic, ASCII).
func hiddenChar(prev, r, next rune) bool {
	switch {
	case r == '\t' || r == '\n' || r == '\r':
		return false
	case unicode.IsControl(r), unicode.Is(unicode.Bidi_Control, r):
		return true
	case r == '\u200c' || r == '\u200d':
		return !joins(prev) || !joins(next)
	case unicode.Is(unicode.Variation_Selector, r):
		return false // they choose a glyph's form (emoji) and reorder nothing
	}
	return unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) ||
		unicode.Is(unicode.Cf, r) || r == '\u3164' || r == '\uffa0' || r == '\u115f' || r == '\u1160'
}

// joins reports whether a joiner beside r may be part of a word: r is a
// visible character of a script that joins.
func joins(r rune) bool {
	switch {
	case r == utf8.RuneError, r < utf8.RuneSelf, unicode.IsSpace(r):
		return false
	case unicode.In(r, unicode.Latin, unicode.Greek, unicode.Cyrillic):
		return false
	}
	return !hiddenChar(utf8.RuneError, r, utf8.RuneError)
}

// showHidden rewrites the text of page, an html/template's output, so that
// every hiddenChar is a visible mark naming its code point. Only text
// between tags changes: html/template writes '<' and '>' of values as
// entities, so a raw '<' opens a tag and a raw '>' closes it. Attribute
// values (a form's hidden fields, links), and the text of a textarea,
// which a form sends back as it is, stay as they are.
func showHidden(page string) string {
	if !strings.ContainsFunc(page, func(r rune) bool { return r >= 0x80 || r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f }) {
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

// writeShown writes text with each hiddenChar as a mark: a span (styled as
// an inline code) holding "U+XXXX", titled with what it is.
func writeShown(b *strings.Builder, text string) {
	prev := utf8.RuneError
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		next, _ := utf8.DecodeRuneInString(text[i+size:]) // RuneError at the end
		if r != utf8.RuneError && hiddenChar(prev, r, next) {
			fmt.Fprintf(b, `<span class="hidden-char" title="a character that is not seen or that reorders the text">U+%04X</span>`, r)
		} else {
			b.WriteString(text[i : i+size]) // as it was, an invalid byte too
		}
		prev = r
		i += size
	}
}
