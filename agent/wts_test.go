package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vdibroker/vdibroker"
)

// What covers the wts provider, and how (the rest of the Windows side is in
// wts_windows_test.go, run on Windows and under Wine):
//
//   - The mapping of the API's answers (states, user names, ids, which
//     sessions count) and the provider's logic (sessions ending between
//     calls, UPNs kept per logon, commands checked against the logon they
//     were meant for) run here, on every system, fed with the answers of
//     testdata/windows/*.json through fakeWTS. Those answers are transcribed
//     from the shape of a real RDSH and AVD host, not captured from one
//     (Wine has no RDS sessions: see below); TestRecordWTS on a real host
//     writes new ones in the same format.
//   - The byte layout of WTSINFOW is checked against a buffer the C
//     compiler laid out from the Windows SDK header (make_wtsinfo.c), and
//     every structure the provider reads from memory against the headers
//     themselves (TestWindowsLayouts, with mingw-w64).
//   - Under Wine 8 the real calls run (wts_windows_test.go), but Wine's
//     wtsapi32 has no sessions: WTSEnumerateSessionsExW fails with no error
//     code, WTSEnumerateSessionsW lists none, WTSQuerySessionInformationW
//     answers only WTSUserName and WTSDomainName, WTSLogoffSession and
//     WTSSendMessageW are stubs that fail, WTSDisconnectSession a stub that
//     succeeds. That test pins those answers, so that a Wine that starts
//     answering is noticed.

// wtsRecording is a testdata/windows/*.json file: what the API answered for
// each session of a host (TestRecordWTS writes them).
type wtsRecording struct {
	Source       string            `json:"source"`
	ComputerName string            `json:"computerName"`
	Sessions     []WTSSession      `json:"sessions"`
	UPNErrors    map[uint32]string `json:"upnErrors,omitempty"`
}

