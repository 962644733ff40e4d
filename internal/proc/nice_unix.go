//go:build unix

package proc

import "syscall"

// Renice gives the running process pid the nice value n (higher is
// lower priority); the processes it starts afterwards inherit it. A
// failure is ignored: priority is a courtesy, never a condition.
func Renice(pid, n int) { _ = syscall.Setpriority(syscall.PRIO_PROCESS, pid, n) }
