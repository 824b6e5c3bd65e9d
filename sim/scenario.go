package sim

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/vdibroker/vdibroker"
)

// Patterns of user arrivals.
const (
	// PatternStorm spreads Count arrivals evenly over Over from Start; Over 0
	// means all at once.
	PatternStorm = "storm"
	// PatternWorkday is an office day from Start: arrivals over a morning
	// ramp of Over (default 2h, peaking in its middle), a lunch break where
	// half the users disconnect for 30..60 minutes, and logoffs spread over
	// the hour after WorkHours (default 8h) for those still connected.
	PatternWorkday = "workday"
)

// Limits of the scenario fields, shared by Parse and its error messages.
// The pool's own settings (maxSessionLimit, loadBalancing, and the sample
// interval metricsInterval stands for) take their ranges from the field
// schema, vdibroker.PoolFields.
const (
	maxHosts       = 100000
	maxUsersTotal  = 10000000
	maxLimitsSweep = 32
	maxDuration    = 31 * 24 * time.Hour
)

// minMetricsEvery and maxMetricsEvery bound metricsInterval: the range of
// the pool's loadBalancing.sampleIntervalSeconds.
var minMetricsEvery, maxMetricsEvery = metricsBounds(vdibroker.PoolFields())

// metricsBounds is the sampleIntervalSeconds range of schema as durations.
func metricsBounds(schema []vdibroker.Field) (min, max time.Duration) {
	f := fieldOf(schema, "loadBalancing.sampleIntervalSeconds")
	return time.Duration(f.Min) * time.Second, time.Duration(f.Max) * time.Second
}

// simulatedSettings are the loadBalancing settings (SPEC §6) a scenario may
// set, the ones the simulator models; their types and ranges are the
// schema's. Disk thresholds and the custom script have no simulated
// metric; sampleIntervalSeconds follows metricsInterval.
var simulatedSettings = []string{
	"cpuThreshold", "memoryThreshold", "loadIndexThreshold", "connectingSessionThreshold",
	"minServersInQueue", "hostLoadIndexThreshold", "hostConnectingSessionThreshold", "includeSessionCount",
}

// fieldOf returns the schema's field at path; the simulator names only
// paths the schema has.
func fieldOf(schema []vdibroker.Field, path string) vdibroker.Field {
	for _, f := range schema {
		if f.Path == path {
			return f
		}
	}
	panic("sim: no pool field " + path)
}

// Scenario is one simulation input: a pool, the algorithms and session limits
// to try, and the users. The YAML names are the json-style names in the
// comments; see examples/ and docs/capacity-planning.md.
type Scenario struct {
	Name            string        // file name or example name, for reports
	Seed            uint64        // seed
	Duration        time.Duration // duration: simulated time
	MetricsInterval time.Duration // metricsInterval: how stale the load index may be
	Pool            PoolSpec      // pool
	Algorithms      []string      // algorithms: BreadthFirst, DepthFirst, LoadIndex
	// LoadBalancing is the pool's §6 settings: defaults overlaid with the
	// scenario's loadBalancing; sampleIntervalSeconds follows MetricsInterval.
	LoadBalancing vdibroker.LoadBalancing
	Users         []UserGroup // users
	Session       SessionSpec // session
	// ScalingPlan is scalingPlan: a plan with the API's field names
	// (hostPools and name are not needed) that the simulated autoscaler
	// applies to the pool, starting hosts on connect too; nil: every host
	// is always on.
	ScalingPlan *vdibroker.ScalingPlan
	// AutoscaleInterval is autoscaleInterval: how often the plan is
	// evaluated (serve --autoscale-interval; default 1m).
	AutoscaleInterval time.Duration
}

// PoolSpec is the simulated host pool.
type PoolSpec struct {
	Hosts     int // hosts: 1..100000
	HostCores int // hostCores: informational, shown in reports
	// MaxSessionLimits is maxSessionLimit: one value, or a list to sweep.
	MaxSessionLimits []int
	// InitialSessions is initialSessions: sessions each host already carries
	// at time 0 (in host order; missing hosts have 0). They never end.
	InitialSessions []int
	// StartDelay is startDelay: how long a stopped host takes to start
	// and take sessions, with a scaling plan (default 5m).
	StartDelay time.Duration
}

