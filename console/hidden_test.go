package console

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker/internal/hidden"
)

func mark(code string) string {
	return `<span class="hidden-char" title="a character that is not seen or that reorders the text">U+` + code + `</span>`
}

// TestShowHidden: a page's text shows each character a reader cannot see,
// or that reorders the text, as its code point; attributes, a textarea's
// text and characters that belong to a word stay as they were (R-SEC).
func TestShowHidden(t *testing.T) {
	for _, tc := range []struct {
		name, page, want string
	}{
		{"plain", "<td>alice</td>", "<td>alice</td>"},
		{"right-to-left override", "<td>x\u202egnp.exe</td>", "<td>x" + mark("202E") + "gnp.exe</td>"},
		{"zero-width space after a name", "<td>alice\u200b</td>", "<td>alice" + mark("200B") + "</td>"},
		{"escape and DEL", "<td>a\x1b[2J\x7f</td>", "<td>a" + mark("001B") + "[2J" + mark("007F") + "</td>"},
		{"C1 CSI", "<td>a\u009b31m</td>", "<td>a" + mark("009B") + "31m</td>"},
		{"isolates and marks", "<p>\u2067\u200f\u061c</p>", "<p>" + mark("2067") + mark("200F") + mark("061C") + "</p>"},
		{"byte order mark, word joiner, soft hyphen, Hangul filler", "a\ufeffb\u2060c\u00add\u3164",
			"a" + mark("FEFF") + "b" + mark("2060") + "c" + mark("00AD") + "d" + mark("3164")},
		{"tag character", "flag\U000E0067", "flag" + mark("E0067")},
		// A Persian name's non-joiner between its letters is part of it;
		// between Latin letters it only makes another name that reads
		// the same.
		{"non-joiner in a Persian word", "<td>علی\u200cرضا</td>", "<td>علی\u200cرضا</td>"},
		{"non-joiner between Latin letters", "<td>al\u200cice</td>", "<td>al" + mark("200C") + "ice</td>"},
		{"joiner at the end of an Arabic word", "<td>علی\u200d</td>", "<td>علی" + mark("200D") + "</td>"},
		{"emoji sequence", "<td>\U0001F469\u200d\U0001F4BB</td>", "<td>\U0001F469\u200d\U0001F4BB</td>"},
		{"variation selector", "<td>\u2764\ufe0f</td>", "<td>\u2764\ufe0f</td>"},
		{"Arabic and German letters", "<td>مستخدم Müller</td>", "<td>مستخدم Müller</td>"},
		{"tab and line breaks", "<pre>a\tb\r\nc</pre>", "<pre>a\tb\r\nc</pre>"},
		{"attribute values stay", `<input type="hidden" name="user" value="alice` + "\u200b" + `"><a title="x` + "\u202e" + `y">z</a>`,
			`<input type="hidden" name="user" value="alice` + "\u200b" + `"><a title="x` + "\u202e" + `y">z</a>`},
		{"a textarea's text stays", "<textarea name=m>a\u200bb</textarea><p>a\u200bb</p>",
			"<textarea name=m>a\u200bb</textarea><p>a" + mark("200B") + "b</p>"},
		{"an end tag in upper case", "<TEXTAREA>a\u202e</TEXTAREA>\u202e", "<TEXTAREA>a\u202e</TEXTAREA>" + mark("202E")},
		{"invalid bytes as they were", "<td>a\xffb\u200b</td>", "<td>a\xffb" + mark("200B") + "</td>"},
		{"an unclosed tag", "<td>a\u202e<b", "<td>a" + mark("202E") + "<b"},
		// Lower-casing İ (two bytes) gives i (one), Ⱥ (two) gives ⱥ
		// (three): the end tag must be found in the page itself, or a
		// textarea's end is taken for text (a mark inside it, which the
		// form would save) or the text after it for the textarea's.
		{"a textarea after İ", "<textarea>İİİ\u200b</textarea>", "<textarea>İİİ\u200b</textarea>"},
		{"a textarea after Ⱥ", "<textarea>ȺȺȺȺȺȺȺȺȺȺȺȺȺȺȺȺȺȺȺȺ</textarea><p>\u202e</p>",
			"<textarea>ȺȺȺȺȺȺȺȺȺȺȺȺȺȺȺȺȺȺȺȺ</textarea><p>" + mark("202E") + "</p>"},
		{"an end tag's name goes on", "<textarea>a</textareas>\u200b</textarea>\u200b", "<textarea>a</textareas>\u200b</textarea>" + mark("200B")},
		// A title's text is the tab's: markup there is shown as text.
		{"a title", "<title>Message to alice\u200b · vdibroker</title><p>\u200b</p>",
			"<title>Message to alice[U+200B] · vdibroker</title><p>" + mark("200B") + "</p>"},
		// In an inline SVG a span ends the drawing: the mark is text.
		{"an SVG chart", "<svg viewBox=\"0 0 1 1\"><text>a\u200b</text><polyline><title>b\u202e</title></polyline></svg><p>\u200b</p>",
			"<svg viewBox=\"0 0 1 1\"><text>a[U+200B]</text><polyline><title>b[U+202E]</title></polyline></svg><p>" + mark("200B") + "</p>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := showHidden(tc.page); got != tc.want {
				t.Errorf("showHidden(%q)\n got %q\nwant %q", tc.page, got, tc.want)
			}
		})
	}
}

