package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/jmespath/go-jmespath"

	"github.com/vdibroker/vdibroker/internal/hidden"
)

// Output formats of --output (SPEC §11). tsv is for scripts: no header, one
// line per item, values separated by tabs.
const (
	formatTable = "table"
	formatJSON  = "json"
	formatYAML  = "yaml"
	formatTSV   = "tsv"
)

// column is one column of a resource's table: its header and the JMESPath
// expression that picks the cell out of one item (the item's JSON, camelCase
// as the API answers).
type column struct {
	Header string
	Path   string
}

// output renders command results as --output and --query ask. The query is
// applied to the JSON form of the result before formatting, as az does, so
// the same expression works for every format.
type output struct {
	Format string // formatTable, formatJSON, formatYAML, formatTSV
	Query  string // JMESPath expression, "" for none
}

// validate checks the flags before anything is sent to the server, so a typo
// in --output or --query changes nothing.
func (o output) validate() error {
	switch o.Format {
	case formatTable, formatJSON, formatYAML, formatTSV:
	default:
		return usageError{fmt.Errorf("--output %q: %s", o.Format, enumReason([]string{formatTable, formatJSON, formatYAML, formatTSV}, o.Format))}
	}
	if o.Query != "" {
		if _, err := jmespath.Compile(o.Query); err != nil {
			return usageError{fmt.Errorf("--query %q: not a valid JMESPath expression: %v", o.Query, err)}
		}
	}
	return nil
}

// print writes v (any value that marshals to JSON) to w. columns is the
// table and tsv layout of one item when no query reshaped the result; after
// a query, columns come from the result itself.
func (o output) print(w io.Writer, v any, columns []column) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	if o.Query != "" {
		data, err := decodeJSON(raw)
		if err != nil {
			return err
		}
		res, err := jmespath.Search(o.Query, data)
		if err != nil {
			return usageError{fmt.Errorf("--query %q: %v", o.Query, err)}
		}
		if raw, err = json.Marshal(res); err != nil {
			return fmt.Errorf("encode query result: %w", err)
		}
		columns = nil
	}
	switch o.Format {
	case formatJSON:
		return writeJSON(w, raw)
	case formatYAML:
		return writeYAML(w, raw)
	}
	data, err := decodeJSON(raw)
	if err != nil {
		return err
	}
	header, rows, err := tabulate(data, columns, o.Query)
	if err != nil {
		return err
	}
	if o.Format == formatTSV {
		return writeTSV(w, rows)
	}
	return writeTable(w, header, rows)
}

func decodeJSON(raw []byte) (any, error) {
	var data any
	if err := json.Unmarshal(raw, &data); err != nil {
		return nil, fmt.Errorf("decode result: %w", err)
	}
	return data, nil
}

// writeJSON indents raw by two spaces, keeping the field order of the API.
func writeJSON(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := io.WriteString(w, escapeJSON(buf.String()))
	return err
}

// escapeJSON writes the terminalUnsafe characters of JSON text js that
// encoding/json (and log/slog's JSON handler) leave raw, DEL, C1, the
// bidi controls and the invisible format characters, as \uXXXX (one
// above U+FFFF, a tag character, as its UTF-16 pair \udb40\udc67: JSON's
// \u takes four digits): inside a string that is the same value, and
// outside strings JSON holds only ASCII, so nothing else is touched. A
// byte that is not UTF-8 (JSON text a server sent) is written as
// \ufffd, the value a JSON decoder reads for it, not raw.
func escapeJSON(js string) string {
	js = escapeInvalid(js, func(b *strings.Builder, _ byte) { b.WriteString(`\ufffd`) })
	return hidden.Escape(js, func(prev, r, next rune) bool { return r >= 0x7f && terminalUnsafe(prev, r, next) },
		func(b *strings.Builder, r rune) {
			if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
				fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
				return
			}
			fmt.Fprintf(b, `\u%04x`, r)
		})
}

// writeYAML converts raw to YAML, keeping the field order of the API.
// A string holding a character a terminal acts on (terminalUnsafe) is
// written double-quoted with escapes, which YAML reads back as the same
// value; the encoder would write it plain, raw.
func writeYAML(w io.Writer, raw []byte) error {
	var v any
	if err := yaml.UnmarshalWithOptions(raw, &v, yaml.UseOrderedMap()); err != nil {
		return fmt.Errorf("encode yaml: %w", err)
	}
	out, err := yaml.MarshalWithOptions(quoteUnsafe(v), yaml.CustomMarshaler[unsafeString](func(s unsafeString) ([]byte, error) {
		return []byte(strconv.Quote(string(s))), nil
	}))
	if err != nil {
		return fmt.Errorf("encode yaml: %w", err)
	}
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	// Map keys are not values: one the API answered with such a character
	// is shown escaped (not the same key to a YAML reader, but never raw).
	_, err = io.WriteString(w, escapeTerminal(string(out), "\n"))
	return err
}

