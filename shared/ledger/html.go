package ledger

import (
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"
)

// Chart geometry of the report (SVG user units).
const (
	chartWidth  = 800
	chartHeight = 240
)

// line is one step series of a chart: its SVG points and the values it draws.
type line struct {
	Name, Class, Points string
	Last                float64
}

// marker is a decision on the timeline.
type marker struct {
	X, Y  float64
	Title string
}

type htmlData struct {
	R        Report
	From, To string
	Rates    []line
	MaxRate  float64
	Markers  []marker
	Shares   []line
	Width    int
	Height   int
}

// WriteHTML writes r as one self-contained HTML page: the totals and the per-pool and per-hour
// tables, a chart of the cluster's $/h (spend, static baseline, no consolidation, lower bound)
// with the decisions on the timeline, and a chart of the requested shares of allocatable CPU
// and memory. Inline SVG and CSS only, no external asset and no script; every value goes
// through html/template, so names from the records are escaped by construction.
func WriteHTML(w io.Writer, r Report) error {
	d := htmlData{R: r, Width: chartWidth, Height: chartHeight,
		From: r.From.UTC().Format(time.RFC3339), To: r.Until.UTC().Format(time.RFC3339)}
	for _, s := range r.Series {
		d.MaxRate = max(d.MaxRate, s.Price, s.StaticBaseline, s.NoConsolidation, s.LowerBound)
	}
	if d.MaxRate == 0 {
		d.MaxRate = 1
	}
	rates := []struct {
		name, class string
		v           func(State) float64
	}{
		{"spend $/h", "price", func(s State) float64 { return s.Price }},
		{"static baseline $/h", "baseline", func(s State) float64 { return s.StaticBaseline }},
		{"no consolidation $/h", "noconsolidation", func(s State) float64 { return s.NoConsolidation }},
		{"lower bound $/h", "lowerbound", func(s State) float64 { return s.LowerBound }},
	}
	for _, c := range rates {
		if l, ok := d.step(c.name, c.class, d.MaxRate, c.v); ok {
			d.Rates = append(d.Rates, l)
		}
	}
	for _, c := range []struct {
		name, class string
		v           func(State) float64
	}{
		{"CPU requested / allocatable", "cpu", func(s State) float64 { return s.CPUShare }},
		{"memory requested / allocatable", "memory", func(s State) float64 { return s.MemoryShare }},
	} {
		if l, ok := d.step(c.name, c.class, 1, c.v); ok {
			d.Shares = append(d.Shares, l)
		}
	}
	for _, dec := range r.Decisions {
		title := fmt.Sprintf("%s %s %s %s", dec.Time.UTC().Format(time.RFC3339), dec.Function, dec.Action, dec.ID)
		if dec.NodePool != "" {
			title += fmt.Sprintf(" (%s %+.4f $/h)", dec.NodePool, dec.Delta)
		}
		d.Markers = append(d.Markers, marker{X: d.x(dec.Time), Y: chartHeight - 6, Title: title + ": " + dec.Rule})
	}
	return page.Execute(w, d)
}

// x maps a time onto the chart's width.
func (d *htmlData) x(t time.Time) float64 {
	span := d.R.Until.Sub(d.R.From)
	if span <= 0 {
		return 0
	}
	return float64(t.Sub(d.R.From)) / float64(span) * chartWidth
}

// step draws v over the series as a step line scaled to top; ok is false for a line that is
// zero throughout (nothing recorded it).
func (d *htmlData) step(name, class string, top float64, v func(State) float64) (line, bool) {
	var b strings.Builder
	nonzero := false
	y := func(val float64) float64 { return chartHeight - val/top*chartHeight }
	for i, s := range d.R.Series {
		val := v(s)
		nonzero = nonzero || val != 0
		x := d.x(s.Time)
		if i > 0 {
			fmt.Fprintf(&b, "%.2f,%.2f ", x, y(v(d.R.Series[i-1])))
		}
		fmt.Fprintf(&b, "%.2f,%.2f ", x, y(val))
	}
	if n := len(d.R.Series); n > 0 {
		fmt.Fprintf(&b, "%.2f,%.2f", float64(chartWidth), y(v(d.R.Series[n-1])))
		return line{Name: name, Class: class, Points: b.String(), Last: v(d.R.Series[n-1])}, nonzero
	}
	return line{}, false
}

