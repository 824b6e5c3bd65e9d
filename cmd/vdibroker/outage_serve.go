package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker/outage"
)

// addOutageFlags adds serve's outage placement flags (R-OUT2).
func addOutageFlags(cmd *cobra.Command, m *Main) {
	o := &m.OutagePlacement
	f := cmd.Flags()
	f.BoolVar(&o.Enabled, "outage-placement", false,
		"during a database outage, place new users within a share of each host's free slots this replica holds in escrow while the database is up (default: refused with 503 StoreUnavailable)")
	f.IntVar(&o.Share, "outage-share", 25, "percentage of each host's free slots this replica holds in escrow for --outage-placement (1-100, rounded up)")
	f.IntVar(&o.MaxPerHost, "outage-share-max", 2, "most slots of one host this replica holds in escrow for --outage-placement (1-10000)")
	f.DurationVar(&o.Renew, "outage-escrow-renew", 10*time.Second, "how often the escrow is renewed (at least twice the maintenance interval, 5s); it expires after 3 renewals")
	f.StringVar(&o.Replica, "replica-id", "", "this replica's name in the escrow table (default: host name and a random suffix)")
	f.DurationVar(&m.MaintenanceInterval, "maintenance-interval", 0, "the maintenance tick (default 5s)")
	f.MarkHidden("maintenance-interval")
}

// checkOutageFlags refuses values out of range, naming the flag. The
// escrow's renewal must be at least two maintenance ticks (maintenance: 0
// is the default 5 s), or the broker would lengthen it without a word.
func checkOutageFlags(o *outage.Placement, maintenance time.Duration) error {
	if maintenance <= 0 {
		maintenance = 5 * time.Second
	}
	switch {
	case o.Share < 1 || o.Share > 100:
		return usageError{fmt.Errorf("--outage-share %d: want 1 to 100 (percent)", o.Share)}
	case o.MaxPerHost < 1 || o.MaxPerHost > 10000:
		return usageError{fmt.Errorf("--outage-share-max %d: want 1 to 10000", o.MaxPerHost)}
	case o.Renew < 2*maintenance || o.Renew > time.Hour:
		return usageError{fmt.Errorf("--outage-escrow-renew %s: want %s (twice the maintenance interval) to 1h", vdibroker.DurationFlag(o.Renew), vdibroker.DurationFlag(2*maintenance))}
	case len(o.Replica) > 128:
		return usageError{fmt.Errorf("--replica-id: want at most 128 characters")}
	}
	return nil
}