// UserGroup is one entry of users.
type UserGroup struct {
	Pattern   string        // pattern: storm or workday
	Count     int           // count
	Start     time.Duration // start
	Over      time.Duration // over: storm spread, workday morning ramp
	WorkHours time.Duration // workHours: workday only
}

// SessionSpec is how sessions behave.
type SessionSpec struct {
	MeanMinutes           float64 // meanMinutes: exponential durations
	DisconnectProbability float64 // disconnectProbability: a user disconnects and reconnects later
	ReconnectMeanMinutes  float64 // reconnectMeanMinutes: mean time away after a disconnect
	CPUPercentPerSession  float64 // cpuPercentPerSession: share of one host's CPU per active session
}

// ScenarioError is one problem in a scenario file: where, which field, what.
type ScenarioError struct {
	File    string
	Line    int
	Field   string
	Message string
}

func (e *ScenarioError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Field == "" {
		return loc + ": " + e.Message
	}
	return loc + ": " + e.Field + ": " + e.Message
}

// ScenarioErrors is every problem Parse found, in file order.
type ScenarioErrors []*ScenarioError

func (es ScenarioErrors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Parse reads a scenario from YAML. file names the source in errors. Every
// problem is reported as "file:line: field: message" (a ScenarioErrors);
// nothing is guessed: unknown fields and values out of range are refused.
func Parse(file string, data []byte) (*Scenario, error) {
	return parseWith(file, data, vdibroker.PoolFields())
}

// parseWith is Parse with the pool settings' ranges taken from schema.
func parseWith(file string, data []byte, schema []vdibroker.Field) (*Scenario, error) {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		var yerr yaml.Error
		if errors.As(err, &yerr) && yerr.GetToken() != nil {
			return nil, ScenarioErrors{{File: file, Line: yerr.GetToken().Position.Line, Message: "invalid YAML: " + yerr.GetMessage()}}
		}
		return nil, ScenarioErrors{{File: file, Message: "invalid YAML: " + err.Error()}}
	}
	p := &scenarioParser{file: file, schema: schema}
	var body ast.Node
	for _, doc := range f.Docs {
		if doc.Body == nil {
			continue
		}
		if body != nil {
			p.errf(doc.Body, "", "one YAML document expected")
			return nil, p.errs
		}
		body = doc.Body
	}
	if body == nil {
		return nil, ScenarioErrors{{File: file, Line: 1, Message: "empty scenario"}}
	}
	sc := p.scenario(body)
	if len(p.errs) > 0 {
		sort.SliceStable(p.errs, func(i, j int) bool { return p.errs[i].Line < p.errs[j].Line })
		return nil, p.errs
	}
	sc.Name = file
	return sc, nil
}

// scenarioParser walks the YAML tree by hand, so that each error knows its
// line and dotted field name.
type scenarioParser struct {
	file   string
	schema []vdibroker.Field // the pool settings' types and ranges
	errs   ScenarioErrors
}

func (p *scenarioParser) errf(n ast.Node, field, format string, args ...any) {
	line := 0
	if n != nil && n.GetToken() != nil {
		line = n.GetToken().Position.Line
	}
	p.errs = append(p.errs, &ScenarioError{File: p.file, Line: line, Field: field, Message: fmt.Sprintf(format, args...)})
}

// field is one key: value of a mapping.
type field struct {
	key   ast.Node
	value ast.Node
}

// mapping returns n's entries by key, refusing keys not in allowed and
// duplicates. ok is false when n is not a mapping.
func (p *scenarioParser) mapping(n ast.Node, path string, allowed ...string) (map[string]field, bool) {
	n = unwrap(n)
	var values []*ast.MappingValueNode
	switch m := n.(type) {
	case *ast.MappingNode:
		values = m.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{m}
	default:
		p.errf(n, path, "must be a mapping")
		return nil, false
	}
	out := make(map[string]field, len(values))
	for _, mv := range values {
		key := mv.Key.GetToken().Value
		name := join(path, key)
		switch {
		case !contains(allowed, key):
			p.errf(mv.Key, name, "unknown field (allowed: %s)", strings.Join(allowed, ", "))
		case out[key].key != nil:
			p.errf(mv.Key, name, "duplicate field")
		default:
			out[key] = field{key: mv.Key, value: mv.Value}
		}
	}
	return out, true
}

