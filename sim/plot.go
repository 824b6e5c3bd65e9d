package sim

import (
	"fmt"
	"math"
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
	_, err := rep.writePlots(dir)
	return err
}

// plotFile is one plot written: its file name without extension and what
// it shows.
type plotFile struct {
	Name, Title string
}

// writePlots is WritePlots, returning the plots in the order written (per
// result its sessions and CPU plots, then the trade-off).
func (rep *Report) writePlots(dir string) ([]plotFile, error) {
	var written []plotFile
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
			return nil, err
		}
		written = append(written, plotFile{"sessions-" + suffix, "Sessions per host: " + title})
		p, err = seriesPlot("CPU per host: "+title, "CPU %", r.Series, r.Series.CPU)
		if err == nil {
			err = savePlot(dir, "cpu-"+suffix, p)
		}
		if err != nil {
			return nil, err
		}
		written = append(written, plotFile{"cpu-" + suffix, "CPU per host: " + title})
	}
	if sweep {
		p, err := tradeoffPlot(rep)
		if err != nil {
			return nil, err
		}
		if err := savePlot(dir, "tradeoff", p); err != nil {
			return nil, err
		}
		written = append(written, plotFile{"tradeoff", "Host hours against peak CPU, per maxSessionLimit"})
	}
	return written, nil
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

// tradeoffPlot draws host hours against peak CPU, one line per algorithm,
// each point labelled with its maxSessionLimit where the label has room:
// labels are placed by placeLabels, so none covers another, a point or
// the legend, which sits in a band kept free above the data.
func tradeoffPlot(rep *Report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Host hours against peak CPU, per maxSessionLimit"
	p.X.Label.Text = "peak CPU % of any host"
	p.Y.Label.Text = "host hours powered on"
	p.Legend.Top = true
	p.Legend.Left = true
	var algs []string
	byAlg := map[string][]Result{}
	var all []labelPoint
	for _, r := range rep.Results {
		if _, ok := byAlg[r.Algorithm]; !ok {
			algs = append(algs, r.Algorithm)
		}
		byAlg[r.Algorithm] = append(byAlg[r.Algorithm], r)
	}
	for k, alg := range algs {
		for _, r := range byAlg[alg] {
			all = append(all, labelPoint{X: r.PeakCPUPercent, Y: r.HostHours, Text: limitLabel(r.MaxSessionLimit), Series: k})
		}
	}
	all = mergeCoincident(all)
	// Axis ranges with a margin round the points, and the top band for
	// the legend (one line per algorithm).
	xmin, xmax, ymin, ymax := bounds(all)
	xr, yr := rangeOf(xmin, xmax), rangeOf(ymin, ymax)
	legendBand := 0.08 * float64(len(algs)+1)
	p.X.Min, p.X.Max = xmin-0.08*xr, xmax+0.12*xr
	p.Y.Min = ymin - 0.12*yr
	p.Y.Max = ymax + yr*(0.12+legendBand)/(1-legendBand)
	frame := labelFrame{xmin: p.X.Min, xmax: p.X.Max, ymin: p.Y.Min, ymax: p.Y.Max, top: 1 - legendBand}
	placed := placeLabels(all, frame)

	for k, alg := range algs {
		rs := byAlg[alg]
		xys := make(plotter.XYs, len(rs))
		for i, r := range rs {
			xys[i] = plotter.XY{X: r.PeakCPUPercent, Y: r.HostHours}
		}
		l, s, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("plot tradeoff: %w", err)
		}
		l.Color, s.Color = plotutil.Color(k), plotutil.Color(k)
		s.Shape = plotutil.Shape(k)
		p.Add(l, s)
		var lab plotter.XYLabels
		for _, pl := range placed {
			if pl.Series == k && pl.Shown {
				lab.XYs = append(lab.XYs, plotter.XY{X: pl.LX, Y: pl.LY})
				lab.Labels = append(lab.Labels, pl.Text)
			}
		}
		if len(lab.Labels) > 0 {
			labels, err := plotter.NewLabels(lab)
			if err != nil {
				return nil, fmt.Errorf("plot tradeoff: %w", err)
			}
			for i := range labels.TextStyle {
				labels.TextStyle[i].Color = plotutil.Color(k)
			}
			p.Add(labels)
		}
		p.Legend.Add(alg+" (labels: maxSessionLimit)", l, s)
	}
	return p, nil
}

