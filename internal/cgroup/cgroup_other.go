//go:build !linux

package cgroup

// Cgroups are Linux's: elsewhere there is nothing to limit with.

// Detect finds no cgroups.
func Detect() Support { return Support{Reason: "cgroups are Linux's"} }

// New cannot make a group here.
func New(string, Limits) (Group, error) { return nil, ErrUnsupported }

// Pids finds no processes: there are no groups.
func Pids(string) []int { return nil }
