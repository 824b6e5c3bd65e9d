package agent

import (
	"path/filepath"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// TestAgentSaysWhetherItRunsRemoteApps_RE12: the agent tells the broker at
// registration and in every heartbeat whether its host can run RemoteApps:
// an xrdp host no, a Windows (wts) host yes, a provider that does not know
// nothing (Unknown, as an older agent), and Config.RemoteApps (the
// --remote-apps flag) overrides the provider.
func TestAgentSaysWhetherItRunsRemoteApps_RE12(t *testing.T) {
	yes, no := true, false
	xrdp := func() SessionProvider { return &XrdpProvider{Proc: twoSessions, LookupUID: labUIDs} }
	wts := func() SessionProvider { return newWTSProvider(newFakeWTS(wtsRecording{}), UserFormatUPN) }
	file := func() SessionProvider { return &FileProvider{Path: filepath.Join(t.TempDir(), "none.json")} }
	for _, tc := range []struct {
		name     string
		sessions func() SessionProvider
		override *bool
		want     *bool
	}{
		{"xrdp", xrdp, nil, &no},
		{"wts", wts, nil, &yes},
		{"a provider that does not know", file, nil, nil},
		{"xrdp overridden yes", xrdp, &yes, &yes},
		{"wts overridden no", wts, &no, &no},
		{"unknown overridden no", file, &no, &no},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newFakeBroker(t)
			a := newTestAgent(t, Config{Server: b.srv.URL, Sessions: tc.sessions(), RemoteApps: tc.override})
			stop := start(t, a)
			waitFor(t, "two heartbeats", func() bool { return b.heartbeatCount() >= 2 })
			_ = stop()
			say := func(v *bool) string {
				if v == nil {
					return "nothing"
				}
				return vdibroker.RemoteAppsFrom(v, "")
			}
			b.locked(func() {
				if got := say(b.registrations[0].RemoteApps); got != say(tc.want) {
					t.Errorf("registration says %s, want %s", got, say(tc.want))
				}
				for i, hb := range b.heartbeats {
					if got := say(hb.RemoteApps); got != say(tc.want) {
						t.Errorf("heartbeat %d says %s, want %s", i, got, say(tc.want))
					}
				}
			})
		})
	}
}
