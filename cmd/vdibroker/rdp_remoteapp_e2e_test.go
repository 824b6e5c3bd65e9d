//go:build linux

package main

// RemoteApp .rdp files read by FreeRDP (R-E7, R-E8), in the RDP end-to-end
// family (VDIBROKER_TEST_RDP=1): a real `vdibroker serve`, application
// connects of an end user through its API, and each answer's rdpFile read
// by FreeRDP twice: by its client library's own .rdp parser
// (freerdp_client_parse_rdp_file and the settings it fills, a small C
// program built against libfreerdp-client2), and by xfreerdp itself, which
// must load its RemoteApp channel (rail) for an application's file and not
// for a desktop's. xrdp is not asked to run the application: it has no
// RemoteApp aliases to resolve ||paint against, so this test stops at the
// client.

import (
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// rdpSettingsProgram prints the settings FreeRDP's client library fills
// from the .rdp file it is given, one name=value a line.
const rdpSettingsProgram = `#include <stdio.h>
#include <freerdp/client/file.h>
#include <freerdp/settings.h>

static void str(rdpSettings* s, const char* name, size_t id) {
	const char* v = freerdp_settings_get_string(s, id);
	printf("%s=%s\n", name, v ? v : "");
}

int main(int argc, char** argv) {
	rdpFile* file = freerdp_client_rdp_file_new();
	rdpSettings* s = freerdp_settings_new(0);
	if (argc != 2 || !file || !s || !freerdp_client_parse_rdp_file(file, argv[1]) ||
	    !freerdp_client_populate_settings_from_rdp_file(file, s)) {
		fprintf(stderr, "FreeRDP did not read %s\n", argc == 2 ? argv[1] : "(no file)");
		return 1;
	}
	printf("RemoteApplicationMode=%d\n", freerdp_settings_get_bool(s, FreeRDP_RemoteApplicationMode));
	str(s, "RemoteApplicationProgram", FreeRDP_RemoteApplicationProgram);
	str(s, "RemoteApplicationName", FreeRDP_RemoteApplicationName);
	str(s, "RemoteApplicationCmdLine", FreeRDP_RemoteApplicationCmdLine);
	str(s, "ServerHostname", FreeRDP_ServerHostname);
	printf("ServerPort=%u\n", freerdp_settings_get_uint32(s, FreeRDP_ServerPort));
	str(s, "Username", FreeRDP_Username);
	printf("RedirectClipboard=%d\n", freerdp_settings_get_bool(s, FreeRDP_RedirectClipboard));
	printf("AudioCapture=%d\n", freerdp_settings_get_bool(s, FreeRDP_AudioCapture));
	return 0;
}
`

// freeRDPReader builds rdpSettingsProgram in dir and returns a function
// that reads an .rdp file's text with it.
func freeRDPReader(t *testing.T, dir string) func(name, rdpFile string) map[string]string {
	t.Helper()
	src, bin := filepath.Join(dir, "rdpsettings.c"), filepath.Join(dir, "rdpsettings")
	if err := os.WriteFile(src, []byte(rdpSettingsProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	flags, err := exec.Command("pkg-config", "--cflags", "--libs", "freerdp-client2", "freerdp2", "winpr2").Output()
	if err != nil {
		t.Fatalf("pkg-config freerdp-client2: %v (apt-get install -y freerdp2-dev pkg-config gcc)", err)
	}
	args := append([]string{"-o", bin, src}, strings.Fields(string(flags))...)
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("build the FreeRDP reader: %v\n%s", err, out)
	}
	return func(name, rdpFile string) map[string]string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(rdpFile), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, path).CombinedOutput()
		if err != nil {
			t.Fatalf("FreeRDP's parser on %s: %v\n%s\n%s", name, err, out, rdpFile)
		}
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			k, v, _ := strings.Cut(line, "=")
			got[k] = v
		}
		return got
	}
}

