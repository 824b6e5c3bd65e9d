package vdibroker

import (
	"fmt"
	"slices"
	"strings"
)

// Validation of scaling plans (SPEC §8, R-SP1..R-SP4 of docs/behaviour.md).
// The settings of a schedule are written once in planFields: validation,
// its range hints, the CLI's flags and the console read them from there, as
// the host pool settings are read from PoolFields.

// Limits of a scaling plan.
const (
	MaxScheduleNameLen         = 64
	MaxNotificationMessageLen  = 1024
	MaxRampDownWaitTimeMinutes = 1440  // a day
	MaxStopHostAfterMinutes    = 10080 // a week
	// MaxPlanHostPools bounds a plan's hostPools: a write checks and
	// locks each (R-SP4), and a token scoped to one pool may send the
	// list, which is validated before its pools are authorized (R-SP5).
	MaxPlanHostPools = 1000
)

// DaysOfWeek are the values of a schedule's daysOfWeek, in time.Weekday
// order from Monday (AVD's order).
var DaysOfWeek = []string{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}

// KindTime is a schedule's start time: "HH:MM", 00:00..23:59, in the plan's
// time zone.
const KindTime FieldKind = "time"

// PlanField is one setting of a scaling schedule: Field's path (relative to
// the schedule, e.g. "rampUpCapacityThresholdPct"), kind, range, default
// and help. PoolTypes are the plan types the setting is for (nil: both);
// in a plan of another type the setting must be left empty (R-SP3). The
// Default of a number is AVD's suggested value, which a schedule made by
// `vdibroker scalingplan create` starts from; the API fills no number
// (FillDefaults).
type PlanField struct {
	Field
	// Optional settings (peakMinimumHostsPct, offPeakMaximumHostsPct) may
	// be absent; absent is not checked.
	Optional bool
	// Phase is the phase the setting belongs to ("" for the schedule's own
	// name and days).
	Phase string
	at    func(s *ScalingSchedule) any
}

var pooledOnly = []string{Pooled}
var personalOnly = []string{Personal}

// algorithms are the load balancing algorithms of a phase (AVD's two).
var algorithms = func(def bool) []Option {
	return []Option{{Value: BreadthFirst, Default: def}, {Value: DepthFirst, Default: !def}}
}

