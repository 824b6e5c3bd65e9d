// Package hidden finds the characters of a text that a reader cannot see
// or that reorder the text around them, so that what hosts, gateways,
// peers, identity providers and anonymous callers wrote is shown with them
// visible (R-SEC): the console marks them in a page's text, the CLI writes
// them as escapes. "alice" followed by a zero-width space is another user
// than alice and reads the same; a right-to-left override makes
// "x\u202Egnp.exe" read "xexe.png".
package hidden

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Char reports whether r, between prev and next (utf8.RuneError at the
// text's ends), is hidden: a control character but tab and line breaks, a
// bidirectional control, or an invisible format character (zero-width
// space, word joiner, byte order mark, soft hyphen, Hangul fillers, tag
// characters and the like). The zero-width joiner and non-joiner are
// written within words of scripts that join (Persian, Arabic, the Indic
// scripts, emoji sequences): they are hidden only beside a space, an end of
// the text, another hidden character, or a letter of the scripts that never
// use them (Latin, Greek, Cyrillic, ASCII). Variation selectors choose a
// glyph's form and move nothing: not hidden.
func Char(prev, r, next rune) bool {
	switch {
	case r < utf8.RuneSelf: // most of any text: no table to search
		return r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f
	case unicode.IsControl(r), unicode.Is(unicode.Bidi_Control, r):
		return true
	case r == '\u200c' || r == '\u200d':
		return !joins(prev) || !joins(next)
	case unicode.Is(unicode.Variation_Selector, r):
		return false
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
	return !Char(utf8.RuneError, r, utf8.RuneError)
}

// Escape returns s with each rune for which is(prev, r, next) holds
// written by mark, every other byte as it was (an invalid one too). It
// returns s itself when there is none.
func Escape(s string, is func(prev, r, next rune) bool, mark func(b *strings.Builder, r rune)) string {
	if !Has(s, is) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	each(s, func(prev, r, next rune, raw string) bool {
		if r != utf8.RuneError && is(prev, r, next) {
			mark(&b, r)
		} else {
			b.WriteString(raw)
		}
		return true
	})
	return b.String()
}

// Has reports whether is holds for a rune of s (between its neighbours).
// is is not asked about printable ASCII (U+0020 to U+007E), which no rule
// hides: a page is mostly that, and is scanned at memory speed.
func Has(s string, is func(prev, r, next rune) bool) bool {
	prev := utf8.RuneError
	for i := 0; i < len(s); {
		if c := s[i]; c >= 0x20 && c < 0x7f {
			prev = rune(c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		next, _ := utf8.DecodeRuneInString(s[i+size:]) // RuneError at the end
		if r != utf8.RuneError && is(prev, r, next) {
			return true
		}
		prev = r
		i += size
	}
	return false
}

// each calls f with every rune of s, its neighbours (utf8.RuneError at the
// ends and for invalid bytes) and its bytes, until f returns false.
func each(s string, f func(prev, r, next rune, raw string) bool) {
	prev := utf8.RuneError
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		next, _ := utf8.DecodeRuneInString(s[i+size:]) // RuneError at the end
		if !f(prev, r, next, s[i:i+size]) {
			return
		}
		prev = r
		i += size
	}
}
