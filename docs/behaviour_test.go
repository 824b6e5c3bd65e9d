package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	// citedID is a rule id as the code and the docs cite it: R-C1, R-LI6,
	// R-SEC, R-BF. "R-IDX1..4" cites R-IDX1; "R-G1..R-G5" cites both ends.
	citedID = regexp.MustCompile(`\bR-[A-Z]+[0-9]*\b`)
	// definedID is a rule id where behaviour.md defines it: in bold.
	definedID = regexp.MustCompile(`\*\*(R-[A-Z]+[0-9]*)\*\*`)
)

// definitions returns the rule ids behaviour.md defines, each with how many
// times it is defined.
func definitions(t *testing.T) map[string]int {
	t.Helper()
	b, err := os.ReadFile("behaviour.md")
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]int{}
	for _, m := range definedID.FindAllStringSubmatch(string(b), -1) {
		defs[m[1]]++
	}
	return defs
}

// citedFiles are the files whose rule ids must resolve: Go code, what the
// binary embeds (console templates and scripts, migrations, sim examples)
// and the other documentation.
func citedFile(path string) bool {
	switch filepath.Ext(path) {
	case ".go", ".html", ".js", ".sql", ".yaml", ".md":
		return filepath.Base(path) != "behaviour.md"
	}
	return false
}

// TestRuleIDsAreDefined: every rule id cited anywhere in the repository is
// defined in behaviour.md, so a citation never points at nothing.
func TestRuleIDsAreDefined(t *testing.T) {
	defs := definitions(t)
	cited := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "out") {
				return filepath.SkipDir
			}
			return nil
		}
		if !citedFile(path) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, id := range citedID.FindAllString(line, -1) {
				cited++
				if defs[id] == 0 {
					t.Errorf("%s:%d cites %s, which docs/behaviour.md does not define", filepath.ToSlash(path[len("../"):]), i+1, id)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cited < 100 {
		t.Errorf("found only %d rule id citations in the repository; is the walk looking in the right place?", cited)
	}
}

// specIDs are the rule ids of the behaviour the project set out to build;
// behaviour.md must keep every one (a rule may be reworded, never lost).
var specIDs = strings.Fields(`
	R-P1 R-P2 R-P3 R-P4
	R-H1
	R-C1 R-C2 R-C3 R-C4 R-C5 R-C6 R-C7 R-C8
	R-BF R-BF1 R-BF2 R-DF R-DF1 R-DF2
	R-LI R-LI1 R-LI2 R-LI3 R-LI4 R-LI5 R-LI6
	R-PE R-PE1 R-PE2 R-PE3 R-PE4
	R-S1 R-S2 R-S3 R-S4 R-S5
	R-IDX R-IDX1 R-IDX2 R-IDX3 R-IDX4
	R-G1 R-G2 R-G3 R-G4 R-G5
	R-A1 R-A2 R-A3 R-A4
	R-SEC
	R-D1 R-D2 R-D3
`)

// TestRuleIDsKept: behaviour.md defines every rule id of the specification,
// and each exactly once.
func TestRuleIDsKept(t *testing.T) {
	defs := definitions(t)
	for _, id := range specIDs {
		if defs[id] == 0 {
			t.Errorf("behaviour.md lost rule %s", id)
		}
	}
	for id, n := range defs {
		if n > 1 {
			t.Errorf("behaviour.md defines %s %d times, want once", id, n)
		}
		if !slices.Contains(specIDs, id) {
			t.Logf("behaviour.md defines %s, a rule of its own", id)
		}
	}
}