// planFields is the schedule schema in AVD's order, which is also the order
// of validation: the first bad field is the one reported. The defaults of
// the enums are AVD's: breadth-first while users arrive (ramp-up, peak),
// depth-first while they leave (ramp-down, off-peak) so that hosts empty
// and can be stopped.
var planFields = []PlanField{
	{Field: Field{Path: "name", Kind: KindName, Min: 1, Max: MaxScheduleNameLen, Label: "Schedule name", Help: "the schedule's name, unique in the plan"},
		at: func(s *ScalingSchedule) any { return &s.Name }},
	{Field: Field{Path: "daysOfWeek", Kind: KindEnum, Label: "Days of week", Help: "the days whose ramp-up starts this schedule; no day in two schedules of a plan",
		Options: dayOptions()},
		at: func(s *ScalingSchedule) any { return &s.DaysOfWeek }},

	{Phase: PhaseRampUp, Field: Field{Path: "rampUpStartTime", Kind: KindTime, Label: "Ramp-up start", Help: "when ramp-up begins, in the plan's time zone"},
		at: func(s *ScalingSchedule) any { return &s.RampUpStartTime }},
	{Phase: PhaseRampUp, Field: Field{Path: "rampUpLoadBalancingAlgorithm", Kind: KindEnum, PoolTypes: pooledOnly, Options: algorithms(true),
		Label: "Ramp-up load balancing", Help: "the pool's load balancer type during ramp-up"},
		at: func(s *ScalingSchedule) any { return &s.RampUpLoadBalancingAlgorithm }},
	{Phase: PhaseRampUp, Field: Field{Path: "rampUpMinimumHostsPct", Kind: KindInt, PoolTypes: pooledOnly, Min: 0, Max: 100, Default: 20,
		Label: "Ramp-up minimum hosts (%)", Help: "share of the pool's hosts kept running during ramp-up (R-A2)"},
		at: func(s *ScalingSchedule) any { return &s.RampUpMinimumHostsPct }},
	{Phase: PhaseRampUp, Field: Field{Path: "rampUpCapacityThresholdPct", Kind: KindInt, PoolTypes: pooledOnly, Min: 1, Max: 100, Default: 60,
		Label: "Ramp-up capacity threshold (%)", Help: "used capacity above which a host is started (R-A2)"},
		at: func(s *ScalingSchedule) any { return &s.RampUpCapacityThresholdPct }},

	{Phase: PhasePeak, Field: Field{Path: "peakStartTime", Kind: KindTime, Label: "Peak start", Help: "when peak begins, in the plan's time zone"},
		at: func(s *ScalingSchedule) any { return &s.PeakStartTime }},
	{Phase: PhasePeak, Field: Field{Path: "peakLoadBalancingAlgorithm", Kind: KindEnum, PoolTypes: pooledOnly, Options: algorithms(true),
		Label: "Peak load balancing", Help: "the pool's load balancer type during peak"},
		at: func(s *ScalingSchedule) any { return &s.PeakLoadBalancingAlgorithm }},
	{Phase: PhasePeak, Optional: true, Field: Field{Path: "peakMinimumHostsPct", Kind: KindInt, PoolTypes: pooledOnly, Min: 0, Max: 100,
		Label: "Peak minimum hosts (%)", Help: "share of the pool's hosts kept running during peak (our addition; absent: none)"},
		at: func(s *ScalingSchedule) any { return &s.PeakMinimumHostsPct }},

	{Phase: PhaseRampDown, Field: Field{Path: "rampDownStartTime", Kind: KindTime, Label: "Ramp-down start", Help: "when ramp-down begins, in the plan's time zone"},
		at: func(s *ScalingSchedule) any { return &s.RampDownStartTime }},
	{Phase: PhaseRampDown, Field: Field{Path: "rampDownLoadBalancingAlgorithm", Kind: KindEnum, PoolTypes: pooledOnly, Options: algorithms(false),
		Label: "Ramp-down load balancing", Help: "the pool's load balancer type during ramp-down"},
		at: func(s *ScalingSchedule) any { return &s.RampDownLoadBalancingAlgorithm }},
	{Phase: PhaseRampDown, Field: Field{Path: "rampDownMinimumHostsPct", Kind: KindInt, PoolTypes: pooledOnly, Min: 0, Max: 100, Default: 10,
		Label: "Ramp-down minimum hosts (%)", Help: "share of the pool's hosts kept running during ramp-down (R-A2)"},
		at: func(s *ScalingSchedule) any { return &s.RampDownMinimumHostsPct }},
	{Phase: PhaseRampDown, Field: Field{Path: "rampDownCapacityThresholdPct", Kind: KindInt, PoolTypes: pooledOnly, Min: 1, Max: 100, Default: 90,
		Label: "Ramp-down capacity threshold (%)", Help: "a host is stopped only if used capacity stays at or under this without it (R-A3)"},
		at: func(s *ScalingSchedule) any { return &s.RampDownCapacityThresholdPct }},
	{Phase: PhaseRampDown, Field: Field{Path: "rampDownForceLogoffUsers", Kind: KindBool, PoolTypes: pooledOnly, Default: false,
		Label: "Force logoff", Help: "log users off a host being stopped after the wait time (R-A3)"},
		at: func(s *ScalingSchedule) any { return &s.RampDownForceLogoffUsers }},
	{Phase: PhaseRampDown, Field: Field{Path: "rampDownWaitTimeMinutes", Kind: KindInt, PoolTypes: pooledOnly, Min: 0, Max: MaxRampDownWaitTimeMinutes, Default: 30,
		Label: "Wait time (min)", Help: "minutes between the notification and the forced logoff"},
		at: func(s *ScalingSchedule) any { return &s.RampDownWaitTimeMinutes }},
	{Phase: PhaseRampDown, Field: Field{Path: "rampDownNotificationMessage", Kind: KindText, PoolTypes: pooledOnly, Max: MaxNotificationMessageLen, Default: "", Multiline: true,
		Label: "Notification message", Help: "sent to the users of a host being stopped before a forced logoff"},
		at: func(s *ScalingSchedule) any { return &s.RampDownNotificationMessage }},
	{Phase: PhaseRampDown, Field: Field{Path: "rampDownStopHostsWhen", Kind: KindEnum, PoolTypes: pooledOnly,
		Options: []Option{{Value: StopWhenZeroSessions, Default: true}, {Value: StopWhenZeroActiveSessions}},
		Label:   "Stop hosts when", Help: "ZeroSessions: no session at all; ZeroActiveSessions: disconnected sessions do not keep a host running"},
		at: func(s *ScalingSchedule) any { return &s.RampDownStopHostsWhen }},

	{Phase: PhaseOffPeak, Field: Field{Path: "offPeakStartTime", Kind: KindTime, Label: "Off-peak start", Help: "when off-peak begins, in the plan's time zone; it lasts until the next ramp-up"},
		at: func(s *ScalingSchedule) any { return &s.OffPeakStartTime }},
	{Phase: PhaseOffPeak, Field: Field{Path: "offPeakLoadBalancingAlgorithm", Kind: KindEnum, PoolTypes: pooledOnly, Options: algorithms(false),
		Label: "Off-peak load balancing", Help: "the pool's load balancer type during off-peak"},
		at: func(s *ScalingSchedule) any { return &s.OffPeakLoadBalancingAlgorithm }},
	{Phase: PhaseOffPeak, Optional: true, Field: Field{Path: "offPeakMaximumHostsPct", Kind: KindInt, PoolTypes: pooledOnly, Min: 0, Max: 100,
		Label: "Off-peak maximum hosts (%)", Help: "share of the pool's hosts that may run off-peak (our addition; absent: no cap)"},
		at: func(s *ScalingSchedule) any { return &s.OffPeakMaximumHostsPct }},

	{Field: Field{Path: "stopHostAfterDisconnectMinutes", Kind: KindInt, PoolTypes: personalOnly, Min: 0, Max: MaxStopHostAfterMinutes, Default: 0, Zero: "never",
		Label: "Stop after disconnect (min)", Help: "stop a personal host this long after its user disconnected"},
		at: func(s *ScalingSchedule) any { return &s.StopHostAfterDisconnectMinutes }},
	{Field: Field{Path: "stopHostAfterLogoffMinutes", Kind: KindInt, PoolTypes: personalOnly, Min: 0, Max: MaxStopHostAfterMinutes, Default: 0, Zero: "never",
		Label: "Stop after logoff (min)", Help: "stop a personal host this long after its user logged off"},
		at: func(s *ScalingSchedule) any { return &s.StopHostAfterLogoffMinutes }},
}

