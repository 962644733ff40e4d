// Package fslock serialises labctl processes on a file: two `labctl up` in
// two terminals, or parallel test packages building the same binaries.
package fslock

import (
	"context"
	"os"
)

// Lock takes an exclusive flock on path (created if missing), waiting until
// it is free or ctx ends. The returned func releases it.
func Lock(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- lock(f) }()
	select {
	case err := <-done:
		if err != nil {
			f.Close()
			return nil, err
		}
		return func() { _ = unlock(f); f.Close() }, nil
	case <-ctx.Done():
		f.Close() // the pending lock fails with the closed descriptor
		return nil, ctx.Err()
	}
}
