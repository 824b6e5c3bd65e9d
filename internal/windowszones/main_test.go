package main

import (
	"fmt"
	"strings"
	"testing"
)

// fixture is a windowsZones.json of n Windows zones, each with a
// territory 001 entry and a country entry of several zones.
func fixture(n int, extra string) []byte {
	var b strings.Builder
	b.WriteString(`{"supplemental":{"version":{"_cldrVersion":"48"},"windowsZones":{"mapTimezones":[`)
	for i := range n {
		fmt.Fprintf(&b, `{"mapZone":{"_other":"Zone %d Standard Time","_type":"Etc/GMT+%d","_territory":"001"}},`, i, i%12)
		fmt.Fprintf(&b, `{"mapZone":{"_other":"Zone %d Standard Time","_type":"America/A America/B","_territory":"US"}},`, i)
	}
	b.WriteString(extra)
	b.WriteString(`{"mapZone":{"_other":"W. Europe Standard Time","_type":"Europe/Berlin","_territory":"001"}}]}}}`)
	return []byte(b.String())
}

// TestParse: territory 001 gives each Windows name one zone; a name
// without one, or with two, is refused rather than guessed.
func TestParse(t *testing.T) {
	zones, cldr, err := parse(fixture(120, ""))
	if err != nil {
		t.Fatal(err)
	}
	if cldr != "48" || zones["W. Europe Standard Time"] != "Europe/Berlin" || zones["Zone 3 Standard Time"] != "Etc/GMT+3" || len(zones) != 121 {
		t.Errorf("CLDR %q, %d zones, W. Europe %q", cldr, len(zones), zones["W. Europe Standard Time"])
	}
	for name, extra := range map[string]string{
		"no 001":  `{"mapZone":{"_other":"Lost Standard Time","_type":"Asia/Lost","_territory":"XX"}},`,
		"two 001": `{"mapZone":{"_other":"Zone 1 Standard Time","_type":"Etc/GMT","_territory":"001"}},`,
	} {
		if _, _, err := parse(fixture(120, extra)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, _, err := parse(fixture(3, "")); err == nil {
		t.Error("a file of 4 zones was accepted as CLDR's")
	}
	src, err := render("vdibroker", "48", "cldr-core-48.2.0.tgz", zones)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "Unicode CLDR 48") || !strings.Contains(string(src), `"W. Europe Standard Time": "Europe/Berlin",`) {
		t.Errorf("rendered:\n%.400s", src)
	}
}