func loadWTSRecording(tb testing.TB, name string) wtsRecording {
	tb.Helper()
	data, err := os.ReadFile("testdata/windows/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	var r wtsRecording
	if err := json.Unmarshal(data, &r); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return r
}

// fakeWTS answers the provider's calls from a recording, as the real calls
// would: the listing has no logon time nor UPN, WTSINFOW cuts user names
// at 20 characters, a session that is gone is ErrNoSession.
type fakeWTS struct {
	mu       sync.Mutex
	sessions []WTSSession
	enumErr  error
	upnErr   map[uint32]error
	upnCalls int
	gone     map[uint32]bool            // ended after the listing
	listedAs map[uint32]WTSConnectState // the listing's state, older than the queries'
	callErr  error                      // what Logoff, Disconnect, SendMessage answer
	calls    []string
}

func newFakeWTS(r wtsRecording) *fakeWTS {
	f := &fakeWTS{sessions: slices.Clone(r.Sessions), upnErr: map[uint32]error{}, gone: map[uint32]bool{}, listedAs: map[uint32]WTSConnectState{}}
	for id, msg := range r.UPNErrors {
		f.upnErr[id] = errors.New(msg)
	}
	return f
}

func (f *fakeWTS) Enumerate() ([]WTSSession, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.enumErr != nil {
		return nil, f.enumErr
	}
	var out []WTSSession
	for _, s := range f.sessions {
		if st, ok := f.listedAs[s.ID]; ok {
			s.State = st
		}
		out = append(out, WTSSession{ID: s.ID, State: s.State, Station: s.Station, User: s.User, Domain: s.Domain})
	}
	return out, nil
}

func (f *fakeWTS) find(id uint32) (WTSSession, bool) {
	for _, s := range f.sessions {
		if s.ID == id && !f.gone[id] {
			return s, true
		}
	}
	return WTSSession{}, false
}

func (f *fakeWTS) Info(id uint32) (wtsInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.find(id)
	if !ok {
		return wtsInfo{}, fmt.Errorf("WTSQuerySessionInformationW(session %d): %w", id, ErrNoSession)
	}
	user := s.User
	if len(user) > 20 {
		user = user[:20]
	}
	return wtsInfo{SessionID: id, State: s.State, User: user, Domain: s.Domain, LogonTime: s.LogonTime}, nil
}

func (f *fakeWTS) UPN(id uint32, domain, user string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.upnCalls++
	if err := f.upnErr[id]; err != nil {
		return "", err
	}
	s, _ := f.find(id)
	return s.UPN, nil
}

func (f *fakeWTS) call(format string, args ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
	return f.callErr
}

func (f *fakeWTS) Logoff(id uint32) error     { return f.call("logoff %d", id) }
func (f *fakeWTS) Disconnect(id uint32) error { return f.call("disconnect %d", id) }
func (f *fakeWTS) SendMessage(id uint32, title, message string) error {
	return f.call("message %d %q %q", id, title, message)
}

func (f *fakeWTS) set(id uint32, change func(*WTSSession)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.sessions {
		if f.sessions[i].ID == id {
			change(&f.sessions[i])
		}
	}
}

// TestWTSBrokerState maps every WTS_CONNECTSTATE_CLASS value, and values a
// later Windows may add.
func TestWTSBrokerState(t *testing.T) {
	tests := []struct {
		s     WTSConnectState
		state string // "" for no user session
	}{
		{WTSActive, vdibroker.StateActive},
		{WTSConnected, ""},    // a client at the logon screen
		{WTSConnectQuery, ""}, // connecting
		{WTSShadow, vdibroker.StateActive},
		{WTSDisconnected, vdibroker.StateDisconnected},
		{WTSIdle, ""},   // a spare WinStation
		{WTSListen, ""}, // the RDP-Tcp listener
		{WTSReset, ""},  // going away
		{WTSDown, ""},   // failed
		{WTSInit, ""},   // coming up
		{WTSConnectState(10), ""},
		{WTSConnectState(0xFFFFFFFF), ""},
	}
	for _, tt := range tests {
		t.Run(tt.s.String(), func(t *testing.T) {
			got, ok := wtsBrokerState(tt.s)
			if got != tt.state || ok != (tt.state != "") {
				t.Errorf("wtsBrokerState(%v) = %q, %v; want %q", tt.s, got, ok, tt.state)
			}
		})
	}
}

// TestWTSUserSession: a user's logon needs a user state, a user and a
// session other than 0, which since Vista holds services only (a user
// shown there, as Windows Server 2003 showed its console user, is none).
func TestWTSUserSession(t *testing.T) {
	tests := []struct {
		s    WTSSession
		want bool
	}{
		{WTSSession{ID: 2, State: WTSActive, User: "alice"}, true},
		{WTSSession{ID: 3, State: WTSDisconnected, User: "bob"}, true},
		{WTSSession{ID: 0, State: WTSActive, User: "alice"}, false},
		{WTSSession{ID: 1, State: WTSActive}, false},
		{WTSSession{ID: 1, State: WTSConnected, User: "alice"}, false}, // logging on
		{WTSSession{ID: 65536, State: WTSListen}, false},
	}
	for _, tt := range tests {
		if got := tt.s.isUserSession(); got != tt.want {
			t.Errorf("isUserSession(%+v) = %v, want %v", tt.s, got, tt.want)
		}
	}
}

func TestWTSConnectStateText(t *testing.T) {
	for _, in := range []string{"WTSDisconnected", "4"} {
		var s WTSConnectState
		if err := s.UnmarshalText([]byte(in)); err != nil || s != WTSDisconnected {
			t.Errorf("UnmarshalText(%q) = %v, %v; want WTSDisconnected", in, s, err)
		}
	}
	var s WTSConnectState
	if err := s.UnmarshalText([]byte("Active")); err == nil {
		t.Error(`UnmarshalText("Active") accepted a name that is not the header's`)
	}
	if got := WTSConnectState(12).String(); got != "WTSConnectState(12)" {
		t.Errorf("String of an unknown state = %q", got)
	}
}

// TestWindowsUserName: each format for a domain account with a UPN, one
// whose UPN differs from its logon name, a local account, and an account
// Windows gives no domain.
func TestWindowsUserName(t *testing.T) {
	alice := WTSSession{User: "alice", Domain: "CONTOSO", UPN: "alice@contoso.com"}
	bob := WTSSession{User: "Bob", Domain: "CONTOSO", UPN: "bob.smith@contoso.com"}
	local := WTSSession{User: "localadmin", Domain: "RDSH01"}
	bare := WTSSession{User: "kiosk"}
	tests := []struct {
		name string
		f    WindowsUserFormat
		s    WTSSession
		want string
	}{
		{"upn", UserFormatUPN, alice, "alice@contoso.com"},
		{"upn other than the logon name", UserFormatUPN, bob, "bob.smith@contoso.com"},
		{"upn of a local account: DOMAIN\\user", UserFormatUPN, local, `RDSH01\localadmin`},
		{"upn without a domain", UserFormatUPN, bare, "kiosk"},
		{"domain", UserFormatDomain, alice, `CONTOSO\alice`},
		{"domain keeps the case", UserFormatDomain, bob, `CONTOSO\Bob`},
		{"domain of a local account", UserFormatDomain, local, `RDSH01\localadmin`},
		{"domain without a domain", UserFormatDomain, bare, "kiosk"},
		{"user", UserFormatUser, alice, "alice"},
		{"user ignores the UPN", UserFormatUser, bob, "Bob"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := WindowsUserName(tt.f, tt.s); got != tt.want {
				t.Errorf("WindowsUserName(%s, %+v) = %q, want %q", tt.f, tt.s, got, tt.want)
			}
		})
	}
}

