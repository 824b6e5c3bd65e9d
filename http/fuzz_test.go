package http

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// The agent endpoints take bodies from machines that only hold a
// registration token or a host credential: their decoding must never panic,
// and must answer InvalidArgument (never Internal) for anything it refuses.
// Whatever it accepts must be valid and survive a JSON round trip.

// FuzzHeartbeatDecode fuzzes decodeHeartbeat.
func FuzzHeartbeatDecode(f *testing.F) {
	seeds := []string{
		// A typical heartbeat: metrics, two sessions, a policy, a result.
		`{"metrics":{"cpuPercent":41.5,"memoryPercent":63,"diskQueueLength":0.4,"diskReadLatencyMs":3,"diskWriteLatencyMs":5,"customLoadValue":30,"sampledAt":"2026-11-29T13:00:00Z"},
		  "sessions":[{"id":"7","user":"CONTOSO\\alice","state":"Active"},{"id":"8","user":"bob","state":"Disconnected"}],
		  "policy":{"hostLoadIndexThreshold":80},"results":[{"id":"c1","success":true}]}`,
		// The smallest: nothing to report.
		`{}`,
		// The last heartbeat of an agent stopping (R-H1 Shutdown).
		`{"shuttingDown":true}`,
		// A failed health check (R-H1 NeedsAssistance).
		`{"healthError":"disk C: 98% full","sessions":[]}`,
		// Invalid: unknown state, negative cpu, unknown field, wrong type,
		// null where an object goes, trailing data, deep nesting.
		`{"sessions":[{"id":"1","user":"a","state":"Running"}]}`,
		`{"metrics":{"cpuPercent":-1}}`,
		`{"metrics":{"cpu":5}}`,
		`{"sessions":"alice"}`,
		`{"metrics":null,"policy":null}`,
		`{} {}`,
		`{"policy":{"hostLoadIndexThreshold":1e400}}`,
		`[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]`,
		"\x00\xff",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		hb, err := decodeHeartbeat(bytes.NewReader(data))
		if err != nil {
			if code := vdibroker.ErrorCode(err); code != vdibroker.EInvalid {
				t.Fatalf("refused with code %s (%v), want InvalidArgument", code, err)
			}
			return
		}
		if err := vdibroker.ValidateHeartbeat(hb); err != nil {
			t.Fatalf("accepted an invalid heartbeat: %v", err)
		}
		b, err := json.Marshal(hb)
		if err != nil {
			t.Fatalf("accepted heartbeat does not marshal: %v", err)
		}
		if _, err := decodeHeartbeat(bytes.NewReader(b)); err != nil {
			t.Fatalf("accepted heartbeat refused after a round trip: %v\n%s", err, b)
		}
	})
}

// FuzzRegisterDecode fuzzes decodeRegister.
func FuzzRegisterDecode(f *testing.F) {
	seeds := []string{
		// A typical registration with a policy (R-LI5).
		`{"token":"vdbr_abc","hostName":"rdsh-01.contoso.com","address":"rdsh-01.contoso.com:3389","protocols":["RDP","Blast"],"standardFeatures":true,"policy":{"hostConnectingSessionThreshold":10}}`,
		// IPv6 address, no protocols, no policy.
		`{"token":"t","hostName":"vdi 001","address":"[2001:db8::1]:3389"}`,
		// Invalid: short name, bad address, bad port, unknown protocol,
		// repeated protocol, missing token, policy out of range.
		`{"token":"t","hostName":"ab"}`,
		`{"token":"t","hostName":"host01","address":"host01"}`,
		`{"token":"t","hostName":"host01","address":"host01:0"}`,
		`{"token":"t","hostName":"host01","protocols":["VNC"]}`,
		`{"token":"t","hostName":"host01","protocols":["RDP","RDP"]}`,
		`{"hostName":"host01"}`,
		`{"token":"t","hostName":"host01","policy":{"hostLoadIndexThreshold":101}}`,
		`{"token":"t","hostName":" host01"}`,
		`{"token":1}`,
		``,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := decodeRegister(bytes.NewReader(data))
		if err != nil {
			if code := vdibroker.ErrorCode(err); code != vdibroker.EInvalid {
				t.Fatalf("refused with code %s (%v), want InvalidArgument", code, err)
			}
			return
		}
		if err := vdibroker.ValidateRegister(req); err != nil {
			t.Fatalf("accepted an invalid registration: %v", err)
		}
		b, _ := json.Marshal(req)
		if _, err := decodeRegister(bytes.NewReader(b)); err != nil {
			t.Fatalf("accepted registration refused after a round trip: %v\n%s", err, b)
		}
	})
}

// FuzzJSONObjects fuzzes jsonObjects, which counts the objects of a
// peer's answer before it is decoded (answerBound): for valid JSON it is
// the number of objects a decoder meets, up to its max and one.
func FuzzJSONObjects(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`[{},{},{}]`,
		// Braces and quotes inside strings are not objects.
		`{"a":"{","b":"\"{","c":"\\","d":{"e":"}{"}}`,
		`["{\\\"{", {"x":[{}]}]`,
		// Escapes of every kind, and non-ASCII text.
		`{"u":"\u007b\n\t\/é{"}`,
		`"{"`, `123`, `null`,
		// Not JSON: counted all the same, refused by the decoder.
		`{"a":"`, `{{{`, "\x00\xff{",
	} {
		f.Add([]byte(s), 3)
	}
	f.Fuzz(func(t *testing.T, data []byte, max int) {
		max = max & 0xff
		got := jsonObjects(data, max)
		if got > max+1 || got < 0 {
			t.Fatalf("jsonObjects(%q, %d) = %d, want at most max+1", data, max, got)
		}
		if !json.Valid(data) {
			return
		}
		want := 0
		dec := json.NewDecoder(bytes.NewReader(data))
		for {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			if tok == json.Delim('{') {
				want++
			}
		}
		if want > max {
			want = max + 1
		}
		if got != want {
			t.Fatalf("jsonObjects(%q, %d) = %d, want %d", data, max, got, want)
		}
	})
}
