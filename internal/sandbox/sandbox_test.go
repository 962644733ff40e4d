package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.MaybeRun()
	maybeProbe()
	os.Exit(m.Run())
}

// A sandboxed command runs as the box's uid, sees its private copy and
// home, and finds hidden directories empty and the grader's processes
// absent.
func TestSandboxHidesAndDropsRoot(t *testing.T) {
	if sup := sandbox.Probe(); !sup.OK {
		t.Skip(sup.Reason)
	}
	root := t.TempDir()
	secret := filepath.Join(root, "secret")
	require.NoError(t, os.MkdirAll(secret, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(secret, "key"), []byte("s3cret"), 0o644))
	src := filepath.Join(root, "submission")
	require.NoError(t, os.MkdirAll(src, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(secret, "key"), filepath.Join(src, "link")))

	uid := sandbox.UIDFor(root)
	box, err := sandbox.NewBox(filepath.Join(root, "work", "box"), uid, []string{secret, filepath.Join(root, "work")})
	require.NoError(t, err)
	require.NoError(t, sandbox.CopyTree(context.Background(), src, box.Src(), sandbox.CopyLimits{Bytes: 1 << 20}))
	_, err = os.Lstat(filepath.Join(box.Src(), "link"))
	require.ErrorIs(t, err, os.ErrNotExist, "symbolic links are not copied")

	spec := box.Spec(box.Src(), []string{"PATH=/usr/bin:/bin"})
	script := `id -u; cat main.go; ls ` + secret + ` 2>/dev/null | wc -l; echo x > ` + box.Home() + `/w && echo home-writable;
(echo x > main.go) 2>/dev/null || echo src-readonly; ls /proc | grep -c '^[0-9]'; echo $HOME; env | grep -c LABCTL; true`
	start := time.Now()
	cmd, err := spec.Command([]string{"sh", "-c", script}, nil)
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), errOut.String())
	t.Logf("sandboxed command ran in %s", time.Since(start))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 8, out.String())
	assert.Equal(t, strconv.Itoa(uid), lines[0])
	assert.Equal(t, "package main", lines[1])
	assert.Equal(t, "0", lines[2], "the secret directory looks empty")
	assert.Equal(t, "home-writable", lines[3])
	assert.Equal(t, "src-readonly", lines[4])
	// sh, ls and grep at most (grep may not have started when ls reads
	// /proc); the grader's hundreds of processes are not there.
	procs, err := strconv.Atoi(lines[5])
	require.NoError(t, err)
	assert.LessOrEqual(t, procs, 3, "only its own processes (sh, ls and grep)")
	assert.Equal(t, box.Home(), lines[6])
	assert.Equal(t, "0", lines[7], "no variable of the grader's")
	raw, err := os.ReadFile(filepath.Join(box.Src(), "main.go"))
	require.NoError(t, err)
	assert.Equal(t, "package main\n", string(raw))
}

func TestCopyTreeBoundsSize(t *testing.T) {
	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "big"), make([]byte, 2048), 0o644))
	err := sandbox.CopyTree(context.Background(), src, filepath.Join(t.TempDir(), "dst"), sandbox.CopyLimits{Bytes: 1024})
	require.Error(t, err)
}

func TestCopyTreeBoundsFilesAndTime(t *testing.T) {
	src := t.TempDir()
	for i := range 50 {
		require.NoError(t, os.WriteFile(filepath.Join(src, fmt.Sprintf("f%d", i)), nil, 0o644))
	}
	err := sandbox.CopyTree(context.Background(), src, filepath.Join(t.TempDir(), "dst"), sandbox.CopyLimits{Files: 10})
	require.ErrorContains(t, err, "more than 10 files")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = sandbox.CopyTree(ctx, src, filepath.Join(t.TempDir(), "dst"), sandbox.CopyLimits{})
	require.ErrorIs(t, err, context.Canceled)
}

func TestUIDForIsUnprivilegedAndStable(t *testing.T) {
	a, b := sandbox.UIDFor("work\x00alice"), sandbox.UIDFor("work\x00bob")
	assert.NotEqual(t, a, b)
	assert.Equal(t, a, sandbox.UIDFor("work\x00alice"))
	assert.Greater(t, a, 1<<20)
}

