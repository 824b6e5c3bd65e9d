package vdibroker

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Limits of the fields of SPEC §2, §3 and §9. The host pool settings'
// ranges and defaults are PoolFields' (fields.go), which names the pool
// constants below; read them through it (Field.Range, Field.Default) rather
// than from here.
const (
	MinPoolNameLen = 3
	MaxPoolNameLen = 64
	MinHostNameLen = 3
	MaxHostNameLen = 48
	MaxTextLen     = 512 // description, friendlyName
	MaxUserLen     = 256
	MaxMessageLen  = 4096

	MinHeartbeatTimeoutSeconds     = 10
	MaxHeartbeatTimeoutSeconds     = 3600
	MinPendingTimeoutSeconds       = 10
	MaxPendingTimeoutSeconds       = 3600
	MaxDisconnectedTimeoutMinutes  = 10080
	MaxSessionLimitMinutes         = 10080 // idle and active session limits (a week)
	MaxGatewayHostLen              = 260   // a DNS name and a port
	DefaultHeartbeatTimeoutSeconds = 90
	DefaultPendingTimeoutSeconds   = 300

	MinRegistrationTokenSeconds = 3600    // 1 hour
	MaxRegistrationTokenSeconds = 2332800 // 27 days
	MaxRegistrationTokenHosts   = 100000  // a registration token's maxHosts (0: no limit)
	MinTokenSeconds             = 60
	MaxTokenSeconds             = 315360000 // 10 years
)

// Protocols a session host may offer (SPEC §3).
var Protocols = []string{"RDP", "PCoIP", "Blast"}

// DepthFirstWarning is the warning of R-P3.
const DepthFirstWarning = "loadBalancerType DepthFirst with maxSessionLimit 999999 fills one host before the next gets any session: depth-first needs a real maxSessionLimit"

// SharedHostsNamed is how many host names PersistentSharedHostsWarning
// names at most: the count says how many there are.
const SharedHostsNamed = 5

// PersistentSharedHostsWarning is the warning of a write that changed a
// Personal pool's loadBalancerType from MultiplePersistent to Persistent
// (R-P1) while some of its hosts, given in query order, keep more than
// one assigned user (the same user in two spellings counts once, as
// placement matches users); "" when none does. It names the first
// SharedHostsNamed such hosts and says what connects do with them.
func PersistentSharedHostsWarning(hosts []*SessionHost) string {
	var shared []string
	for _, h := range hosts {
		if distinctUsers(h.AssignedUsers) > 1 {
			shared = append(shared, h.Name)
		}
	}
	if len(shared) == 0 {
		return ""
	}
	names := strings.Join(shared[:min(len(shared), SharedHostsNamed)], ", ")
	if more := len(shared) - SharedHostsNamed; more > 0 {
		names += fmt.Sprintf(" and %d more", more)
	}
	what, verb := "session host", "keeps"
	if len(shared) > 1 {
		what, verb = "session hosts", "keep"
	}
	return fmt.Sprintf("loadBalancerType Persistent gives each host one user, but %d %s %s more than one assigned user (%s): "+
		"every user assigned to such a host still connects to it, several at once up to maxSessionLimit, "+
		"and a user assigned to several hosts gets the first in name order that can take a session, whatever sessionHost the connect names; "+
		"leave one user on each host (sessionhost update --assigned-user) or set loadBalancerType MultiplePersistent again",
		len(shared), what, verb, names)
}

// distinctUsers counts users as placement tells them apart (FoldUser).
func distinctUsers(users []string) int {
	if len(users) < 2 {
		return len(users)
	}
	seen := make(map[string]struct{}, len(users))
	for _, u := range users {
		seen[FoldUser(u)] = struct{}{}
	}
	return len(seen)
}

