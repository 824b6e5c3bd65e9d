package vdibroker

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker/gatewaytoken"
)

// TestValidateHostPool_RP3_RP4 covers the pool checks that depend on other
// fields (the per-field ranges are covered end to end in http/).
func TestValidateHostPool_RP3_RP4(t *testing.T) {
	cases := []struct {
		name     string
		edit     func(p *HostPool)
		field    string // "" = valid
		warnings int
	}{
		{"defaults", func(p *HostPool) {}, "", 0},
		{"R-P3 DepthFirst without a limit warns", func(p *HostPool) { p.LoadBalancerType = DepthFirst }, "", 1},
		{"DepthFirst with a limit", func(p *HostPool) { p.LoadBalancerType = DepthFirst; p.MaxSessionLimit = 10 }, "", 0},
		{"Personal defaults to Persistent", func(p *HostPool) { p.HostPoolType = Personal; p.LoadBalancerType = "" }, "", 0},
		{"Personal Direct", func(p *HostPool) {
			p.HostPoolType, p.LoadBalancerType, p.PersonalDesktopAssignmentType = Personal, MultiplePersistent, Direct
		}, "", 0},
		{"Personal with BreadthFirst", func(p *HostPool) { p.HostPoolType, p.LoadBalancerType = Personal, BreadthFirst }, "loadBalancerType", 0},
		{"Pooled with Direct", func(p *HostPool) { p.PersonalDesktopAssignmentType = Direct }, "personalDesktopAssignmentType", 0},
		{"limit 0", func(p *HostPool) { p.MaxSessionLimit = 0 }, "maxSessionLimit", 0},
		{"description with a newline is fine", func(p *HostPool) { p.Description = "line 1\nline 2" }, "", 0},
		{"friendlyName with a newline", func(p *HostPool) { p.FriendlyName = "a\nb" }, "friendlyName", 0},
		{"512 runes of description", func(p *HostPool) { p.Description = strings.Repeat("é", 512) }, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := NewHostPool("pool01")
			p.LoadBalancerType = BreadthFirst
			tc.edit(p)
			p.FillDefaults()
			w, err := ValidateHostPool(p)
			if got := ErrorField(err); got != tc.field || (tc.field != "" && ErrorCode(err) != EInvalid) {
				t.Fatalf("got %v (field %q), want field %q", err, got, tc.field)
			}
			if len(w) != tc.warnings {
				t.Errorf("warnings %v, want %d", w, tc.warnings)
			}
		})
	}
}

// TestPersistentSharedHostsWarning_RP1: the hosts that keep more than
// one user (one user in two spellings is one) are counted and the first
// SharedHostsNamed named, in the order given.
func TestPersistentSharedHostsWarning_RP1(t *testing.T) {
	host := func(name string, users ...string) *SessionHost { return &SessionHost{Name: name, AssignedUsers: users} }
	shared := func(n int) []*SessionHost {
		out := []*SessionHost{host("solo", "ann")}
		for i := range n {
			out = append(out, host(fmt.Sprintf("d%02d", i+1), "a", "b"))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		hosts []*SessionHost
		want  string // "" = no warning
	}{
		{"none", nil, ""},
		{"one user each, one in two spellings", []*SessionHost{host("d1", "ann"), host("d2", "bo", "BO"), host("d3")}, ""},
		{"one", shared(1), "but 1 session host keeps more than one assigned user (d01):"},
		{"five, all named", shared(5), "but 5 session hosts keep more than one assigned user (d01, d02, d03, d04, d05):"},
		// 12 shared: 5 named, 12-5 = 7 more.
		{"twelve", shared(12), "but 12 session hosts keep more than one assigned user (d01, d02, d03, d04, d05 and 7 more):"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PersistentSharedHostsWarning(tc.hosts)
			if tc.want == "" {
				if got != "" {
					t.Errorf("got %q, want no warning", got)
				}
				return
			}
			if !strings.Contains(got, tc.want) || !strings.Contains(got, "still connects to it") || strings.Contains(got, `"`) {
				t.Errorf("got %q, want it to say %q and what connects do, without a double quote (a Warning header carries it)", got, tc.want)
			}
		})
	}
}