// BenchmarkSandboxSetup is what sandboxing adds to a submission: a box,
// a private copy of the reference operator, the build cache's upper layer
// and a command started in new namespaces as the box's user.
func BenchmarkSandboxSetup(b *testing.B) {
	if sup := sandbox.Probe(); !sup.OK {
		b.Skip(sup.Reason)
	}
	for i := 0; i < b.N; i++ {
		root := b.TempDir()
		box, err := sandbox.NewBox(filepath.Join(root, "box"), sandbox.UIDFor(root), sandbox.GraderSecrets())
		if err != nil {
			b.Fatal(err)
		}
		if err := sandbox.CopyTree(context.Background(), "../../operator", box.Src(), sandbox.CopyLimits{Bytes: 1 << 30}); err != nil {
			b.Fatal(err)
		}
		ov, _, release, err := box.GoCache(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		spec := box.Spec(box.Src(), []string{"PATH=/usr/bin:/bin"})
		spec.Overlays = append(spec.Overlays, ov)
		cmd, err := spec.Command([]string{"true"}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		release()
	}
}

// The sandbox's root is an allow-list: the machine's programs and
// configuration, its own scratch and binds. A world-readable file
// anywhere else does not exist inside, and /proc/self/mountinfo names
// no hidden place (a deny-list of covered paths would list them all).
func TestSandboxRootIsAnAllowList(t *testing.T) {
	if sup := sandbox.Probe(); !sup.OK {
		t.Skip(sup.Reason)
	}
	root := t.TempDir()
	elsewhere := filepath.Join(root, "another-students-work")
	require.NoError(t, os.MkdirAll(elsewhere, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(elsewhere, "answer.go"), []byte("package answer\n"), 0o644))
	hidden := filepath.Join(root, "roster-of-the-class")
	require.NoError(t, os.MkdirAll(hidden, 0o755))

	box, err := sandbox.NewBox(filepath.Join(root, "box"), sandbox.UIDFor(root), []string{hidden})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(box.Src(), 0o755))
	spec := box.Spec(box.Src(), []string{"PATH=/usr/bin:/bin"})
	script := `cat ` + elsewhere + `/answer.go 2>/dev/null || echo no-answer;
ls /var/lib /opt /root /run/user 2>/dev/null | wc -l;
cat /proc/self/mountinfo; echo x > /dev/null && echo devnull-ok; (echo x > /etc/x) 2>/dev/null || echo etc-readonly; ls /usr/bin/sh >/dev/null && echo usr-ok`
	cmd, err := spec.Command([]string{"sh", "-c", script}, nil)
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), errOut.String())
	got := out.String()
	lines := strings.Split(strings.TrimSpace(got), "\n")
	assert.Equal(t, "no-answer", lines[0])
	assert.Equal(t, "0", lines[1], "nothing of /var/lib, /opt, /root, /run/user")
	assert.NotContains(t, got, "roster-of-the-class", "mountinfo names no hidden path")
	assert.NotContains(t, got, "another-students-work")
	assert.Contains(t, got, "devnull-ok")
	assert.Contains(t, got, "etc-readonly")
	assert.Contains(t, got, "usr-ok")
}

// Commands of one box that run at once each mount the Go cache overlay on
// a layer of their own (a shared upper or work directory breaks the
// second mount); one after another, they reuse a layer and see what the
// one before wrote.
func TestGoCacheLayersForCommandsAtOnce(t *testing.T) {
	if sup := sandbox.Probe(); !sup.OK {
		t.Skip(sup.Reason)
	}
	if !sandbox.OverlaySupported() {
		t.Skip("no overlayfs here")
	}
	root := t.TempDir()
	box, err := sandbox.NewBox(filepath.Join(root, "box"), sandbox.UIDFor(root), nil)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(box.Src(), 0o755))
	lower := filepath.Join(root, "cache")
	require.NoError(t, os.MkdirAll(lower, 0o755))
	run := func(script string) (string, error) {
		ov, dst, release, err := box.GoCache(lower)
		if err != nil {
			return "", err
		}
		defer release()
		spec := box.Spec(box.Src(), []string{"PATH=/usr/bin:/bin", "C=" + dst})
		spec.Overlays = append(spec.Overlays, ov)
		cmd, err := spec.Command([]string{"/bin/sh", "-c", script}, nil)
		if err != nil {
			return "", err
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			out, err := run(`echo x > "$C/00/entry" && sleep 0.2 && cat "$C/00/entry"`)
			if err != nil {
				errs[i] = fmt.Errorf("%w: %s", err, out)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
	out, err := run(`cat "$C/00/entry"`)
	require.NoError(t, err, out)
	assert.Equal(t, "x\n", out, "a later command sees what one before it wrote")
	layers, _ := filepath.Glob(filepath.Join(box.Root, "gocache*"))
	assert.LessOrEqual(t, len(layers), len(errs))
}
