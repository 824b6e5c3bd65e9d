package main

import (
	"strings"
	"testing"
)

// serve refuses outage placement flags out of range, naming the flag and
// the range, before it opens anything (R-OUT2): an escrow renewed more
// often than twice the maintenance tick would be lengthened silently.
func TestServeOutageFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--outage-escrow-renew", "2s"}, "--outage-escrow-renew 2s: want 10s (twice the maintenance interval) to 1h"},
		{[]string{"--outage-escrow-renew", "2h"}, "--outage-escrow-renew 2h: want 10s"},
		{[]string{"--outage-share", "0"}, "--outage-share 0: want 1 to 100"},
		{[]string{"--outage-share-max", "0"}, "--outage-share-max 0: want 1 to 10000"},
	} {
		args := append([]string{"serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--outage-placement"}, c.args...)
		r := runCLI(t, args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want 2 and %q", c.args, r.code, r.stderr, c.want)
		}
	}
}
