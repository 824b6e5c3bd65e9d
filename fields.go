package vdibroker

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// FieldKind is the JSON type of a host pool setting, with the check its
// value gets.
type FieldKind string

// Kinds of host pool settings.
const (
	KindName   FieldKind = "name"   // Min..Max characters of A-Za-z0-9@._- and space
	KindText   FieldKind = "text"   // free text of at most Max characters
	KindEnum   FieldKind = "enum"   // one of Options
	KindInt    FieldKind = "int"    // a whole number Min..Max
	KindNumber FieldKind = "number" // a number Min..Max (Max +Inf: no upper bound)
	KindBool   FieldKind = "bool"
)

// Option is one value of an enum setting. PoolTypes are the host pool types
// it is allowed for (nil: every type); Default marks the value a pool of
// those types gets when the field is left empty.
type Option struct {
	Value     string
	PoolTypes []string
	Default   bool
}

// Field is one host pool setting of SPEC §2 and §6: the one place its JSON
// path, type, range, default and help are written. Validation (R-P4) and
// its messages, the API's range hints, the CLI's flags, the console's
// settings form and the simulator's scenario parser all read it from
// PoolFields, so a range changed here changes everywhere.
type Field struct {
	// Path is the JSON path in a pool body, e.g. "maxSessionLimit" or
	// "loadBalancing.cpuThreshold"; it is also the Field of the error.
	Path string
	Kind FieldKind
	// Min and Max bound a number (KindInt, KindNumber; Max +Inf for "≥
	// Min") or the length in characters of a string (KindName, KindText).
	Min, Max float64
	// Default is the value a new pool gets: int, float64, bool or string;
	// nil for enums, whose Options say the default per pool type.
	Default any
	// Options are the values of an enum.
	Options []Option
	// PoolTypes are the host pool types the setting applies to (nil: all).
	PoolTypes []string
	// LoadBalancerTypes are the load balancer types whose placement reads
	// the setting (nil: all, or not about placement).
	LoadBalancerTypes []string
	// Zero says what 0 means ("not used", "off", "never"), "" when 0 is an
	// ordinary value.
	Zero string
	// Multiline allows line breaks in a KindText value.
	Multiline bool
	// Immutable settings are set at creation only (R-P1: hostPoolType).
	Immutable bool
	// Group is the part of the settings the field belongs to (one of the
	// Group* constants), the console's settings form's sections.
	Group string
	// Label is a short title (a form label); Help one line saying what the
	// setting does, without the range or default (Range and Default say
	// those).
	Label, Help string
	// at returns a pointer to the setting in p: *int, *float64, *bool or
	// *string as Kind says.
	at func(p *HostPool) any
}

// Groups of host pool settings, in the order the console shows them.
const (
	GroupGeneral   = "General"
	GroupCapacity  = "Capacity"
	GroupLoadIndex = "Load index"
	GroupTimeouts  = "Timeouts"
	GroupPersonal  = "Personal desktops"
	GroupPower     = "Power"
	GroupGateway   = "Gateway"
)

// MaxCustomRdpPropertyLen bounds a pool's customRdpProperty.
const MaxCustomRdpPropertyLen = 4096