func TestValidateNamesAndAddresses(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"abc", true}, {"a b", true}, {"rdsh-01.contoso.com", true}, {"user@x_y", true},
		{"ab", false}, {" abc", false}, {"abc ", false}, {"a/b", false}, {"a\tb", false}, {"ümlaut", false},
		{strings.Repeat("a", 48), true}, {strings.Repeat("a", 49), false},
	} {
		if err := ValidateName("name", tc.in, MinHostNameLen, MaxHostNameLen); (err == nil) != tc.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"", true}, {"host:3389", true}, {"10.0.0.1:3389", true}, {"[2001:db8::1]:443", true},
		{"host", false}, {"host:0", false}, {"host:65536", false}, {":3389", false}, {"ho st:3389", false},
		{"host:3389\r\nfull address:s:evil", false},
		// A port in digits, five at most (R-GW1: a gateway's token takes
		// no other): no sign, no run of leading zeros.
		{"host:+3389", false}, {"host:003389", false}, {"host:03389", true},
		{strings.Repeat("h", 253) + ":65535", true}, {strings.Repeat("h", 253) + ":0000065535", false},
	} {
		if err := ValidateAddress("address", tc.in); (err == nil) != tc.ok {
			t.Errorf("ValidateAddress(%q) = %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
	if err := ValidateUser("user", "eve\r\nx"); err == nil {
		t.Error("a user name with a line break was accepted (it goes into an .rdp line)")
	}
}

// TestValidateUsersRepeats_RE5: a name listed twice in any case is
// refused, as SameUser compares them (simple case folding: the Kelvin
// sign is a k; ß is not ss), naming the later one, however long the
// list; ValidateUsers finds repeats by FoldUser's keys.
func TestValidateUsersRepeats_RE5(t *testing.T) {
	many := make([]string, 20000)
	for i := range many {
		many[i] = fmt.Sprintf("user%05d@contoso.com", i)
	}
	for _, tc := range []struct {
		name  string
		users []string
		twice string // "" when accepted
	}{
		{"distinct", []string{"alice", "bob"}, ""},
		{"same case", []string{"alice", "bob", "alice"}, "alice"},
		{"ASCII case", []string{"Alice@Contoso.com", "alice@contoso.com"}, "alice@contoso.com"},
		{"Kelvin sign", []string{"\u212aate", "Kate"}, "Kate"},
		{"sharp s apart", []string{"straße", "strasse"}, ""},
		{"many distinct", many, ""},
		{"many, the last a repeat", append(slices.Clone(many), "USER00000@contoso.com"), "USER00000@contoso.com"},
	} {
		err := ValidateUsers("assignedUsers", tc.users)
		switch {
		case tc.twice == "" && err != nil:
			t.Errorf("%s: %v, want accepted", tc.name, err)
		case tc.twice != "" && (ErrorField(err) != "assignedUsers" || !strings.Contains(ErrorMessage(err), fmt.Sprintf("lists %q twice", tc.twice))):
			t.Errorf("%s: %v, want a refusal naming %q twice", tc.name, err, tc.twice)
		}
	}
}

// TestValidateAssignedUsersBound_RPE3: a list past MaxAssignedUsers
// (1,000) is refused when it is longer than the host's stored list (0
// for a new host): one an older release stored longer may stay or
// shrink, not grow.
func TestValidateAssignedUsersBound_RPE3(t *testing.T) {
	for _, c := range []struct {
		name         string
		stored, n    int
		refused      bool
		olderRelease bool // the refusal names the stored list
	}{
		{"a new host at the bound", 0, 1000, false, false},
		{"a new host past it", 0, 1001, true, false},
		{"growing past the bound from within it", 900, 1001, true, false},
		{"growing past the bound from it", 1000, 1001, true, false},
		{"an older release's list kept", 1200, 1200, false, false},
		{"an older release's list shortened, still past the bound", 1200, 1100, false, false},
		{"an older release's list shortened within the bound", 1200, 3, false, false},
		{"an older release's list grown", 1200, 1201, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := &SessionHost{Name: "host01", Address: "host01:3389", Protocols: []string{"RDP"}}
			for i := range c.n {
				h.AssignedUsers = append(h.AssignedUsers, fmt.Sprintf("u%d", i))
			}
			err := ValidateSessionHost(h, c.stored)
			if !c.refused {
				if err != nil {
					t.Fatalf("%d users, %d stored: %v; want accepted", c.n, c.stored, err)
				}
				return
			}
			var ve *Error
			if !errors.As(err, &ve) || ve.Field != "assignedUsers" || !strings.Contains(ve.Message, fmt.Sprintf("0..1000 users, got %d", c.n)) {
				t.Fatalf("%d users, %d stored: %v; want refused naming assignedUsers and 0..1000", c.n, c.stored, err)
			}
			if got := strings.Contains(ve.Message, "older release"); got != c.olderRelease {
				t.Errorf("message %q names the older release: %v, want %v", ve.Message, got, c.olderRelease)
			}
		})
	}
}

// TestHostNameKey_RSEC: the key a host's name is unique by in its pool
// (R-SEC, R-D3): ASCII letters in lower case, one trailing dot dropped.
func TestHostNameKey_RSEC(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"office-01", "office-01"},
		{"OFFICE-01", "office-01"},
		{"Office-01.", "office-01"},
		{"office-01..", "office-01."}, // one dot only: another DNS name
		{"a.b.", "a.b"},
		{"Host@Pool_1 X", "host@pool_1 x"},
		{"...", ".."},
		{"ÖSTEN-01", "Östen-01"}, // only ASCII folds, as SQL's lower() does in the store
	} {
		if got := HostNameKey(c.name); got != c.want {
			t.Errorf("HostNameKey(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}

// TestSameGateway_RGW4: gateway names compare as host names do (R-GW4,
// R-SEC): ASCII case and one trailing dot aside, nothing else folds, so
// a name that only looks alike in Unicode's folding is another gateway.
func TestSameGateway_RGW4(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"rdgw-1", "rdgw-1", true},
		{"rdgw-1", "RDGW-1", true},
		{"RDGW-1.", "rdgw-1", true},
		{"rdgw-1..", "rdgw-1", false}, // one dot only
		{"rdgw-1", "rdgw-2", false},
		{"gw-s", "gw-\u017f", false}, // ſ folds to s in strings.EqualFold, not here
		{"gw-k", "gw-\u212a", false}, // the Kelvin sign likewise
	} {
		if got := SameGateway(c.a, c.b); got != c.want {
			t.Errorf("SameGateway(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestAddressesTakenSignInGatewayTokens_RGW1 (R-GW1): every address
// ValidateAddress takes goes into a gateway access token's host claim:
// a connect through a gateway to a host of such an address is not
// answered Internal for a token the broker cannot sign. Those it refuses
// are the forms the token refuses.
func TestAddressesTakenSignInGatewayTokens_RGW1(t *testing.T) {
	signer, err := gatewaytoken.GenerateSigner("k1")
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("h", 253)
	for _, addr := range []string{"host:3389", "10.0.0.1:1", "[2001:db8::1]:443", "[::ffff:255.255.255.255]:65535", "host:03389",
		long + ":65535", long + ":1", "host:+3389", long + ":065535", "host:0000003389"} {
		c := gatewaytoken.Claims{ID: gatewaytoken.NewID(), User: "alice", Session: "s-1", Pool: "p", Host: addr,
			NotBefore: 1, Expiry: 60}
		_, serr := signer.Sign(c)
		if verr := ValidateAddress("address", addr); verr == nil && serr != nil {
			t.Errorf("address %q is taken, but a token for it is not signed: %v", addr, serr)
		}
	}
}