func (p *scenarioParser) scenario(body ast.Node) *Scenario {
	sc := &Scenario{
		Seed:            1,
		Duration:        10 * time.Hour,
		MetricsInterval: 30 * time.Second,
		Pool:            PoolSpec{HostCores: 8, MaxSessionLimits: []int{vdibroker.NoSessionLimit}},
		Algorithms:      []string{vdibroker.BreadthFirst, vdibroker.DepthFirst, vdibroker.LoadIndex},
		LoadBalancing:   vdibroker.DefaultLoadBalancing(),
		Session:         SessionSpec{MeanMinutes: 240, ReconnectMeanMinutes: 15, CPUPercentPerSession: 4},
	}
	sc.AutoscaleInterval, sc.Pool.StartDelay = time.Minute, 5*time.Minute
	m, ok := p.mapping(body, "", "seed", "duration", "metricsInterval", "pool", "algorithms", "loadBalancing", "users", "session",
		"scalingPlan", "autoscaleInterval")
	if !ok {
		return sc
	}
	if f, ok := m["seed"]; ok {
		sc.Seed = uint64(p.int(f.value, "seed", 0, math.MaxInt64))
	}
	if f, ok := m["duration"]; ok {
		sc.Duration = p.duration(f.value, "duration", time.Minute, maxDuration)
	}
	if f, ok := m["metricsInterval"]; ok {
		lo, hi := metricsBounds(p.schema)
		sc.MetricsInterval = p.duration(f.value, "metricsInterval", lo, hi)
	}
	if f, ok := m["pool"]; ok {
		p.pool(f.value, &sc.Pool)
	} else {
		p.errf(body, "pool", "required")
	}
	if f, ok := m["algorithms"]; ok {
		sc.Algorithms = p.algorithms(f.value)
	}
	if f, ok := m["loadBalancing"]; ok {
		p.loadBalancing(f.value, &sc.LoadBalancing)
	}
	sc.LoadBalancing.SampleIntervalSeconds = int(sc.MetricsInterval / time.Second)
	if f, ok := m["users"]; ok {
		sc.Users = p.users(f.value, sc.Duration)
	} else {
		p.errf(body, "users", "required")
	}
	if f, ok := m["session"]; ok {
		p.session(f.value, &sc.Session)
	}
	if f, ok := m["scalingPlan"]; ok {
		sc.ScalingPlan = p.scalingPlan(f.value)
	}
	if f, ok := m["autoscaleInterval"]; ok {
		sc.AutoscaleInterval = p.duration(f.value, "autoscaleInterval", 10*time.Second, time.Hour)
	}
	return sc
}

func (p *scenarioParser) pool(n ast.Node, ps *PoolSpec) {
	m, ok := p.mapping(n, "pool", "hosts", "hostCores", "maxSessionLimit", "initialSessions", "startDelay")
	if !ok {
		return
	}
	if f, ok := m["startDelay"]; ok {
		ps.StartDelay = p.duration(f.value, "pool.startDelay", 0, time.Hour)
	}
	if f, ok := m["hosts"]; ok {
		ps.Hosts = p.int(f.value, "pool.hosts", 1, maxHosts)
	} else {
		p.errf(n, "pool.hosts", "required")
	}
	if f, ok := m["hostCores"]; ok {
		ps.HostCores = p.int(f.value, "pool.hostCores", 1, 1024)
	}
	if f, ok := m["maxSessionLimit"]; ok {
		ps.MaxSessionLimits = p.limits(f.value)
	}
	if f, ok := m["initialSessions"]; ok {
		seq, ok := p.sequence(f.value, "pool.initialSessions", 0, maxHosts)
		if ok {
			ps.InitialSessions = make([]int, len(seq))
			for i, v := range seq {
				ps.InitialSessions[i] = p.int(v, fmt.Sprintf("pool.initialSessions[%d]", i), 0, int64(fieldOf(p.schema, "maxSessionLimit").Max))
			}
			if ps.Hosts > 0 && len(seq) > ps.Hosts {
				p.errf(f.value, "pool.initialSessions", "has %d entries for %d hosts", len(seq), ps.Hosts)
			}
		}
	}
}