// unsafeString is a string value writeYAML writes quoted.
type unsafeString string

// quoteUnsafe returns v (decoded with yaml.UseOrderedMap) with every
// string value holding a terminalUnsafe character made an unsafeString.
func quoteUnsafe(v any) any {
	switch v := v.(type) {
	case string:
		if hidden.Has(v, terminalUnsafe) {
			return unsafeString(v)
		}
	case yaml.MapSlice:
		for i := range v {
			v[i].Value = quoteUnsafe(v[i].Value)
		}
	case []any:
		for i := range v {
			v[i] = quoteUnsafe(v[i])
		}
	}
	return v
}

// tabulate turns data into a header and rows of cells. A list is one row per
// item, an object one row, a scalar one cell. Given columns pick the cells;
// without them (after --query) the columns are the object's scalar fields,
// ordered as they appear in the query, then by name.
func tabulate(data any, columns []column, query string) (header []string, rows [][]string, err error) {
	items, ok := data.([]any)
	if !ok {
		if data == nil {
			return nil, nil, nil
		}
		items = []any{data}
	}
	if len(items) == 0 && columns == nil {
		return nil, nil, nil // a query's empty result: no columns to name
	}
	// An empty list still has its header (and a table its rule), as
	// docker ps shows one: the list ran and found nothing, which a blank
	// answer does not say. tsv has no header: it prints nothing.
	if columns != nil {
		paths := make([]*jmespath.JMESPath, len(columns))
		for i, c := range columns {
			header = append(header, c.Header)
			paths[i] = jmespath.MustCompile(c.Path)
		}
		for _, it := range items {
			row := make([]string, len(columns))
			for i, p := range paths {
				v, err := p.Search(it)
				if err != nil {
					return nil, nil, fmt.Errorf("table column %s: %w", columns[i].Header, err)
				}
				row[i] = cell(v)
			}
			rows = append(rows, row)
		}
		return header, rows, nil
	}
	return autoTable(items, query)
}

// autoTable builds columns from the items themselves, as az's table output
// does after a query: objects give one column per scalar field (header with
// a capital first letter), lists give Column1..N, scalars one Result column.
func autoTable(items []any, query string) (header []string, rows [][]string, err error) {
	switch first := items[0].(type) {
	case map[string]any:
		keys := objectKeys(items, query)
		if len(keys) == 0 {
			return nil, nil, errors.New("the result has no plain fields to show as a table; use --output json or yaml")
		}
		for _, k := range keys {
			header = append(header, capitalize(k))
		}
		for _, it := range items {
			m, _ := it.(map[string]any)
			row := make([]string, len(keys))
			for i, k := range keys {
				row[i] = cell(m[k])
			}
			rows = append(rows, row)
		}
	case []any:
		n := 0
		for _, it := range items {
			if l, ok := it.([]any); ok && len(l) > n {
				n = len(l)
			}
		}
		for i := range n {
			header = append(header, "Column"+strconv.Itoa(i+1))
		}
		for _, it := range items {
			l, _ := it.([]any)
			row := make([]string, n)
			for i := range l {
				row[i] = cell(l[i])
			}
			rows = append(rows, row)
		}
	default:
		_ = first
		header = []string{"Result"}
		for _, it := range items {
			rows = append(rows, []string{cell(it)})
		}
	}
	return header, rows, nil
}

// objectKeys lists the scalar fields of the items' objects. JMESPath results
// are unordered maps, so the order is the order in which the names appear in
// the query (so "[].{Name:name, Limit:maxSessionLimit}" shows Name first),
// then alphabetical.
func objectKeys(items []any, query string) []string {
	seen := map[string]bool{}
	var keys []string
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			continue
		}
		for k, v := range m {
			if seen[k] || !isScalar(v) {
				continue
			}
			seen[k] = true
			keys = append(keys, k)
		}
	}
	pos := func(k string) int {
		if i := strings.Index(query, k+":"); i >= 0 {
			return i
		}
		if i := strings.Index(query, k); i >= 0 {
			return i
		}
		return len(query) + 1
	}
	sort.Slice(keys, func(i, j int) bool {
		pi, pj := pos(keys[i]), pos(keys[j])
		if pi != pj {
			return pi < pj
		}
		return keys[i] < keys[j]
	})
	return keys
}

func isScalar(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		return false
	case []any:
		for _, e := range v {
			if !isScalar(e) {
				return false
			}
		}
		return true
	default:
		return true
	}
}

func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return strings.ToUpper(string(r)) + s[n:]
}

