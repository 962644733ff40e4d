package grade

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
	"github.com/labctl/labctl/internal/userr"
)

// Files in the output directory.
const (
	GradebookFile = "gradebook.csv"
	ResultsFile   = "results.json"
	JUnitFile     = "junit.xml"
	ReportFile    = "report.html"
	FeedbackDir   = "feedback"
	LogsDir       = "logs"
)

// outputs is the output directory: results.json is the record of every
// student graded there; the other files are rendered from it each time a
// submission finishes, so re-grading one student replaces only that row.
type outputs struct {
	dir    string
	reveal bool
	mu     sync.Mutex
	gb     *report.Gradebook
}

func openOutputs(dir string, lab *labs.Lab, lang string, credit Credit, reveal bool) (*outputs, error) {
	if err := os.MkdirAll(filepath.Join(dir, FeedbackDir), 0o755); err != nil {
		return nil, userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("cannot create the output directory %s: %v", dir, err), "pass --out with a writable directory")
	}
	cols := Columns(lab, lang)
	gb := &report.Gradebook{Lab: lab.ID, Title: lab.Title.In(lang), Lang: lang, Tasks: cols, MaxPoints: float64(lab.MaxPoints()), Credit: string(credit)}
	raw, err := os.ReadFile(filepath.Join(dir, ResultsFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		old, err := report.ReadGradebookJSON(bytes.NewReader(raw))
		if err != nil {
			return nil, userr.Usage(fmt.Sprintf("%s is not a results file of labctl grade: %v", filepath.Join(dir, ResultsFile), err), "pass another --out directory")
		}
		if old.Lab != lab.ID {
			return nil, userr.Usage(fmt.Sprintf("%s holds the grades of %s, not %s", dir, old.Lab, lab.ID), "pass another --out directory for each lab")
		}
		if err := old.SameColumns(cols); err != nil {
			return nil, userr.Usage(fmt.Sprintf("the tasks of %s changed since %s was written: %v", lab.ID, dir, err), "grade the whole class again into a new --out directory")
		}
		if old.Credit != "" && old.Credit != string(credit) {
			return nil, userr.Usage(fmt.Sprintf("%s was graded with --credit %s, not %s", dir, old.Credit, credit), "use the same --credit for every student of a gradebook, or another --out")
		}
		gb.Submissions = old.Submissions
		gb.Policy = old.Policy
	}
	return &outputs{dir: dir, reveal: reveal, gb: gb}, nil
}

// usePolicy names the grading policy of the gradebook; students already in
// it must have been graded under the same one.
func (o *outputs) usePolicy(name string) error {
	if len(o.gb.Submissions) > 0 && o.gb.Policy != name {
		was, now := o.gb.Policy, name
		if was == "" {
			was = "the lab's defaults"
		}
		if now == "" {
			now = "the lab's defaults"
		}
		return userr.Usage(fmt.Sprintf("%s was graded under policy %q, not %q", o.dir, was, now), "use the same --policy for every student of a gradebook, or another --out")
	}
	o.gb.Policy = name
	return nil
}

// record adds a student's result and rewrites every file.
func (o *outputs) record(s *report.GradedSubmission) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.gb.Put(s)
	var errs []error
	write := func(name string, render func(io.Writer) error) {
		var b bytes.Buffer
		if err := render(&b); err != nil {
			errs = append(errs, err)
			return
		}
		errs = append(errs, writeAtomic(filepath.Join(o.dir, name), b.Bytes()))
	}
	write(filepath.Join(FeedbackDir, s.Student+".md"), func(w io.Writer) error {
		return report.WriteFeedbackMarkdown(w, o.gb, s, o.reveal)
	})
	write(ResultsFile, func(w io.Writer) error { return report.WriteGradebookJSON(w, o.gb) })
	write(GradebookFile, func(w io.Writer) error { return report.WriteGradebookCSV(w, o.gb) })
	write(JUnitFile, func(w io.Writer) error { return report.WriteGradebookJUnit(w, o.gb) })
	write(ReportFile, func(w io.Writer) error { return report.WriteHTMLReport(w, o.gb) })
	return errors.Join(errs...)
}

// clearLogs removes a student's logs of an earlier run.
func (o *outputs) clearLogs(student string) {
	_ = os.RemoveAll(filepath.Join(o.dir, LogsDir, student))
}

// saveLog keeps a log of a student's run in logs/<student>/name.
func (o *outputs) saveLog(student, name string, data []byte) {
	dir := filepath.Join(o.dir, LogsDir, student)
	if os.MkdirAll(dir, 0o755) == nil {
		_ = writeAtomic(filepath.Join(dir, name), data)
	}
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
