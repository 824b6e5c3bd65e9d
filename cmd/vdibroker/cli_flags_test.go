package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNearNames: which names a "did you mean" proposes. Distances are
// edit distances in any case; only the nearest are kept.
func TestNearNames(t *testing.T) {
	formats := []string{"table", "json", "yaml", "tsv"}
	pools := []string{"contosohp01", "contosohp02", "contosohp11", "fabrikam01"}
	tests := []struct {
		name  string
		typed string
		among []string
		want  []string
	}{
		// jsn: json 1 (insert o), tsv 2 (j->t, n->v): json alone.
		{"one_edit", "jsn", formats, []string{"json"}},
		// JSON: json in another case, nearer than any edit.
		{"case", "JSON", formats, []string{"json"}},
		// xml: table 5, json 4, yaml 2 (x->y, insert a), tsv 3: yaml.
		{"two_edits", "xml", formats, []string{"yaml"}},
		// xlsx: table 4, json 4, yaml 4, tsv 3 (x->t, drop l, x->v): nothing.
		{"far", "xlsx", formats, nil},
		// contosohp1: contosohp01 1 (insert 0), contosohp11 1 (insert 1),
		// contosohp02 2: the two at 1, in the list's order.
		{"pool_typo", "contosohp1", pools, []string{"contosohp01", "contosohp11"}},
		// CONTOSOHP01: contosohp01 in another case, though contosohp02
		// and contosohp11 are 1 away in any case.
		{"pool_case", "CONTOSOHP01", pools, []string{"contosohp01"}},
		// fab: a prefix of fabrikam01 (distance 7).
		{"prefix", "fab", pools, []string{"fabrikam01"}},
		// contoso: a prefix of three at distance 4: at most 3 proposed.
		{"prefix_many", "contoso", pools, []string{"contosohp01", "contosohp02", "contosohp11"}},
		// The name itself is not proposed (it would exist).
		{"itself", "fabrikam01", pools, nil},
		// Distance in characters: "é" is one edit from "e", not two.
		{"runes", "cafe01", []string{"café01"}, []string{"café01"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, nearNames(tt.typed, tt.among, 3)); diff != "" {
				t.Errorf("nearNames(%q) (-want +got):\n%s", tt.typed, diff)
			}
		})
	}
}
