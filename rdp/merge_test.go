package rdp

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseCustomProperties (R-E8): AVD's ";"-separated form and line
// breaks, a ";" kept inside a string value, each property checked as
// --rdp-defaults checks it.
func TestParseCustomProperties(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       []Property
		err        string
	}{
		{"AVD's form", "audiocapturemode:i:1;camerastoredirect:s:*;", []Property{{"audiocapturemode", 'i', "1"}, {"camerastoredirect", 's', "*"}}, ""},
		{"lines", "redirectclipboard:i:0\r\n\nuse multimon:i:1", []Property{{"redirectclipboard", 'i', "0"}, {"use multimon", 'i', "1"}}, ""},
		{"drives keep their ;", "drivestoredirect:s:C:;D:;redirectprinters:i:0", []Property{{"drivestoredirect", 's', "C:;D:"}, {"redirectprinters", 'i', "0"}}, ""},
		{"empty", " ; ;\n", nil, ""},
		{"unknown", "redirectclipbord:i:0", nil, `"redirectclipbord": not a known`},
		{"refused", "full address:s:evil:3389", nil, "the broker sets it"},
		{"bad value", "audiomode:i:5", nil, "want one of 0, 1, 2"},
		{"twice", "audiomode:i:1;audiomode:i:2", nil, "set twice"},
		{"not a property", "hello", nil, "want name:type:value"},
		{"a ; after an integer", "audiomode:i:1;2", nil, "want name:type:value"},
	} {
		got, err := ParseCustomProperties(c.text)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want an error with %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || !cmp.Equal(got, c.want) {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

// TestMergeAndRemoteApp (R-E7, R-E8): a pool's properties replace the
// server's in place and add the others; an application's RemoteApp lines
// replace every remoteapplication* property before them.
func TestMergeAndRemoteApp(t *testing.T) {
	server := []Property{{"redirectclipboard", 'i', "1"}, {"remoteapplicationmode", 'i', "1"}, {"remoteapplicationprogram", 's', "||notepad"}, {"remoteapplicationcmdline", 's', "x"}}
	pool := []Property{{"audiomode", 'i', "2"}, {"redirectclipboard", 'i', "0"}}
	merged := Merge(server, pool)
	want := []Property{{"redirectclipboard", 'i', "0"}, {"remoteapplicationmode", 'i', "1"}, {"remoteapplicationprogram", 's', "||notepad"}, {"remoteapplicationcmdline", 's', "x"}, {"audiomode", 'i', "2"}}
	if !cmp.Equal(merged, want) {
		t.Errorf("merged %v, want %v", merged, want)
	}
	if server[0].Value != "1" {
		t.Error("Merge changed its base")
	}
	app := WithRemoteApp(merged, "paint", "Paint", "")
	want = []Property{{"redirectclipboard", 'i', "0"}, {"audiomode", 'i', "2"},
		{"remoteapplicationmode", 'i', "1"}, {"remoteapplicationprogram", 's', "||paint"}, {"remoteapplicationname", 's', "Paint"}}
	if !cmp.Equal(app, want) {
		t.Errorf("with paint %v, want %v", app, want)
	}
	if got := WithRemoteApp(nil, "cmd", "cmd", "/k dir"); got[len(got)-1] != (Property{"remoteapplicationcmdline", 's', "/k dir"}) {
		t.Errorf("with cmd %v", got)
	}
	f := File("h:3389", "u", app)
	for _, line := range []string{"remoteapplicationmode:i:1\r\n", "remoteapplicationprogram:s:||paint\r\n", "remoteapplicationname:s:Paint\r\n"} {
		if strings.Count(f, line) != 1 {
			t.Errorf("file has %q %d times:\n%s", line, strings.Count(f, line), f)
		}
	}
}

// FuzzParseCustomProperties: any text parses or is refused; what parses
// writes lines that parse back to the same properties (no line can be
// injected).
func FuzzParseCustomProperties(f *testing.F) {
	f.Add("audiocapturemode:i:1;camerastoredirect:s:*;")
	f.Add("drivestoredirect:s:C:;D:\nredirectclipboard:i:0")
	f.Add("remoteapplicationname:s:a\rb")
	f.Fuzz(func(t *testing.T, text string) {
		props, err := ParseCustomProperties(text)
		if err != nil {
			return
		}
		var b strings.Builder
		for _, p := range props {
			b.WriteString(p.String() + "\n")
		}
		again, err := ParseProperties([]byte(b.String()))
		if err != nil || !cmp.Equal(again, props) {
			t.Errorf("%q: %v written back as %q reads %v, %v", text, props, b.String(), again, err)
		}
	})
}
