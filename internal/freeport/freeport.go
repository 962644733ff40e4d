// Package freeport finds a TCP port on the loopback interface that no one
// listens on, for the processes labctl starts (control plane, managers).
package freeport

import "net"

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