// limits reads maxSessionLimit: an integer or a list of distinct integers.
func (p *scenarioParser) limits(n ast.Node) []int {
	const name = "pool.maxSessionLimit"
	f := fieldOf(p.schema, "maxSessionLimit")
	lo, hi := int64(f.Min), int64(f.Max)
	if _, isSeq := unwrap(n).(*ast.SequenceNode); !isSeq {
		return []int{p.int(n, name, lo, hi)}
	}
	seq, ok := p.sequence(n, name, 1, maxLimitsSweep)
	if !ok {
		return nil
	}
	out := make([]int, 0, len(seq))
	for i, v := range seq {
		limit := p.int(v, fmt.Sprintf("%s[%d]", name, i), lo, hi)
		for _, prev := range out {
			if prev == limit {
				p.errf(v, fmt.Sprintf("%s[%d]", name, i), "duplicate value %d", limit)
			}
		}
		out = append(out, limit)
	}
	return out
}

func (p *scenarioParser) algorithms(n ast.Node) []string {
	seq, ok := p.sequence(n, "algorithms", 1, 3)
	if !ok {
		return nil
	}
	allowed := []string{vdibroker.BreadthFirst, vdibroker.DepthFirst, vdibroker.LoadIndex}
	var out []string
	for i, v := range seq {
		name := fmt.Sprintf("algorithms[%d]", i)
		a := p.str(v, name)
		switch {
		case a == "":
		case !contains(allowed, a):
			p.errf(v, name, "must be one of %s", strings.Join(allowed, ", "))
		case contains(out, a):
			p.errf(v, name, "duplicate algorithm %s", a)
		default:
			out = append(out, a)
		}
	}
	return out
}

// loadBalancing overlays the §6 settings of simulatedSettings, each with
// the schema's type and range.
func (p *scenarioParser) loadBalancing(n ast.Node, lb *vdibroker.LoadBalancing) {
	m, ok := p.mapping(n, "loadBalancing", simulatedSettings...)
	if !ok {
		return
	}
	pool := &vdibroker.HostPool{LoadBalancing: *lb}
	for _, key := range simulatedSettings {
		fv, ok := m[key]
		if !ok {
			continue
		}
		f := fieldOf(p.schema, "loadBalancing."+key)
		var v any
		switch f.Kind {
		case vdibroker.KindInt:
			v = p.int(fv.value, f.Path, int64(f.Min), int64(f.Max))
		case vdibroker.KindNumber:
			v = p.float(fv.value, f.Path, f.Min, f.Max)
		case vdibroker.KindBool:
			b, isBool := unwrap(fv.value).(*ast.BoolNode)
			if !isBool {
				p.errf(fv.value, f.Path, "must be true or false")
				continue
			}
			v = b.Value
		default:
			panic("sim: no parser for " + f.Path)
		}
		if err := f.Set(pool, v); err != nil {
			panic(err) // the switch above gives each kind its Go type
		}
	}
	*lb = pool.LoadBalancing
}

func (p *scenarioParser) users(n ast.Node, duration time.Duration) []UserGroup {
	seq, ok := p.sequence(n, "users", 1, 100)
	if !ok {
		return nil
	}
	var out []UserGroup
	total := 0
	for i, v := range seq {
		path := fmt.Sprintf("users[%d]", i)
		m, ok := p.mapping(v, path, "pattern", "count", "start", "over", "workHours")
		if !ok {
			continue
		}
		g := UserGroup{}
		if f, ok := m["pattern"]; ok {
			g.Pattern = p.str(f.value, path+".pattern")
			if g.Pattern != "" && g.Pattern != PatternStorm && g.Pattern != PatternWorkday {
				p.errf(f.value, path+".pattern", "must be one of storm, workday")
			}
		} else {
			p.errf(v, path+".pattern", "required")
		}
		if f, ok := m["count"]; ok {
			g.Count = p.int(f.value, path+".count", 1, maxUsersTotal)
			total += g.Count
			if total > maxUsersTotal {
				p.errf(f.value, path+".count", "users in all groups must total at most %d", maxUsersTotal)
			}
		} else {
			p.errf(v, path+".count", "required")
		}
		if f, ok := m["start"]; ok {
			g.Start = p.duration(f.value, path+".start", 0, maxDuration)
			if duration > 0 && g.Start >= duration {
				p.errf(f.value, path+".start", "must be before the end of the scenario (duration %s)", fmtDuration(duration))
			}
		}
		if g.Pattern == PatternWorkday {
			g.Over, g.WorkHours = 2*time.Hour, 8*time.Hour
		}
		if f, ok := m["over"]; ok {
			g.Over = p.duration(f.value, path+".over", 0, maxDuration)
		}
		if f, ok := m["workHours"]; ok {
			if g.Pattern != PatternWorkday {
				p.errf(f.key, path+".workHours", "only for pattern workday")
			}
			g.WorkHours = p.duration(f.value, path+".workHours", time.Hour, 24*time.Hour)
		}
		out = append(out, g)
	}
	return out
}

