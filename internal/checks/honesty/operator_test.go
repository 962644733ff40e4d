//go:build unix

package honesty_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
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
	"github.com/labctl/labctl/internal/testcluster"
)

// referenceDir is the reference project of that name in this repository
// ("" is the Database operator; see reference.Lookup).
func referenceDir(project string) (string, error) {
	ref, err := reference.Lookup(project)
	if err != nil {
		return "", err
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", ref.RepoDir))
	if err != nil {
		return "", err
	}
	marker := "PROJECT"
	if !ref.Operator {
		marker = "."
	}
	if _, err := os.Stat(filepath.Join(dir, marker)); err != nil {
		return "", fmt.Errorf("the reference project %s is expected in %s: %w", ref.Name, dir, err)
	}
	return dir, nil
}

// workDir is where a project under test is copied: one of two fixed
// paths (slots), because the Go build cache keys compiled packages by
// their directory too. At a fixed path, a mutant whose files are unchanged
// since the last run costs a link, not a compile; two slots let the next
// subtest's project be built while the current one is verified (ahead).
func workDir(project string, slot int) (string, error) {
	ref, err := reference.Lookup(project)
	if err != nil {
		return "", err
	}
	name := ref.Name
	if slot != 0 {
		name = fmt.Sprintf("%s-%d", name, slot+1)
	}
	return filepath.Abs(filepath.Join("..", "..", "..", ".labctl-tmp", "honesty", name))
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
// operator) into its first slot and applies a patch to it ("" for none).
func copyProject(t testing.TB, project, patch string) string {
	t.Helper()
	dir, err := copyInto(project, patch, 0)
	require.NoError(t, err)
	return dir
}

// copyInto copies a reference project into the given slot of its workDir
// (replacing what was there) and applies a patch to it ("" for none).
func copyInto(project, patch string, slot int) (string, error) {
	src, err := referenceDir(project)
	if err != nil {
		return "", err
	}
	dst, err := workDir(project, slot)
	if err != nil {
		return "", err
	}
	if err := os.RemoveAll(dst); err != nil {
		return "", err
	}
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			// .github holds the project's CI workflow (lab 6.3).
			if rel == "bin" || strings.HasPrefix(d.Name(), ".") && rel != "." && rel != ".github" {
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
	if err != nil {
		return "", err
	}
	if patch == "" {
		return dst, nil
	}
	abs, err := filepath.Abs(patch)
	if err != nil {
		return "", err
	}
	cmd := exec.Command("git", "apply", "--verbose", "-p1", abs)
	cmd.Dir = dst
	// dst lies inside this repository's work tree: keep git from finding
	// the repository, or it would patch paths relative to its root.
	cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dst))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git apply %s (regenerate it against operator/?): %w\n%s", patch, err, out.String())
	}
	if strings.Contains(out.String(), "Skipped patch") || !strings.Contains(out.String(), "Applied patch") {
		return "", fmt.Errorf("git apply %s did not apply it:\n%s", patch, out.String())
	}
	return dst, stampPatched(dst, abs)
}

// stampPatched gives the files a patch changed an mtime derived from their
// content, so the same mutant gets the same manager cache entry run after
// run (and different content never shares one).
func stampPatched(dir, patch string) error {
	raw, err := os.ReadFile(patch)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		name, ok := strings.CutPrefix(line, "+++ b/")
		if !ok {
			continue
		}
		path := filepath.Join(dir, filepath.FromSlash(name))
		content, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(content)
		stamp := time.Unix(1_600_000_000, int64(binary.BigEndian.Uint32(sum[:4])))
		if err := os.Chtimes(path, stamp, stamp); err != nil {
			return err
		}
	}
	return nil
}

// deployOperator runs the project as the shared cluster's operator,
// replacing the one running before.
func deployOperator(t testing.TB, dir string) *operator.Operator {
	t.Helper()
	return deployOn(t, env, dir)
}

// deployOn runs the project as c's operator, replacing the one running
// before.
func deployOn(t testing.TB, c *testcluster.Cluster, dir string) *operator.Operator {
	t.Helper()
	p, err := deploy.LoadProject(dir)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	op, err := deploy.RunLocal(ctx, c.Cluster, p, deploy.LocalOptions{TiedToParent: true})
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