// TestRemoteAppRDPFileFreeRDP: an end user's application connects answer
// .rdp files FreeRDP reads as RemoteApps of the application, with the
// command line its setting allows and the pool's customRdpProperty over
// the server's --rdp-defaults; the user's desktop file is no RemoteApp.
func TestRemoteAppRDPFileFreeRDP(t *testing.T) {
	if os.Getenv("VDIBROKER_TEST_RDP") != "1" {
		t.Skip("RDP end-to-end test: set VDIBROKER_TEST_RDP=1 to run it (after apt-get install -y freerdp2-x11 freerdp2-dev pkg-config gcc xvfb; .ci/run does both)")
	}
	for _, tool := range []string{"gcc", "pkg-config", "xfreerdp", "Xvfb"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("RemoteApp .rdp test: %s not found (apt-get install -y freerdp2-x11 freerdp2-dev pkg-config gcc xvfb)", tool)
		}
	}
	dir := t.TempDir()
	read := freeRDPReader(t, dir)
	bin := e2eBuild(t, dir)
	defaults := filepath.Join(dir, "rdp-defaults")
	if err := os.WriteFile(defaults, []byte("redirectclipboard:i:1\naudiocapturemode:i:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const admin = "vdb_admin_e2e_remoteapp"
	_, base := e2eServeAt(t, bin, filepath.Join(dir, "broker"), admin, "127.0.0.1:0", "--rdp-defaults", defaults)
	api := e2eAPI{tb: t, base: base, token: admin}
	const pool = "apps-pool"
	api.call("PUT", "/hostpools/"+pool, map[string]any{"customRdpProperty": "redirectclipboard:i:0;audiocapturemode:i:1"}, 201, nil)

	// The session host: registered and heartbeating at an address where
	// nothing listens (xfreerdp's connect is refused there).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hostAddr := ln.Addr().String()
	ln.Close()
	var tok struct {
		Token string `json:"token"`
	}
	api.call("POST", "/hostpools/"+pool+"/registrationtoken", map[string]any{"expiresInSeconds": 3600}, 201, &tok)
	var reg vdibroker.RegisterResponse
	api.call("POST", "/agent/register", map[string]any{"token": tok.Token, "hostName": "app-host", "address": hostAddr}, 201, &reg)
	beat := e2eAPI{tb: t, base: base, token: reg.Credential}
	beat.call("POST", "/agent/heartbeat", map[string]any{}, 200, nil)

	api.call("PUT", "/applicationgroups/tools", map[string]any{"hostPool": pool, "applicationGroupType": "RemoteApp",
		"assignments": map[string]any{"groups": []string{"Toolers"}}}, 201, nil)
	api.call("PUT", "/applicationgroups/"+pool+"-dag", map[string]any{"hostPool": pool, "applicationGroupType": "Desktop",
		"assignments": map[string]any{"allUsers": true}}, 201, nil)
	for name, app := range map[string]map[string]any{
		"paint": {"filePath": `C:\Windows\system32\mspaint.exe`, "friendlyName": "Paint"},
		"cmd":   {"filePath": `C:\Windows\system32\cmd.exe`, "commandLineSetting": "Require", "commandLineArguments": "/k dir", "friendlyName": "Command Prompt"},
		"word":  {"filePath": `C:\Office\WINWORD.EXE`, "commandLineSetting": "Allow", "friendlyName": "Word"},
	} {
		api.call("PUT", "/applicationgroups/tools/applications/"+name, app, 201, nil)
	}
	var ut struct {
		Token string `json:"token"`
	}
	api.call("POST", "/tokens", map[string]any{"role": "User", "subject": "erin", "groups": []string{"toolers"}}, 201, &ut)
	user := e2eAPI{tb: t, base: base, token: ut.Token}

	host, port, _ := net.SplitHostPort(hostAddr)
	files := map[string]string{}
	for _, c := range []struct {
		app, commandLine, name, cmdline string
	}{
		{"paint", "", "Paint", ""},
		{"cmd", "", "Command Prompt", "/k dir"},
		{"word", `/n "C:\Users\erin\a b.docx"`, "Word", `/n "C:\Users\erin\a b.docx"`},
	} {
		var a vdibroker.ConnectResponse
		status := 200
		if c.app == "paint" {
			status = 201 // erin's first connect makes her session; the others reconnect to it (R-E7)
		}
		user.call("POST", "/applicationgroups/tools/connect", map[string]any{"user": "erin", "application": c.app, "commandLine": c.commandLine}, status, &a)
		got := read(c.app+".rdp", a.RDPFile)
		files[c.app] = a.RDPFile
		want := map[string]string{
			"RemoteApplicationMode": "1", "RemoteApplicationProgram": "||" + c.app, "RemoteApplicationName": c.name,
			"RemoteApplicationCmdLine": c.cmdline, "ServerHostname": host, "ServerPort": port, "Username": "erin",
			// The pool's customRdpProperty over --rdp-defaults (R-E8).
			"RedirectClipboard": "0", "AudioCapture": "1",
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: FreeRDP read %s=%q, want %q\n%s", c.app, k, got[k], v, a.RDPFile)
			}
		}
	}
	var d vdibroker.ConnectResponse
	user.call("POST", "/hostpools/"+pool+"/connect", map[string]any{"user": "erin"}, 200, &d)
	if got := read("desktop.rdp", d.RDPFile); got["RemoteApplicationMode"] != "0" || got["RemoteApplicationProgram"] != "" || got["RedirectClipboard"] != "0" {
		t.Errorf("desktop: FreeRDP read %v", got)
	}
	files["desktop"] = d.RDPFile

	// xfreerdp itself: the application's file puts it in RemoteApp mode
	// (it loads the rail channel before connecting), the desktop's not;
	// neither file is corrected or refused.
	display := rdpXvfb(t)
	for name, file := range files {
		path := filepath.Join(dir, "xfreerdp-"+name+".rdp")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		c := rdpStart(t, "xfreerdp", []string{"DISPLAY=" + display}, path, "/p:x", "/cert:ignore", "/log-level:DEBUG")
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("xfreerdp on %s did not end", name)
		}
		out := c.output()
		rail := strings.Contains(out, "loading channelEx rail")
		if rail != (name != "desktop") || !strings.Contains(out, "loading channelEx rdpdr") {
			t.Errorf("xfreerdp on the %s file: RemoteApp channel loaded %v:\n%s", name, rail, tail(out, 3000))
		}
		for _, bad := range []string{"Correcting", "Failed to parse"} {
			if strings.Contains(out, bad) {
				t.Errorf("xfreerdp on the %s file says %q:\n%s", name, bad, tail(out, 3000))
			}
		}
	}
	// The sessions: erin's one, on app-host.
	s := api.sessions(pool, url.Values{"user": {"ERIN"}})
	if len(s) != 1 || s[0].ID != d.SessionID {
		t.Errorf("erin's sessions %+v, want her one session %s", s, d.SessionID)
	}
}
