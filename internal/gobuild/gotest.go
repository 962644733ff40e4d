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

// Ran reports whether any test ran.
func (r *TestRun) Ran() bool { return len(r.Passed)+len(r.Failed) > 0 }