// poolFields is the schema, in SPEC §2 order with §6 (loadBalancing) last.
// The order is the order of validation: the first bad field is the one
// reported.
var poolFields = []Field{
	{Path: "name", Kind: KindName, Group: GroupGeneral, Min: MinPoolNameLen, Max: MaxPoolNameLen, Immutable: true,
		Label: "Name", Help: "host pool name",
		at: func(p *HostPool) any { return &p.Name }},
	{Path: "hostPoolType", Kind: KindEnum, Group: GroupGeneral, Immutable: true,
		Options: []Option{{Value: Pooled, Default: true}, {Value: Personal}},
		Label:   "Host pool type", Help: "Pooled pools load balance, Personal pools give each user a host of their own; set at creation only (R-P1)",
		at: func(p *HostPool) any { return &p.HostPoolType }},
	{Path: "loadBalancerType", Kind: KindEnum, Group: GroupCapacity,
		Options: []Option{
			{Value: BreadthFirst, PoolTypes: []string{Pooled}, Default: true},
			{Value: DepthFirst, PoolTypes: []string{Pooled}},
			{Value: LoadIndex, PoolTypes: []string{Pooled}},
			{Value: Persistent, PoolTypes: []string{Personal}, Default: true},
			{Value: MultiplePersistent, PoolTypes: []string{Personal}},
		},
		Label: "Load balancer type", Help: "how a new session's host is chosen; applies to the next placement (R-P1)",
		at: func(p *HostPool) any { return &p.LoadBalancerType }},
	{Path: "personalDesktopAssignmentType", Kind: KindEnum, Group: GroupPersonal, PoolTypes: []string{Personal},
		Options: []Option{{Value: Automatic, Default: true}, {Value: Direct, PoolTypes: []string{Personal}}},
		Label:   "Assignment type", Help: "how users get their personal host: Automatic at the first connect (R-PE1), Direct by an admin only (R-PE2)",
		at: func(p *HostPool) any { return &p.PersonalDesktopAssignmentType }},
	{Path: "maxSessionLimit", Kind: KindInt, Group: GroupCapacity, Min: 1, Max: NoSessionLimit, Default: NoSessionLimit,
		Label: "Max session limit", Help: fmt.Sprintf("most sessions per host (%d: no limit)", NoSessionLimit),
		at: func(p *HostPool) any { return &p.MaxSessionLimit }},
	{Path: "heartbeatTimeoutSeconds", Kind: KindInt, Group: GroupTimeouts, Min: MinHeartbeatTimeoutSeconds, Max: MaxHeartbeatTimeoutSeconds, Default: DefaultHeartbeatTimeoutSeconds,
		Label: "Heartbeat timeout (s)", Help: "a host without heartbeat for longer is Unavailable (R-H1)",
		at: func(p *HostPool) any { return &p.HeartbeatTimeoutSeconds }},
	{Path: "pendingTimeoutSeconds", Kind: KindInt, Group: GroupTimeouts, Min: MinPendingTimeoutSeconds, Max: MaxPendingTimeoutSeconds, Default: DefaultPendingTimeoutSeconds,
		Label: "Pending timeout (s)", Help: "a Pending session never seen by the agent ends after this (R-S3)",
		at: func(p *HostPool) any { return &p.PendingTimeoutSeconds }},
	{Path: "disconnectedSessionTimeoutMinutes", Kind: KindInt, Group: GroupTimeouts, Min: 0, Max: MaxDisconnectedTimeoutMinutes, Default: 0, Zero: "never",
		Label: "Disconnected session timeout (min)", Help: "log off sessions disconnected longer (R-S5)",
		at: func(p *HostPool) any { return &p.DisconnectedSessionTimeoutMinutes }},
	{Path: "description", Kind: KindText, Group: GroupGeneral, Max: MaxTextLen, Default: "", Multiline: true,
		Label: "Description", Help: "free text about the pool",
		at: func(p *HostPool) any { return &p.Description }},
	{Path: "friendlyName", Kind: KindText, Group: GroupGeneral, Max: MaxTextLen, Default: "",
		Label: "Friendly name", Help: "display name",
		at: func(p *HostPool) any { return &p.FriendlyName }},
	{Path: "powerDriver", Kind: KindText, Group: GroupPower, Max: MaxPoolNameLen, Default: "",
		Label: "Power driver", Help: "the driver of serve --power-config that starts and stops this pool's hosts (R-A4); empty: none",
		at: func(p *HostPool) any { return &p.PowerDriver }},
	{Path: "startVMOnConnect", Kind: KindBool, Group: GroupPower, Default: false,
		Label: "Start VM on connect", Help: "a connect that finds no capacity starts a stopped host, else one whose power state is Unknown and whose agent is silent, and answers 503 HostStarting (R-A4); needs a power driver",
		at: func(p *HostPool) any { return &p.StartVMOnConnect }},
	{Path: "gatewayUsage", Kind: KindEnum, Group: GroupGateway,
		Options: []Option{{Value: GatewayUsageGateway, Default: true}, {Value: GatewayUsageDirect}},
		Label:   "Gateway usage", Help: "Gateway: through gatewayHostName or, when empty, the server's RD gateway (serve --gateway-hostname), straight to the host with neither; Direct: straight to the host (R-GW1)",
		at: func(p *HostPool) any { return &p.GatewayUsage }},
	{Path: "gatewayHostName", Kind: KindText, Group: GroupGateway, Max: MaxGatewayHostLen, Default: "",
		Label: "Gateway host name", Help: "this pool's RD gateway as clients reach it, host or host:port; empty: the server's (R-GW1)",
		at: func(p *HostPool) any { return &p.GatewayHostName }},
	{Path: "idleSessionLimitMinutes", Kind: KindInt, Group: GroupGateway, Min: 0, Max: MaxSessionLimitMinutes, Default: 0, Zero: "the gateway's own",
		Label: "Idle session limit (min)", Help: "a gateway closes a tunnel that carried nothing for this long (R-GW1)",
		at: func(p *HostPool) any { return &p.IdleSessionLimitMinutes }},
	{Path: "activeSessionLimitMinutes", Kind: KindInt, Group: GroupGateway, Min: 0, Max: MaxSessionLimitMinutes, Default: 0, Zero: "the gateway's own",
		Label: "Active session limit (min)", Help: "a gateway closes a tunnel open this long (R-GW1)",
		at: func(p *HostPool) any { return &p.ActiveSessionLimitMinutes }},
	{Path: "customRdpProperty", Kind: KindText, Group: GroupGeneral, Max: MaxCustomRdpPropertyLen, Default: "", Multiline: true,
		Label: "Custom RDP properties", Help: "the pool's own .rdp properties, name:type:value separated by ; or line breaks, over serve --rdp-defaults (R-E8)",
		at: func(p *HostPool) any { return &p.CustomRdpProperty }},

	{Path: "loadBalancing.useCustomScript", Kind: KindBool, Group: GroupLoadIndex, LoadBalancerTypes: []string{LoadIndex}, Default: false,
		Label: "Use custom script", Help: "the load index is the agent's custom script value alone (R-IDX3)",
		at: func(p *HostPool) any { return &p.LoadBalancing.UseCustomScript }},
	{Path: "loadBalancing.includeSessionCount", Kind: KindBool, Group: GroupLoadIndex, LoadBalancerTypes: []string{LoadIndex}, Default: true,
		Label: "Include session count", Help: "the session count is a load index factor (R-IDX1)",
		at: func(p *HostPool) any { return &p.LoadBalancing.IncludeSessionCount }},
	{Path: "loadBalancing.cpuThreshold", Kind: KindNumber, Group: GroupLoadIndex, LoadBalancerTypes: []string{LoadIndex}, Min: 0, Max: 100, Default: 0.0, Zero: "not used",
		Label: "CPU threshold (%)", Help: "CPU % at load index 100 (R-IDX1)",
		at: func(p *HostPool) any { return &p.LoadBalancing.CPUThreshold }},
	{Path: "loadBalancing.memoryThreshold", Kind: KindNumber, Group: GroupLoadIndex, LoadBalancerTypes: []string{LoadIndex}, Min: 0, Max: 100, Default: 0.0, Zero: "not used",
		Label: "Memory threshold (%)", Help: "memory % at load index 100 (R-IDX1)",
		at: func(p *HostPool) any { return &p.LoadBalancing.MemoryThreshold }},
	{Path: "loadBalancing.diskQueueLengthThreshold", Kind: KindNumber, Group: GroupLoadIndex, LoadBalancerTypes: []string{LoadIndex}, Min: 0, Max: math.Inf(1), Default: 0.0, Zero: "not used",
		Label: "Disk queue length threshold", Help: "disk queue length at load index 100 (R-IDX1)",
		at: func(p *HostPool) any { return &p.LoadBalancing.DiskQueueLengthThreshold }},
	{Path: "loadBalancing.diskReadLatencyThreshold", Kind: KindNumber, Group: GroupLoadIndex, LoadBalancerTypes: []string{LoadIndex}, Min: 0, Max: math.Inf(1), Default: 0.0, Zero: "not used",
		Label: "Disk read latency threshold (ms)", Help: "disk read latency in ms at load index 100 (R-IDX1)",
		at: func(p *HostPool) any { return &p.LoadBalancing.DiskReadLatencyThreshold }},
	{Path: "loadBalancing.diskWriteLatencyThreshold", Kind: KindNumber, Group: GroupLoadIndex, LoadBalancerTypes: []string{LoadIndex}, Min: 0, Max: math.Inf(1), Default: 0.0, Zero: "not used",
		Label: "Disk write latency threshold (ms)", Help: "disk write latency in ms at load index 100 (R-IDX1)",
		at: func(p *HostPool) any { return &p.LoadBalancing.DiskWriteLatencyThreshold }},
	{Path: "loadBalancing.loadIndexThreshold", Kind: KindInt, Group: GroupLoadIndex, Min: 0, Max: 100, Default: 20, LoadBalancerTypes: []string{LoadIndex},
		Label: "Load index threshold", Help: "bucket 1 takes hosts below this load index (R-LI3)",
		at: func(p *HostPool) any { return &p.LoadBalancing.LoadIndexThreshold }},
	{Path: "loadBalancing.connectingSessionThreshold", Kind: KindInt, Group: GroupLoadIndex, Min: 0, Max: 150, Default: 20, LoadBalancerTypes: []string{LoadIndex},
		Label: "Connecting session threshold", Help: "bucket 1 takes hosts with fewer connecting sessions (R-LI3)",
		at: func(p *HostPool) any { return &p.LoadBalancing.ConnectingSessionThreshold }},
	{Path: "loadBalancing.minServersInQueue", Kind: KindInt, Group: GroupLoadIndex, Min: 1, Max: 1000, Default: 4, LoadBalancerTypes: []string{LoadIndex},
		Label: "Min servers in queue", Help: "raise the load index threshold until bucket 1 has this many hosts (R-LI3)",
		at: func(p *HostPool) any { return &p.LoadBalancing.MinServersInQueue }},
	{Path: "loadBalancing.hostLoadIndexThreshold", Kind: KindInt, Group: GroupLoadIndex, Min: 0, Max: 100, Default: 0, Zero: "off", LoadBalancerTypes: []string{LoadIndex},
		Label: "Host load index threshold", Help: "a host at or above this load index takes no new session (R-LI2)",
		at: func(p *HostPool) any { return &p.LoadBalancing.HostLoadIndexThreshold }},
	{Path: "loadBalancing.hostConnectingSessionThreshold", Kind: KindInt, Group: GroupLoadIndex, Min: 0, Max: 150, Default: 0, Zero: "off", LoadBalancerTypes: []string{LoadIndex},
		Label: "Host connecting session threshold", Help: "a host with this many connecting sessions takes no new one (R-LI2)",
		at: func(p *HostPool) any { return &p.LoadBalancing.HostConnectingSessionThreshold }},
	{Path: "loadBalancing.sampleIntervalSeconds", Kind: KindInt, Group: GroupTimeouts, Min: 5, Max: 3600, Default: 30,
		Label: "Sample interval (s)", Help: "how often the agent samples its metrics (R-LI6)",
		at: func(p *HostPool) any { return &p.LoadBalancing.SampleIntervalSeconds }},
}