func TestSameUser(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"alice@contoso.com", "Alice@Contoso.com", true},
		{`CONTOSO\bob`, `contoso\BOB`, true},
		{`CONTOSO\alice`, "alice@contoso.com", false}, // two formats are two names
		{"alice", "alice2", false},
		{"", "", false}, // no user is nobody
	}
	for _, tt := range tests {
		if got := sameUser(tt.a, tt.b); got != tt.want {
			t.Errorf("sameUser(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestParseWindowsUserFormat(t *testing.T) {
	for in, want := range map[string]WindowsUserFormat{"": UserFormatUPN, "upn": UserFormatUPN, "domain": UserFormatDomain, "user": UserFormatUser} {
		if got, err := ParseWindowsUserFormat(in); err != nil || got != want {
			t.Errorf("ParseWindowsUserFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"UPN", "sam", "domain\\user"} {
		if _, err := ParseWindowsUserFormat(in); err == nil {
			t.Errorf("ParseWindowsUserFormat(%q) accepted", in)
		}
	}
}

func TestWTSSessionID(t *testing.T) {
	s := WTSSession{ID: 3, LogonTime: 134405857310000000}
	id := wtsSessionID(s)
	if id != "wts-3-134405857310000000" {
		t.Fatalf("wtsSessionID = %q", id)
	}
	sid, logon, err := parseWTSSessionID(id)
	if err != nil || sid != 3 || logon != s.LogonTime {
		t.Fatalf("parseWTSSessionID(%q) = %d, %d, %v", id, sid, logon, err)
	}
	// Ids the broker sends back come from the agent, but are checked as
	// hostile input: anything not made by wtsSessionID is no session.
	for _, bad := range []string{"", "wts-", "wts-3", "wts-3-", "wts--5", "wts-3--5", "wts-4294967296-1", "wts-03-1",
		"wts-3-01", "wts-3-1-2", "xrdp-10-5", "wts-+3-1", "wts-3-+1", "wts-3-9223372036854775808"} {
		if _, _, err := parseWTSSessionID(bad); !errors.Is(err, ErrNoSession) {
			t.Errorf("parseWTSSessionID(%q) = %v, want ErrNoSession", bad, err)
		}
	}
}

// TestDecodeWTSInfo decodes a WTSINFOW laid out by the C compiler from the
// Windows SDK header (testdata/windows/make_wtsinfo.c).
func TestDecodeWTSInfo(t *testing.T) {
	data, err := os.ReadFile("testdata/windows/wtsinfo-session2.bin")
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeWTSInfo(data)
	if err != nil {
		t.Fatal(err)
	}
	want := wtsInfo{SessionID: 2, State: WTSActive, User: "alice", Domain: "CONTOSO", LogonTime: 134405857310000000}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decodeWTSInfo (-want +got):\n%s", diff)
	}
	if _, err := decodeWTSInfo(data[:wtsInfoSize-1]); err == nil {
		t.Error("a short WTSINFOW decoded")
	}
	// A user name that fills its field has no NUL before the next field.
	full := slices.Clone(data)
	for i := range wtsInfoUserNameLen / 2 {
		full[wtsInfoUserNameOff+2*i], full[wtsInfoUserNameOff+2*i+1] = 'x', 0
	}
	if got, _ := decodeWTSInfo(full); got.User != strings.Repeat("x", 21) {
		t.Errorf("a full user name field decoded as %q", got.User)
	}
}

// TestWTSProviderRecorded runs the provider on the recorded answers of an
// RDSH joined to Active Directory and an AVD host joined to Entra ID, in
// each user name format.
func TestWTSProviderRecorded(t *testing.T) {
	type want = []vdibroker.AgentSession
	tests := []struct {
		file   string
		format WindowsUserFormat
		want   want
	}{
		// Sessions 0 (services), 1 (console at the logon screen), 4 (a
		// client at the logon screen) and 65536 (the listener) are no
		// user's; 6 shadows another session and is Active.
		{"rdsh-2022-ad.json", UserFormatUPN, want{
			{ID: "wts-2-134405857310000000", User: "alice@contoso.com", State: "Active"},
			{ID: "wts-3-134405307270000000", User: "bob.smith@contoso.com", State: "Disconnected"},
			{ID: "wts-5-134405859400000000", User: `RDSH01\localadmin`, State: "Active"}, // local: no UPN
			{ID: "wts-6-134405861420000000", User: "helpdesk@contoso.com", State: "Active"},
		}},
		{"rdsh-2022-ad.json", UserFormatDomain, want{
			{ID: "wts-2-134405857310000000", User: `CONTOSO\alice`, State: "Active"},
			{ID: "wts-3-134405307270000000", User: `CONTOSO\Bob`, State: "Disconnected"},
			{ID: "wts-5-134405859400000000", User: `RDSH01\localadmin`, State: "Active"},
			{ID: "wts-6-134405861420000000", User: `CONTOSO\helpdesk`, State: "Active"},
		}},
		{"rdsh-2022-ad.json", UserFormatUser, want{
			{ID: "wts-2-134405857310000000", User: "alice", State: "Active"},
			{ID: "wts-3-134405307270000000", User: "Bob", State: "Disconnected"},
			{ID: "wts-5-134405859400000000", User: "localadmin", State: "Active"},
			{ID: "wts-6-134405861420000000", User: "helpdesk", State: "Active"},
		}},
		{"avd-win11-multisession-entra.json", UserFormatUPN, want{
			{ID: "wts-2-134405854830000000", User: "alice.smith@contoso.com", State: "Active"},
			{ID: "wts-3-134405857900000000", User: "david@contoso.com", State: "Disconnected"},
		}},
		{"avd-win11-multisession-entra.json", UserFormatDomain, want{
			{ID: "wts-2-134405854830000000", User: `AzureAD\AliceSmith`, State: "Active"},
			{ID: "wts-3-134405857900000000", User: `AzureAD\DavidJones`, State: "Disconnected"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file+"/"+string(tt.format), func(t *testing.T) {
			api := newFakeWTS(loadWTSRecording(t, tt.file))
			got, err := newWTSProvider(api, tt.format).Sessions(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			// Each session's logon time is the FILETIME its id ends with.
			for i := range tt.want {
				ft, _ := strconv.ParseInt(tt.want[i].ID[strings.LastIndex(tt.want[i].ID, "-")+1:], 10, 64)
				logon := time.Date(1601, 1, 1, 0, 0, int(ft/1e7), int(ft%1e7*100), time.UTC)
				tt.want[i].LogonTime = &logon
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("sessions (-want +got):\n%s", diff)
			}
			if ok, dropped := acceptable(got); len(dropped) > 0 || len(ok) != len(got) {
				t.Errorf("the broker would refuse %v", dropped)
			}
			if tt.format != UserFormatUPN && api.upnCalls != 0 {
				t.Errorf("%d UPN look-ups in format %s, want none", api.upnCalls, tt.format)
			}
		})
	}
}

// TestWTSProviderChanges: the answers change between and within listings.
func TestWTSProviderChanges(t *testing.T) {
	ctx := t.Context()
	t.Run("a session ends between the listing and its query", func(t *testing.T) {
		api := newFakeWTS(loadWTSRecording(t, "rdsh-2022-ad.json"))
		api.gone[3] = true
		got, err := newWTSProvider(api, UserFormatDomain).Sessions(ctx)
		if err != nil || len(got) != 3 || slices.ContainsFunc(got, func(s vdibroker.AgentSession) bool { return s.User == `CONTOSO\Bob` }) {
			t.Errorf("sessions = %v, %v; want the three others", got, err)
		}
	})
	t.Run("the query is fresher than the listing", func(t *testing.T) {
		// Listed Active, being reset (logged off) by the time it is
		// queried; and listed at the logon screen, logged on by then.
		api := newFakeWTS(loadWTSRecording(t, "rdsh-2022-ad.json"))
		api.set(2, func(s *WTSSession) { s.State = WTSReset })
		api.listedAs[2] = WTSActive
		got, err := newWTSProvider(api, UserFormatDomain).Sessions(ctx)
		if err != nil || slices.ContainsFunc(got, func(s vdibroker.AgentSession) bool { return s.User == `CONTOSO\alice` }) {
			t.Errorf("sessions = %v, %v; want alice's session, reset, left out", got, err)
		}
	})
	t.Run("a listing that fails", func(t *testing.T) {
		api := newFakeWTS(loadWTSRecording(t, "rdsh-2022-ad.json"))
		api.enumErr = errors.New("WTSEnumerateSessionsExW: RPC server unavailable")
		if got, err := newWTSProvider(api, UserFormatUPN).Sessions(ctx); err == nil || got != nil {
			t.Errorf("Sessions = %v, %v; want the error", got, err)
		}
	})
	t.Run("a UPN that cannot be found out now", func(t *testing.T) {
		api := newFakeWTS(loadWTSRecording(t, "rdsh-2022-ad.json"))
		api.upnErr[6] = errors.New("TranslateName(CONTOSO\\helpdesk): The specified domain either does not exist or could not be contacted.")
		p := newWTSProvider(api, UserFormatUPN)
		got, err := p.Sessions(ctx)
		var partial *PartialListError
		if !errors.As(err, &partial) || len(partial.Reasons) != 1 || !strings.Contains(partial.Reasons[0], `session 6 of CONTOSO\helpdesk not reported`) {
			t.Fatalf("err = %v, want a PartialListError naming session 6", err)
		}
		if len(got) != 3 || slices.ContainsFunc(got, func(s vdibroker.AgentSession) bool { return strings.HasPrefix(s.ID, "wts-6-") }) {
			t.Errorf("sessions = %v, want the three others and not session 6 under another name", got)
		}
		// The directory answers again: the session is reported.
		delete(api.upnErr, 6)
		if got, err := p.Sessions(ctx); err != nil || len(got) != 4 || got[3].User != "helpdesk@contoso.com" {
			t.Errorf("after the directory is back: %v, %v", got, err)
		}
	})
	t.Run("UPNs are kept per logon", func(t *testing.T) {
		api := newFakeWTS(loadWTSRecording(t, "rdsh-2022-ad.json"))
		p := newWTSProvider(api, UserFormatUPN)
		if _, err := p.Sessions(ctx); err != nil {
			t.Fatal(err)
		}
		calls := api.upnCalls // one per user session: 2, 3, 5, 6
		if calls != 4 {
			t.Fatalf("%d UPN look-ups, want 4", calls)
		}
		// The directory stops answering: the users keep their names.
		for _, id := range []uint32{2, 3, 5, 6} {
			api.upnErr[id] = errors.New("directory down")
		}
		got, err := p.Sessions(ctx)
		if err != nil || api.upnCalls != calls || got[0].User != "alice@contoso.com" {
			t.Fatalf("second listing = %v, %v with %d more look-ups; want the kept names and none", got, err, api.upnCalls-calls)
		}
		// Alice logs off and session 2 goes to a new logon of carol: the
		// new logon is looked up, and the old one forgotten.
		api.upnErr = map[uint32]error{}
		api.set(2, func(s *WTSSession) { s.User, s.UPN, s.LogonTime = "carol", "carol@contoso.com", s.LogonTime+1 })
		got, err = p.Sessions(ctx)
		if err != nil || got[0].User != "carol@contoso.com" || got[0].ID != "wts-2-134405857310000001" || api.upnCalls != calls+1 {
			t.Fatalf("after the new logon: %v, %v, %d look-ups", got, err, api.upnCalls-calls)
		}
		if len(p.upns) != 4 {
			t.Errorf("%d UPNs kept, want the 4 logons that exist", len(p.upns))
		}
	})
}

// TestWTSProviderCommands: commands reach the API only for the logon they
// name (R-S4).
func TestWTSProviderCommands(t *testing.T) {
	ctx := context.Background()
	newP := func() (*WTSProvider, *fakeWTS) {
		api := newFakeWTS(loadWTSRecording(t, "rdsh-2022-ad.json"))
		return newWTSProvider(api, UserFormatUPN), api
	}
	alice, bob := "wts-2-134405857310000000", "wts-3-134405307270000000"

	p, api := newP()
	if err := p.Logoff(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if err := p.Disconnect(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if err := p.SendMessage(ctx, alice, "Maintenance at 18:00"); err != nil {
		t.Fatal(err)
	}
	// Bob is disconnected already: nothing to do.
	if err := p.Disconnect(ctx, bob); err != nil {
		t.Fatal(err)
	}
	want := []string{"logoff 2", "disconnect 2", `message 2 "Message from your administrator" "Maintenance at 18:00"`}
	if diff := cmp.Diff(want, api.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}

	tests := []struct {
		name string
		id   string
		prep func(*fakeWTS)
	}{
		{"session gone", alice, func(f *fakeWTS) { f.gone[2] = true }},
		{"session id reused by another logon", alice, func(f *fakeWTS) {
			f.set(2, func(s *WTSSession) { s.User, s.LogonTime = "carol", s.LogonTime+10_000_000 })
		}},
		{"session at the logon screen now", alice, func(f *fakeWTS) { f.set(2, func(s *WTSSession) { s.State, s.User = WTSConnected, "" }) }},
		{"the listener", "wts-65536-0", nil},
		{"services session", "wts-0-0", nil},
		{"not a wts id", "s-alice", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, api := newP()
			if tt.prep != nil {
				tt.prep(api)
			}
			for _, err := range []error{p.Logoff(ctx, tt.id), p.Disconnect(ctx, tt.id), p.SendMessage(ctx, tt.id, "hi")} {
				if !errors.Is(err, ErrNoSession) {
					t.Errorf("command on %s = %v, want ErrNoSession", tt.id, err)
				}
			}
			if len(api.calls) != 0 {
				t.Errorf("calls %v reached the API", api.calls)
			}
		})
	}

	t.Run("the API refuses", func(t *testing.T) {
		p, api := newP()
		api.callErr = errors.New("WTSSendMessageW: Access is denied.")
		if err := p.SendMessage(ctx, alice, "hi"); err == nil || !strings.Contains(err.Error(), "Access is denied") || errors.Is(err, ErrNoSession) {
			t.Errorf("SendMessage = %v, want the API's error", err)
		}
	})
}

// TestWTSProviderInAgent: a command for a user name the broker spells in
// another case finds the session (the broker compares user names without
// regard to case), and a partial listing reports its sessions and reasons.
func TestWTSProviderInAgent(t *testing.T) {
	b := newFakeBroker(t)
	api := newFakeWTS(loadWTSRecording(t, "rdsh-2022-ad.json"))
	api.upnErr[6] = errors.New("directory down")
	a := newTestAgent(t, Config{Server: b.srv.URL, Sessions: newWTSProvider(api, UserFormatUPN)})
	b.locked(func() {
		b.commands = []vdibroker.Command{{ID: "c1", Type: vdibroker.CommandLogoff, User: "Alice@CONTOSO.com"}}
	})
	start(t, a)
	var results []vdibroker.CommandResult
	waitFor(t, "the logoff's result", func() bool {
		results = b.results()
		return len(results) == 1
	})
	if r := results[0]; !r.Success || r.Message != "" {
		t.Errorf("logoff result = %+v, want success", r)
	}
	hb := b.lastHeartbeat()
	api.mu.Lock()
	calls := slices.Clone(api.calls)
	api.mu.Unlock()
	if !slices.Equal(calls, []string{"logoff 2"}) {
		t.Errorf("calls = %v, want alice's session 2 logged off", calls)
	}
	if len(hb.Sessions) != 3 || !strings.Contains(hb.HealthError, "session 6") {
		t.Errorf("heartbeat sessions %v, health %q; want three sessions and session 6 named", hb.Sessions, hb.HealthError)
	}
}

// TestFiletimeTime: a FILETIME counts 100 ns from 1601-01-01 UTC; 0 (no
// logon yet) and what lies before 1970 are no logon time, and the largest
// value does not overflow.
func TestFiletimeTime(t *testing.T) {
	for _, tt := range []struct {
		ft   int64
		want time.Time
	}{
		{116444736000000000 + 1e7 + 5, time.Date(1970, 1, 1, 0, 0, 1, 500, time.UTC)},
		// Seconds counted from 1601-01-01 (Unix -11644473600) in int64,
		// which time.Date's int is not on 32-bit targets.
		{134405857310000000, time.Unix(-11644473600+13440585731, 0).UTC()},
		{math.MaxInt64, time.Unix(-11644473600+math.MaxInt64/10_000_000, math.MaxInt64%10_000_000*100).UTC()},
	} {
		if got := FiletimeTime(tt.ft); got == nil || !got.Equal(tt.want) {
			t.Errorf("FiletimeTime(%d) = %v, want %v", tt.ft, got, tt.want)
		}
	}
	for _, ft := range []int64{0, -1, 116444736000000000, math.MinInt64} {
		if got := FiletimeTime(ft); got != nil {
			t.Errorf("FiletimeTime(%d) = %v, want no time", ft, got)
		}
	}
}
