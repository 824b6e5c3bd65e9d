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
// text's ends, beside an invalid byte, and after a hidden character), is
// hidden: a control character but tab and line breaks, a bidirectional
// control, a line or paragraph separator, or an invisible format
// character (zero-width space, word joiner, byte order mark, soft hyphen,
// Hangul fillers, the blank Braille pattern, tag characters and the like).
//
// The zero-width joiner and non-joiner are written within words of
// scripts that join (Persian, Arabic, Syriac, Mongolian), beside a virama
// of an Indic script, and the joiner within an emoji sequence (U+1F469
// U+200D U+1F4BB): there they stay; beside anything else (a space, an end
// of the text, a hidden character, a Latin, Greek, Cyrillic, Han, Hangul
// or kana letter) they change nothing one sees, so "张\u200c三" reads as
// 张三.
//
// A variation selector picks the glyph of the character before it (an
// emoji's presentation, an ideograph's form, a keycap after a digit):
// there it stays; after anything else (a Latin letter, a space, another
// selector) it shows nothing and may carry a hidden text, one byte a
// selector.
func Char(prev, r, next rune) bool {
	switch {
	case r < utf8.RuneSelf: // most of any text: no table to search
		return r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f
	case unicode.IsControl(r), unicode.Is(unicode.Bidi_Control, r), r == '\u2028', r == '\u2029':
		return true
	case r == '\u200c' || r == '\u200d':
		return !joined(prev, r, next)
	case unicode.Is(unicode.Variation_Selector, r):
		return !selects(prev, next)
	}
	return unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) || unicode.Is(unicode.Cf, r) ||
		r == '\u3164' || r == '\uffa0' || r == '\u115f' || r == '\u1160' || r == '\u2800'
}

// joiningScripts are the scripts whose letters join (the Arabic script's
// family): a joiner or non-joiner between two of their letters chooses
// how they join.
var joiningScripts = []*unicode.RangeTable{
	unicode.Arabic, unicode.Syriac, unicode.Nko, unicode.Mongolian, unicode.Mandaic, unicode.Manichaean,
	unicode.Psalter_Pahlavi, unicode.Adlam, unicode.Hanifi_Rohingya, unicode.Sogdian, unicode.Phags_Pa,
}

// indicScripts are the scripts where a joiner or non-joiner beside a
// virama (a combining mark) chooses a conjunct's form: after it (क्‍ष, a
// half form; ന്‍, a chillu at a word's end) or before it (র‍্য).
var indicScripts = []*unicode.RangeTable{
	unicode.Devanagari, unicode.Bengali, unicode.Gurmukhi, unicode.Gujarati, unicode.Oriya, unicode.Tamil,
	unicode.Telugu, unicode.Kannada, unicode.Malayalam, unicode.Sinhala, unicode.Khmer, unicode.Myanmar,
	unicode.Tibetan, unicode.Balinese, unicode.Javanese,
}

// joined reports whether the joiner r between prev and next is part of a
// word: both are visible letters of a script that joins; prev is a
// virama of an Indic script, or next is one after a letter; or (the
// zero-width joiner) prev ends an emoji (a symbol, a skin tone, the emoji
// presentation selector) and next is one. Between two Indic letters
// without a virama it changes nothing one sees.
func joined(prev, r, next rune) bool {
	switch {
	case inWord(prev, joiningScripts) && inWord(next, joiningScripts):
		return true
	case inWord(prev, indicScripts) && unicode.Is(unicode.Mn, prev):
		return true
	case inWord(prev, indicScripts) && inWord(next, indicScripts) && unicode.Is(unicode.Mn, next):
		return true
	}
	return r == '\u200d' && (prev == '\ufe0f' || prev > 0xff && prev != utf8.RuneError && unicode.In(prev, unicode.So, unicode.Sk)) &&
		next > 0xff && next != utf8.RuneError && unicode.Is(unicode.So, next) && !Char(utf8.RuneError, next, utf8.RuneError)
}

// inWord reports whether r is a visible character of one of scripts.
func inWord(r rune, scripts []*unicode.RangeTable) bool {
	return r >= utf8.RuneSelf && r != utf8.RuneError && unicode.In(r, scripts...) &&
		!Char(utf8.RuneError, r, utf8.RuneError)
}

// selects reports whether a variation selector after prev (and before
// next) picks prev's glyph: prev is a visible character other than ASCII
// and the letters of the Latin, Greek and Cyrillic scripts, which have
// none to pick, or a keycap's digit, '#' or '*' (U+0031 U+FE0F U+20E3).
func selects(prev, next rune) bool {
	switch {
	case prev >= '0' && prev <= '9', prev == '#', prev == '*':
		return next == '\u20e3'
	case prev < utf8.RuneSelf, prev == utf8.RuneError, unicode.IsSpace(prev):
		return false
	case unicode.IsLetter(prev) && unicode.In(prev, unicode.Latin, unicode.Greek, unicode.Cyrillic):
		return false
	}
	return !Char(utf8.RuneError, prev, utf8.RuneError)
}

// Escape returns s with each rune for which is(prev, r, next) holds
// written by mark, every other byte as it was (an invalid one too). It
// returns s itself when there is none. The rune after a marked one is
// asked about with prev utf8.RuneError: a joiner or a selector after a
// hidden character belongs to no word, and is marked too.
func Escape(s string, is func(prev, r, next rune) bool, mark func(b *strings.Builder, r rune)) string {
	if !Has(s, is) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	marked := false
	each(s, func(prev, r, next rune, raw string) bool {
		if marked {
			prev = utf8.RuneError
		}
		marked = r != utf8.RuneError && is(prev, r, next)
		if marked {
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
