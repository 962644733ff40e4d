// Package diskfree says how much disk space an unprivileged user may still
// write under a path (statfs's f_bavail; GetDiskFreeSpaceEx on Windows),
// for the checks that refuse to start a build or a cluster on a full disk.
package diskfree

// Available returns the bytes free for the current user on path's file
// system.
func Available(path string) (uint64, error) { return available(path) }