// cell formats one JSON value for a table or tsv cell: numbers without
// exponent, null as empty, lists of scalars joined by ", ", objects as
// compact JSON.
func cell(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = cell(e)
		}
		return strings.Join(parts, ", ")
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// writeTable writes an aligned table with a dashed rule under the header,
// byte for byte as az's table output (tabulate's "simple" format) in SPEC
// §11: a column is as wide as its longest cell and at least its header plus
// two, its rule is that many dashes, columns are two spaces apart, cells are
// left-aligned and trailing blanks are cut.
//
//	Name         LoadBalancerType    MaxSessionLimit
//	-----------  ------------------  -----------------
//	contosohp01  DepthFirst          10
func writeTable(w io.Writer, header []string, rows [][]string) error {
	if len(header) == 0 {
		return nil
	}
	clean := make([][]string, len(rows))
	for i, r := range rows {
		clean[i] = sanitizeCells(r, " ")
		for j, c := range clean[i] {
			clean[i][j] = tableTime(c)
		}
	}
	rows = clean
	widths := make([]int, len(header))
	for i, h := range header {
		widths[i] = utf8.RuneCountInString(h) + 2
	}
	for _, r := range rows {
		for i, c := range r {
			if n := utf8.RuneCountInString(c); n > widths[i] {
				widths[i] = n
			}
		}
	}
	var b strings.Builder
	line := func(cells []string) {
		var l strings.Builder
		for i, c := range cells {
			if i > 0 {
				l.WriteString("  ")
			}
			l.WriteString(c)
			l.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)))
		}
		b.WriteString(strings.TrimRight(l.String(), " "))
		b.WriteByte('\n')
	}
	line(header)
	rule := make([]string, len(widths))
	for i, n := range widths {
		rule[i] = strings.Repeat("-", n)
	}
	line(rule)
	for _, r := range rows {
		line(r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// tableTime shows a timestamp cell to the second in UTC: a table is read by
// a person, and equal widths keep the columns steady. Other cells are
// returned as they are; json, yaml and tsv keep the full precision.
func tableTime(c string) string {
	if len(c) < 20 || c[10] != 'T' {
		return c
	}
	t, err := time.Parse(time.RFC3339Nano, c)
	if err != nil {
		return c
	}
	return t.UTC().Format(time.RFC3339)
}

// writeTSV writes one line per row, cells separated by tabs, no header.
func writeTSV(w io.Writer, rows [][]string) error {
	var b strings.Builder
	for _, r := range rows {
		b.WriteString(strings.Join(sanitizeCells(r, " "), "\t"))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// sanitizeCells replaces tabs and line breaks inside cells, which would
// break a table's alignment or a tsv line, and escapes every other
// character a terminal acts on (escapeTerminal).
func sanitizeCells(cells []string, with string) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = escapeTerminal(strings.NewReplacer("\t", with, "\r\n", with, "\n", with, "\r", with).Replace(c), "")
	}
	return out
}

// terminalUnsafe reports whether a terminal acts on r (between prev and
// next) rather than shows it, or shows nothing of it: the control
// characters (C0 with tab, line breaks and ESC, which starts every escape
// sequence; DEL; C1 with U+009B, a CSI in one character), the
// bidirectional controls, which reorder what follows them on the line,
// and the characters no one sees (hidden.Char: a zero-width space makes
// "alice" another user who reads the same). Values the CLI prints come
// from hosts, gateways, peers, identity providers and anonymous callers
// (an audit entry's target is the path they asked for), so none may reach
// the terminal raw.
func terminalUnsafe(prev, r, next rune) bool {
	return unicode.IsControl(r) || hidden.Char(prev, r, next)
}

// escapeTerminal writes each terminalUnsafe character of s but those in
// keep as a Go escape (\x1b, \u009b), so the reader sees that it is there,
// and each byte that is not UTF-8 as \x9b: a proxy's answer quoted in an
// error may hold a lone C1 byte, a CSI to a terminal that reads bytes.
func escapeTerminal(s, keep string) string {
	s = hidden.Escape(s, func(prev, r, next rune) bool { return terminalUnsafe(prev, r, next) && !strings.ContainsRune(keep, r) },
		func(b *strings.Builder, r rune) {
			switch {
			case r < utf8.RuneSelf:
				fmt.Fprintf(b, `\x%02x`, r)
			case r > 0xffff: // a tag character: \u takes four digits
				fmt.Fprintf(b, `\U%08x`, r)
			default:
				fmt.Fprintf(b, `\u%04x`, r)
			}
		})
	return escapeInvalid(s, func(b *strings.Builder, c byte) { fmt.Fprintf(b, `\x%02x`, c) })
}

// escapeInvalid returns s with each byte that is not UTF-8 written by
// mark, s itself when it is all UTF-8.
func escapeInvalid(s string, mark func(b *strings.Builder, c byte)) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			mark(&b, s[i])
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
