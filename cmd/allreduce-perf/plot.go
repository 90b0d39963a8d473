package main

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// series is one line of the plot: the rows that share everything the run
// sweeps except the size, in one mode.
type series struct {
	label   string
	inPlace bool
	pts     plotter.XYs // x: log2(size in bytes); y: algbw in GB/s
	bus     plotter.XYs // the same with busbw
}

// seriesOf groups the records into lines. A line's label names what varies
// across the run (strategy, collective, type, op, root); a run that sweeps
// only sizes gets one line named by its collective and strategy.
func seriesOf(recs []record) []*series {
	vary := func(f func(record) string) bool {
		for _, r := range recs {
			if f(r) != f(recs[0]) {
				return true
			}
		}
		return false
	}
	dims := []func(record) string{
		func(r record) string { return r.Collective },
		func(r record) string { return r.Strategy },
		func(r record) string { return r.Type },
		func(r record) string { return r.Redop },
		func(r record) string { return fmt.Sprintf("root %d", r.Root) },
	}
	// What a collective cannot have (all-gather's op, all-reduce's root)
	// does not go into a label.
	omit := map[string]bool{"none": true, "root -1": true}
	var used []func(record) string
	for _, d := range dims {
		if len(recs) > 0 && vary(d) {
			used = append(used, d)
		}
	}
	if len(used) == 0 {
		used = dims[:2]
	}
	var out []*series
	index := map[string]*series{}
	for _, r := range recs {
		if r.Size <= 0 { // no place on a log axis
			continue
		}
		var parts []string
		for _, d := range used {
			if v := d(r); !omit[v] {
				parts = append(parts, v)
			}
		}
		label := strings.Join(parts, " ")
		key := fmt.Sprintf("%s/%v", label, r.InPlace)
		s := index[key]
		if s == nil {
			s = &series{label: label, inPlace: r.InPlace}
			index[key] = s
			out = append(out, s)
		}
		x := math.Log2(float64(r.Size))
		s.pts = append(s.pts, plotter.XY{X: x, Y: r.AlgBw})
		s.bus = append(s.bus, plotter.XY{X: x, Y: r.BusBw})
	}
	return out
}

// palette holds distinguishable colours (Tableau 10); past ten series the
// point shapes still differ.
var palette = []color.Color{
	color.RGBA{0x4e, 0x79, 0xa7, 0xff}, color.RGBA{0xf2, 0x8e, 0x2b, 0xff}, color.RGBA{0xe1, 0x57, 0x59, 0xff},
	color.RGBA{0x76, 0xb7, 0xb2, 0xff}, color.RGBA{0x59, 0xa1, 0x4f, 0xff}, color.RGBA{0xed, 0xc9, 0x48, 0xff},
	color.RGBA{0xb0, 0x7a, 0xa1, 0xff}, color.RGBA{0xff, 0x9d, 0xa7, 0xff}, color.RGBA{0x9c, 0x75, 0x5f, 0xff},
	color.RGBA{0xba, 0xb0, 0xac, 0xff},
}

// log2Ticks marks the x axis, which holds log2(size): the labels name
// the sizes (1 B, 4 KiB, 1 MiB), with a stride that keeps them readable;
// the powers of two between are minor ticks. (Plotting log2(size) on a
// linear axis draws exactly a log-2 axis, and avoids plot.LogScale's
// placement of a centred axis label at the arithmetic midpoint.)
type log2Ticks struct{}

func (log2Ticks) Ticks(lo, hi float64) []plot.Tick {
	a, b := int(math.Ceil(lo-1e-9)), int(math.Floor(hi+1e-9))
	if b < a {
		return nil
	}
	stride := 1
	for _, st := range []int{1, 2, 3, 4, 5, 10} {
		stride = st
		if (b-a)/st+1 <= 12 {
			break
		}
	}
	var ticks []plot.Tick
	for e := a; e <= b; e++ {
		t := plot.Tick{Value: float64(e)}
		if (b-e)%stride == 0 { // the largest size is always labelled
			t.Label = sizeLabel(e)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// gbpsTicks marks the bandwidth axis with 4 to 8 labelled steps of 1, 2 or
// 5 times a power of ten (plot.DefaultTicks labels as few as two).
type gbpsTicks struct{}

func (gbpsTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return nil
	}
	raw := (hi - lo) / 6
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if step = m * mag; step >= raw {
			break
		}
	}
	var ticks []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 4, 64)})
		if mid := v + step/2; mid <= hi {
			ticks = append(ticks, plot.Tick{Value: mid})
		}
	}
	return ticks
}

