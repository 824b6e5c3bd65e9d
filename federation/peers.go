package federation

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/vdibroker/vdibroker"
)

// PeerPolicy says which URLs a pod may call as its peers' (R-G5): the
// federation document names them, and a Contributor writes it, so without
// a policy a Contributor could make the broker request any URL on its
// network (server-side request forgery), the cloud's metadata service and
// the broker's own loopback included.
//
// Without allow patterns (serve without --federation-allow) a peer's URL
// must be https, and the pod never connects to a loopback, link-local
// (169.254.0.0/16, fe80::/10: a cloud's metadata service), unspecified or
// multicast address, whatever name resolves to it. With allow patterns a
// peer's URL must match one of them:
//
//	[scheme://]host[:port]
//
// scheme is http or https (absent: https only); port absent is any port;
// host is a DNS name (exact, without case), *.domain (any name below
// domain), * (any host), an IP address, or a CIDR prefix (10.0.0.0/8). A
// loopback, link-local, unspecified or multicast address is reached only
// through a pattern that names it: an IP or CIDR pattern holding it, or a
// name or *.domain pattern for the name the URL gives (never through *).
// The address a name resolves to is checked when the pod connects, so a
// name that later resolves elsewhere does not reach past the policy.
type PeerPolicy struct {
	allow []peerPattern
}

// peerPattern is one allow pattern.
type peerPattern struct {
	text   string
	scheme string       // "http" or "https"
	port   int          // 0: any
	any    bool         // host *
	suffix string       // *.domain: ".domain"
	name   string       // an exact DNS name, lower case
	prefix netip.Prefix // an IP (a /32 or /128) or a CIDR
}

// ParsePeerPolicy parses allow patterns (serve --federation-allow); none
// is the default policy. A bad pattern is an error naming it.
func ParsePeerPolicy(patterns []string) (*PeerPolicy, error) {
	p := &PeerPolicy{}
	for _, s := range patterns {
		pat, err := parsePeerPattern(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("--federation-allow %q: %w", s, err)
		}
		p.allow = append(p.allow, pat)
	}
	return p, nil
}

func parsePeerPattern(s string) (peerPattern, error) {
	pat := peerPattern{text: s, scheme: "https"}
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		if scheme != "http" && scheme != "https" {
			return pat, fmt.Errorf("scheme must be http or https, got %q", scheme)
		}
		pat.scheme, s = scheme, rest
	}
	if s == "" || strings.ContainsAny(s, "?#@ \\") {
		return pat, fmt.Errorf("want [scheme://]host[:port] with host a name, *.domain, *, an IP address or a CIDR prefix")
	}
	host := s
	if pfx, err := netip.ParsePrefix(s); err == nil {
		pat.prefix = pfx.Masked()
		return pat, nil
	}
	if h, port, err := net.SplitHostPort(s); err == nil {
		n, perr := strconv.Atoi(port)
		if perr != nil || n < 1 || n > 65535 {
			return pat, fmt.Errorf("port must be 1..65535, got %q", port)
		}
		host, pat.port = h, n
	}
	switch {
	case host == "*":
		pat.any = true
	case strings.HasPrefix(host, "*."):
		if !validDNSName(host[2:]) {
			return pat, fmt.Errorf("%q is not a DNS name", host[2:])
		}
		pat.suffix = "." + strings.ToLower(host[2:])
	default:
		if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
			pat.prefix = netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen())
			break
		}
		if !validDNSName(host) {
			return pat, fmt.Errorf("%q is not a DNS name, *.domain, *, an IP address or a CIDR prefix", host)
		}
		pat.name = strings.ToLower(host)
	}
	return pat, nil
}

