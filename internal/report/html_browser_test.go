//go:build unix

package report_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// chromium finds a Chromium (Debian's package is `chromium`; .ci/run
// installs it when missing).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium binary on PATH (Debian: apt-get install chromium): the page is not rendered in a browser")
	return ""
}

// artifactDir is where the screenshots go: $LABCTL_TEST_ARTIFACTS, else a
// temporary directory.
func artifactDir(t *testing.T) string {
	if dir := os.Getenv("LABCTL_TEST_ARTIFACTS"); dir != "" {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		return dir
	}
	return t.TempDir()
}

// headless runs one headless Chromium on a page and returns its stdout.
// Its profile, config and cache live in a temporary directory; its whole
// process group is killed at the end, so nothing outlives the test.
func headless(t *testing.T, bin string, args ...string) string {
	t.Helper()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base := []string{
		"--headless", "--no-sandbox", // root in CI; the page is the test's own
		"--disable-gpu", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--host-resolver-rules=MAP * ~NOTFOUND", // the page loads nothing; make sure of it
		"--hide-scrollbars", "--user-data-dir=" + filepath.Join(home, "profile"),
	}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_CACHE_HOME="+filepath.Join(home, ".cache"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // helpers it may have left
	}
	require.NoError(t, err, "chromium %s\n%s", strings.Join(args, " "), lastLines(stderr.String(), 20))
	return stdout.String()
}

// requireAbsent is NotContains without printing the whole page.
func requireAbsent(t *testing.T, dom, s, why string) {
	t.Helper()
	if strings.Contains(dom, s) {
		i := strings.Index(dom, s)
		t.Fatalf("%s: the DOM holds %q: …%s…", why, s, dom[max(0, i-200):min(len(dom), i+200)])
	}
}

// requirePresent is Contains without printing the whole page.
func requirePresent(t *testing.T, dom, s, why string) {
	t.Helper()
	if !strings.Contains(dom, s) {
		t.Fatalf("%s: the DOM lacks %q (it starts %.300q)", why, s, dom)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

var titleRe = regexp.MustCompile(`(?s)<title>(.*?)</title>`)

// TestHTMLReportInChromium renders the fixture class in headless
// Chromium: the class table and both charts are in the DOM, the page's own
// script ran (the table became sortable), and nothing a student wrote ran
// or became an element. A second page, with script injected raw as a
// broken escaper would let through, shows the Content-Security-Policy
// stopping it. Screenshots go to $LABCTL_TEST_ARTIFACTS.
func TestHTMLReportInChromium(t *testing.T) {
	bin := chromium(t)
	dir := artifactDir(t)
	page := renderHTML(t, fixtureClass())
	file := filepath.Join(dir, "report.html")
	require.NoError(t, os.WriteFile(file, []byte(page), 0o644))
	wantTitle := titleRe.FindStringSubmatch(page)[1]

	dom := headless(t, bin, "--dump-dom", "file://"+file)
	requirePresent(t, dom, `id="class-table"`, "the class table")
	require.Equal(t, len(fixtureClass().Submissions), strings.Count(dom, `<td class="student">`), "a row per student")
	requirePresent(t, dom, `<svg class="chart tasks"`, "the chart of tasks passed")
	requirePresent(t, dom, `<svg class="chart hist"`, "the histogram of totals")
	requirePresent(t, dom, `data-sortable="on">`, "the page's own script ran (its CSP hash matches)")
	requirePresent(t, dom, `<button type="button">`, "the script made the headings sort buttons")
	// What the students wrote stayed text.
	require.Equal(t, wantTitle, titleRe.FindStringSubmatch(dom)[1], "no script changed the title")
	requireAbsent(t, dom, "<img", "no element came from a student's name")
	requireAbsent(t, dom, "data-pwned", "no script from a log line ran")
	require.Equal(t, 1, strings.Count(dom, "<script"), "the page's own script is the only one")
	requirePresent(t, dom, "&lt;img src=x onerror=alert(1)&gt;", "the name is shown as text")

	// Feedback is folded; a cell's link unfolds the student's and lands on
	// the task that lost points.
	require.Zero(t, strings.Count(dom, `<details class="more" open`), "every feedback folded at first")
	link := regexp.MustCompile(`<td class="num cell lvl-(?:part|zero)"[^>]*><a href="#([^"]+)">`).FindStringSubmatch(page)
	require.NotNil(t, link, "a cell that lost points links to its task")
	requirePresent(t, page, `id="`+link[1]+`"`, "the link's target")
	dom = headless(t, bin, "--dump-dom", "file://"+file+"#"+link[1])
	require.Equal(t, 1, strings.Count(dom, `<details class="more" open`), "the link unfolds that student's feedback only")

	// The filter (prefilled from ?q=, as a bookmark would): a task's ID
	// keeps the rows that lost points on it; a word keeps the rows that
	// say it.
	dom = headless(t, bin, "--dump-dom", "file://"+file+"?q=failed+4.2")
	lost := len(regexp.MustCompile(`href="#s-[0-9]+-4\.2"`).FindAllString(page, -1))
	require.NotZero(t, lost)
	require.Equal(t, len(fixtureClass().Submissions)-lost, strings.Count(dom, `<tr hidden="">`), "only the rows that lost points on 4.2 stay")

	// Were markup to get through, the policy still lets no script run but
	// the page's own.
	injected := strings.Replace(page, "<body>", `<body><script>document.title='pwned';document.body.dataset.pwned='script'</script>`+
		`<img src=x onerror="document.title='pwned';document.body.dataset.pwned='img'"><svg onload="document.body.dataset.pwned='svg'"></svg>`, 1)
	bad := filepath.Join(dir, "report-injected.html")
	require.NoError(t, os.WriteFile(bad, []byte(injected), 0o644))
	dom = headless(t, bin, "--dump-dom", "file://"+bad)
	require.Equal(t, wantTitle, titleRe.FindStringSubmatch(dom)[1], "the CSP blocks injected script")
	requireAbsent(t, dom, "data-pwned", "the CSP blocks injected event handlers")
	requirePresent(t, dom, `data-sortable="on">`, "and still runs the page's own")

	// Without its script the page reads the same, only unsorted.
	// (--dump-dom needs script enabled, so the script is taken out.)
	noScript := regexp.MustCompile(`(?s)<script>.*</script>`).ReplaceAllString(page, "")
	plain := filepath.Join(dir, "report-noscript.html")
	require.NoError(t, os.WriteFile(plain, []byte(noScript), 0o644))
	dom = headless(t, bin, "--dump-dom", "file://"+plain)
	require.Equal(t, len(fixtureClass().Submissions), strings.Count(dom, `<td class="student">`))
	requirePresent(t, dom, `<svg class="chart hist"`, "the histogram without script")
	requireAbsent(t, dom, `data-sortable="on"`, "the script was taken out")

	// Screenshots, to look at: the first screen, and the whole page.
	for name, height := range map[string]int{"report.png": 2400, "report-full.png": 10000} {
		shot := filepath.Join(dir, name)
		headless(t, bin, "--screenshot="+shot, fmt.Sprintf("--window-size=1280,%d", height), "file://"+file)
		f, err := os.Open(shot)
		require.NoError(t, err)
		img, err := png.Decode(f)
		f.Close()
		require.NoError(t, err)
		require.Equal(t, 1280, img.Bounds().Dx())
		t.Logf("screenshot: %s", shot)
	}
}
