// The class's numbers for report.html: per-task shares, the distribution of totals, the charts.

package report

import (
	_ "embed"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// quantile is the q-quantile of sorted values, interpolated between the
// two nearest (the way spreadsheets compute it; q=0.5 is the median).
func quantile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	lo := int(pos)
	if lo+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	return sorted[lo] + (pos-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// spread reads "min 0 · Q1 25 · median 30 · Q3 40 · max 45".
func spread(words map[string]string, totals []float64) string {
	s := slices.Sorted(slices.Values(totals))
	var parts []string
	for _, q := range []struct {
		word string
		at   float64
	}{{"min", 0}, {"q1", 0.25}, {"median", 0.5}, {"q3", 0.75}, {"max", 1}} {
		parts = append(parts, words[q.word]+" "+FormatPoints(math.Round(10*quantile(s, q.at))/10))
	}
	return strings.Join(parts, " · ")
}

func mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// taskStats counts, for each task, the scored submissions that passed it,
// and among the others the check that failed most often and the message it
// gave most often. Ties go to the check first in the task, and to the
// message of the first student: the page is the same for the same class.
func taskStats(g *Gradebook) []htmlTaskStat {
	var out []htmlTaskStat
	for _, t := range g.Tasks {
		st := htmlTaskStat{GradeTask: t}
		type tally struct {
			title    string
			count    int
			first    int
			messages map[string]int
			order    []string
		}
		checks := map[string]*tally{}
		var order []string
		for _, s := range g.Submissions {
			if s.Outcome == OutcomeError {
				continue
			}
			st.Of++
			ts, _ := s.Task(t.ID)
			if ts.Status.Passed() {
				st.Passed++
				continue
			}
			if s.Report == nil {
				continue
			}
			for _, rt := range s.Report.Tasks {
				if rt.ID != t.ID {
					continue
				}
				for _, c := range rt.Checks {
					if c.Status.Passed() {
						continue
					}
					tl := checks[c.ID]
					if tl == nil {
						tl = &tally{title: c.Title, messages: map[string]int{}, first: len(order)}
						checks[c.ID] = tl
						order = append(order, c.ID)
					}
					tl.count++
					msg := shorten(CleanLine(c.Message), 240)
					if msg == "" {
						continue
					}
					if tl.messages[msg] == 0 {
						tl.order = append(tl.order, msg)
					}
					tl.messages[msg]++
				}
			}
		}
		var best *tally
		for _, id := range order {
			if tl := checks[id]; best == nil || tl.count > best.count {
				best = tl
			}
		}
		switch {
		case best != nil:
			st.CheckTitle, st.CheckCount = best.title, best.count
			for _, m := range best.order {
				if best.messages[m] > st.ReasonCount {
					st.Reason, st.ReasonCount = m, best.messages[m]
				}
			}
		case st.Passed == st.Of:
			st.NoFailure = true
		default:
			st.NoCheck = true
		}
		out = append(out, st)
	}
	return out
}

// Geometry of the charts, in SVG user units (the SVGs scale to the page).
const (
	chartWidth   = 760
	taskRow      = 30
	taskLabelW   = 300
	taskBarW     = 330
	histHeight   = 230
	histBarsTop  = 40
	histBarsBase = 190
)

func taskChart(stats []htmlTaskStat, hidden string) htmlTaskChart {
	c := htmlTaskChart{Width: chartWidth, Height: len(stats)*taskRow + 8}
	for i, st := range stats {
		share := 0.0
		if st.Of > 0 {
			share = float64(st.Passed) / float64(st.Of)
		}
		full := st.ID + "  " + st.Title
		label := shorten(full, 40)
		if st.Hidden {
			label = shorten(full, 40-utf8.RuneCountInString(hidden)-3) + " (" + hidden + ")"
		}
		b := htmlTaskBar{
			RectY: 4 + i*taskRow + 6, TextY: 4 + i*taskRow + 20, Label: label, Full: full,
			BarX: taskLabelW, Track: taskBarW, Width: math.Round(share*taskBarW*10) / 10,
			ValueX: taskLabelW + taskBarW + 12, Percent: int(math.Round(share * 100)), Passed: st.Passed, Of: st.Of,
		}
		b.Level = shareLevel(share)
		c.Bars = append(c.Bars, b)
	}
	return c
}

// histogram bins totals into at most ten bins of a round width, the last
// one closed (full marks fall in it).
func histogram(maxPoints float64, totals []float64) htmlHistogram {
	const left, right = 16.0, 16.0
	h := htmlHistogram{Width: chartWidth, Height: histHeight, Base: histBarsBase, Left: left, Right: chartWidth - right, Top: histBarsTop, TickY: histBarsBase + 20}
	if maxPoints <= 0 {
		return h
	}
	width := 1.0
	for _, w := range []float64{1, 2, 2.5, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000} {
		width = w
		if math.Ceil(maxPoints/w) <= 10 {
			break
		}
	}
	bins := int(math.Ceil(maxPoints / width))
	counts := make([]int, bins)
	for _, t := range totals {
		i := int(math.Floor(t / width))
		counts[min(max(i, 0), bins-1)]++
	}
	most := slices.Max(append(counts, 1))
	slot := (chartWidth - left - right) / float64(bins)
	x := func(points float64) float64 { return math.Round((left+points/width*slot)*10) / 10 }
	for i, n := range counts {
		lo, hi := float64(i)*width, min(float64(i+1)*width, maxPoints)
		barH := math.Round(float64(n)/float64(most)*(histBarsBase-histBarsTop)*10) / 10
		b := htmlBin{X: x(lo) + 3, W: math.Round((x(hi)-x(lo)-6)*10) / 10, Y: histBarsBase - barH, H: barH, Count: n,
			Level: shareLevel((lo + hi) / 2 / maxPoints), TextY: histBarsBase - barH - 6}
		b.TextX = math.Round((b.X+b.W/2)*10) / 10
		b.Range = fmt.Sprintf("%s–%s", FormatPoints(lo), FormatPoints(hi))
		h.Bars = append(h.Bars, b)
		h.Ticks = append(h.Ticks, htmlTick{X: x(lo), Label: FormatPoints(lo)})
	}
	h.Ticks = append(h.Ticks, htmlTick{X: x(maxPoints), Label: FormatPoints(maxPoints)})
	if len(totals) > 0 {
		m := median(totals)
		h.Median = &htmlTick{X: x(min(m, maxPoints)), Label: FormatPoints(m)}
	}
	return h
}
