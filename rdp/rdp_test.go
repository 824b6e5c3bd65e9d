package rdp

import (
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/google/go-cmp/cmp"
)

// rdpLines splits a file into its lines, failing on a line not ended by
// CRLF.
func rdpLines(tb testing.TB, file string) []string {
	tb.Helper()
	if !strings.HasSuffix(file, "\r\n") {
		tb.Fatalf("file does not end in CRLF:\n%q", file)
	}
	lines := strings.Split(strings.TrimSuffix(file, "\r\n"), "\r\n")
	for _, l := range lines {
		if strings.ContainsAny(l, "\r\n") {
			tb.Fatalf("line %q holds a bare CR or LF", l)
		}
	}
	return lines
}

func TestRDPFileDefaults(t *testing.T) {
	lines := rdpLines(t, File("rdsh01.example.test:3389", `CONTOSO\alice`, nil))
	if lines[0] != "full address:s:rdsh01.example.test:3389" || lines[1] != `username:s:CONTOSO\alice` {
		t.Fatalf("first lines %q, want the address with its port and the user", lines[:2])
	}
	// Every other line is a known property an admin could set, of its
	// type and with an allowed value: the defaults and the table agree.
	seen := map[string]bool{}
	for _, l := range lines[2:] {
		p, err := parseRDPLine(l)
		if err != nil {
			t.Errorf("default %q: %v", l, err)
			continue
		}
		if seen[p.Name] {
			t.Errorf("default %q twice", p.Name)
		}
		seen[p.Name] = true
	}
	for _, l := range []string{"screen mode id:i:2", "prompt for credentials:i:1", "bandwidthautodetect:i:1", "connection type:i:7"} {
		if !seen[strings.SplitN(l, ":", 2)[0]] || !strings.Contains(strings.Join(lines, "\n"), l) {
			t.Errorf("no %q", l)
		}
	}
	// FreeRDP 2 warns about networkautodetect:i:1 with bandwidthautodetect,
	// FreeRDP 3 about networkautodetect:i:0: neither is in the file.
	for _, name := range []string{"networkautodetect", "loadbalanceinfo", "alternate full address", "password 51"} {
		if seen[name] {
			t.Errorf("the file has %q", name)
		}
	}
}

