package main

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestGatewayPerAddressFlags (R-GW1): --max-conns-per-address and
// --max-handshakes-per-address take 1 or more; 0 or less, which the
// gateway would take silently as its default (1,000 and 20), not as "no
// limit", is a usage error naming the flag and its range.
func TestGatewayPerAddressFlags(t *testing.T) {
	for _, flag := range []string{"--max-conns-per-address", "--max-handshakes-per-address"} {
		for _, v := range []string{"0", "-1"} {
			cmd := newGatewayCmd()
			cmd.SetArgs([]string{flag, v})
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			err := cmd.Execute()
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), flag+": must be 1 or more, got "+v) {
				t.Errorf("gateway %s %s = %v, want a usage error naming the range", flag, v, err)
			}
		}
	}
}
