package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

type outItem struct {
	Name             string   `json:"name"`
	LoadBalancerType string   `json:"loadBalancerType"`
	MaxSessionLimit  int      `json:"maxSessionLimit"`
	Drain            bool     `json:"drain"`
	Users            []string `json:"users"`
	Nested           struct {
		CPU float64 `json:"cpu"`
	} `json:"nested"`
}

var outColumns = []column{
	{"Name", "name"},
	{"LoadBalancerType", "loadBalancerType"},
	{"MaxSessionLimit", "maxSessionLimit"},
}

func render(t *testing.T, o output, v any, cols []column) string {
	t.Helper()
	var buf bytes.Buffer
	if err := o.print(&buf, v, cols); err != nil {
		t.Fatalf("print: %v", err)
	}
	return buf.String()
}

// TestTableSPEC11 checks the table layout byte for byte against SPEC §11.
func TestTableSPEC11(t *testing.T) {
	item := outItem{Name: "contosohp01", LoadBalancerType: "DepthFirst", MaxSessionLimit: 10}
	got := render(t, output{Format: formatTable}, item, outColumns)
	want := "" +
		"Name         LoadBalancerType    MaxSessionLimit\n" +
		"-----------  ------------------  -----------------\n" +
		"contosohp01  DepthFirst          10\n"
	if got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

func TestTableWidths(t *testing.T) {
	tests := []struct {
		name   string
		header []string
		rows   [][]string
		want   string
	}{
		{
			// Column 1: header 1+2=3 < longest cell 5 -> 5. Column 2: header
			// 2+2=4 > cells -> 4. Trailing blanks cut.
			name:   "cell wider than header",
			header: []string{"A", "BB"},
			rows:   [][]string{{"abcde", "x"}, {"ab", ""}},
			want:   "A      BB\n-----  ----\nabcde  x\nab\n",
		},
		{
			name:   "no rows still prints the header",
			header: []string{"Name"},
			want:   "Name\n------\n",
		},
		{
			name:   "tabs and newlines in cells do not break alignment",
			header: []string{"Message", "N"},
			rows:   [][]string{{"a\tb\nc", "1"}},
			want:   "Message    N\n---------  ---\na b c      1\n",
		},
		{
			// Times to the second in UTC, so the column is as wide on every row.
			name:   "times",
			header: []string{"CreateTime"},
			rows:   [][]string{{"2026-11-29T13:40:19.123456789Z"}, {"2026-11-29T14:40:19+01:00"}, {"2026-11-29Tnope"}},
			want:   "CreateTime\n--------------------\n2026-11-29T13:40:19Z\n2026-11-29T13:40:19Z\n2026-11-29Tnope\n",
		},
		{
			// Width counts runes, not bytes: "ü" is one column.
			name:   "unicode",
			header: []string{"U", "V"},
			rows:   [][]string{{"müller", "1"}},
			want:   "U       V\n------  ---\nmüller  1\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := writeTable(&buf, tt.header, tt.rows); err != nil {
				t.Fatal(err)
			}
			if got := buf.String(); got != tt.want {
				t.Errorf("got:\n%q\nwant:\n%q", got, tt.want)
			}
		})
	}
}