// validDNSName reports whether s is a host name of letters, digits,
// hyphens and dots (underscores allowed, as some internal zones have).
func validDNSName(s string) bool {
	if s == "" || len(s) > 253 || strings.HasPrefix(s, ".") || strings.Contains(s, "..") {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// String lists the patterns, or says the default.
func (p *PeerPolicy) String() string {
	if len(p.allow) == 0 {
		return "https only, never to loopback, link-local, unspecified or multicast addresses (no --federation-allow)"
	}
	var out []string
	for _, a := range p.allow {
		out = append(out, a.text)
	}
	return "--federation-allow " + strings.Join(out, ", ")
}

// CheckURL checks a peer's URL as the document gives it: an error says
// why the pod will not call it (an InvalidArgument the caller names the
// field of).
func (p *PeerPolicy) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("must be an http:// or https:// URL, got %q", raw)
	}
	if u.User != nil {
		return fmt.Errorf("must not carry a user or password")
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	port := urlPort(u)
	if len(p.allow) == 0 {
		if u.Scheme != "https" {
			return fmt.Errorf("must be https:// (%s)", p)
		}
		if special(host) {
			return fmt.Errorf("names a loopback, link-local, unspecified or multicast host (%s)", p)
		}
		return nil
	}
	for _, a := range p.allow {
		if a.matchesURL(u.Scheme, host, port) && (!special(host) || a.explicit()) {
			return nil
		}
	}
	return fmt.Errorf("%s://%s is not allowed (%s)", u.Scheme, net.JoinHostPort(host, strconv.Itoa(port)), p)
}

// CheckDial checks the address a connection to a peer's URL host is about
// to be made to (ip, the address host resolved to, and port): the check
// of the resolved address, at connection time.
func (p *PeerPolicy) CheckDial(host string, ip netip.Addr, port int) error {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	ip = ip.Unmap()
	if len(p.allow) == 0 {
		if specialIP(ip) {
			return fmt.Errorf("peer %s resolves to %s, a loopback, link-local, unspecified or multicast address (%s)", host, ip, p)
		}
		return nil
	}
	for _, a := range p.allow {
		if a.port != 0 && a.port != port {
			continue
		}
		hostOK := a.any || a.matchesName(host) || (a.prefix.IsValid() && a.prefix.Contains(ip))
		if !hostOK {
			continue
		}
		if !specialIP(ip) || (a.prefix.IsValid() && a.prefix.Contains(ip)) || (a.explicit() && a.matchesName(host)) {
			return nil
		}
	}
	return fmt.Errorf("peer %s resolves to %s, which is not allowed (%s)", host, ip, p)
}

// matchesURL reports whether a URL of scheme, host and port matches.
func (a *peerPattern) matchesURL(scheme, host string, port int) bool {
	if a.scheme != scheme || (a.port != 0 && a.port != port) {
		return false
	}
	if a.any || a.matchesName(host) {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && a.prefix.IsValid() && a.prefix.Contains(ip.Unmap())
}

func (a *peerPattern) matchesName(host string) bool {
	return (a.name != "" && host == a.name) || (a.suffix != "" && strings.HasSuffix(host, a.suffix))
}

// explicit: the pattern names its hosts (not *).
func (a *peerPattern) explicit() bool { return !a.any }

// urlPort is u's port, or its scheme's.
func urlPort(u *url.URL) int {
	if n, err := strconv.Atoi(u.Port()); err == nil {
		return n
	}
	if u.Scheme == "http" {
		return 80
	}
	return 443
}

// special reports whether a URL's host is a special address, or a name
// that always is one (localhost).
func special(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && specialIP(ip.Unmap())
}

// specialIP: loopback, link-local, unspecified or multicast.
func specialIP(ip netip.Addr) bool {
	return ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() ||
		ip.IsMulticast() || ip.IsInterfaceLocalMulticast()
}

// checkPeerURLs checks the URLs of every pod of f but self against p.
func (p *PeerPolicy) checkPeerURLs(f *vdibroker.Federation, self string) error {
	for i, pod := range f.Pods {
		if pod.Name == self {
			continue
		}
		if err := p.CheckURL(pod.URL); err != nil {
			return vdibroker.FieldError(fmt.Sprintf("pods[%d].url", i), "%s", err.Error())
		}
	}
	return nil
}