func dayOptions() []Option {
	out := make([]Option, len(DaysOfWeek))
	for i, d := range DaysOfWeek {
		out[i] = Option{Value: d}
	}
	return out
}

// PlanFields returns the schedule schema in validation order (a copy).
func PlanFields() []PlanField { return slices.Clone(planFields) }

// PlanFieldAt returns the schedule setting at path ("rampUpStartTime").
func PlanFieldAt(path string) (PlanField, bool) {
	for _, f := range planFields {
		if f.Path == path {
			return f, true
		}
	}
	return PlanField{}, false
}

// Range says the allowed values as messages show them; a time is
// "00:00..23:59".
func (f PlanField) Range() string {
	if f.Kind == KindTime {
		return "HH:MM, 00:00..23:59"
	}
	return f.Field.Range()
}

// Value returns the setting's value in s: int, bool, string, []string, or
// for an optional setting *int (nil: absent).
func (f PlanField) Value(s *ScalingSchedule) any {
	switch v := f.at(s).(type) {
	case *int:
		return *v
	case **int:
		return *v
	case *bool:
		return *v
	case *string:
		return *v
	case *[]string:
		return *v
	}
	return nil
}

// Set stores v in s: an int, bool, string or []string as the setting
// takes (an int also for an optional setting; nil clears it).
func (f PlanField) Set(s *ScalingSchedule, v any) error {
	if setAt(f.at(s), v) {
		return nil
	}
	return fmt.Errorf("vdibroker: %s takes a %s, not %T", f.Path, f.Kind, v)
}

