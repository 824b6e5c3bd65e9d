package hidden

import (
	"fmt"
	"strings"
	"testing"
)

// TestEscape: Escape marks each hidden character by its neighbours, keeps
// every other byte (an invalid one too), and returns the text itself when
// nothing is hidden; Has agrees with it (R-SEC).
func TestEscape(t *testing.T) {
	mark := func(b *strings.Builder, r rune) { fmt.Fprintf(b, "[%04X]", r) }
	for _, tc := range []struct{ in, want string }{
		{"alice", "alice"},
		{"alice\u200b", "alice[200B]"},
		{"x\u202egnp.exe", "x[202E]gnp.exe"},
		{"\u200calice", "[200C]alice"},
		{"علی\u200cرضا", "علی\u200cرضا"},
		{"علی\u200c\u200bرضا", "علی[200C][200B]رضا"},
		{"a\xff\u200cب", "a\xff[200C]ب"}, // an invalid byte beside a joiner: no word
		{"\u0628\u200d", "\u0628[200D]"},
		{"tab\tand\r\nbreaks", "tab\tand\r\nbreaks"},
		{"\x00\x1b\x7f\u0085", "[0000][001B][007F][0085]"},
		// Line and paragraph separators end a line where a table cell
		// shows nothing; the blank Braille pattern is a blank a name
		// may end with.
		{"alice\u2028", "alice[2028]"},
		{"alice\u2029bob", "alice[2029]bob"},
		{"alice\u2800", "alice[2800]"},
		// A joiner within a word of a script that joins stays (a Persian
		// name, a Devanagari conjunct's half form and explicit virama, an
		// emoji sequence, one with a presentation selector); between
		// letters of scripts that never join it changes nothing one
		// sees: 张\u200c三 reads as 张三.
		{"क्\u200dष क्\u200cष", "क्\u200dष क्\u200cष"},
		{"അവന്\u200d র\u200d্য", "അവന്\u200d র\u200d্য"}, // a chillu; ra and ya-phala
		{"क\u200cख", "क[200C]ख"},                         // no virama: nothing to choose
		{"\U0001F3F3\ufe0f\u200d\U0001F308", "\U0001F3F3\ufe0f\u200d\U0001F308"},
		{"张\u200c三", "张[200C]三"},
		{"김\u200d철수", "김[200D]철수"},
		{"さくら\u200cこ", "さくら[200C]こ"},
		{"דוד\u200cכהן", "דוד[200C]כהן"},
		{"Ἀλ\u200dέξης", "Ἀλ[200D]έξης"},
		// A variation selector after a character it picks a form of stays
		// (an emoji's, an ideograph's, a keycap's digit); after a Latin
		// letter, a space or another selector it shows nothing, and a run
		// of them can carry a hidden text.
		{"\u2764\ufe0f \u845b\U000E0100 1\ufe0f\u20e3 #\ufe0f\u20e3", "\u2764\ufe0f \u845b\U000E0100 1\ufe0f\u20e3 #\ufe0f\u20e3"},
		{"alice\ufe0f", "alice[FE0F]"},
		{"1\ufe0f", "1[FE0F]"},
		{" \ufe0e", " [FE0E]"},
		{"\U0001F600\U000E0100\U000E0148\U000E0145", "\U0001F600\U000E0100[E0148][E0145]"},
		// A joiner after a marked selector is part of no sequence.
		{"a\ufe0f\u200d\U0001F600", "a[FE0F][200D]\U0001F600"},
		// Nor one before a hidden symbol (the blank Braille pattern).
		{"\U0001F600\u200d\u2800", "\U0001F600[200D][2800]"},
	} {
		got := Escape(tc.in, Char, mark)
		if got != tc.want {
			t.Errorf("Escape(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if has := Has(tc.in, Char); has != (tc.want != tc.in) {
			t.Errorf("Has(%q) = %v, want %v", tc.in, has, !has)
		}
	}
	s := "nothing hidden"
	if got := Escape(s, Char, mark); got != s {
		t.Errorf("Escape changed %q to %q", s, got)
	}
}

// FuzzEscape: whatever the text, Has says whether Escape changes it, and
// no hidden character is left in what Escape returns (its neighbours there
// are the marks' brackets where one was marked) (R-SEC).
func FuzzEscape(f *testing.F) {
	f.Add("alice\u200b x\u202egnp.exe علی\u200cرضا")
	f.Add("\U0001F600\u200d\u2800 क्\u200dष \U0001F3F3\ufe0f\u200d\U0001F308 a\ufe0f\u200d1\ufe0f\u20e3 张\u200c三")
	f.Add("\U0001F600\U000E0100\U000E0148 \xff\u200cب")
	mark := func(b *strings.Builder, r rune) { fmt.Fprintf(b, "[%04X]", r) }
	f.Fuzz(func(t *testing.T, s string) {
		out := Escape(s, Char, mark)
		if Has(s, Char) != (out != s) {
			t.Fatalf("Has(%q) = %v, Escape gives %q", s, Has(s, Char), out)
		}
		if Has(out, Char) {
			t.Fatalf("Escape(%q) = %q leaves a hidden character", s, out)
		}
	})
}
