//go:build !linux

package sandbox_test

// maybeProbe: the user-namespace probe is Linux's (seccomp_linux_test.go).
func maybeProbe() {}
