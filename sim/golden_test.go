package sim

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestGoldenWorkday: the workday example's summary table and report.json are
// the golden files, and docs/capacity-planning.md shows that very table, so
// the walkthrough never drifts from what the tool prints. After an intended
// change of placement or of the simulator, run go test ./sim -run Golden
// -update and paste the new table into the doc.
func TestGoldenWorkday(t *testing.T) {
	data, _ := Example("workday")
	rep := run(t, parse(t, string(data)))
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	js, err := rep.JSON()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "workday.table.golden", table.Bytes())
	golden(t, "workday.report.golden.json", js)
	doc, err := os.ReadFile("../docs/capacity-planning.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, table.Bytes()) {
		t.Errorf("docs/capacity-planning.md does not show the current workday table; paste it:\n%s", table.Bytes())
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output (run with -update if the change is intended):\n got:\n%s\nwant:\n%s", path, got, want)
	}
}
