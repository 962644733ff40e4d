// Package fslock serialises labctl processes on a file: two `labctl up` in
// two terminals, or parallel test packages building the same binaries.
package fslock

import (
	"context"
	"os"
	"time"

	"github.com/gofrs/flock"
)

// retryDelay is how often a waiting Lock tries again. The holders are
// builds and deploys that take seconds to minutes, so a tenth of a second
// costs nothing in wait and keeps cancellation prompt.
const retryDelay = 100 * time.Millisecond

// Lock takes an exclusive lock on path (flock on Unix, LockFileEx on
// Windows; the file is created if missing), waiting until it is free or ctx
// ends. A cancelled wait leaves nothing behind: no descriptor, no goroutine
// still blocked in the kernel. The returned func releases the lock.
func Lock(ctx context.Context, path string) (func(), error) {
	l := flock.New(path, flock.SetFlag(os.O_CREATE|os.O_RDWR), flock.SetPermissions(0o644))
	locked, err := l.TryLockContext(ctx, retryDelay)
	if err != nil {
		return nil, err
	}
	if !locked { // only when ctx ended between two tries
		return nil, context.Cause(ctx)
	}
	return func() { _ = l.Unlock() }, nil
}
