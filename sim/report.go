package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
)

// JSON returns report.json's bytes: indented, fields in a fixed order, a
// final newline. The same report always gives the same bytes.
func (rep *Report) JSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return nil, fmt.Errorf("encode report: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteFiles writes DIR/report.json, unless noPlots the plots, and
// DIR/index.html showing the table and the plots together; it creates dir
// if needed.
func (rep *Report) WriteFiles(dir string, noPlots bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	data, err := rep.JSON()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), data, 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	var plots []plotFile
	if !noPlots {
		if plots, err = rep.writePlots(dir); err != nil {
			return err
		}
	}
	return rep.writeIndex(dir, plots)
}

// indexPage is DIR/index.html: the summary table and every plot on one
// page, the trade-off first, each result's sessions and CPU side by side.
var indexPage = template.Must(template.New("index").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>vdibroker sim report</title>
<style>
body{font-family:system-ui,sans-serif;margin:24px;color:#1c2333}
table{border-collapse:collapse;margin:8px 0 24px}th,td{padding:4px 10px;border-bottom:1px solid #e3e7ef;text-align:right}
th:first-child,td:first-child{text-align:left}th{font-size:12px;color:#667085}
.plots{display:grid;grid-template-columns:1fr 1fr;gap:16px}figure{margin:0}img{width:100%;border:1px solid #e3e7ef}
figcaption{font-size:13px;color:#667085}.wide{grid-column:1/-1;max-width:1000px}
</style></head><body>
<h1>Simulation report</h1>
<p>One row per algorithm and maxSessionLimit; the same figures as <a href="report.json">report.json</a> and the table <code>vdibroker sim</code> prints.</p>
<table id="summary"><thead><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>{{end}}</tbody></table>
{{if .Plots}}<div class="plots">
{{range .Plots}}<figure{{if eq .Name "tradeoff"}} class="wide"{{end}}><a href="{{.Name}}.svg"><img src="{{.Name}}.png" alt="{{.Title}}"></a><figcaption>{{.Title}} (<a href="{{.Name}}.svg">SVG</a>)</figcaption></figure>
{{end}}</div>{{else}}<p>No plots (written with --no-plots).</p>{{end}}
</body></html>
`))

// writeIndex writes DIR/index.html for the plots written.
func (rep *Report) writeIndex(dir string, plots []plotFile) error {
	// The trade-off first: it is the page's answer.
	if n := len(plots); n > 0 && plots[n-1].Name == "tradeoff" {
		plots = append([]plotFile{plots[n-1]}, plots[:n-1]...)
	}
	header := []string{"Algorithm", "Limit", "Placed", "Rejected", "Violations", "Max/host", "Peak spread", "Peak CPU%", "Host hours", "Storm overshoot"}
	if rep.autoscaled() {
		header = append(header, autoscaleHeader...)
	}
	var rows [][]string
	for _, r := range rep.Results {
		rows = append(rows, append([]string{r.Algorithm, limitLabel(r.MaxSessionLimit), strconv.Itoa(r.Placed), strconv.Itoa(r.Rejected),
			strconv.Itoa(r.LimitViolations), strconv.Itoa(r.MaxSessionsOnAHost), strconv.Itoa(r.PeakSpread),
			strconv.FormatFloat(r.PeakCPUPercent, 'f', 1, 64), strconv.FormatFloat(r.HostHours, 'f', 2, 64), strconv.Itoa(r.StormOvershoot)},
			autoscaleCells(r)...))
	}
	var buf bytes.Buffer
	if err := indexPage.Execute(&buf, map[string]any{"Header": header, "Rows": rows, "Plots": plots}); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "index.html"), buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	return nil
}

// WriteTable prints the summary table, one row per result.
func (rep *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "ALGORITHM\tLIMIT\tPLACED\tREJECTED\tVIOLATIONS\tMAX/HOST\tPEAK SPREAD\tPEAK CPU%\tHOST HOURS\tSTORM OVERSHOOT"
	if rep.autoscaled() {
		head += "\t" + strings.ToUpper(strings.Join(autoscaleHeader, "\t"))
	}
	fmt.Fprintln(tw, head)
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%d",
			r.Algorithm, limitLabel(r.MaxSessionLimit), r.Placed, r.Rejected, r.LimitViolations,
			r.MaxSessionsOnAHost, r.PeakSpread, strconv.FormatFloat(r.PeakCPUPercent, 'f', 1, 64),
			strconv.FormatFloat(r.HostHours, 'f', 2, 64), r.StormOvershoot)
		for _, c := range autoscaleCells(r) {
			fmt.Fprintf(tw, "\t%s", c)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func limitLabel(limit int) string {
	if limit == 999999 {
		return "none"
	}
	return strconv.Itoa(limit)
}

// Placements is the number of new sessions the report's runs placed.
func (rep *Report) Placements() int {
	n := 0
	for _, r := range rep.Results {
		n += r.Placed
	}
	return n
}

// Decisions is the number of engine decisions the report's runs made:
// placements, rejections and reconnects (each a Place call).
func (rep *Report) Decisions() int {
	n := 0
	for _, r := range rep.Results {
		n += r.Placed + r.Rejected + r.Reconnects
	}
	return n
}

// The columns a scaling plan adds (autoscale.go): powered host-hours
// against always-on, starts, stops, and logons that waited for a start.
var autoscaleHeader = []string{"Powered h", "Always-on h", "Starts", "Stops", "Waited"}

// autoscaled reports whether the runs had a scaling plan.
func (rep *Report) autoscaled() bool {
	return len(rep.Results) > 0 && rep.Results[0].Autoscale != nil
}

func autoscaleCells(r Result) []string {
	a := r.Autoscale
	if a == nil {
		return nil
	}
	return []string{strconv.FormatFloat(a.PoweredHostHours, 'f', 2, 64), strconv.FormatFloat(a.AlwaysOnHostHours, 'f', 2, 64),
		strconv.Itoa(a.Starts), strconv.Itoa(a.Stops), strconv.Itoa(a.LogonsWaitedForStart)}
}
