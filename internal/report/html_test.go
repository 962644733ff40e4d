package report_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/report"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata from this run")

func renderHTML(t testing.TB, gb *report.Gradebook) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, report.WriteHTMLReport(&b, gb))
	return b.String()
}

// TestHTMLReportGolden compares report.html of the fixture class with
// testdata/report.html (go test ./internal/report -run HTMLReportGolden -update
// rewrites it).
func TestHTMLReportGolden(t *testing.T) {
	got := renderHTML(t, fixtureClass())
	require.Equal(t, got, renderHTML(t, fixtureClass()), "the same class renders the same page")
	golden := filepath.Join("testdata", "report.html")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run with -update to create it")
	require.Equal(t, string(want), got, "report.html differs from %s (rerun with -update if the change is intended)", golden)
}

// The spread of totals is the five-number summary, quartiles interpolated:
// the fixture's twelve scored totals are 0 0 5 25 25 30 30 30 30 40 40 45.
func TestHTMLReportSpread(t *testing.T) {
	require.Contains(t, renderHTML(t, fixtureClass()), "12 submissions · min 0 · Q1 20 · median 30 · Q3 32.5 · max 45")
}

// TestHTMLReportEscapesSubmissions: nothing a submission wrote reaches the
// page as markup.
func TestHTMLReportEscapesSubmissions(t *testing.T) {
	page := renderHTML(t, fixtureClass())
	for _, raw := range []string{evilAlert, evilTitle, evilScript, "<img", "<script>document"} {
		require.False(t, strings.Contains(page, raw), "the page holds %q as markup", raw)
	}
	require.Contains(t, page, "&lt;img src=x onerror=alert(1)&gt;", "the name is shown, as text")
	require.Equal(t, 1, strings.Count(page, "<script"), "the page's own script is the only one")
	require.Contains(t, page, `http-equiv="Content-Security-Policy"`)
	require.Contains(t, page, "default-src &#39;none&#39;")
	for _, external := range []string{"http://", "https://", ` src="`, "@import", "url("} {
		require.False(t, strings.Contains(page, external), "the page loads nothing, yet it holds %q", external)
	}
}

// TestHTMLReportOldResults renders a gradebook of an older labctl (no run
// recorded) and an empty one.
func TestHTMLReportOldResults(t *testing.T) {
	gb := fixtureClass()
	gb.Run = nil
	require.Contains(t, renderHTML(t, gb), "not recorded (graded by an older labctl)")
	empty := fixtureGradebook()
	page := renderHTML(t, empty)
	require.Contains(t, page, "Every submission was graded.")
	gb.Lang = "ru"
	require.Contains(t, renderHTML(t, gb), "Распределение баллов")
}

// TestHTMLReportDurationsInItsLanguage: the limits and each submission's
// grading time read as words of the report's language, not Go's "1m30s".
func TestHTMLReportDurationsInItsLanguage(t *testing.T) {
	gb := fixtureClass()
	page := renderHTML(t, gb)
	require.Contains(t, page, "wall time 10 min per submission · manager CPU time 1 min 30 s")
	require.Contains(t, page, "UTC · 2 min · source")
	gb.Lang = "ru"
	page = renderHTML(t, gb)
	require.Contains(t, page, "время 10 мин на решение · процессорное время менеджера 1 мин 30 с")
	require.Contains(t, page, "UTC · 2 мин · ")
	require.NotContains(t, page, "1m30s")
}

// BenchmarkHTMLReport renders report.html for a class of 200 students.
func BenchmarkHTMLReport(b *testing.B) {
	gb := bigClass(200)
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := report.WriteHTMLReport(&buf, gb); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len())/1024, "KiB/page")
}