// PoolFields returns the host pool schema in SPEC order. The slice is a
// copy: a caller (or a test) may change it without changing validation.
func PoolFields() []Field { return slices.Clone(poolFields) }

// PoolField returns the setting at path, for example "maxSessionLimit".
func PoolField(path string) (Field, bool) {
	for _, f := range poolFields {
		if f.Path == path {
			return f, true
		}
	}
	return Field{}, false
}

// mustField is PoolField for the paths this package names itself.
func mustField(path string) Field {
	f, ok := PoolField(path)
	if !ok {
		panic("vdibroker: no pool field " + path)
	}
	return f
}

// RangeHint returns the allowed range of a numeric field as the API names
// it in messages ("1..999999", "≥ 0"). A host policy field
// ("policy.hostLoadIndexThreshold") has the range of the pool setting it
// overrides (R-LI5).
func RangeHint(path string) (string, bool) {
	if rest, ok := strings.CutPrefix(path, "policy."); ok {
		path = "loadBalancing." + rest
	}
	f, ok := PoolField(path)
	if !ok || (f.Kind != KindInt && f.Kind != KindNumber) {
		return "", false
	}
	return f.Range(), true
}

// Key is the last element of the path ("cpuThreshold").
func (f Field) Key() string {
	return f.Path[strings.LastIndexByte(f.Path, '.')+1:]
}

