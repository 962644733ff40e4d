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
