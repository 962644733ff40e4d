package fslock_test

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/fslock"
)

// A second Lock waits for the first to be released, and a wait that is
// cancelled returns at once with the context's error and keeps nothing
// open: the holder's release then lets a new Lock in straight away.
func TestLockWaitsAndCancelsCleanly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := fslock.Lock(t.Context(), path)
	require.NoError(t, err)

	goroutines := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = fslock.Lock(ctx, path)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 5*time.Second, "the cancelled wait returns promptly")
	// The context's timer fires on a goroutine of its own, which may still
	// be finishing; the old implementation left one blocked in flock(2)
	// until the holder let go, so waiting here tells them apart.
	// (require.Eventually runs its own goroutines, so poll by hand.)
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > goroutines && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), goroutines, "no goroutine is left waiting in the kernel")

	got := make(chan error, 1)
	go func() {
		second, err := fslock.Lock(t.Context(), path)
		if err == nil {
			second()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the second Lock returned (%v) while the first still held the lock", err)
	case <-time.After(300 * time.Millisecond):
	}
	unlock()
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the second Lock did not get the lock after the first released it")
	}
}