func TestOutputFormats(t *testing.T) {
	items := []outItem{
		{Name: "hp1", LoadBalancerType: "BreadthFirst", MaxSessionLimit: 999999, Users: []string{"a", "b"}},
		{Name: "hp2", LoadBalancerType: "DepthFirst", MaxSessionLimit: 10, Drain: true},
	}
	items[0].Nested.CPU = 12.5
	tests := []struct {
		name string
		out  output
		cols []column
		want string
	}{
		{
			name: "table list",
			out:  output{Format: formatTable},
			cols: outColumns,
			want: "Name    LoadBalancerType    MaxSessionLimit\n" +
				"------  ------------------  -----------------\n" +
				"hp1     BreadthFirst        999999\n" +
				"hp2     DepthFirst          10\n",
		},
		{
			name: "tsv has no header",
			out:  output{Format: formatTSV},
			cols: outColumns,
			want: "hp1\tBreadthFirst\t999999\nhp2\tDepthFirst\t10\n",
		},
		{
			name: "json keeps the API's field order",
			out:  output{Format: formatJSON},
			want: `[
  {
    "name": "hp1",
    "loadBalancerType": "BreadthFirst",
    "maxSessionLimit": 999999,
    "drain": false,
    "users": [
      "a",
      "b"
    ],
    "nested": {
      "cpu": 12.5
    }
  },
  {
    "name": "hp2",
    "loadBalancerType": "DepthFirst",
    "maxSessionLimit": 10,
    "drain": true,
    "users": null,
    "nested": {
      "cpu": 0
    }
  }
]
`,
		},
		{
			name: "yaml keeps the API's field order",
			out:  output{Format: formatYAML, Query: "[0]"},
			// After a query the JSON is re-encoded from a map: keys sorted.
			want: "drain: false\nloadBalancerType: BreadthFirst\nmaxSessionLimit: 999999\nname: hp1\nnested:\n  cpu: 12.5\nusers:\n- a\n- b\n",
		},
		{
			name: "query before table: columns from the result, in query order",
			out:  output{Format: formatTable, Query: "[].{Pool:name, Limit:maxSessionLimit, Drain:drain}"},
			cols: outColumns,
			want: "Pool    Limit    Drain\n------  -------  -------\nhp1     999999   false\nhp2     10       true\n",
		},
		{
			name: "query to a list of strings, tsv: one per line",
			out:  output{Format: formatTSV, Query: "[?maxSessionLimit < `100`].name"},
			cols: outColumns,
			want: "hp2\n",
		},
		{
			name: "query to a scalar, json",
			out:  output{Format: formatJSON, Query: "length(@)"},
			want: "2\n",
		},
		{
			name: "query with no match, table prints nothing",
			out:  output{Format: formatTable, Query: "[?name=='nope']"},
			want: "",
		},
		{
			name: "auto table skips nested objects, joins lists",
			out:  output{Format: formatTable, Query: "[0]"},
			want: "Drain    LoadBalancerType    MaxSessionLimit    Name    Users\n" +
				"-------  ------------------  -----------------  ------  -------\n" +
				"false    BreadthFirst        999999             hp1     a, b\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := render(t, tt.out, items, tt.cols); got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestYAMLOrder(t *testing.T) {
	got := render(t, output{Format: formatYAML}, outItem{Name: "hp1", MaxSessionLimit: 3}, nil)
	if !strings.HasPrefix(got, "name: hp1\nloadBalancerType: \"\"\nmaxSessionLimit: 3\n") {
		t.Errorf("yaml does not keep field order:\n%s", got)
	}
}

func TestOutputValidate(t *testing.T) {
	tests := []struct {
		name string
		out  output
		ok   bool
	}{
		{"table", output{Format: formatTable}, true},
		{"tsv with query", output{Format: formatTSV, Query: "[].name"}, true},
		{"unknown format", output{Format: "xml"}, false},
		{"bad query", output{Format: formatJSON, Query: "[?name=="}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.out.validate()
			if tt.ok != (err == nil) {
				t.Fatalf("validate() = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.As(err, new(usageError)) {
				t.Errorf("error %v is not a usage error (exit 2)", err)
			}
		})
	}
}

// An empty list as a table is its header and rule alone (the list ran and
// found nothing); as tsv nothing; as json [].
func TestOutputEmptyList(t *testing.T) {
	for _, tt := range []struct {
		format, want string
	}{
		{formatTable, "Name    LoadBalancerType    MaxSessionLimit\n------  ------------------  -----------------\n"},
		{formatTSV, ""},
		{formatJSON, "[]\n"},
	} {
		if got := render(t, output{Format: tt.format}, []outItem{}, outColumns); got != tt.want {
			t.Errorf("%s of an empty list:\n%q\nwant:\n%q", tt.format, got, tt.want)
		}
	}
}