// NewHostPool returns a pool named name with every §2 and §6 default of
// PoolFields set except loadBalancerType, which depends on the pool type and
// is filled by FillDefaults once the type is known. Decode a PUT body onto
// it, then call FillDefaults and ValidateHostPool.
func NewHostPool(name string) *HostPool {
	p := &HostPool{}
	for _, f := range poolFields {
		if f.Default != nil {
			_ = f.Set(p, f.Default)
		}
	}
	p.HostPoolType = mustField("hostPoolType").DefaultFor("").(string)
	p.PersonalDesktopAssignmentType = mustField("personalDesktopAssignmentType").DefaultFor(p.HostPoolType).(string)
	p.Name = name
	return p
}

// FillDefaults sets the defaults that depend on other fields: each empty
// enum becomes its default for the pool type (hostPoolType first, so an
// empty loadBalancerType becomes BreadthFirst for Pooled and Persistent for
// Personal).
func (p *HostPool) FillDefaults() {
	for _, f := range poolFields {
		if f.Kind == KindEnum && f.Value(p) == "" {
			_ = f.Set(p, f.DefaultFor(p.HostPoolType))
		}
	}
}

// ValidateHostPool checks every field of SPEC §2 and §6 (R-P4) against
// PoolFields, in its order. The error is an InvalidArgument *Error naming
// the first bad field and its allowed range. Warnings are the
// accepted-but-doubtful settings of R-P3.
func ValidateHostPool(p *HostPool) (warnings []string, err error) {
	for _, f := range poolFields {
		if err := f.Check(p); err != nil {
			return nil, err
		}
	}
	if err := ValidateGatewayHost("gatewayHostName", p.GatewayHostName); err != nil {
		return nil, err
	}
	if p.HostPoolType == Personal && p.LoadBalancerType == MultiplePersistent && p.PersonalDesktopAssignmentType != Direct {
		// R-PE3, as AVD requires: several desktops per user are the
		// admin's to assign.
		return nil, FieldError("personalDesktopAssignmentType", "must be Direct with loadBalancerType MultiplePersistent (R-PE3: an admin assigns each user's hosts), got %q", p.PersonalDesktopAssignmentType)
	}
	if p.LoadBalancerType == DepthFirst && p.MaxSessionLimit == NoSessionLimit {
		warnings = append(warnings, DepthFirstWarning) // R-P3
	}
	return warnings, nil
}

// ValidateGatewayHost checks an RD gateway's name as clients reach it: a
// DNS name or IP address, with a port or without (443). Empty is allowed.
func ValidateGatewayHost(field, s string) error {
	if s == "" {
		return nil
	}
	given := s
	if _, _, err := net.SplitHostPort(s); err != nil {
		if ip := net.ParseIP(s); ip != nil && ip.To4() == nil {
			s = "[" + s + "]"
		}
		s += ":443"
	}
	if err := ValidateAddress(field, s); err != nil {
		return FieldError(field, "must be a DNS name or IP address, optionally with :port (for example rdgw.example.com), at most %d characters, got %q", MaxGatewayHostLen, given)
	}
	return nil
}

