package grade

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/labctl/labctl/internal/grade"
)

// An Opener shows a file to the user: report.html in a browser.
type Opener func(path string) error

// errNoOpener: nothing on this machine opens files in a browser.
var errNoOpener = errors.New("no browser opener")

// openerWait bounds the wait for the opener: xdg-open exits once it has
// handed the file to the browser, but with some browsers it stays until the
// browser is closed, and the grade must not wait for that.
const openerWait = 5 * time.Second

// openerCommand is the system's program that opens a file in its default
// application.
func openerCommand() string {
	if runtime.GOOS == "darwin" {
		return "open"
	}
	return "xdg-open"
}

// SystemOpener opens a file with xdg-open (open on macOS).
func SystemOpener(path string) error {
	name := openerCommand()
	bin, err := exec.LookPath(name)
	if err != nil {
		return fmt.Errorf("%w: no %s on PATH", errNoOpener, name)
	}
	cmd := exec.Command(bin, path) // stdin, stdout, stderr: /dev/null
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	case <-time.After(openerWait):
		// Still running: it has the browser in the foreground.
	}
	return nil
}

// openReport opens the output directory's report.html, when there is one,
// with o.Opener. Whatever goes wrong is one line on stderr, never the
// grade's failure: the grades are written either way.
func openReport(o *Options, dir string) {
	path, err := filepath.Abs(filepath.Join(dir, grade.ReportFile))
	if err != nil {
		path = filepath.Join(dir, grade.ReportFile)
	}
	errOut := o.f.IOStreams.ErrOut
	if _, err := os.Stat(path); err != nil {
		fmt.Fprintf(errOut, "No %s to open: no submission was graded into %s.\n", grade.ReportFile, dir)
		return
	}
	opener := o.Opener
	if opener == nil {
		opener = SystemOpener
	}
	if err := opener(path); err != nil {
		if errors.Is(err, errNoOpener) {
			fmt.Fprintf(errOut, "Cannot open the report here (%v); open %s in a browser.\n", err, path)
			return
		}
		fmt.Fprintf(errOut, "Could not open the report (%v); open %s in a browser.\n", err, path)
		return
	}
	fmt.Fprintf(errOut, "Opened %s.\n", path)
}
