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
