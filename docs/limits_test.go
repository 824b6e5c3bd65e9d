package docs_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker"
	"github.com/vdibroker/vdibroker/broker/outage"
	vdihttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/identity"
	"github.com/vdibroker/vdibroker/power"
	"github.com/vdibroker/vdibroker/websession"
)

// TestDocsStateTheBounds: the bounds the documentation states for
// admins are the code's. Each phrase is built from the constant the code
// enforces, so a bound changed in one place and not the other fails here
// instead of leaving a page that says another number than the broker
// answers.
func TestDocsStateTheBounds(t *testing.T) {
	for _, c := range []struct {
		name, file, phrase string
	}{
		// 65536: "64 KiB (65,536 bytes" (R-SEC).
		{"ID token bound", "behaviour.md",
			fmt.Sprintf("an ID token above %d KiB (%s bytes", identity.MaxIDTokenBytes>>10, thousands(identity.MaxIDTokenBytes))},
		{"outage copies' bytes", "behaviour.md",
			fmt.Sprintf("%d MiB of each area's copies", websession.DefaultMaxCopyBytes>>20)},
		{"peer document writes (reference)", "behaviour.md",
			fmt.Sprintf("is taken %d at once, then %d a minute from each calling pod", vdihttp.PodDocumentsPerPod, vdihttp.PodDocumentsPerPod)},
		{"peer document writes (API table)", "federation.md",
			fmt.Sprintf("a calling pod is taken %d at once, then %d a minute", vdihttp.PodDocumentsPerPod, vdihttp.PodDocumentsPerPod)},
		// 10000: "at most 10,000 waiting users a pool" (R-SEC, R-A4).
		{"start VM on connect's waiting users", "behaviour.md",
			fmt.Sprintf("at most %s waiting users a pool", thousands(power.MaxWaitingUsers))},
		// 100000, 134217728: "100,000 keys at most and 128 MiB of their
		// answers" (R-C6, R-SEC).
		{"idempotency keys' bounds", "behaviour.md",
			fmt.Sprintf("%s keys at most and %d MiB of their answers", thousands(broker.IdempotencyMaxKeys), broker.IdempotencyMaxBytes>>20)},
		{"idempotency bytes (operations)", "operations.md",
			fmt.Sprintf("at most %d MiB of connect answers a replica", broker.IdempotencyMaxBytes>>20)},
		// 268435456: "at most 256 MiB of a replica's memory" (R-SEC,
		// R-OUT1).
		{"outage reports' bound", "behaviour.md",
			fmt.Sprintf("at most %d MiB of a replica's memory", outage.MaxReportBytes>>20)},
		// 268435456: "held heartbeats take at most 256 MiB a replica"
		// (R-SEC, R-OUT1).
		{"held heartbeats' bound", "behaviour.md",
			fmt.Sprintf("heartbeats take at most %d MiB a replica", outage.MaxHeldBytes>>20)},
		{"held heartbeats' bound (README)", "../README.md",
			fmt.Sprintf("(%d MiB of them at most a replica;", outage.MaxHeldBytes>>20)},
		{"held heartbeats' bound (ARCHITECTURE)", "../ARCHITECTURE.md",
			fmt.Sprintf("the heartbeats %d MiB at most (`maxHeldBytes`", outage.MaxHeldBytes>>20)},
		{"outage reports' bound (ARCHITECTURE)", "../ARCHITECTURE.md",
			fmt.Sprintf("registers its name; %d MiB at most (`maxReportBytes`", outage.MaxReportBytes>>20)},
		{"re-keys per host", "behaviour.md",
			fmt.Sprintf("current credential): %d at once, then %d a minute", vdihttp.ReKeysPerHost, vdihttp.ReKeysPerHost)},
		// 500, 60: "500 at once, then 60 a minute (one a second), per
		// replica" (R-SEC).
		{"new hosts per registration token (reference)", "behaviour.md",
			fmt.Sprintf("per registration token** (a `POST /agent/register` that creates a host, `maxHosts` 0 or not): %d at once, then %d a minute", vdihttp.NewHostsPerTokenBurst, vdihttp.NewHostsPerTokenPerMinute)},
		{"new hosts per registration token (error codes)", "behaviour.md",
			fmt.Sprintf("new hosts of one registration token past %d at once and %d a minute", vdihttp.NewHostsPerTokenBurst, vdihttp.NewHostsPerTokenPerMinute)},
		{"new hosts per registration token (agent)", "agent.md",
			fmt.Sprintf("(the token has registered %d new hosts at once, and takes %d a minute past them", vdihttp.NewHostsPerTokenBurst, vdihttp.NewHostsPerTokenPerMinute)},
		{"new hosts per registration token (operations)", "operations.md",
			fmt.Sprintf("A token registers at most %d new hosts at once, then %d a minute, on each replica", vdihttp.NewHostsPerTokenBurst, vdihttp.NewHostsPerTokenPerMinute)},
		{"new hosts per registration token (README)", "../README.md",
			fmt.Sprintf("any token registers at most %d new hosts at once, then %d a minute", vdihttp.NewHostsPerTokenBurst, vdihttp.NewHostsPerTokenPerMinute)},
		{"gateway token TTL", "gateway.md",
			fmt.Sprintf("| `--gateway-token-ttl` | %s |", shortDuration(vdibroker.DefaultGatewayTokenTTL.String()))},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := os.ReadFile(c.file)
			if err != nil {
				t.Fatal(err)
			}
			// Lines wrap anywhere: white space compares as one space.
			if !strings.Contains(strings.Join(strings.Fields(string(b)), " "), c.phrase) {
				t.Errorf("%s does not say %q", c.file, c.phrase)
			}
		})
	}
}

// thousands is n with a comma every three digits (65536 is 65,536).
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// shortDuration is a duration as the docs write it: 5m0s is 5m, 1h0m0s 1h.
func shortDuration(s string) string {
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