// Range says the allowed values as messages and help show them:
// "1..999999", "0..100", "≥ 0", "3..64 characters", "at most 512
// characters", "Pooled, Personal".
func (f Field) Range() string {
	switch f.Kind {
	case KindInt:
		return fmt.Sprintf("%d..%d", int(f.Min), int(f.Max))
	case KindNumber:
		if math.IsInf(f.Max, 1) {
			return fmt.Sprintf("≥ %g", f.Min)
		}
		return fmt.Sprintf("%g..%g", f.Min, f.Max)
	case KindName:
		return fmt.Sprintf("%d..%d characters", int(f.Min), int(f.Max))
	case KindText:
		return fmt.Sprintf("at most %d characters", int(f.Max))
	case KindEnum:
		return strings.Join(f.Values(""), ", ")
	case KindBool:
		return "true or false"
	}
	return ""
}

// AppliesTo reports whether the setting matters for a pool of poolType.
func (f Field) AppliesTo(poolType string) bool {
	return f.PoolTypes == nil || slices.Contains(f.PoolTypes, poolType)
}

// Values returns the enum values allowed for poolType ("": every value).
func (f Field) Values(poolType string) []string {
	var out []string
	for _, o := range f.Options {
		if poolType == "" || o.PoolTypes == nil || slices.Contains(o.PoolTypes, poolType) {
			out = append(out, o.Value)
		}
	}
	return out
}