// FuzzShowHidden: whatever the page, its tags and attribute values come
// out as they went in, and no hidden character is left in its text.
func FuzzShowHidden(f *testing.F) {
	f.Add("<td>x\u202egnp.exe</td><textarea>\u200b</textarea>")
	f.Add("<a title=\"\u202e\">al\u200cice</a>")
	// Joiners and selectors, whose neighbours decide.
	f.Add("\U0001F600\u200d\u2800 क्\u200dष \U0001F3F3\ufe0f\u200d\U0001F308 a\ufe0f\u200d1\ufe0f\u20e3")
	f.Add("<title>\u200b</title><svg><text>\u202e</text></svg><textarea>İ\u200b</textarea>")
	f.Fuzz(func(t *testing.T, page string) {
		out := showHidden(page)
		if strings.Count(out, "<")-strings.Count(out, `<span class="hidden-char"`)-strings.Count(out, "</span>") !=
			strings.Count(page, "<")-strings.Count(page, `<span class="hidden-char"`)-strings.Count(page, "</span>") {
			t.Fatalf("tags changed: %q -> %q", page, out)
		}
		if !strings.Contains(page, "<") {
			// All text: nothing hidden is left.
			prev := rune(0xFFFD)
			rs := []rune(out)
			for i, r := range rs {
				next := rune(0xFFFD)
				if i+1 < len(rs) {
					next = rs[i+1]
				}
				if r != 0xFFFD && hidden.Char(prev, r, next) {
					t.Fatalf("hidden %U left in %q (from %q)", r, out, page)
				}
				prev = r
			}
		}
	})
}

// BenchmarkShowHidden: the pass over a console page of about 300 KB
// (a long sessions page), mostly ASCII with some names in other scripts.
func BenchmarkShowHidden(b *testing.B) {
	row := `<tr><td><a href="/users/alice">alice@contoso.com</a></td><td>pool-a</td><td>host-17</td><td>Active</td><td>3m</td><td>Müller · مستخدم</td></tr>` + "\n"
	page := strings.Repeat(row, 300*1024/len(row))
	b.SetBytes(int64(len(page)))
	for b.Loop() {
		showHidden(page)
	}
}

// TestTemplatesSuitShowHidden: showHidden takes the first '>' after a '<'
// for a tag's end and leaves attribute values as they are, so no template
// may write a raw '>' inside a quoted attribute value (html/template
// writes a value's as &gt;), and every option names its value: an option
// without one submits its text, which the pass marks (R-SEC).
func TestTemplatesSuitShowHidden(t *testing.T) {
	actions := regexp.MustCompile(`(?s)\{\{.*?\}\}`)
	files, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil || len(files) == 0 {
		t.Fatalf("templates: %v %v", files, err)
	}
	for _, name := range files {
		raw, err := templateFS.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		text := actions.ReplaceAllString(string(raw), "x")
		for i := 0; i < len(text); i++ {
			if text[i] != '<' {
				continue
			}
			// The tag's end with quoted values skipped.
			end, quote := -1, byte(0)
			for j := i + 1; j < len(text) && end < 0; j++ {
				switch c := text[j]; {
				case quote != 0:
					if c == quote {
						quote = 0
					}
				case c == '"' || c == '\'':
					quote = c
				case c == '>':
					end = j
				}
			}
			if naive := strings.IndexByte(text[i:], '>'); end < 0 || naive != end-i {
				t.Errorf("%s: a '>' inside an attribute value of %q", name, text[i:min(len(text), i+80)])
				continue
			}
			if tag := text[i : end+1]; tagName(tag) == "option" && !strings.Contains(tag, "value=") {
				t.Errorf("%s: an option without a value: %s", name, tag)
			}
		}
	}
}