// mergeCoincident gives the limits of one series that land on the same
// point one label ("12, 14, 16"): labels of their own would stand side by
// side with no telling which point is whose.
func mergeCoincident(pts []labelPoint) []labelPoint {
	var out []labelPoint
	for _, p := range pts {
		merged := false
		for i := range out {
			if out[i].Series == p.Series && out[i].X == p.X && out[i].Y == p.Y {
				out[i].Text += ", " + p.Text
				merged = true
				break
			}
		}
		if !merged {
			out = append(out, p)
		}
	}
	return out
}

// labelPoint is a point of the trade-off plot and its label.
type labelPoint struct {
	X, Y   float64
	Text   string
	Series int
	// Set by placeLabels: where the label's lower left corner goes (data
	// coordinates), and whether it has room at all.
	LX, LY float64
	Shown  bool
}

// labelFrame is the plot's data ranges and, as a fraction of the height,
// the top of the area labels may use (the legend is above it).
type labelFrame struct {
	xmin, xmax, ymin, ymax float64
	top                    float64
}

// Label sizes as fractions of the plot area (8 × 4.5 inch plots, 10 pt
// text): a character's width, a line's height, a point's half size.
const (
	labelCharW = 0.0105
	labelH     = 0.045
	pointHalf  = 0.012
	labelGap   = 0.006
)

type box struct{ x0, y0, x1, y1 float64 }

func (a box) overlaps(b box) bool { return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1 }

// placeLabels puts each point's label beside it (right above, right below,
// left above, left below, then further out), in a place that overlaps no
// point, no label placed before it and not the legend band; a label with
// no such place is not shown (the index page's table has every value).
func placeLabels(pts []labelPoint, f labelFrame) []labelPoint {
	out := append([]labelPoint(nil), pts...)
	w, h := f.xmax-f.xmin, f.ymax-f.ymin
	norm := func(x, y float64) (float64, float64) { return (x - f.xmin) / w, (y - f.ymin) / h }
	var taken []box
	for _, pt := range out {
		u, v := norm(pt.X, pt.Y)
		taken = append(taken, box{u - pointHalf, v - pointHalf*16/9, u + pointHalf, v + pointHalf*16/9})
	}
	for i := range out {
		u, v := norm(out[i].X, out[i].Y)
		lw := labelCharW*float64(len(out[i].Text)) + 0.004
		for _, d := range [][2]float64{
			{pointHalf + labelGap, labelGap}, {pointHalf + labelGap, -labelGap - labelH},
			{-pointHalf - labelGap - lw, labelGap}, {-pointHalf - labelGap - lw, -labelGap - labelH},
			{-lw / 2, pointHalf*16/9 + labelGap}, {-lw / 2, -pointHalf*16/9 - labelGap - labelH},
			{pointHalf + labelGap, labelH}, {pointHalf + labelGap, -2 * labelH},
		} {
			b := box{u + d[0], v + d[1], u + d[0] + lw, v + d[1] + labelH}
			if b.x0 < 0 || b.x1 > 1 || b.y0 < 0 || b.y1 > f.top {
				continue
			}
			free := true
			for _, t := range taken {
				if b.overlaps(t) {
					free = false
					break
				}
			}
			if !free {
				continue
			}
			taken = append(taken, b)
			out[i].Shown = true
			out[i].LX, out[i].LY = f.xmin+b.x0*w, f.ymin+b.y0*h
			break
		}
	}
	return out
}

func bounds(pts []labelPoint) (xmin, xmax, ymin, ymax float64) {
	xmin, ymin = math.Inf(1), math.Inf(1)
	xmax, ymax = math.Inf(-1), math.Inf(-1)
	for _, p := range pts {
		xmin, xmax = math.Min(xmin, p.X), math.Max(xmax, p.X)
		ymin, ymax = math.Min(ymin, p.Y), math.Max(ymax, p.Y)
	}
	if len(pts) == 0 {
		return 0, 1, 0, 1
	}
	return xmin, xmax, ymin, ymax
}

// rangeOf is a range's width, never 0 (a single point gets room round it).
func rangeOf(lo, hi float64) float64 {
	if d := hi - lo; d > 0 {
		return d
	}
	return math.Max(1, math.Abs(hi)*0.1)
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
