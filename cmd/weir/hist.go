package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/weir-mq/weir/benchmarks"
)

// histCmd runs `weir hist show x.hgrm` and `weir hist compare a.hgrm b.hgrm ... [--plot out.png]`.
func histCmd(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("hist: want show or compare")
	}
	fs := flag.NewFlagSet("hist "+args[0], flag.ContinueOnError)
	plotPath := fs.String("plot", "", "write a latency-by-percentile plot here (.png, .svg or .pdf)")
	title := fs.String("title", "Latency by percentile", "plot title")
	unit := fs.String("unit", "ms", "unit of the .hgrm values, for the table header and the plot axis")
	labels := fs.String("labels", "", "comma-separated curve labels (default: file names)")
	logY := fs.Bool("log-y", false, "logarithmic latency axis")
	files, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("hist %s: no .hgrm files given", args[0])
	}
	hs := make([]*benchmarks.Hgrm, len(files))
	for i, f := range files {
		if hs[i], err = benchmarks.ParseHgrmFile(f); err != nil {
			return err
		}
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = histLabel(f)
	}
	if *labels != "" {
		ls := strings.Split(*labels, ",")
		if len(ls) != len(files) {
			return fmt.Errorf("hist: %d labels for %d files", len(ls), len(files))
		}
		names = ls
	}
	switch args[0] {
	case "show":
		for i, h := range hs {
			if len(hs) > 1 {
				fmt.Fprintf(stdout, "== %s\n", files[i])
			}
			showHgrm(stdout, h, *unit)
		}
	case "compare":
		compareHgrm(stdout, names, hs, *unit)
	default:
		return fmt.Errorf("hist: unknown mode %q (want show or compare)", args[0])
	}
	if *plotPath != "" {
		if err := plotHgrm(*plotPath, *title, *unit, names, hs, *logY); err != nil {
			return fmt.Errorf("hist: plot: %w", err)
		}
		fmt.Fprintf(stdout, "wrote %s\n", *plotPath)
	}
	return nil
}

// histLabel names a curve after its file: "run1/publish.hgrm" -> "run1/publish".
func histLabel(path string) string {
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	if dir := filepath.Base(filepath.Dir(path)); dir != "." && dir != "/" {
		return dir + "/" + base
	}
	return base
}

var tablePercentiles = []struct {
	name string
	q    float64
}{{"p50", 0.50}, {"p90", 0.90}, {"p99", 0.99}, {"p99.9", 0.999}, {"p99.99", 0.9999}}

func showHgrm(w io.Writer, h *benchmarks.Hgrm, unit string) {
	fmt.Fprintf(w, "%12s %10s %12s %14s\n", "Value("+unit+")", "Percentile", "TotalCount", "1/(1-Percentile)")
	for _, p := range h.Points {
		inv := "inf"
		if p.Percentile < 1 {
			inv = fmt.Sprintf("%.2f", 1/(1-p.Percentile))
		}
		fmt.Fprintf(w, "%12.3f %10.6f %12d %14s\n", p.Value, p.Percentile, p.TotalCount, inv)
	}
	fmt.Fprintf(w, "count %d, mean %.3f, stddev %.3f, max %.3f %s\n", h.Count, h.Mean, h.StdDev, h.Max, unit)
	for _, tp := range tablePercentiles {
		fmt.Fprintf(w, "%s=%.3f ", tp.name, h.ValueAt(tp.q))
	}
	fmt.Fprintln(w)
}

func compareHgrm(w io.Writer, names []string, hs []*benchmarks.Hgrm, unit string) {
	width := 10
	for _, n := range names {
		width = max(width, len(n))
	}
	fmt.Fprintf(w, "%-*s", width, "("+unit+")")
	for _, tp := range tablePercentiles {
		fmt.Fprintf(w, " %10s", tp.name)
	}
	fmt.Fprintf(w, " %10s %12s\n", "max", "count")
	for i, h := range hs {
		fmt.Fprintf(w, "%-*s", width, names[i])
		for _, tp := range tablePercentiles {
			fmt.Fprintf(w, " %10.3f", h.ValueAt(tp.q))
		}
		fmt.Fprintf(w, " %10.3f %12d\n", h.Max, h.Count)
	}
	if len(hs) > 1 {
		fmt.Fprintf(w, "%-*s", width, "ratio")
		for _, tp := range tablePercentiles {
			fmt.Fprintf(w, " %10s", ratio(hs[len(hs)-1].ValueAt(tp.q), hs[0].ValueAt(tp.q)))
		}
		fmt.Fprintf(w, " %10s\n", ratio(hs[len(hs)-1].Max, hs[0].Max))
		fmt.Fprintf(w, "(ratio: last / first)\n")
	}
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// plotHgrm draws latency against percentile on HdrHistogram's log "1/(1-p)" x axis.
func plotHgrm(path, title, unit string, names []string, hs []*benchmarks.Hgrm, logY bool) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency (" + unit + ")"
	p.X.Scale = plot.LogScale{}
	maxX := 10.0
	for i, h := range hs {
		var xys plotter.XYs
		for _, pt := range h.Points {
			if pt.Percentile >= 1 {
				continue // 1/(1-1) is infinite
			}
			if logY && pt.Value <= 0 {
				continue
			}
			xys = append(xys, plotter.XY{X: 1 / (1 - pt.Percentile), Y: pt.Value})
		}
		if len(xys) == 0 {
			continue
		}
		maxX = math.Max(maxX, xys[len(xys)-1].X)
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		l.Dashes = plotutil.Dashes(i / 7)
		p.Add(l)
		p.Legend.Add(names[i], l)
	}
	var ticks []plot.Tick
	labels := []string{"0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%", "99.99999%"}
	for i, v := 0, 1.0; i < len(labels) && v <= maxX*10; i, v = i+1, v*10 {
		ticks = append(ticks, plot.Tick{Value: v, Label: labels[i]})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min = 1
	p.Y.Min = 0
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Min = math.Inf(1)
		for _, h := range hs {
			for _, pt := range h.Points {
				if pt.Value > 0 {
					p.Y.Min = math.Min(p.Y.Min, pt.Value)
				}
			}
		}
		if math.IsInf(p.Y.Min, 1) {
			p.Y.Min = 0.001
		}
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(10)
	p.Legend.YOffs = vg.Points(-5)
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}
