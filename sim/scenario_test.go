package sim

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
)

// TestParseErrors: a bad scenario is refused with the file, the line and the
// field, and every problem is listed in file order.
func TestParseErrors(t *testing.T) {
	const okUsers = "users:\n  - {pattern: storm, count: 1}\n"
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"hosts out of range", "pool:\n  hosts: 0\n" + okUsers,
			"scenario.yaml:2: pool.hosts: must be 1..100000"},
		{"hosts too many", "seed: 7\npool:\n  hosts: 100001\n" + okUsers,
			"scenario.yaml:3: pool.hosts: must be 1..100000"},
		{"hosts not a number", "pool:\n  hosts: forty\n" + okUsers,
			"scenario.yaml:2: pool.hosts: must be 1..100000"},
		{"pool missing", okUsers,
			"scenario.yaml:1: pool: required"},
		{"hosts missing", "pool:\n  hostCores: 8\n" + okUsers,
			"scenario.yaml:2: pool.hosts: required"},
		{"unknown top-level field", "pool: {hosts: 2}\nfoo: 1\n" + okUsers,
			"scenario.yaml:2: foo: unknown field (allowed: seed, duration, metricsInterval, pool, algorithms, loadBalancing, users, session, scalingPlan, autoscaleInterval)"},
		{"unknown nested field", "pool: {hosts: 2, maxSessions: 3}\n" + okUsers,
			"scenario.yaml:1: pool.maxSessions: unknown field (allowed: hosts, hostCores, maxSessionLimit, initialSessions, startDelay)"},
		{"duplicate field", "pool: {hosts: 2}\npool: {hosts: 3}\n" + okUsers,
			`scenario.yaml:2: invalid YAML: mapping key "pool" already defined at [1:1]`},
		{"limit zero", "pool:\n  hosts: 2\n  maxSessionLimit: 0\n" + okUsers,
			"scenario.yaml:3: pool.maxSessionLimit: must be 1..999999"},
		{"limit in a sweep", "pool:\n  hosts: 2\n  maxSessionLimit: [8, 1000000]\n" + okUsers,
			"scenario.yaml:3: pool.maxSessionLimit[1]: must be 1..999999"},
		{"duplicate limit", "pool:\n  hosts: 2\n  maxSessionLimit: [8, 8]\n" + okUsers,
			"scenario.yaml:3: pool.maxSessionLimit[1]: duplicate value 8"},
		{"empty sweep", "pool:\n  hosts: 2\n  maxSessionLimit: []\n" + okUsers,
			"scenario.yaml:3: pool.maxSessionLimit: must have 1..32 entries"},
		{"duration without unit", "duration: 10\npool: {hosts: 2}\n" + okUsers,
			"scenario.yaml:1: duration: must be a duration 1m..744h (like 30s, 10m, 8h)"},
		{"metrics interval too short", "metricsInterval: 1s\npool: {hosts: 2}\n" + okUsers,
			"scenario.yaml:1: metricsInterval: must be a duration 5s..1h (like 30s, 10m, 8h)"},
		{"unknown algorithm", "pool: {hosts: 2}\nalgorithms: [BreadthFirst, Random]\n" + okUsers,
			"scenario.yaml:2: algorithms[1]: must be one of BreadthFirst, DepthFirst, LoadIndex"},
		{"personal algorithm", "pool: {hosts: 2}\nalgorithms: [Persistent]\n" + okUsers,
			"scenario.yaml:2: algorithms[0]: must be one of BreadthFirst, DepthFirst, LoadIndex"},
		{"cpu threshold", "pool: {hosts: 2}\nloadBalancing: {cpuThreshold: 120}\n" + okUsers,
			"scenario.yaml:2: loadBalancing.cpuThreshold: must be 0..100"},
		{"min servers", "pool: {hosts: 2}\nloadBalancing:\n  minServersInQueue: 0\n" + okUsers,
			"scenario.yaml:3: loadBalancing.minServersInQueue: must be 1..1000"},
		{"users missing", "pool: {hosts: 2}\n",
			"scenario.yaml:1: users: required"},
		{"users empty", "pool: {hosts: 2}\nusers: []\n",
			"scenario.yaml:2: users: must have 1..100 entries"},
		{"unknown pattern", "pool: {hosts: 2}\nusers:\n  - {pattern: flood, count: 3}\n",
			"scenario.yaml:3: users[0].pattern: must be one of storm, workday"},
		{"count missing", "pool: {hosts: 2}\nusers:\n  - {pattern: storm, count: 3}\n  - pattern: storm\n    over: 1m\n",
			"scenario.yaml:4: users[1].count: required"},
		{"start after the end", "duration: 1h\npool: {hosts: 2}\nusers:\n  - {pattern: storm, count: 3, start: 2h}\n",
			"scenario.yaml:4: users[0].start: must be before the end of the scenario (duration 1h)"},
		{"workHours on a storm", "pool: {hosts: 2}\nusers:\n  - {pattern: storm, count: 3, workHours: 8h}\n",
			"scenario.yaml:3: users[0].workHours: only for pattern workday"},
		{"disconnect probability", "pool: {hosts: 2}\n" + okUsers + "session:\n  disconnectProbability: 1.5\n",
			"scenario.yaml:5: session.disconnectProbability: must be 0..1"},
		{"initial sessions longer than hosts", "pool:\n  hosts: 2\n  initialSessions: [1, 2, 3]\n" + okUsers,
			"scenario.yaml:3: pool.initialSessions: has 3 entries for 2 hosts"},
		{"not a mapping", "- 1\n- 2\n",
			"scenario.yaml:1: must be a mapping"},
		{"empty file", "",
			"scenario.yaml:1: empty scenario"},
		{"two documents", "pool: {hosts: 2}\n" + okUsers + "---\nseed: 1\n",
			"scenario.yaml:5: one YAML document expected"},
		{"several problems, in file order", "seed: -1\npool:\n  hosts: 0\n  maxSessionLimit: 0\nusers: 3\n",
			"scenario.yaml:1: seed: must be 0..9223372036854775807\n" +
				"scenario.yaml:3: pool.hosts: must be 1..100000\n" +
				"scenario.yaml:4: pool.maxSessionLimit: must be 1..999999\n" +
				"scenario.yaml:5: users: must be a list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("scenario.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s", tt.yaml)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestParseSyntaxError: a YAML syntax error keeps its line.
func TestParseSyntaxError(t *testing.T) {
	_, err := Parse("bad.yaml", []byte("pool:\n  hosts: [1,\nusers: 2\n"))
	var errs ScenarioErrors
	if err == nil || !asScenarioErrors(err, &errs) || errs[0].Line == 0 || errs[0].File != "bad.yaml" {
		t.Fatalf("got %v, want a ScenarioErrors with a line", err)
	}
}

func asScenarioErrors(err error, out *ScenarioErrors) bool {
	es, ok := err.(ScenarioErrors)
	*out = es
	return ok && len(es) > 0
}

// TestParseIssueExample: the original example scenario, word for word,
// parses to these values; unset fields take their defaults.
func TestParseIssueExample(t *testing.T) {
	src := `seed: 7
duration: 10h
metricsInterval: 30s          # how stale the load index may be
pool:
  hosts: 40
  hostCores: 8
  maxSessionLimit: 16         # or a list, e.g. [8, 12, 16], to sweep
algorithms: [BreadthFirst, DepthFirst, LoadIndex]
loadBalancing: {cpuThreshold: 90}
users:
  - {pattern: storm, count: 400, start: 0s, over: 10m}   # arrivals spread evenly within ` + "`over`" + `
  - {pattern: workday, count: 200, start: 1h}            # morning ramp, lunch dip, evening ramp-down
session:
  meanMinutes: 240            # exponential durations
  disconnectProbability: 0.1  # a user disconnects and reconnects later
  cpuPercentPerSession: 4     # share of one host's total CPU per active session
`
	got, err := Parse("issue.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	lb := vdibroker.DefaultLoadBalancing()
	lb.CPUThreshold = 90
	want := &Scenario{
		Name: "issue.yaml", Seed: 7, Duration: 10 * time.Hour, MetricsInterval: 30 * time.Second,
		Pool:          PoolSpec{Hosts: 40, HostCores: 8, MaxSessionLimits: []int{16}, StartDelay: 5 * time.Minute},
		Algorithms:    []string{"BreadthFirst", "DepthFirst", "LoadIndex"},
		LoadBalancing: lb,
		Users: []UserGroup{
			{Pattern: "storm", Count: 400, Over: 10 * time.Minute},
			{Pattern: "workday", Count: 200, Start: time.Hour, Over: 2 * time.Hour, WorkHours: 8 * time.Hour},
		},
		Session:           SessionSpec{MeanMinutes: 240, DisconnectProbability: 0.1, ReconnectMeanMinutes: 15, CPUPercentPerSession: 4},
		AutoscaleInterval: time.Minute,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}

// TestExamplesParse: every built-in example is a valid scenario.
func TestExamplesParse(t *testing.T) {
	if len(Examples()) < 2 {
		t.Fatalf("examples: %v, want logon-storm and workday", Examples())
	}
	for _, name := range Examples() {
		data, err := Example(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(name+".yaml", data); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Example("nope"); err == nil {
		t.Error("Example(nope) succeeded")
	}
}

// FuzzParse: no input makes Parse panic, and an accepted scenario is within
// the ranges the simulator relies on.
func FuzzParse(f *testing.F) {
	for _, name := range Examples() {
		data, _ := Example(name)
		f.Add(data) // the examples: valid
	}
	f.Add([]byte("pool: {hosts: 2}\nusers: [{pattern: storm, count: 1}]\n")) // minimal valid
	f.Add([]byte("pool: &a {hosts: 2}\nusers: *a\n"))                        // alias where a list goes
	f.Add([]byte("pool: !!map {hosts: 2}\n"))                                // tag
	f.Add([]byte("{"))                                                       // syntax error
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		if sc.Pool.Hosts < 1 || sc.Pool.Hosts > maxHosts || len(sc.Users) == 0 || len(sc.Algorithms) == 0 ||
			len(sc.Pool.MaxSessionLimits) == 0 || sc.MetricsInterval < minMetricsEvery || sc.Duration < time.Minute {
			t.Fatalf("accepted an out-of-range scenario: %+v", sc)
		}
	})
}
