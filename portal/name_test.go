package portal

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// TestSessionName_RU3: a session on the portal's page is named by what
// the user's feed offers in its pool: the desktop, else the first three
// applications, else the pool; a global entitlement's session is named
// by the entitlement whose member it is in this pod.
func TestSessionName_RU3(t *testing.T) {
	app := func(pool, name string) vdibroker.FeedResource {
		return vdibroker.FeedResource{Kind: vdibroker.FeedRemoteApp, HostPool: pool, FriendlyName: name}
	}
	feed := []vdibroker.FeedResource{
		{ID: "desktop:desk", Kind: vdibroker.FeedDesktop, HostPool: "desk", FriendlyName: "Office desktop"},
		app("desk", "Word"),
		app("apps", "Word"), app("apps", "Excel"), app("apps", "Outlook"), app("apps", "Teams"),
		app("two", "Paint"), app("two", "Notepad"),
		{ID: "global:crm", Kind: vdibroker.FeedDesktop, GlobalEntitlement: "crm", FriendlyName: "CRM", MemberPools: []string{"crm-east", "crm-west"}},
		{Kind: vdibroker.FeedRemoteApp, GlobalEntitlement: "calc", FriendlyName: "Calculator", MemberPools: []string{"two", "calc-east"}},
	}
	for pool, want := range map[string]string{
		"desk":      "Office desktop",
		"apps":      "Word, Excel, Outlook, …",
		"two":       "Paint, Notepad, Calculator",
		"crm-west":  "CRM",
		"calc-east": "Calculator",
		"other":     "other",
	} {
		got, desktop := sessionName(feed, pool)
		if got != want {
			t.Errorf("pool %q: %q, want %q", pool, got, want)
		}
		// The desktop that names it reconnects to it; applications do
		// not say which one to open.
		if wantDesktop := map[string]string{"desk": "desktop:desk", "crm-west": "global:crm"}[pool]; desktop != wantDesktop {
			t.Errorf("pool %q: desktop %q, want %q", pool, desktop, wantDesktop)
		}
	}
}

// TestLaunchFailureReference_RU4: a failed launch whose cause has no
// words of its own for the user gives her the request's id to quote to
// her helpdesk.
func TestLaunchFailureReference_RU4(t *testing.T) {
	p := &Portal{}
	lg := newLang("en")
	v := p.view("s", &vdibroker.PortalLaunch{Name: "Office", State: launchFailed, Message: failure(errors.New("disk full"), "req-7f3a")}, lg, time.Now())
	if v.Message != "\u2068Office\u2069 could not be opened. Try again; if it keeps happening, tell your helpdesk. Reference for your helpdesk: req-7f3a" {
		t.Errorf("message %q", v.Message)
	}
	// A known cause has its own words, and the reference too.
	v = p.view("s", &vdibroker.PortalLaunch{Name: "Office", State: launchFailed, Message: failure(vdibroker.Errorf(vdibroker.ENoCapacity, "pool x is full"), "req-8b"), CreateTime: time.Now()}, lg, time.Now())
	if !strings.HasPrefix(v.Message, "No session host can take \u2068Office\u2069 right now.") || !strings.HasSuffix(v.Message, "Reference for your helpdesk: req-8b") {
		t.Errorf("message %q", v.Message)
	}
	// A launch an older replica stored holds the connect's own words:
	// none of them is shown as a reference.
	v = p.view("s", &vdibroker.PortalLaunch{Name: "Office", State: launchFailed, Message: `pool "desk" has no capacity: 2 session hosts drained`}, lg, time.Now())
	if strings.Contains(v.Message, "drained") || strings.Contains(v.Message, "Reference") {
		t.Errorf("an older replica's launch: %q", v.Message)
	}
}