var page = template.Must(template.New("cost").Funcs(template.FuncMap{
	"usd":  func(v float64) string { return fmt.Sprintf("%.4f", v) },
	"pct":  func(v float64) string { return fmt.Sprintf("%.1f%%", v*100) },
	"time": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04Z") },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Dovetail cost ledger</title>
<style>
body{font-family:sans-serif;margin:24px;color:#222;background:#fff}
table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#eee}
td:first-child{text-align:left}svg{border:1px solid #ccc;background:#fafafa}
.price{stroke:#1f77b4}.baseline{stroke:#d62728;stroke-dasharray:6 3}.noconsolidation{stroke:#ff7f0e;stroke-dasharray:2 2}
.lowerbound{stroke:#2ca02c}.cpu{stroke:#9467bd}.memory{stroke:#8c564b}polyline{fill:none;stroke-width:2}
.decision{fill:#000}.legend span{margin-right:16px}
</style></head><body>
<h1>Dovetail cost ledger</h1>
<p>From <span id="from">{{.From}}</span> to <span id="until">{{.To}}</span> ({{printf "%.2f" .R.Total.Hours}} h). Amounts in USD; rates in USD per hour.</p>
<table id="totals"><tr><th>NodePool</th><th>spend</th><th>static baseline</th><th>saving vs static</th><th>no consolidation</th><th>saving vs no consolidation</th><th>waste</th></tr>
{{range .R.Pools}}<tr class="pool" data-nodepool="{{.NodePool}}"><td>{{.NodePool}}</td><td class="spend">{{usd .Spend}}</td><td class="baseline">{{usd .StaticBaseline}}</td><td class="saving-static">{{usd .SavingVsStatic}}</td><td class="noconsolidation">{{usd .NoConsolidation}}</td><td class="saving-noconsolidation">{{usd .SavingVsNoConsolidation}}</td><td class="waste">{{usd .Waste}}</td></tr>
{{end}}<tr><th>total</th><td id="total-spend">{{usd .R.Total.Spend}}</td><td id="total-baseline">{{usd .R.Total.StaticBaseline}}</td><td id="total-saving-static">{{usd .R.Total.SavingVsStatic}}</td><td id="total-noconsolidation">{{usd .R.Total.NoConsolidation}}</td><td id="total-saving-noconsolidation">{{usd .R.Total.SavingVsNoConsolidation}}</td><td id="total-waste">{{usd .R.Total.Waste}}</td></tr>
</table>
<h2>$/h over time</h2>
<p class="legend">{{range .Rates}}<span class="{{.Class}}">&#9472; {{.Name}} (last {{usd .Last}})</span>{{end}}</p>
<svg id="rates" xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" data-max="{{usd .MaxRate}}">
<text x="4" y="14" font-size="12">{{usd .MaxRate}} $/h</text>
{{range .Rates}}<polyline class="{{.Class}}" data-last="{{usd .Last}}" points="{{.Points}}"><title>{{.Name}}</title></polyline>
{{end}}{{range .Markers}}<circle class="decision" cx="{{printf "%.2f" .X}}" cy="{{printf "%.2f" .Y}}" r="4"><title>{{.Title}}</title></circle>
{{end}}</svg>
<h2>Utilisation</h2>
<svg id="utilisation" xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}">
<text x="4" y="14" font-size="12">100%</text>
{{range .Shares}}<polyline class="{{.Class}}" data-last="{{pct .Last}}" points="{{.Points}}"><title>{{.Name}}</title></polyline>
{{end}}</svg>
<p class="legend">{{range .Shares}}<span class="{{.Class}}">&#9472; {{.Name}} (last {{pct .Last}})</span>{{end}}</p>
{{if .R.Commitments}}<h2>Commitments</h2>
<p>As the decision of {{time .R.CommitmentsAt}} counted them (the cluster's nodes and that plan together).</p>
<table id="commitments"><tr><th>commitment</th><th>kind</th><th>used</th><th>committed</th><th>utilisation</th></tr>
{{range .R.Commitments}}<tr class="commitment" data-name="{{.Name}}"><td>{{.Name}}</td><td>{{.Kind}}</td>{{if eq .Kind "SavingsPlan"}}<td>{{usd .UsedPerHour}} $/h</td><td>{{usd .CommittedPerHour}} $/h</td>{{else}}<td>{{.Used}}</td><td>{{.Count}} instances</td>{{end}}<td class="utilisation">{{pct .Utilisation}}</td></tr>
{{end}}</table>
{{end}}<h2>Decisions</h2>
<table id="decisions"><tr><th>time</th><th>function</th><th>action</th><th>decision</th><th>NodePool</th><th>$/h change</th><th>rule</th></tr>
{{range .R.Decisions}}<tr><td>{{time .Time}}</td><td>{{.Function}}</td><td>{{.Action}}</td><td>{{.ID}}</td><td>{{.NodePool}}</td><td>{{if .NodePool}}{{printf "%+.4f" .Delta}}{{end}}</td><td>{{.Rule}}</td></tr>
{{end}}</table>
<h2>By hour (UTC)</h2>
<table id="hours"><tr><th>hour</th><th>spend</th><th>static baseline</th><th>no consolidation</th><th>waste</th></tr>
{{range .R.Hours}}<tr><td>{{time .Start}}</td><td>{{usd .Spend}}</td><td>{{usd .StaticBaseline}}</td><td>{{usd .NoConsolidation}}</td><td>{{usd .Waste}}</td></tr>
{{end}}</table>
</body></html>
`))