// ValidateLoadBalancing checks the §6 ranges of PoolFields; fields are
// named loadBalancing.<field>.
func ValidateLoadBalancing(lb *LoadBalancing) error {
	p := &HostPool{LoadBalancing: *lb}
	for _, f := range poolFields {
		if strings.HasPrefix(f.Path, "loadBalancing.") {
			if err := f.Check(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// ValidateHostPolicy checks a host's own thresholds (R-LI5) with the ranges
// of the pool settings they override; fields are named prefix+<field>.
func ValidateHostPolicy(prefix string, p *HostPolicy) error {
	if p == nil {
		return nil
	}
	for _, c := range []struct {
		v    *int
		pool string
	}{
		{p.HostLoadIndexThreshold, "loadBalancing.hostLoadIndexThreshold"},
		{p.HostConnectingSessionThreshold, "loadBalancing.hostConnectingSessionThreshold"},
	} {
		if c.v == nil {
			continue
		}
		f := mustField(c.pool)
		if err := f.CheckValue(prefix+f.Key(), "", *c.v); err != nil {
			return err
		}
	}
	return nil
}

// ValidateSessionHost checks a host's admin fields (SPEC §3): name, address,
// protocols and assigned users. Runtime fields are not the caller's to set.
// stored is how many assignedUsers the host has as stored (0 for a new
// host): a list past MaxAssignedUsers is refused only when it is longer
// than that (R-PE3), so a host an older release stored with more can
// still be written (drained above all) while its list stays or shrinks.
func ValidateSessionHost(h *SessionHost, stored int) error {
	if err := ValidateName("name", h.Name, MinHostNameLen, MaxHostNameLen); err != nil {
		return err
	}
	if err := ValidateAddress("address", h.Address); err != nil {
		return err
	}
	if err := ValidateProtocols("protocols", h.Protocols); err != nil {
		return err
	}
	return ValidateAssignedUsers(h.AssignedUsers, stored)
}

// ValidateAssignedUsers checks a host's assignedUsers, users, where the
// host has stored of them as stored (0 for a new host): a list past
// MaxAssignedUsers is refused only when it is longer than that (R-PE3).
func ValidateAssignedUsers(users []string, stored int) error {
	if n := len(users); n > MaxAssignedUsers && n > stored {
		if stored > MaxAssignedUsers {
			return FieldError("assignedUsers", "must list 0..%d users, got %d (the host has %d, stored by an older release: its list may stay or shrink, not grow)",
				MaxAssignedUsers, n, stored)
		}
		return FieldError("assignedUsers", "must list 0..%d users, got %d", MaxAssignedUsers, n)
	}
	return ValidateUsers("assignedUsers", users)
}

// MaxAssignedUsers bounds a host's assignedUsers (R-PE3): a connect in a
// Personal pool reads every host's list for the user, and a Contributor
// scoped to the pool writes it, otherwise bounded only by the body. A
// list an older release stored past it is kept (ValidateSessionHost).
const MaxAssignedUsers = 1000

// ValidateName checks a pool or host name: min..max characters of
// A-Za-z0-9@._- and space, not starting or ending with a space (SPEC §2, §3).
func ValidateName(field, s string, min, max int) error {
	if len(s) < min || len(s) > max {
		return FieldError(field, "must be %d..%d characters of A-Za-z0-9@._- and space, got %d", min, max, len(s))
	}
	for _, r := range s {
		if !nameChar(r) {
			return FieldError(field, "must be %d..%d characters of A-Za-z0-9@._- and space; %q is not allowed", min, max, r)
		}
	}
	if s[0] == ' ' || s[len(s)-1] == ' ' {
		return FieldError(field, "must not start or end with a space")
	}
	return nil
}

func nameChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
		r == '@' || r == '.' || r == '_' || r == '-' || r == ' '
}

// HostNameKey is what a session host's name is compared by for its
// uniqueness in its pool: its ASCII letters in lower case, one trailing
// dot dropped, as Windows and DNS compare host names (OFFICE-01 and
// office-01. are office-01). The store's unique index is over the same
// key (store/migrations, 00077); only ASCII folds, as SQL's lower() does
// there.
func HostNameKey(name string) string {
	name = strings.TrimSuffix(name, ".")
	b := []byte(name)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// ValidateAddress checks a host:port address a client can connect to: a DNS
// name or IP address (IPv6 in brackets) and a port 1..65535. Empty is allowed
// (the host has not registered yet; the client then uses the host name).
func ValidateAddress(field, addr string) error {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return FieldError(field, "must be host:port (for example rdsh01.example.com:3389), got %q", addr)
	}
	// Digits alone, at most five: Atoi also takes a sign ("+3389") and
	// any number of leading zeros, which no RDP client reads as a port
	// and which a gateway's access token refuses (its host claim is a
	// 253-byte name, a colon and five digits at most, R-GW1).
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return FieldError(field, "port must be 1..65535, got %q", port)
	}
	if len(port) > 5 || strings.IndexFunc(port, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return FieldError(field, "port must be 1..65535 in at most five digits, without a sign, got %q", port)
	}
	if len(host) > 253 {
		return FieldError(field, "host must be at most 253 characters")
	}
	if net.ParseIP(host) != nil {
		return nil
	}
	for _, r := range host {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return FieldError(field, "host must be a DNS name or IP address; %q is not allowed", r)
		}
	}
	return nil
}

// ValidateProtocols checks that every protocol is one of RDP, PCoIP, Blast,
// without repeats.
func ValidateProtocols(field string, ps []string) error {
	for i, p := range ps {
		if !slices.Contains(Protocols, p) {
			return FieldError(field, "must be a subset of %s, got %q", strings.Join(Protocols, ", "), p)
		}
		if slices.Contains(ps[:i], p) {
			return FieldError(field, "lists %q twice", p)
		}
	}
	return nil
}

// ValidateUsers checks a list of user names (each as ValidateUser), without
// repeats in any case (R-E5). Repeats are found by their folded keys
// (FoldUser, equal exactly when SameUser), not by comparing each name
// with every one before it: a host's assignedUsers has no bound but the
// body's, whose 100,000 names took minutes of CPU compared pairwise.
func ValidateUsers(field string, users []string) error {
	seen := make(map[string]bool, len(users))
	for i, u := range users {
		if err := ValidateUser(fmt.Sprintf("%s[%d]", field, i), u); err != nil {
			return err
		}
		k := FoldUser(u)
		if seen[k] {
			return FieldError(field, "lists %q twice", u)
		}
		seen[k] = true
	}
	return nil
}

// ValidateUser checks a user name: 1..256 characters, no control characters
// (it ends up in an .rdp file line) and no leading or trailing space.
func ValidateUser(field, u string) error {
	if u == "" {
		return FieldError(field, "is required (1..%d characters)", MaxUserLen)
	}
	return ValidateText(field, u, MaxUserLen)
}

// ValidateText checks free text: at most max characters, no control
// characters, no leading or trailing space.
func ValidateText(field, s string, max int) error {
	if err := textLen(field, s, max, false); err != nil {
		return err
	}
	if strings.TrimSpace(s) != s {
		return FieldError(field, "must not start or end with white space")
	}
	return nil
}

// IntRange returns an InvalidArgument error naming field and min..max unless
// min <= v <= max.
func IntRange(field string, v, min, max int) error {
	if v < min || v > max {
		return FieldError(field, "must be %d..%d, got %d", min, max, v)
	}
	return nil
}

func floatRange(field string, v, min, max float64) error {
	if !(v >= min && v <= max) { // also refuses NaN
		return FieldError(field, "must be %g..%g, got %g", min, max, v)
	}
	return nil
}

func floatMin(field string, v float64) error {
	if !(v >= 0) {
		return FieldError(field, "must be ≥ 0 (0 = not used), got %g", v)
	}
	return nil
}

func oneOf(field, v string, allowed ...string) error {
	if !slices.Contains(allowed, v) {
		return FieldError(field, "must be one of %s, got %q", strings.Join(allowed, ", "), v)
	}
	return nil
}

// textLen refuses more than max characters and control characters other
// than tab (and line breaks when multiline).
func textLen(field, s string, max int, multiline bool) error {
	if n := len([]rune(s)); n > max {
		return FieldError(field, "must be at most %d characters, got %d", max, n)
	}
	for _, r := range s {
		if unicode.IsControl(r) && r != '\t' && !(multiline && (r == '\n' || r == '\r')) {
			return FieldError(field, "must not contain control characters")
		}
	}
	return nil
}

// ValidateMetrics checks an agent's metrics sample: percentages 0..100,
// queue and latencies ≥ 0. A custom load value above 100 is capped, a
// negative one means "no valid value" (R-IDX3), so neither is refused.
func ValidateMetrics(field string, m *Metrics) error {
	if m == nil {
		return nil
	}
	checks := []error{
		floatRange(field+".cpuPercent", m.CPUPercent, 0, 100),
		floatRange(field+".memoryPercent", m.MemoryPercent, 0, 100),
		floatMin(field+".diskQueueLength", m.DiskQueueLength),
		floatMin(field+".diskReadLatencyMs", m.DiskReadLatencyMs),
		floatMin(field+".diskWriteLatencyMs", m.DiskWriteLatencyMs),
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	return nil
}

// MaxHeartbeatSessions and MaxHeartbeatResults bound one heartbeat:
// a host reporting tens of thousands of sessions or results would make
// one write of the shared group commit stall every connect.
const (
	MaxHeartbeatSessions = 2000
	MaxHeartbeatResults  = 200
)

// ValidateHeartbeat checks an agent heartbeat body (SPEC §9): metrics, the
// reported sessions (id, user, state Active or Disconnected), the policy,
// the command results, within the caps above.
func ValidateHeartbeat(hb *HeartbeatRequest) error {
	if err := ValidateMetrics("metrics", hb.Metrics); err != nil {
		return err
	}
	if err := ValidateHostPolicy("policy.", hb.Policy); err != nil {
		return err
	}
	if len(hb.Sessions) > MaxHeartbeatSessions {
		return FieldError("sessions", "must hold at most %d sessions, got %d", MaxHeartbeatSessions, len(hb.Sessions))
	}
	if len(hb.Results) > MaxHeartbeatResults {
		return FieldError("results", "must hold at most %d command results, got %d (send the rest with the next heartbeat)", MaxHeartbeatResults, len(hb.Results))
	}
	for i, s := range hb.Sessions {
		f := fmt.Sprintf("sessions[%d]", i)
		if err := agentID(f+".id", s.ID); err != nil {
			return err
		}
		if err := ValidateUser(f+".user", s.User); err != nil {
			return err
		}
		if err := oneOf(f+".state", s.State, StateActive, StateDisconnected); err != nil {
			return err
		}
	}
	for i, r := range hb.Results {
		f := fmt.Sprintf("results[%d]", i)
		if err := agentID(f+".id", r.ID); err != nil {
			return err
		}
		if err := textLen(f+".message", r.Message, MaxTextLen, false); err != nil {
			return err
		}
	}
	return textLen("healthError", hb.HealthError, MaxTextLen, false)
}

// agentID checks an id a host or a gateway reports (a session's, a
// command's, a tunnel's token id): 1..MaxUserLen bytes without control
// characters. The broker stores a host's session ids, answers them
// (agentSessionId) and records them, and a gateway's session ids, in
// audit entries; a control character there would reach an admin's
// terminal (R-SEC).
func agentID(field, id string) error {
	if id == "" || len(id) > MaxUserLen {
		return FieldError(field, "is required (1..%d characters, no control characters)", MaxUserLen)
	}
	if strings.IndexFunc(id, unicode.IsControl) >= 0 {
		return FieldError(field, "must be 1..%d characters without control characters", MaxUserLen)
	}
	return nil
}

// ValidateRegister checks an agent registration body (SPEC §9). The token
// itself is checked by the store.
func ValidateRegister(req *RegisterRequest) error {
	if req.Token == "" {
		return FieldError("token", "is required (a registration token of the host pool)")
	}
	if err := ValidateName("hostName", req.HostName, MinHostNameLen, MaxHostNameLen); err != nil {
		return err
	}
	if err := ValidateAddress("address", req.Address); err != nil {
		return err
	}
	if err := ValidateProtocols("protocols", req.Protocols); err != nil {
		return err
	}
	return ValidateHostPolicy("policy.", req.Policy)
}
