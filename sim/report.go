package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
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

// WriteFiles writes DIR/report.json and, unless noPlots, the plots; it
// creates dir if needed.
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
	if noPlots {
		return nil
	}
	return rep.WritePlots(dir)
}

// WriteTable prints the summary table, one row per result.
func (rep *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ALGORITHM\tLIMIT\tPLACED\tREJECTED\tVIOLATIONS\tMAX/HOST\tPEAK SPREAD\tPEAK CPU%\tHOST HOURS\tSTORM OVERSHOOT")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%d\n",
			r.Algorithm, limitLabel(r.MaxSessionLimit), r.Placed, r.Rejected, r.LimitViolations,
			r.MaxSessionsOnAHost, r.PeakSpread, strconv.FormatFloat(r.PeakCPUPercent, 'f', 1, 64),
			strconv.FormatFloat(r.HostHours, 'f', 2, 64), r.StormOvershoot)
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
