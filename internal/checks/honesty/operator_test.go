//go:build unix

package honesty_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/labctl/labctl/internal/deploy"
	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/operator"
	"github.com/labctl/labctl/internal/reference"
)

// referenceDir is the reference project of that name in this repository
// ("" is the Database operator; see reference.Lookup).
func referenceDir(t testing.TB, project string) string {
	t.Helper()
	ref, err := reference.Lookup(project)
	require.NoError(t, err)
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", ref.RepoDir))
	require.NoError(t, err)
	marker := "PROJECT"
	if !ref.Operator {
		marker = "."
	}
	_, err = os.Stat(filepath.Join(dir, marker))
	require.NoError(t, err, "the reference project %s is expected in %s", ref.Name, dir)
	return dir
}

// workDir is where the operator under test is copied: always the same
// path, because the Go build cache keys compiled packages by their
// directory too. At one path, a mutant whose files are unchanged since the
// last run costs a link, not a compile.
func workDir(t testing.TB, project string) string {
	t.Helper()
	ref, err := reference.Lookup(project)
	require.NoError(t, err)
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", ".labctl-tmp", "honesty", ref.Name))
	require.NoError(t, err)
	return dir
}

// lockWorkDir serialises test runs that share workDir (another engineer's
// `make test` in the same checkout); the lock goes with the process.
func lockWorkDir() error {
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", ".labctl-tmp", "honesty"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
}

// copyOperator copies the Database operator into workDir (replacing what
// was there) and applies a mutant patch to it ("" for none).
func copyOperator(t testing.TB, patch string) string {
	t.Helper()
	return copyProject(t, "", patch)
}

// copyProject copies a reference project (by name, "" for the Database
// operator) into its workDir and applies a patch to it ("" for none).
func copyProject(t testing.TB, project, patch string) string {
	t.Helper()
	src := referenceDir(t, project)
	dst := workDir(t, project)
	require.NoError(t, os.RemoveAll(dst))
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			if rel == "bin" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if strings.HasSuffix(rel, ".out") {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if err := os.WriteFile(out, raw, info.Mode().Perm()); err != nil {
			return err
		}
		// Keep the source's mtime: labctl caches built managers by the
		// project's file names, sizes and mtimes.
		return os.Chtimes(out, info.ModTime(), info.ModTime())
	})
	require.NoError(t, err)
	if patch != "" {
		abs, err := filepath.Abs(patch)
		require.NoError(t, err)
		cmd := exec.Command("git", "apply", "--verbose", "-p1", abs)
		cmd.Dir = dst
		// dst lies inside this repository's work tree: keep git from finding
		// the repository, or it would patch paths relative to its root.
		cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dst))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Run(), "git apply %s (regenerate it against operator/?):\n%s", patch, out.String())
		require.NotContains(t, out.String(), "Skipped patch", "git apply %s:\n%s", patch, out.String())
		require.Contains(t, out.String(), "Applied patch", "git apply %s:\n%s", patch, out.String())
		stampPatched(t, dst, abs)
	}
	return dst
}

// stampPatched gives the files a patch changed an mtime derived from their
// content, so the same mutant gets the same manager cache entry run after
// run (and different content never shares one).
func stampPatched(t testing.TB, dir, patch string) {
	t.Helper()
	raw, err := os.ReadFile(patch)
	require.NoError(t, err)
	for _, line := range strings.Split(string(raw), "\n") {
		name, ok := strings.CutPrefix(line, "+++ b/")
		if !ok {
			continue
		}
		path := filepath.Join(dir, filepath.FromSlash(name))
		content, err := os.ReadFile(path)
		require.NoError(t, err)
		sum := sha256.Sum256(content)
		stamp := time.Unix(1_600_000_000, int64(binary.BigEndian.Uint32(sum[:4])))
		require.NoError(t, os.Chtimes(path, stamp, stamp))
	}
}

// deployOperator runs the project as the local cluster's operator,
// replacing the one running before.
func deployOperator(t testing.TB, dir string) *operator.Operator {
	t.Helper()
	p, err := deploy.LoadProject(dir)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	op, err := deploy.RunLocal(ctx, env.Cluster, p, deploy.LocalOptions{TiedToParent: true})
	require.NoError(t, err)
	t.Logf("deployed in %s", time.Since(start).Round(time.Millisecond))
	return op
}

// waitGarbageCollector waits until the cluster's garbage collector handles
// owners of the operator's kinds. It learns about a newly installed CRD only
// at its next discovery sync (every 30s); until then dependents of a
// deleted Database linger, which would make the first run's cleanup slow.
func waitGarbageCollector(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := env.Namespace(t)
	for _, kind := range []string{"Database", "Backup"} {
		owner := &unstructured.Unstructured{}
		owner.SetAPIVersion("database.example.com/v1")
		owner.SetKind(kind)
		owner.SetNamespace(ns)
		owner.SetName("gc-probe-" + strings.ToLower(kind))
		if kind == "Database" {
			owner.Object["spec"] = map[string]any{"image": "postgres:14", "databaseName": "db", "username": "u", "storage": map[string]any{"size": "1Gi"}}
		} else {
			owner.Object["spec"] = map[string]any{"databaseRef": map[string]any{"name": "gc-probe-missing"}}
		}
		require.NoError(t, env.Client.Create(ctx, owner))
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gc-probe-" + strings.ToLower(kind)}}
		require.NoError(t, controllerutil.SetControllerReference(owner, cm, kube.Scheme))
		require.NoError(t, env.Client.Create(ctx, cm))
		require.NoError(t, env.Client.Delete(ctx, owner))
		_, err := kube.WaitFor(ctx, env.Config, corev1.SchemeGroupVersion.WithResource("configmaps"), ns, cm.Name, 90*time.Second, kube.Gone)
		require.NoError(t, err, "the garbage collector never deleted a dependent of a %s", kind)
	}
}
