package sim

import (
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// TestParseRangesFromTheSchema: the scenario's pool settings take their
// ranges from the field schema: ranges changed in a copy of it change what
// the parser accepts and what its errors say.
func TestParseRangesFromTheSchema(t *testing.T) {
	const users = "users:\n  - {pattern: storm, count: 1}\n"
	schema := vdibroker.PoolFields()
	for i := range schema {
		switch schema[i].Path {
		case "maxSessionLimit":
			schema[i].Max = 50
		case "loadBalancing.connectingSessionThreshold":
			schema[i].Min, schema[i].Max = 2, 40
		case "loadBalancing.cpuThreshold":
			schema[i].Max = 80
		case "loadBalancing.sampleIntervalSeconds":
			schema[i].Min, schema[i].Max = 10, 60
		}
	}
	tests := []struct {
		name, yaml string
		want       string // "" = accepted under the changed schema
	}{
		{"limit over the changed max", "pool: {hosts: 2, maxSessionLimit: 51}\n" + users, "s.yaml:1: pool.maxSessionLimit: must be 1..50"},
		{"limit sweep over it", "pool: {hosts: 2, maxSessionLimit: [10, 60]}\n" + users, "s.yaml:1: pool.maxSessionLimit[1]: must be 1..50"},
		{"limit at the changed max", "pool: {hosts: 2, maxSessionLimit: 50}\n" + users, ""},
		{"int setting under the changed min", "pool: {hosts: 2}\nloadBalancing: {connectingSessionThreshold: 1}\n" + users,
			"s.yaml:2: loadBalancing.connectingSessionThreshold: must be 2..40"},
		{"number setting over the changed max", "pool: {hosts: 2}\nloadBalancing: {cpuThreshold: 81}\n" + users,
			"s.yaml:2: loadBalancing.cpuThreshold: must be 0..80"},
		{"metricsInterval follows sampleIntervalSeconds", "metricsInterval: 5s\npool: {hosts: 2}\n" + users,
			"s.yaml:1: metricsInterval: must be a duration 10s..1m (like 30s, 10m, 8h)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseWith("s.yaml", []byte(tt.yaml), schema)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	// The same scenario under the real schema: SPEC §2's 1..999999.
	if _, err := Parse("s.yaml", []byte("pool: {hosts: 2, maxSessionLimit: 51}\n"+users)); err != nil {
		t.Errorf("the real schema refused a limit of 51: %v", err)
	}
	if lo, hi := metricsBounds(vdibroker.PoolFields()); lo != 5*time.Second || hi != time.Hour {
		t.Errorf("metricsInterval bounds %v..%v, want 5s..1h (sampleIntervalSeconds 5..3600)", lo, hi)
	}
}

// TestParseEverySimulatedSettingIsInTheSchema: each loadBalancing key the
// simulator accepts is a schema field, and a value set in a scenario
// arrives in the scenario's LoadBalancing.
func TestParseEverySimulatedSettingIsInTheSchema(t *testing.T) {
	for _, key := range simulatedSettings {
		f, ok := vdibroker.PoolField("loadBalancing." + key)
		if !ok {
			t.Errorf("simulated setting %s is not in the schema", key)
			continue
		}
		val, want := "7", any(7)
		switch f.Kind {
		case vdibroker.KindNumber:
			want = 7.0
		case vdibroker.KindBool:
			val, want = "false", false
		}
		sc, err := Parse("s.yaml", []byte("pool: {hosts: 2}\nloadBalancing: {"+key+": "+val+"}\nusers:\n  - {pattern: storm, count: 1}\n"))
		if err != nil {
			t.Errorf("%s: %v", key, err)
			continue
		}
		if got := f.Value(&vdibroker.HostPool{LoadBalancing: sc.LoadBalancing}); got != want {
			t.Errorf("%s: %v in the scenario, want %v", key, got, want)
		}
	}
}
