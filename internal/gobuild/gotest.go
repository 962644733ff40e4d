package gobuild

import (
	"bufio"
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// TestRun is what `go test -json` said about a run: which tests passed
// and failed, and, for Ginkgo suites (one Go test running many specs),
// which specs.
type TestRun struct {
	// Passed and Failed are Go tests ("pkg TestName"); Skipped too.
	Passed, Failed, Skipped []string
	// FailedSpecs are the Ginkgo specs reported as failed ("[FAIL] ...").
	FailedSpecs []string
	// Specs is how many Ginkgo specs ran, from "Ran N of M Specs".
	Specs int
	// BuildFailed lists the packages that did not compile; BuildOutput is
	// the compiler's messages.
	BuildFailed []string
	BuildOutput string
	// Coverage is the lowest statement coverage a package reported (-1
	// when none was).
	Coverage float64
	// Output holds the lines the failed tests printed (for evidence).
	Output map[string][]string
	// Lines is every output line, in order (markers a test binary prints).
	Lines []string
}

type testEvent struct {
	ImportPath  string
	Action      string
	Package     string
	Test        string
	Output      string
	FailedBuild string
}

var (
	ranSpecs = regexp.MustCompile(`Ran (\d+) of \d+ Specs?`)
	failSpec = regexp.MustCompile(`^\s*\[FAIL\] (.+?)(\s+\[[A-Za-z]+\])?$`)
	coverage = regexp.MustCompile(`coverage: ([0-9.]+)% of statements`)
	// failedSpecHeader heads Ginkgo's report of a spec (or suite node)
	// that did not pass: "• [FAILED] [2.387 seconds]", "[BeforeSuite] [PANICKED] [...]".
	failedSpecHeader = regexp.MustCompile(`\[(FAILED|PANICKED|TIMEDOUT|INTERRUPTED|ABORTED)\]( DURING REPETITION #\d+)? \[[0-9.]+ seconds\]$`)
	// Ginkgo colours its report unless told not to.
	ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")
)

// ParseTestEvents reads go test -json's stream.
func ParseTestEvents(raw []byte) *TestRun {
	run := &TestRun{Coverage: -1, Output: map[string][]string{}}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	var build strings.Builder
	for sc.Scan() {
		var ev testEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		name := ev.Package
		if ev.Test != "" {
			name += " " + ev.Test
		}
		switch ev.Action {
		case "build-output":
			build.WriteString(ev.Output)
		case "build-fail":
			// "pkg [pkg.test]": the package whose test binary did not build.
			if p, _, _ := strings.Cut(ev.ImportPath, " "); p != "" && !slices.Contains(run.BuildFailed, p) {
				run.BuildFailed = append(run.BuildFailed, p)
			}
		case "output":
			line := ansi.ReplaceAllString(strings.TrimRight(ev.Output, "\n"), "")
			run.Lines = append(run.Lines, line)
			if ev.Test != "" {
				run.Output[name] = append(run.Output[name], line)
			}
			if m := ranSpecs.FindStringSubmatch(line); m != nil {
				n, _ := strconv.Atoi(m[1])
				run.Specs += n
			}
			if m := failSpec.FindStringSubmatch(line); m != nil && !slices.Contains(run.FailedSpecs, m[1]) {
				run.FailedSpecs = append(run.FailedSpecs, m[1])
			}
			if m := coverage.FindStringSubmatch(line); m != nil {
				if c, err := strconv.ParseFloat(m[1], 64); err == nil && (run.Coverage < 0 || c < run.Coverage) {
					run.Coverage = c
				}
			}
		case "pass":
			if ev.Test != "" {
				run.Passed = append(run.Passed, name)
			}
		case "fail":
			switch {
			case ev.Test != "":
				run.Failed = append(run.Failed, name)
			case ev.FailedBuild != "" && !slices.Contains(run.BuildFailed, ev.Package):
				run.BuildFailed = append(run.BuildFailed, ev.Package)
			}
		case "skip":
			if ev.Test != "" {
				run.Skipped = append(run.Skipped, name)
			}
		}
	}
	run.BuildOutput = build.String()
	for name := range run.Output {
		if !slices.Contains(run.Failed, name) {
			delete(run.Output, name)
		}
	}
	return run
}

// Failures are what each failure printed: for a Ginkgo suite, each failed
// spec's report (from its header to Ginkgo's delimiter line), so one spec's
// failure is told from another's; for any other failed test, all it
// printed.
func (r *TestRun) Failures() []string {
	var texts []string
	for _, name := range r.Failed {
		var block []string
		inSpec, found := false, false
		for _, l := range r.Output[name] {
			switch {
			case failedSpecHeader.MatchString(strings.TrimSpace(l)):
				if inSpec {
					texts = append(texts, strings.Join(block, "\n"))
				}
				block, inSpec, found = []string{l}, true, true
			case inSpec && strings.TrimSpace(l) == ginkgoDelimiter:
				texts = append(texts, strings.Join(block, "\n"))
				block, inSpec = nil, false
			case inSpec:
				block = append(block, l)
			}
		}
		switch {
		case inSpec:
			texts = append(texts, strings.Join(block, "\n"))
		case !found:
			texts = append(texts, strings.Join(r.Output[name], "\n"))
		}
	}
	return texts
}

// ginkgoDelimiter is the line Ginkgo ends a spec's report with.
var ginkgoDelimiter = strings.Repeat("-", 30)

// Ran reports whether any test ran.
func (r *TestRun) Ran() bool { return len(r.Passed)+len(r.Failed) > 0 }