func TestWithRDPPort(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"rdsh01:3389", "rdsh01:3389"},
		{"rdsh01:13389", "rdsh01:13389"},
		{"rdsh01", "rdsh01:3389"},
		{"10.213.0.2", "10.213.0.2:3389"},
		{"[2001:db8::1]:3390", "[2001:db8::1]:3390"},
		{"2001:db8::1", "[2001:db8::1]:3389"},
	} {
		if got := withRDPPort(c.in); got != c.want {
			t.Errorf("withRDPPort(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestRDPFileExtra(t *testing.T) {
	extra, err := ParseProperties([]byte("# the admin's choices\r\nScreen Mode ID:i:1\r\nredirectclipboard:i:0\r\n\r\nkeyboardhook:i:2\r\ndrivestoredirect:s:*\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	lines := rdpLines(t, File("h:3389", "alice", extra))
	count := map[string]int{}
	for _, l := range lines {
		count[strings.SplitN(l, ":", 2)[0]]++
	}
	text := strings.Join(lines, "\n")
	// Overrides replace the default in its place; new ones come last.
	for _, l := range []string{"screen mode id:i:1", "redirectclipboard:i:0", "drivestoredirect:s:*"} {
		if !strings.Contains(text, l+"\n") || count[strings.SplitN(l, ":", 2)[0]] != 1 {
			t.Errorf("want %q once:\n%s", l, text)
		}
	}
	if lines[len(lines)-1] != "keyboardhook:i:2" {
		t.Errorf("last line %q, want keyboardhook:i:2", lines[len(lines)-1])
	}
}

func TestParseRDPProperties(t *testing.T) {
	tests := []struct {
		name, in string
		want     []Property
		err      string // part of the error; "" for none
	}{
		{name: "empty", in: "", want: nil},
		{name: "comments and blank lines", in: "# x\n\n  \nuse multimon:i:1\n",
			want: []Property{{"use multimon", 'i', "1"}}},
		{name: "string with colons", in: "gatewayhostname:s:gw.example.test:443",
			want: []Property{{"gatewayhostname", 's', "gw.example.test:443"}}},
		{name: "integer in range, case folded", in: "DesktopWidth:i:2560",
			want: []Property{{"desktopwidth", 'i', "2560"}}},
		{name: "unknown", in: "use multimon:i:1\nfrobnicate:i:1", err: `line 2: property "frobnicate": not a known .rdp property`},
		{name: "loadbalanceinfo refused", in: "loadbalanceinfo:s:tsv://MS Terminal Services Plugin.1.pool", err: `line 1: property "loadbalanceinfo": cannot be set here`},
		{name: "full address refused", in: "full address:s:evil:3389", err: `line 1: property "full address": cannot be set here`},
		{name: "username refused", in: "username:s:bob", err: `property "username": cannot be set here`},
		{name: "no secrets", in: "password 51:b:01000000D08C9DDF", err: `property "password 51": cannot be set here: the broker puts no secrets`},
		{name: "wrong type", in: "redirectclipboard:s:1", err: `line 1: property "redirectclipboard": type "s", want i`},
		{name: "value not allowed", in: "\n\nscreen mode id:i:3", err: `line 3: property "screen mode id": value "3", want one of 1, 2`},
		{name: "not an integer", in: "autoreconnect max retries:i:many", err: `property "autoreconnect max retries": value "many" is not an integer`},
		{name: "out of range", in: "desktopheight:i:100000", err: `property "desktopheight": value 100000, want 200..8192`},
		{name: "twice", in: "use multimon:i:1\nUSE MULTIMON:i:0", err: `line 2: property "use multimon": set already on line 1`},
		{name: "not name:type:value", in: "use multimon=1", err: `line 1: "use multimon=1": want name:type:value`},
		{name: "control character", in: "domain:s:a\x1bb", err: `property "domain": value has a control character`},
		{name: "not text", in: "domain:s:\xff", err: "not UTF-8 or UTF-16 text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProperties([]byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// mstsc saves .rdp files as UTF-16LE with a byte order mark.
func TestParseRDPPropertiesUTF16(t *testing.T) {
	u := utf16.Encode([]rune("redirectprinters:i:0\r\nsession bpp:i:24\r\n"))
	le := []byte{0xFF, 0xFE}
	be := []byte{0xFE, 0xFF}
	for _, c := range u {
		le = append(le, byte(c), byte(c>>8))
		be = append(be, byte(c>>8), byte(c))
	}
	want := []Property{{"redirectprinters", 'i', "0"}, {"session bpp", 'i', "24"}}
	for name, data := range map[string][]byte{"LE": le, "BE": be} {
		got, err := ParseProperties(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if _, err := ParseProperties(le[:len(le)-1]); err == nil {
		t.Error("odd UTF-16: no error")
	}
}

// FuzzParseRDPProperties: whatever an admin's file holds, what is accepted
// makes a file in which every line is one property, the address and user
// come first and once, and each accepted property parses back as itself.
func FuzzParseRDPProperties(f *testing.F) {
	for _, seed := range []string{
		"redirectclipboard:i:0\r\nscreen mode id:i:1\r\n", // overrides
		"gatewayhostname:s:gw:443",                        // colons in a value
		"# comment\n\ndesktopwidth:i:0002560",             // leading zeros
		"full address:s:evil\r\nusername:s:x",             // refused
		"domain:s:a\rb",                                   // a CR inside a line
		"\xff\xfed\x00:\x00s\x00:\x00x\x00",               // UTF-16LE
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		extra, err := ParseProperties(data)
		if err != nil {
			return
		}
		lines := rdpLines(t, File("h:3389", "alice", extra))
		if lines[0] != "full address:s:h:3389" || lines[1] != "username:s:alice" {
			t.Fatalf("first lines %q", lines[:2])
		}
		text := strings.Join(lines, "\n") + "\n"
		for _, p := range extra {
			back, err := parseRDPLine(p.String())
			if err != nil || back != p {
				t.Fatalf("%q parses back as %+v, %v", p.String(), back, err)
			}
			if strings.Count(text, "\n"+p.Name+":") != 1 {
				t.Fatalf("%q not exactly once:\n%s", p.Name, text)
			}
		}
	})
}
