package grade

import (
	"bytes"
	"strings"
	"sync"

	"github.com/labctl/labctl/internal/iostreams"
)

// stepLog collects what deploying a submission prints (the grade.log of
// the student) and reports each step as it starts, for the progress
// display: verbose, non-terminal streams announce a step as "• title ...".
type stepLog struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	line   []byte
	onStep func(string)
}

func newStepLog(onStep func(string)) *stepLog { return &stepLog{onStep: onStep} }

func (l *stepLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.buf.Write(p)
	var steps []string
	for _, b := range p {
		if b != '\n' {
			l.line = append(l.line, b)
			continue
		}
		if t, ok := strings.CutPrefix(string(l.line), "• "); ok {
			steps = append(steps, strings.TrimSuffix(t, " ..."))
		}
		l.line = l.line[:0]
	}
	l.mu.Unlock()
	for _, s := range steps {
		l.onStep(s)
	}
	return len(p), nil
}

// Bytes returns everything written.
func (l *stepLog) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.buf.Bytes())
}

// streams are plain, verbose streams writing into the log.
func (l *stepLog) streams() *iostreams.IOStreams {
	s, _, _ := iostreams.Test(false)
	s.Out, s.ErrOut = l, l
	s.Verbose = true
	return s
}
