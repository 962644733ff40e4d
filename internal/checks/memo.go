package checks

import (
	"os"
	"sync"
)

// What a run keeps for several of its steps: results computed once, and
// directories removed when it ends.

// scratchDir creates a directory anyone may read, removed when the run
// ends.
func (r *run) scratchDir(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err == nil {
		r.addScratch(dir)
		err = os.Chmod(dir, 0o755)
	}
	return dir, err
}

func (r *run) addScratch(dir string) {
	r.memoMu.Lock()
	defer r.memoMu.Unlock()
	r.scratch = append(r.scratch, dir)
}

func (r *run) removeScratch() {
	for _, d := range r.scratch {
		os.RemoveAll(d)
	}
}

type memoEntry struct {
	once sync.Once
	v    any
}

// once computes what several steps of the run need (the project's
// tests at baseline) once, under key.
func (r *run) once(key string, compute func() any) any {
	r.memoMu.Lock()
	if r.memo == nil {
		r.memo = map[string]*memoEntry{}
	}
	e, ok := r.memo[key]
	if !ok {
		e = &memoEntry{}
		r.memo[key] = e
	}
	r.memoMu.Unlock()
	e.once.Do(func() { e.v = compute() })
	return e.v
}

// recall returns what once computed under key, if it was asked to (it
// waits for a computation under way).
func (r *run) recall(key string) (any, bool) {
	r.memoMu.Lock()
	e, ok := r.memo[key]
	r.memoMu.Unlock()
	if !ok {
		return nil, false
	}
	e.once.Do(func() {}) // entries are made by once, which computes them
	return e.v, true
}

// sharedControl is a control run one step makes for the steps after it.
type sharedControl struct {
	once sync.Once
	done chan struct{}
	run  baselineRun
	ok   bool
}

// control returns the control run shared under key, and whether the
// caller is the first to ask: then it runs the control, keeps it if it
// can be used, and settles (whatever happened) so that the others stop
// waiting.
func (r *run) control(key string) (shared *sharedControl, ours bool) {
	shared = r.once(key, func() any {
		ours = true
		return &sharedControl{done: make(chan struct{})}
	}).(*sharedControl)
	return shared, ours
}

func (s *sharedControl) keep(b baselineRun) {
	s.run, s.ok = b, true
	s.settle()
}

func (s *sharedControl) settle() { s.once.Do(func() { close(s.done) }) }

// wait returns the control once the step that runs it has settled, and
// whether it ran.
func (s *sharedControl) wait() (baselineRun, bool) {
	<-s.done
	return s.run, s.ok
}
