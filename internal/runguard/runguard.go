// Package runguard keeps a verify run honest about its cluster: a watchdog
// that ends the run when the API server stops answering (so a dead cluster
// is never judged as a failing operator), and markers that let the next run
// delete the namespace of one killed with its cluster or with kill -9.
package runguard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/proc"
)

// errClusterGone ends a run whose cluster stopped answering.
var errClusterGone = errors.New("the API server does not answer")

// Watch cancels ctx (cause errClusterGone) when the API server fails
// to answer /readyz twice in a row. A dead server has nothing to watch, so
// this asks every couple of seconds; a single slow answer on a loaded
// machine is not enough.
func Watch(ctx context.Context, c *cluster.Cluster) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		misses := 0
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			err := kube.Ready(ctx, c.Config, 5*time.Second)
			if err == nil || ctx.Err() != nil {
				misses = 0
				continue
			}
			if misses++; misses >= 2 {
				cancel(fmt.Errorf("%w: %s", errClusterGone, oneLine(err)))
				return
			}
		}
	}()
	return ctx, func() { close(done); cancel(nil) }
}

// Gone tells why a run cannot be judged because of the cluster:
// the watchdog saw it stop, or (when something failed, which a dying API
// server causes before the watchdog's second look) it does not answer now.
func Gone(ctx context.Context, c *cluster.Cluster, failed bool) error {
	if cause := context.Cause(ctx); errors.Is(cause, errClusterGone) {
		return cause
	}
	if !failed {
		return nil
	}
	if err := kube.Ready(context.WithoutCancel(ctx), c.Config, 5*time.Second); err != nil {
		return fmt.Errorf("%w: %s", errClusterGone, oneLine(err))
	}
	return nil
}

func oneLine(err error) string {
	s := err.Error()
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// markerDir holds one file per verify run in progress on a local cluster:
// the run's namespace, holding the pid of the labctl that owns it. A run
// killed with the cluster (or with kill -9) cannot delete its namespace;
// the next verify does.
func markerDir(c *cluster.Cluster) string {
	if c.Env.StateDir == "" {
		return ""
	}
	return filepath.Join(c.Env.StateDir, "verify-namespaces")
}

// RememberNamespace leaves a marker for the run's namespace ns; the
// returned func removes it once the namespace is gone (or going).
func RememberNamespace(c *cluster.Cluster, ns string) func(context.Context) {
	dir := markerDir(c)
	if dir == "" || os.MkdirAll(dir, 0o755) != nil {
		return func(context.Context) {}
	}
	marker := filepath.Join(dir, ns)
	if os.WriteFile(marker, []byte(strconv.Itoa(os.Getpid())), 0o644) != nil {
		return func(context.Context) {}
	}
	return func(ctx context.Context) {
		// Keep the marker while the namespace may still exist and the
		// cluster cannot be asked (it stopped answering).
		if gone, err := namespaceGone(ctx, c, ns); err == nil && gone {
			_ = os.Remove(marker)
		}
	}
}

func namespaceGone(ctx context.Context, c *cluster.Cluster, ns string) (bool, error) {
	cl, err := kube.NewClient(c.Config)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var obj corev1.Namespace
	err = cl.Get(ctx, client.ObjectKey{Name: ns}, &obj)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return obj.DeletionTimestamp != nil, nil
}

// CleanStaleNamespaces deletes the namespaces of verify runs whose labctl
// is gone; the namespace controller removes their objects.
func CleanStaleNamespaces(ctx context.Context, c *cluster.Cluster) {
	dir := markerDir(c)
	entries, err := os.ReadDir(dir)
	if dir == "" || err != nil {
		return
	}
	cl, err := kube.NewClient(c.Config)
	if err != nil {
		return
	}
	for _, e := range entries {
		marker := filepath.Join(dir, e.Name())
		raw, _ := os.ReadFile(marker)
		if pid, err := strconv.Atoi(string(raw)); err == nil && proc.Alive(pid) {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := cl.Delete(dctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.Name()}})
		cancel()
		if err == nil || apierrors.IsNotFound(err) {
			_ = os.Remove(marker)
		}
	}
}