// isSet reports whether the setting has a value other than its zero.
func (f PlanField) isSet(s *ScalingSchedule) bool {
	switch v := f.Value(s).(type) {
	case int:
		return v != 0
	case *int:
		return v != nil
	case bool:
		return v
	case string:
		return v != ""
	case []string:
		return len(v) > 0
	}
	return false
}

// check validates the setting's value in s of a plan of planType; field is
// the error's JSON path (schedules[i].<path>).
func (f PlanField) check(field, planType string, s *ScalingSchedule) error {
	if !f.AppliesTo(planType) {
		if f.isSet(s) {
			return FieldError(field, "is for %s scaling plans only; leave it out of a %s plan (R-SP3)", strings.Join(f.PoolTypes, ", "), planType)
		}
		return nil
	}
	v := f.Value(s)
	switch f.Kind {
	case KindTime:
		_, err := parseClock(field, v.(string))
		return err
	case KindBool:
		return nil
	}
	if f.Path == "daysOfWeek" {
		return checkDays(field, v.([]string))
	}
	if p, ok := v.(*int); ok {
		if p == nil {
			return nil
		}
		v = *p
	}
	return f.CheckValue(field, "", v)
}

// FillDefaults sets each empty enum of a plan to its default:
// hostPoolType Pooled, and in a Pooled plan the phases' load balancing
// algorithms and rampDownStopHostsWhen. Numbers are not filled: 0 is a
// value (and refused where the range starts at 1), so a body that leaves
// out a threshold is told so rather than given one silently.
func (p *ScalingPlan) FillDefaults() {
	if p.HostPoolType == "" {
		p.HostPoolType = Pooled
	}
	for i := range p.Schedules {
		s := &p.Schedules[i]
		for _, f := range planFields {
			if f.Kind != KindEnum || f.Path == "daysOfWeek" || !f.AppliesTo(p.HostPoolType) || f.Value(s) != "" {
				continue
			}
			_ = f.Set(s, f.DefaultFor(p.HostPoolType))
		}
	}
}

// Validate checks a scaling plan (SPEC §8, R-SP1..R-SP3): the error is an
// InvalidArgument *Error whose Field is the JSON path of the first bad
// field (schedules[0].rampUpCapacityThresholdPct) and whose message gives
// the allowed range. Call FillDefaults first. Whether the plan's pools
// exist, have its type and are in no other plan is the store's to check
// (R-SP4), in the transaction that stores the plan.
func (p *ScalingPlan) Validate() error {
	if err := ValidateName("name", p.Name, MinPoolNameLen, MaxPoolNameLen); err != nil {
		return err
	}
	if err := textLen("description", p.Description, MaxTextLen, true); err != nil {
		return err
	}
	if err := ValidateTimeZone("timeZone", p.TimeZone); err != nil {
		return err
	}
	if err := oneOf("hostPoolType", p.HostPoolType, Pooled, Personal); err != nil {
		return err
	}
	if len(p.HostPools) > MaxPlanHostPools {
		return FieldError("hostPools", "must list 0..%d host pools, got %d", MaxPlanHostPools, len(p.HostPools))
	}
	seen := make(map[string]bool, len(p.HostPools))
	for i, pool := range p.HostPools {
		if err := ValidateName(fmt.Sprintf("hostPools[%d]", i), pool, MinPoolNameLen, MaxPoolNameLen); err != nil {
			return err
		}
		if seen[pool] {
			return FieldError("hostPools", "lists %q twice", pool)
		}
		seen[pool] = true
	}
	if len(p.Schedules) == 0 {
		return FieldError("schedules", "must hold 1..%d schedules, got none", len(DaysOfWeek))
	}
	days := map[string]int{} // day -> schedule that has it
	for i := range p.Schedules {
		s := &p.Schedules[i]
		prefix := fmt.Sprintf("schedules[%d].", i)
		for _, f := range planFields {
			if err := f.check(prefix+f.Path, p.HostPoolType, s); err != nil {
				return err
			}
		}
		for j := range i {
			if p.Schedules[j].Name == s.Name {
				return FieldError(prefix+"name", "must be unique in the plan: schedules[%d] is also %q", j, s.Name)
			}
		}
		if err := s.checkOrder(prefix); err != nil {
			return err
		}
		for _, d := range s.DaysOfWeek {
			if j, ok := days[d]; ok {
				return FieldError(prefix+"daysOfWeek", "%s is already in schedules[%d] (%q): schedules of a plan must not share a day (R-SP2)", d, j, p.Schedules[j].Name)
			}
			days[d] = i
		}
	}
	return nil
}

