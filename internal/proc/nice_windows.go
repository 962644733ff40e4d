package proc

// Renice leaves the priority alone: Windows has no nice values.
func Renice(pid, n int) {}