func (p *scenarioParser) session(n ast.Node, s *SessionSpec) {
	m, ok := p.mapping(n, "session", "meanMinutes", "disconnectProbability", "reconnectMeanMinutes", "cpuPercentPerSession")
	if !ok {
		return
	}
	if f, ok := m["meanMinutes"]; ok {
		s.MeanMinutes = p.float(f.value, "session.meanMinutes", 1, 43200)
	}
	if f, ok := m["disconnectProbability"]; ok {
		s.DisconnectProbability = p.float(f.value, "session.disconnectProbability", 0, 1)
	}
	if f, ok := m["reconnectMeanMinutes"]; ok {
		s.ReconnectMeanMinutes = p.float(f.value, "session.reconnectMeanMinutes", 1, 1440)
	}
	if f, ok := m["cpuPercentPerSession"]; ok {
		s.CPUPercentPerSession = p.float(f.value, "session.cpuPercentPerSession", 0, 100)
	}
}

// sequence returns n's items, requiring min..max of them.
func (p *scenarioParser) sequence(n ast.Node, name string, min, max int) ([]ast.Node, bool) {
	seq, ok := unwrap(n).(*ast.SequenceNode)
	if !ok {
		p.errf(n, name, "must be a list")
		return nil, false
	}
	if len(seq.Values) < min || len(seq.Values) > max {
		p.errf(n, name, "must have %d..%d entries", min, max)
		return nil, false
	}
	return seq.Values, true
}

func (p *scenarioParser) int(n ast.Node, name string, min, max int64) int {
	v, ok := unwrap(n).(*ast.IntegerNode)
	var i int64
	switch {
	case ok:
		switch x := v.Value.(type) {
		case int64:
			i = x
		case uint64:
			i = math.MaxInt64
			if x <= math.MaxInt64 {
				i = int64(x)
			}
		default:
			ok = false
		}
	}
	if !ok || i < min || i > max {
		p.errf(n, name, "must be %d..%d", min, max)
		return 0
	}
	return int(i)
}

func (p *scenarioParser) float(n ast.Node, name string, min, max float64) float64 {
	var f float64
	ok := true
	switch v := unwrap(n).(type) {
	case *ast.FloatNode:
		f = v.Value
	case *ast.IntegerNode:
		switch x := v.Value.(type) {
		case int64:
			f = float64(x)
		case uint64:
			f = float64(x)
		}
	default:
		ok = false
	}
	if !ok || math.IsNaN(f) || f < min || f > max {
		p.errf(n, name, "must be %s..%s", fmtNum(min), fmtNum(max))
		return 0
	}
	return f
}

func (p *scenarioParser) duration(n ast.Node, name string, min, max time.Duration) time.Duration {
	s, ok := unwrap(n).(*ast.StringNode)
	var d time.Duration
	var err error
	if ok {
		d, err = time.ParseDuration(s.Value)
	}
	if !ok || err != nil || d < min || d > max {
		p.errf(n, name, "must be a duration %s..%s (like 30s, 10m, 8h)", fmtDuration(min), fmtDuration(max))
		return 0
	}
	return d
}

func (p *scenarioParser) str(n ast.Node, name string) string {
	s, ok := unwrap(n).(*ast.StringNode)
	if !ok || s.Value == "" {
		p.errf(n, name, "must be a non-empty string")
		return ""
	}
	return s.Value
}

// unwrap looks through anchors and tags to the value.
func unwrap(n ast.Node) ast.Node {
	for {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			n = v.Value
		default:
			return n
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func fmtNum(f float64) string { return fmt.Sprintf("%g", f) }

// fmtDuration prints 0s, 5s, 1m, 1h, 744h rather than 1h0m0s.
func fmtDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	default:
		return d.String()
	}
}