// sizeLabel names 2^e bytes.
func sizeLabel(e int) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	if e < 0 {
		return fmt.Sprintf("2^%d B", e)
	}
	return fmt.Sprintf("%d %s", 1<<(e%10), units[min(e/10, len(units)-1)])
}

// writePlot draws busbw (top) and algbw (bottom) against size on a log-2
// axis, one colour per series, out of place solid and in place dashed, and
// writes it to path (.png or .svg) atomically.
func writePlot(path, title string, recs []record) error {
	ss := seriesOf(recs)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, p := range s.pts {
			lo, hi = math.Min(lo, p.X), math.Max(hi, p.X)
		}
	}
	if math.IsInf(lo, 0) { // nothing to draw: an empty chart over 1 B..1 KiB
		lo, hi = 0, 10
	}
	// Widen the axis to whole powers of two, at least one octave.
	lo, hi = math.Floor(lo), math.Ceil(hi)
	if lo == hi {
		lo, hi = lo-1, hi+1
	}

	panel := func(name string, pick func(*series) plotter.XYs) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = name
		p.X.Label.Text = "size (bytes, log2 scale)      solid: out-of-place   dashed: in-place"
		p.Y.Label.Text = name + " (GB/s)"
		p.X.Tick.Marker = log2Ticks{}
		p.Y.Tick.Marker = gbpsTicks{}
		p.Add(plotter.NewGrid())
		colours := map[string]int{}
		for _, s := range ss {
			ci, ok := colours[s.label]
			if !ok {
				ci = len(colours)
				colours[s.label] = ci
			}
			l, pts, err := plotter.NewLinePoints(pick(s))
			if err != nil {
				return nil, err
			}
			l.Color = palette[ci%len(palette)]
			l.Width = vg.Points(1.5)
			pts.Color = palette[ci%len(palette)]
			pts.Shape = plotutil.Shape(ci)
			if s.inPlace {
				l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			p.Add(l, pts)
			if !ok {
				p.Legend.Add(s.label, l, pts)
			}
		}
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), -vg.Points(4)
		p.X.Min, p.X.Max = lo, hi
		p.Y.Min = 0
		// Room for the legend (top left): lift the top of the axis so the
		// points under the legend stay below it.
		top, left := 0.0, 0.0
		for _, s := range ss {
			for _, q := range pick(s) {
				top = math.Max(top, q.Y)
				if q.X <= lo+0.45*(hi-lo) {
					left = math.Max(left, q.Y)
				}
			}
		}
		frac := math.Min(0.7, (float64(len(colours))*15+14)/290)
		p.Y.Max = math.Max(top*1.05, left*1.05/(1-frac))
		if !(p.Y.Max > 0) || math.IsInf(p.Y.Max, 0) {
			p.Y.Max = 1
		}
		return p, nil
	}
	bus, err := panel("busbw", func(s *series) plotter.XYs { return s.bus })
	if err != nil {
		return err
	}
	bus.Title.Text = title + "\nbusbw"
	alg, err := panel("algbw", func(s *series) plotter.XYs { return s.pts })
	if err != nil {
		return err
	}

	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	width, height := 10*vg.Inch, 10*vg.Inch
	c, err := draw.NewFormattedCanvas(width, height, format)
	if err != nil {
		return err
	}
	plots := [][]*plot.Plot{{bus}, {alg}}
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadX: vg.Millimeter, PadY: 6 * vg.Millimeter,
		PadTop: 3 * vg.Millimeter, PadBottom: 3 * vg.Millimeter, PadLeft: 3 * vg.Millimeter, PadRight: 6 * vg.Millimeter}
	canvases := plot.Align(plots, tiles, draw.New(c))
	bus.Draw(canvases[0][0])
	alg.Draw(canvases[1][0])
	return writeFileAtomic(path, func(w io.Writer) error {
		_, err := c.WriteTo(w)
		return err
	})
}
