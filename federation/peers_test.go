package federation

import (
	"net/netip"
	"strings"
	"testing"
)

// TestPeerPolicy_RSEC: which peer URLs a pod calls, and which addresses
// it connects to, by default and with allow patterns.
func TestPeerPolicy_RSEC(t *testing.T) {
	tests := []struct {
		name  string
		allow []string
		url   string
		ok    bool
	}{
		{"default: https by name", nil, "https://fra1.example.com:8443", true},
		{"default: http", nil, "http://fra1.example.com", false},
		{"default: loopback", nil, "https://127.0.0.1:8443", false},
		{"default: IPv6 loopback", nil, "https://[::1]:8443", false},
		{"default: localhost", nil, "https://localhost", false},
		{"default: metadata service", nil, "https://169.254.169.254", false},
		{"default: private address", nil, "https://10.1.2.3:8443", true},
		{"default: a user in the URL", nil, "https://u:p@fra1.example.com", false},
		{"name", []string{"fra1.example.com"}, "https://FRA1.example.com:443", true},
		{"name, other host", []string{"fra1.example.com"}, "https://ams1.example.com", false},
		{"name, http not allowed", []string{"fra1.example.com"}, "http://fra1.example.com", false},
		{"suffix", []string{"*.pods.example.com"}, "https://ams1.pods.example.com", true},
		{"suffix is below", []string{"*.pods.example.com"}, "https://pods.example.com", false},
		{"port", []string{"https://*.example.com:8443"}, "https://a.example.com:8443", true},
		{"other port", []string{"https://*.example.com:8443"}, "https://a.example.com:9443", false},
		{"CIDR", []string{"10.0.0.0/8"}, "https://10.9.8.7:8443", true},
		{"outside CIDR", []string{"10.0.0.0/8"}, "https://192.168.1.1", false},
		{"loopback named", []string{"http://127.0.0.1"}, "http://127.0.0.1:8080/x", true},
		{"loopback through *", []string{"http://*"}, "http://127.0.0.1:8080", false},
		{"localhost named", []string{"http://localhost"}, "http://localhost:8080", true},
		{"any https host", []string{"*"}, "https://anything.example", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePeerPolicy(tt.allow)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.CheckURL(tt.url); (err == nil) != tt.ok {
				t.Errorf("CheckURL(%q) = %v, want ok %v", tt.url, err, tt.ok)
			}
		})
	}
}

// TestPeerPolicyDial_RSEC: the address a name resolves to is checked when
// the pod connects.
func TestPeerPolicyDial_RSEC(t *testing.T) {
	loop, private, meta := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("169.254.169.254")
	def, _ := ParsePeerPolicy(nil)
	star, _ := ParsePeerPolicy([]string{"http://*"})
	named, _ := ParsePeerPolicy([]string{"http://vm"})
	cidr, _ := ParsePeerPolicy([]string{"10.0.0.0/8"})
	tests := []struct {
		name string
		p    *PeerPolicy
		host string
		ip   netip.Addr
		port int
		ok   bool
	}{
		{"default: a name resolving to loopback", def, "fra1.example.com", loop, 443, false},
		{"default: to the metadata service", def, "fra1.example.com", meta, 443, false},
		{"default: to a private address", def, "fra1.example.com", private, 443, true},
		{"*: a name resolving to loopback", star, "vm", loop, 80, false},
		{"the name, resolving to loopback", named, "vm", loop, 80, true},
		{"CIDR: inside", cidr, "10.1.2.3", private, 443, true},
		{"CIDR: a name resolving outside", cidr, "peer", loop, 443, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.p.CheckDial(tt.host, tt.ip, tt.port); (err == nil) != tt.ok {
				t.Errorf("CheckDial(%s, %s) = %v, want ok %v", tt.host, tt.ip, err, tt.ok)
			}
		})
	}
}

// TestParsePeerPolicyRefuses: bad patterns name themselves.
func TestParsePeerPolicyRefuses(t *testing.T) {
	for _, bad := range []string{"", "ftp://x", "x:0", "x:70000", "https://x/path", "a b", "user@host", "*.", "*.a..b", "300.1.1.1/8"} {
		if _, err := ParsePeerPolicy([]string{bad}); err == nil || !strings.Contains(err.Error(), "--federation-allow") {
			t.Errorf("ParsePeerPolicy(%q) = %v, want an error naming --federation-allow", bad, err)
		}
	}
}

// FuzzPeerPolicy: any pattern either fails to parse or yields a policy
// that checks any URL and address without panicking, and never lets a
// default-policy URL over plain http through.
func FuzzPeerPolicy(f *testing.F) {
	// The patterns of the docs, odd ones, and URLs to check.
	f.Add("https://*.pods.example.com:8443", "https://a.pods.example.com:8443", "10.0.0.1", 8443)
	f.Add("10.0.0.0/8", "https://10.1.2.3", "10.1.2.3", 443)
	f.Add("http://127.0.0.1", "http://127.0.0.1:8080/x", "127.0.0.1", 8080)
	f.Add("[::1]:8443", "https://[::1]:8443", "::1", 8443)
	f.Add("*", "https://u:p@x", "169.254.169.254", 443)
	f.Fuzz(func(t *testing.T, pattern, url, ip string, port int) {
		if def, _ := ParsePeerPolicy(nil); strings.HasPrefix(url, "http://") && def.CheckURL(url) == nil {
			t.Fatalf("the default policy lets %q through", url)
		}
		p, err := ParsePeerPolicy([]string{pattern})
		if err != nil {
			return
		}
		_ = p.CheckURL(url)
		_ = p.String()
		if addr, err := netip.ParseAddr(ip); err == nil {
			_ = p.CheckDial("peer.example.com", addr, port)
		}
	})
}
