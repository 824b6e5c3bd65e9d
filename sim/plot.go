package sim

import (
	"fmt"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plotFormats are the files each plot is saved as.
var plotFormats = []string{"png", "svg"}

// WritePlots saves, in dir, for each result sessions-ALG[-limitN] and
// cpu-ALG[-limitN] (per host over time, or min/mean/max over hosts for large
// pools), and, when the scenario sweeps maxSessionLimit, tradeoff: host
// hours against peak CPU, one line per algorithm, each point labelled with
// its limit. Each as PNG and SVG.
func (rep *Report) WritePlots(dir string) error {
	limits := map[int]bool{}
	for _, r := range rep.Results {
		limits[r.MaxSessionLimit] = true
	}
	sweep := len(limits) > 1
	for _, r := range rep.Results {
		if r.Series == nil || len(r.Series.Hours) == 0 {
			continue
		}
		suffix := r.Algorithm
		title := r.Algorithm
		if sweep {
			suffix += "-limit" + strconv.Itoa(r.MaxSessionLimit)
			title += ", maxSessionLimit " + limitLabel(r.MaxSessionLimit)
		}
		p, err := seriesPlot("Sessions per host: "+title, "sessions", r.Series, r.Series.Sessions)
		if err == nil {
			err = savePlot(dir, "sessions-"+suffix, p)
		}
		if err != nil {
			return err
		}
		p, err = seriesPlot("CPU per host: "+title, "CPU %", r.Series, r.Series.CPU)
		if err == nil {
			err = savePlot(dir, "cpu-"+suffix, p)
		}
		if err != nil {
			return err
		}
	}
	if sweep {
		p, err := tradeoffPlot(rep)
		if err != nil {
			return err
		}
		if err := savePlot(dir, "tradeoff", p); err != nil {
			return err
		}
	}
	return nil
}

func seriesPlot(title, ylabel string, s *Series, lines [][]float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "hours"
	p.Y.Label.Text = ylabel
	p.Y.Min = 0
	p.Legend.Top = true
	for k, ys := range lines {
		xys := make(plotter.XYs, len(ys))
		for i, y := range ys {
			xys[i] = plotter.XY{X: s.Hours[i], Y: y}
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", title, err)
		}
		l.Color = plotutil.Color(k)
		l.Dashes = plotutil.Dashes(k / len(plotutil.DefaultColors))
		p.Add(l)
		if len(lines) <= 12 {
			p.Legend.Add(s.Lines[k], l)
		}
	}
	return p, nil
}

func tradeoffPlot(rep *Report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Host hours against peak CPU, per maxSessionLimit"
	p.X.Label.Text = "peak CPU % of any host"
	p.Y.Label.Text = "host hours powered on"
	p.Legend.Top = true
	var algs []string
	byAlg := map[string][]Result{}
	for _, r := range rep.Results {
		if _, ok := byAlg[r.Algorithm]; !ok {
			algs = append(algs, r.Algorithm)
		}
		byAlg[r.Algorithm] = append(byAlg[r.Algorithm], r)
	}
	for k, alg := range algs {
		rs := byAlg[alg]
		pts := plotter.XYLabels{XYs: make(plotter.XYs, len(rs)), Labels: make([]string, len(rs))}
		for i, r := range rs {
			pts.XYs[i] = plotter.XY{X: r.PeakCPUPercent, Y: r.HostHours}
			pts.Labels[i] = limitLabel(r.MaxSessionLimit)
		}
		l, s, err := plotter.NewLinePoints(pts.XYs)
		if err != nil {
			return nil, fmt.Errorf("plot tradeoff: %w", err)
		}
		l.Color, s.Color = plotutil.Color(k), plotutil.Color(k)
		s.Shape = plotutil.Shape(k)
		labels, err := plotter.NewLabels(pts)
		if err != nil {
			return nil, fmt.Errorf("plot tradeoff: %w", err)
		}
		for i := range labels.TextStyle {
			labels.TextStyle[i].Color = plotutil.Color(k)
		}
		labels.Offset = vg.Point{X: vg.Points(4), Y: vg.Points(2)}
		p.Add(l, s, labels)
		p.Legend.Add(alg, l, s)
	}
	return p, nil
}

func savePlot(dir, name string, p *plot.Plot) error {
	for _, ext := range plotFormats {
		file := filepath.Join(dir, name+"."+ext)
		if err := p.Save(8*vg.Inch, 4.5*vg.Inch, file); err != nil {
			return fmt.Errorf("save plot %s: %w", file, err)
		}
	}
	return nil
}
