// Package freeport finds a TCP port on the loopback interface that no one
// listens on, for the processes labctl starts (control plane, managers),
// and tells whether a given host port is taken (kind's published ports).
package freeport

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Get asks the kernel for a free loopback port. Another program may take it
// before the caller binds it: callers that start a server on it retry on
// "address in use".
func Get() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// InUse reports whether the TCP port is taken on host ("0.0.0.0" for all
// addresses, where a listener on any address blocks it). It tries to
// listen there itself; where it may not (a privileged port), it asks the
// kernel's socket table, and without one (macOS) it dials 127.0.0.1.
func InUse(host string, port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err == nil {
		l.Close()
		return false
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return true
	}
	if listening, ok := listeningInProc(port); ok {
		return listening
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 500*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// listeningInProc looks for a listening TCP socket on port in
// /proc/net/tcp and tcp6; ok is false when they cannot be read.
func listeningInProc(port int) (listening, ok bool) {
	want := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		ok = true
		for _, line := range strings.Split(string(raw), "\n")[1:] {
			fields := strings.Fields(line)
			// local_address is fields[1] (ADDR:PORT), st is fields[3];
			// 0A is LISTEN.
			if len(fields) > 3 && strings.HasSuffix(fields[1], want) && fields[3] == "0A" {
				return true, true
			}
		}
	}
	return false, ok
}
