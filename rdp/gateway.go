package rdp

import (
	"slices"
	"strings"
)

// gatewayProperties are the .rdp properties that route a client through
// an RD gateway. When the broker sends a connect through its gateway
// (R-GW1), its lines replace an admin's (--rdp-defaults) of these names.
var gatewayProperties = []string{"gatewayhostname", "gatewayusagemethod", "gatewaycredentialssource",
	"gatewayprofileusagemethod", "gatewayaccesstoken"}

// WithGateway returns file (an .rdp text of File's, CRLF lines) sent
// through the RD gateway hostName: its gateway lines, an admin's from
// --rdp-defaults among them, replaced by GatewayLines'.
func WithGateway(file, hostName, accessToken string) string {
	lines := strings.SplitAfter(file, "\r\n")
	lines = slices.DeleteFunc(lines, func(l string) bool {
		name, _, _ := strings.Cut(l, ":")
		return l == "" || slices.Contains(gatewayProperties, strings.ToLower(name))
	})
	return strings.Join(lines, "") + GatewayLines(hostName, accessToken)
}

// GatewayLines returns the .rdp lines (CRLF) that send a client through
// the RD gateway hostName with accessToken, as Microsoft's RD Gateway
// deployments write them and FreeRDP 2.11 and mstsc read them: always
// through the gateway (usage method 1, not "detect": the host is not
// reachable without it), the gateway's credential from the access token
// (credentials source 5, so no second prompt for the gateway), and these
// settings rather than the client's own profile. An empty accessToken (a
// dry run, which has no session to sign one for) leaves its line out.
// hostName was validated (vdibroker.ValidateGatewayHost) and a token is
// base64url and dots, so neither can inject a line.
func GatewayLines(hostName, accessToken string) string {
	props := []Property{
		{"gatewayhostname", 's', hostName},
		{"gatewayusagemethod", 'i', "1"},
		{"gatewaycredentialssource", 'i', "5"},
		{"gatewayprofileusagemethod", 'i', "1"},
	}
	if accessToken != "" {
		props = append(props, Property{"gatewayaccesstoken", 's', accessToken})
	}
	var b strings.Builder
	for _, p := range props {
		b.WriteString(p.String() + "\r\n")
	}
	return b.String()
}
