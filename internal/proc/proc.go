// Package proc starts and stops the background processes labctl owns (the
// local control plane, operator managers). labctl remembers each one as a
// Record (pid and start time) in its state files and stops only processes
// that match a record: a pid reused by another program, or a user's
// `tail -f` of a log, is never touched.
package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Process is a running process found on the machine.
type Process struct {
	PID  int
	Name string // base name of argv[0]
	Args []string
}

// Spec describes a background process to start.
type Spec struct {
	Name    string // for messages
	Path    string
	Args    []string
	Env     []string // added to the environment
	Dir     string
	LogFile string // stdout and stderr are appended here
	// TiedToParent kills the process when the starting process dies (tests);
	// otherwise it gets its own session and outlives labctl.
	TiedToParent bool
}

// Running is a process this labctl started; Exited closes when it ends.
type Running struct {
	Spec   Spec
	PID    int
	Exited <-chan struct{}
	err    error
}

// Record returns what identifies the process later.
func (r *Running) Record() Record {
	st, _ := StartTime(r.PID)
	return Record{PID: r.PID, Start: st}
}

// Record identifies a process labctl started: its pid and its start time
// (clock ticks after boot, field 22 of /proc/PID/stat), which together
// never name another process, even after the pid is reused.
type Record struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// Alive reports whether the recorded process still runs (not a zombie).
func (r Record) Alive() bool {
	if r.PID <= 0 || !Alive(r.PID) {
		return false
	}
	st, err := StartTime(r.PID)
	return err == nil && st == r.Start
}

// Err is the process's exit error once Exited is closed.
func (r *Running) Err() error { return r.err }

func mentions(args []string, dir string) bool {
	for _, a := range args {
		if i := strings.Index(a, dir); i >= 0 {
			rest := a[i+len(dir):]
			if rest == "" || rest[0] == '/' {
				return true
			}
		}
	}
	return false
}

// Tail returns the last n non-empty lines of a log file.
func Tail(path string, n int) []string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	if len(raw) > 64<<10 {
		raw = raw[len(raw)-64<<10:]
	}
	var lines []string
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// SupervisorRecord is the record file of an operator's supervisor, in
// the operator's directory under a local cluster's operators/.
const SupervisorRecord = "supervisor.json"

// SaveRecord writes a record file (atomically).
func SaveRecord(path string, r Record) error {
	raw := fmt.Sprintf("{\"pid\":%d,\"start\":%d}\n", r.PID, r.Start)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(raw), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// LoadRecords reads the record files matching a glob pattern; unreadable
// ones are skipped (they name no process labctl could recognise).
func LoadRecords(pattern string) []Record {
	paths, _ := filepath.Glob(pattern)
	var out []Record
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var r Record
		if _, err := fmt.Sscanf(strings.TrimSpace(string(raw)), "{\"pid\":%d,\"start\":%d}", &r.PID, &r.Start); err == nil && r.PID > 0 {
			out = append(out, r)
		}
	}
	return out
}