// DefaultFor returns the default of the setting for a pool of poolType.
func (f Field) DefaultFor(poolType string) any {
	if f.Kind != KindEnum {
		return f.Default
	}
	for _, o := range f.Options {
		if o.Default && (o.PoolTypes == nil || slices.Contains(o.PoolTypes, poolType)) {
			return o.Value
		}
	}
	return ""
}

// DefaultText is the default as help shows it ("999999", "20", "true").
func (f Field) DefaultText(poolType string) string {
	return FormatValue(f.DefaultFor(poolType))
}

// FormatValue writes a setting's value as a form or flag shows it.
func FormatValue(v any) string {
	switch x := v.(type) {
	case int:
		return strconv.Itoa(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case string:
		return x
	}
	return ""
}

// Value returns the setting's value in p: int, float64, bool or string.
func (f Field) Value(p *HostPool) any {
	switch v := f.at(p).(type) {
	case *int:
		return *v
	case *float64:
		return *v
	case *bool:
		return *v
	case *string:
		return *v
	}
	return nil
}

// Set stores v in p. v must have the setting's Go type (an int is also
// taken for a number).
func (f Field) Set(p *HostPool, v any) error {
	if setAt(f.at(p), v) {
		return nil
	}
	return fmt.Errorf("vdibroker: %s takes a %s, not %T", f.Path, f.Kind, v)
}

// setAt stores v at ptr when v is of the type ptr points to (an int also
// into a float64, and into an optional *int, where nil clears it), and
// reports whether it did: the one conversion of the pool and plan schemas.
func setAt(ptr, v any) bool {
	switch ptr := ptr.(type) {
	case *int:
		if x, ok := v.(int); ok {
			*ptr = x
			return true
		}
	case **int:
		switch x := v.(type) {
		case int:
			*ptr = &x
			return true
		case nil:
			*ptr = nil
			return true
		}
	case *float64:
		switch x := v.(type) {
		case float64:
			*ptr = x
			return true
		case int:
			*ptr = float64(x)
			return true
		}
	case *bool:
		if x, ok := v.(bool); ok {
			*ptr = x
			return true
		}
	case *string:
		if x, ok := v.(string); ok {
			*ptr = x
			return true
		}
	case *[]string:
		if x, ok := v.([]string); ok {
			*ptr = x
			return true
		}
	}
	return false
}

// Put stores v at the field's path in a JSON body, making the nested
// objects on the way: {"loadBalancing": {"cpuThreshold": v}}.
func (f Field) Put(body map[string]any, v any) {
	keys := strings.Split(f.Path, ".")
	m := body
	for _, k := range keys[:len(keys)-1] {
		sub, ok := m[k].(map[string]any)
		if !ok {
			sub = map[string]any{}
			m[k] = sub
		}
		m = sub
	}
	m[keys[len(keys)-1]] = v
}

// Check validates the setting's value in p (R-P4): an InvalidArgument
// *Error naming f.Path and the allowed range, or nil.
func (f Field) Check(p *HostPool) error {
	return f.CheckValue(f.Path, p.HostPoolType, f.Value(p))
}

// CheckValue validates v as a value of the setting in a pool of poolType;
// the error names field (f.Path, or the path of a field with the same
// range, such as a host policy's "policy.hostLoadIndexThreshold").
func (f Field) CheckValue(field, poolType string, v any) error {
	switch f.Kind {
	case KindInt:
		n, _ := v.(int)
		return IntRange(field, n, int(f.Min), int(f.Max))
	case KindNumber:
		x, _ := v.(float64)
		if math.IsInf(f.Max, 1) {
			if !(x >= f.Min) { // also refuses NaN
				zero := ""
				if f.Zero != "" {
					zero = fmt.Sprintf(" (0 = %s)", f.Zero)
				}
				return FieldError(field, "must be ≥ %g%s, got %g", f.Min, zero, x)
			}
			return nil
		}
		return floatRange(field, x, f.Min, f.Max)
	case KindName:
		s, _ := v.(string)
		return ValidateName(field, s, int(f.Min), int(f.Max))
	case KindText:
		s, _ := v.(string)
		return textLen(field, s, int(f.Max), f.Multiline)
	case KindEnum:
		s, _ := v.(string)
		return f.checkEnum(field, poolType, s)
	}
	return nil
}

// checkEnum refuses a value not allowed for the pool type, saying which
// values are, and when the value belongs to another pool type, which.
func (f Field) checkEnum(field, poolType, v string) error {
	allowed := f.Values(poolType)
	if slices.Contains(allowed, v) {
		return nil
	}
	restricted := false
	for _, o := range f.Options {
		restricted = restricted || o.PoolTypes != nil
	}
	if !restricted {
		return FieldError(field, "must be one of %s, got %q", strings.Join(allowed, ", "), v)
	}
	want := "one of " + strings.Join(allowed, ", ")
	if len(allowed) == 1 {
		want = allowed[0]
	}
	other := ""
	for _, o := range f.Options {
		if o.Value == v && o.PoolTypes != nil {
			other = fmt.Sprintf(" (%s is for %s pools only)", v, strings.Join(o.PoolTypes, ", "))
		}
	}
	return FieldError(field, "must be %s for a %s host pool%s, got %q", want, poolType, other, v)
}
