package vdibroker

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// validPool is a pool that passes ValidateHostPool, of the given type.
func validPool(tb testing.TB, poolType string) *HostPool {
	tb.Helper()
	p := NewHostPool("pool01")
	p.HostPoolType = poolType
	p.FillDefaults()
	if _, err := ValidateHostPool(p); err != nil {
		tb.Fatalf("defaults of a %s pool: %v", poolType, err)
	}
	return p
}

// TestPoolFieldsRanges_RP4 walks the schema: for every numeric field,
// validation accepts Min and Max and refuses Min-1 and Max+1 with an
// InvalidArgument error naming that field and its range; strings likewise
// by length; enums accept every value allowed for the pool type and refuse
// others.
func TestPoolFieldsRanges_RP4(t *testing.T) {
	for _, f := range PoolFields() {
		t.Run(f.Path, func(t *testing.T) {
			poolType := Pooled
			if !f.AppliesTo(Pooled) {
				poolType = Personal
			}
			check := func(v any, wantOK bool) {
				t.Helper()
				p := validPool(t, poolType)
				if err := f.Set(p, v); err != nil {
					t.Fatal(err)
				}
				if f.Path == "hostPoolType" { // its dependants follow
					p.LoadBalancerType = ""
					p.FillDefaults()
				}
				_, err := ValidateHostPool(p)
				if wantOK {
					if err != nil {
						t.Errorf("%s = %v refused: %v", f.Path, v, err)
					}
					return
				}
				if ErrorCode(err) != EInvalid || ErrorField(err) != f.Path {
					t.Errorf("%s = %v: got %v (field %q), want InvalidArgument naming %s", f.Path, v, err, ErrorField(err), f.Path)
				}
				if s, _ := v.(string); f.Kind != KindEnum && !strings.ContainsRune(s, 0) && !strings.Contains(ErrorMessage(err), f.Range()) {
					t.Errorf("%s = %v: message %q does not say the range %q", f.Path, v, ErrorMessage(err), f.Range())
				}
			}
			switch f.Kind {
			case KindInt:
				lo, hi := int(f.Min), int(f.Max)
				check(lo, true)
				check(hi, true)
				check(lo-1, false)
				check(hi+1, false)
			case KindNumber:
				check(f.Min, true)
				check(f.Min-1, false)
				check(f.Min-0.001, false)
				check(math.NaN(), false)
				if math.IsInf(f.Max, 1) {
					check(1e12, true)
				} else {
					check(f.Max, true)
					check(f.Max+1, false)
					check(f.Max+0.001, false)
				}
			case KindName:
				check(strings.Repeat("a", int(f.Min)), true)
				check(strings.Repeat("a", int(f.Max)), true)
				check(strings.Repeat("a", int(f.Min)-1), false)
				check(strings.Repeat("a", int(f.Max)+1), false)
			case KindText:
				if f.Path == "gatewayHostName" { // a host name, not any text
					check("", true)
					check("rdgw.example.com", true)
					check("[2001:db8::1]:8443", true)
					check("rdgw.example.com:0", false)
					check("rdgw example", false)
					check(strings.Repeat("a", int(f.Max)+1), false)
					check("a\x00b", false)
					return
				}
				check("", true)
				check(strings.Repeat("é", int(f.Max)), true)
				check(strings.Repeat("é", int(f.Max)+1), false)
				check("a\x00b", false)
			case KindEnum:
				for _, v := range f.Values(poolType) {
					check(v, true)
				}
				check("Nope", false)
				for _, v := range f.Values("") {
					if !contains(f.Values(poolType), v) {
						check(v, false) // a value of the other pool type
					}
				}
			case KindBool:
				check(true, true)
				check(false, true)
			default:
				t.Fatalf("kind %q has no check", f.Kind)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestPoolFieldsSpec pins the schema to SPEC §2 and §6: path, type, range
// and default of every setting. Changing a range is a SPEC change; this
// test says so.
func TestPoolFieldsSpec(t *testing.T) {
	want := []string{
		"name name 3..64 characters default ",
		"hostPoolType enum Pooled, Personal default Pooled",
		"loadBalancerType enum BreadthFirst, DepthFirst, LoadIndex, Persistent, MultiplePersistent default BreadthFirst",
		"personalDesktopAssignmentType enum Automatic, Direct default Automatic",
		"maxSessionLimit int 1..999999 default 999999",
		"heartbeatTimeoutSeconds int 10..3600 default 90",
		"pendingTimeoutSeconds int 10..3600 default 300",
		"disconnectedSessionTimeoutMinutes int 0..10080 default 0",
		"description text at most 512 characters default ",
		"friendlyName text at most 512 characters default ",
		// Power (R-A4), vdibroker's additions to §2.
		"powerDriver text at most 64 characters default ",
		"startVMOnConnect bool true or false default false",
		// RD gateways (R-GW1), vdibroker's additions to §2.
		"gatewayUsage enum Gateway, Direct default Gateway",
		"gatewayHostName text at most 260 characters default ",
		"idleSessionLimitMinutes int 0..10080 default 0",
		"activeSessionLimitMinutes int 0..10080 default 0",
		// AVD's per-pool .rdp properties (R-E8).
		"customRdpProperty text at most 4096 characters default ",
		"loadBalancing.useCustomScript bool true or false default false",
		"loadBalancing.includeSessionCount bool true or false default true",
		"loadBalancing.cpuThreshold number 0..100 default 0",
		"loadBalancing.memoryThreshold number 0..100 default 0",
		"loadBalancing.diskQueueLengthThreshold number ≥ 0 default 0",
		"loadBalancing.diskReadLatencyThreshold number ≥ 0 default 0",
		"loadBalancing.diskWriteLatencyThreshold number ≥ 0 default 0",
		"loadBalancing.loadIndexThreshold int 0..100 default 20",
		"loadBalancing.connectingSessionThreshold int 0..150 default 20",
		"loadBalancing.minServersInQueue int 1..1000 default 4",
		"loadBalancing.hostLoadIndexThreshold int 0..100 default 0",
		"loadBalancing.hostConnectingSessionThreshold int 0..150 default 0",
		"loadBalancing.sampleIntervalSeconds int 5..3600 default 30",
	}
	var got []string
	for _, f := range PoolFields() {
		got = append(got, fmt.Sprintf("%s %s %s default %s", f.Path, f.Kind, f.Range(), f.DefaultText(Pooled)))
		if f.Label == "" || f.Help == "" || f.at == nil {
			t.Errorf("%s lacks a label, help or accessor", f.Path)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("schema (-SPEC +PoolFields):\n%s", diff)
	}
	if got := mustField("loadBalancerType").DefaultText(Personal); got != Persistent {
		t.Errorf("Personal default loadBalancerType %q, want Persistent", got)
	}
}

// TestPoolFieldsDefaults: a new pool holds every default of the table, and
// each field's value round-trips through Set and Value.
func TestPoolFieldsDefaults(t *testing.T) {
	p := NewHostPool("pool01")
	p.FillDefaults()
	for _, f := range PoolFields() {
		if f.Path == "name" {
			continue
		}
		if got, want := f.Value(p), f.DefaultFor(p.HostPoolType); got != want {
			t.Errorf("%s = %#v in a new pool, want the default %#v", f.Path, got, want)
		}
	}
	if got, want := DefaultLoadBalancing(), p.LoadBalancing; got != want {
		t.Errorf("DefaultLoadBalancing() = %+v, want %+v", got, want)
	}
	if err := mustField("maxSessionLimit").Set(p, "ten"); err == nil {
		t.Error("Set of a string into an int field was accepted")
	}
}

// TestValidationMessages: the exact wording the README and the API
// documentation show (R-P4), and the enum messages per pool type.
func TestValidationMessages(t *testing.T) {
	tests := []struct {
		name string
		edit func(p *HostPool)
		want string // message; the field is its prefix
	}{
		{"limit 0", func(p *HostPool) { p.MaxSessionLimit = 0 }, "maxSessionLimit: must be 1..999999, got 0"},
		{"disk threshold", func(p *HostPool) { p.LoadBalancing.DiskQueueLengthThreshold = -1 },
			"loadBalancing.diskQueueLengthThreshold: must be ≥ 0 (0 = not used), got -1"},
		{"cpu threshold", func(p *HostPool) { p.LoadBalancing.CPUThreshold = 100.5 }, "loadBalancing.cpuThreshold: must be 0..100, got 100.5"},
		{"pool type", func(p *HostPool) { p.HostPoolType = "Shared" }, `hostPoolType: must be one of Pooled, Personal, got "Shared"`},
		{"Pooled with Direct", func(p *HostPool) { p.PersonalDesktopAssignmentType = Direct },
			`personalDesktopAssignmentType: must be Automatic for a Pooled host pool (Direct is for Personal pools only), got "Direct"`},
		{"Pooled with Persistent", func(p *HostPool) { p.LoadBalancerType = Persistent },
			`loadBalancerType: must be one of BreadthFirst, DepthFirst, LoadIndex for a Pooled host pool (Persistent is for Personal pools only), got "Persistent"`},
		{"Personal with nonsense", func(p *HostPool) { p.HostPoolType, p.LoadBalancerType = Personal, "Random" },
			`loadBalancerType: must be one of Persistent, MultiplePersistent for a Personal host pool, got "Random"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPool(t, Pooled)
			tt.edit(p)
			_, err := ValidateHostPool(p)
			if got := ErrorMessage(err); got != tt.want {
				t.Errorf("message %q, want %q", got, tt.want)
			}
			if field, _, _ := strings.Cut(tt.want, ":"); ErrorField(err) != field {
				t.Errorf("field %q, want %q", ErrorField(err), field)
			}
		})
	}
}

// TestHostPolicyAndHintsFollowTheTable_RLI5: a host's own thresholds and
// the API's range hints use the ranges of the pool settings.
func TestHostPolicyAndHintsFollowTheTable_RLI5(t *testing.T) {
	for _, key := range []string{"hostLoadIndexThreshold", "hostConnectingSessionThreshold"} {
		f := mustField("loadBalancing." + key)
		for _, tc := range []struct {
			v  int
			ok bool
		}{{int(f.Min), true}, {int(f.Max), true}, {int(f.Min) - 1, false}, {int(f.Max) + 1, false}} {
			v := tc.v
			pol := &HostPolicy{}
			if key == "hostLoadIndexThreshold" {
				pol.HostLoadIndexThreshold = &v
			} else {
				pol.HostConnectingSessionThreshold = &v
			}
			err := ValidateHostPolicy("policy.", pol)
			if (err == nil) != tc.ok || (err != nil && ErrorField(err) != "policy."+key) {
				t.Errorf("policy.%s = %d: %v, want ok=%v", key, v, err, tc.ok)
			}
		}
		if hint, ok := RangeHint("policy." + key); !ok || hint != f.Range() {
			t.Errorf("RangeHint(policy.%s) = %q, want %q", key, hint, f.Range())
		}
	}
	for path, want := range map[string]string{
		"maxSessionLimit": "1..999999", "loadBalancing.sampleIntervalSeconds": "5..3600",
		"loadBalancing.diskReadLatencyThreshold": "≥ 0",
	} {
		if got, _ := RangeHint(path); got != want {
			t.Errorf("RangeHint(%s) = %q, want %q", path, got, want)
		}
	}
	if _, ok := RangeHint("description"); ok {
		t.Error("RangeHint gives a text field a numeric range")
	}
}

func TestFieldPut(t *testing.T) {
	body := map[string]any{}
	mustField("maxSessionLimit").Put(body, 10)
	mustField("loadBalancing.cpuThreshold").Put(body, 80.0)
	mustField("loadBalancing.minServersInQueue").Put(body, 2)
	want := map[string]any{"maxSessionLimit": 10, "loadBalancing": map[string]any{"cpuThreshold": 80.0, "minServersInQueue": 2}}
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

// TestPoolFieldsPathsAreTheJSONNames: each field's accessor reaches the
// struct field whose JSON name is its Path, so the table cannot name one
// setting and check another.
func TestPoolFieldsPathsAreTheJSONNames(t *testing.T) {
	for _, f := range PoolFields() {
		p := NewHostPool("pool01")
		var v any
		switch f.Kind {
		case KindInt:
			v = 4242
		case KindNumber:
			v = 42.5
		case KindBool:
			v = !f.Value(p).(bool)
		default:
			v = "marker-" + f.Key()
		}
		if err := f.Set(p, v); err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		var got any = doc
		for _, k := range strings.Split(f.Path, ".") {
			m, _ := got.(map[string]any)
			got = m[k]
		}
		want := v
		if n, ok := v.(int); ok {
			want = float64(n) // JSON numbers decode as float64
		}
		if got != want {
			t.Errorf("%s: JSON has %#v at that path after Set(%#v)", f.Path, got, v)
		}
	}
}