// checkDays refuses an empty list, unknown days and repeats.
func checkDays(field string, days []string) error {
	if len(days) == 0 {
		return FieldError(field, "must name at least one of %s", strings.Join(DaysOfWeek, ", "))
	}
	for i, d := range days {
		if !slices.Contains(DaysOfWeek, d) {
			return FieldError(field, "must be days of %s, got %q", strings.Join(DaysOfWeek, ", "), d)
		}
		if slices.Contains(days[:i], d) {
			return FieldError(field, "lists %q twice", d)
		}
	}
	return nil
}

// ParseClock parses a schedule time "HH:MM" (00:00..23:59) into minutes
// after midnight.
func ParseClock(s string) (int, error) { return parseClock("time", s) }

func parseClock(field, s string) (int, error) {
	bad := FieldError(field, "must be HH:MM, 00:00..23:59, got %q", s)
	if len(s) != 5 || s[2] != ':' {
		return 0, bad
	}
	for _, i := range []int{0, 1, 3, 4} {
		if s[i] < '0' || s[i] > '9' {
			return 0, bad
		}
	}
	h := int(s[0]-'0')*10 + int(s[1]-'0')
	m := int(s[3]-'0')*10 + int(s[4]-'0')
	if h > 23 || m > 59 {
		return 0, bad
	}
	return h*60 + m, nil
}

// StartMinutes returns the start of each phase in minutes after midnight,
// in phase order (ramp-up, peak, ramp-down, off-peak). Call it on a
// validated schedule; a bad time is -1.
func (s *ScalingSchedule) StartMinutes() [4]int {
	var out [4]int
	for i, t := range []string{s.RampUpStartTime, s.PeakStartTime, s.RampDownStartTime, s.OffPeakStartTime} {
		m, err := ParseClock(t)
		if err != nil {
			m = -1
		}
		out[i] = m
	}
	return out
}

// checkOrder enforces R-SP1: a schedule is a cycle. Read forward from its
// ramp-up start, the peak, ramp-down and off-peak starts come in that
// order, all four distinct, within 24 hours; the cycle may cross midnight
// once (a night shift: ramp-up 20:00, peak 22:00, ramp-down 05:00,
// off-peak 07:00), and off-peak lasts until the next ramp-up. The error
// names the first start that is out of order.
func (s *ScalingSchedule) checkOrder(prefix string) error {
	st := s.StartMinutes()
	names := []string{"rampUpStartTime", "peakStartTime", "rampDownStartTime", "offPeakStartTime"}
	prev := 0 // minutes after ramp-up of the previous phase's start
	for i := 1; i < 4; i++ {
		off := (st[i] - st[0] + 1440) % 1440
		if off <= prev {
			return FieldError(prefix+names[i], "must come after %s %s: the starts follow each other as ramp-up, peak, ramp-down, off-peak, crossing midnight at most once (R-SP1); got %s, %s, %s, %s",
				names[i-1], s.timeOf(i-1), s.timeOf(0), s.timeOf(1), s.timeOf(2), s.timeOf(3))
		}
		prev = off
	}
	return nil
}

func (s *ScalingSchedule) timeOf(i int) string {
	return []string{s.RampUpStartTime, s.PeakStartTime, s.RampDownStartTime, s.OffPeakStartTime}[i]
}
