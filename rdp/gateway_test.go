package rdp

import (
	"strings"
	"testing"
)

// TestWithGateway (R-GW1): the broker's gateway lines end the file, an
// admin's gateway lines (any case) are replaced, nothing else changes; a
// dry run's file has no token line.
func TestWithGateway(t *testing.T) {
	extra, err := ParseProperties([]byte("gatewayhostname:s:old-gw.example.com\nGatewayUsageMethod:i:2\nredirectprinters:i:0\n"))
	if err != nil {
		t.Fatal(err)
	}
	file := File("10.0.0.12:3389", "alice", extra)
	got := WithGateway(file, "rdgw.example.com", "v1.k1.e30.sig")
	want := strings.Replace(strings.Replace(file, "gatewayhostname:s:old-gw.example.com\r\n", "", 1), "gatewayusagemethod:i:2\r\n", "", 1) +
		"gatewayhostname:s:rdgw.example.com\r\ngatewayusagemethod:i:1\r\ngatewaycredentialssource:i:5\r\ngatewayprofileusagemethod:i:1\r\ngatewayaccesstoken:s:v1.k1.e30.sig\r\n"
	if got != want {
		t.Errorf("WithGateway:\n%s\nwant:\n%s", got, want)
	}
	if !strings.Contains(got, "redirectprinters:i:0\r\n") || !strings.HasPrefix(got, "full address:s:10.0.0.12:3389\r\nusername:s:alice\r\n") {
		t.Errorf("the rest of the file changed:\n%s", got)
	}
	if dry := WithGateway(file, "rdgw.example.com", ""); strings.Contains(dry, "gatewayaccesstoken") || !strings.HasSuffix(dry, "gatewayprofileusagemethod:i:1\r\n") {
		t.Errorf("a dry run's file:\n%s", dry)
	}
	if _, err := ParseProperties([]byte("gatewayaccesstoken:s:x\n")); err == nil || !strings.Contains(err.Error(), "cannot be set here") {
		t.Errorf("an admin's gatewayaccesstoken: %v, want refused", err)
	}
}
