// Package kubeconfig merges cluster contexts into the user's kubeconfig and
// removes them again, never touching entries labctl did not write. It
// writes as kubectl does: under kubectl's lock file (<file>.lock), through
// symlinks to the file they name, and, with several files in KUBECONFIG,
// removing a context from the file that holds it.
package kubeconfig

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/labctl/labctl/internal/userr"
)

// DefaultPath is where kubectl reads and writes: the first entry of
// $KUBECONFIG, else ~/.kube/config.
func DefaultPath() string {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	return rules.GetDefaultFilename()
}

// Merge copies the named context (with its cluster and user, which share
// the context's name) from src into the kubeconfig at path, replacing only
// entries of that name, and makes it the current context as kind does.
func Merge(path string, src *clientcmdapi.Config, contextName string) error {
	if path == "" {
		path = DefaultPath()
	}
	ctx, ok := src.Contexts[contextName]
	if !ok {
		return fmt.Errorf("kubeconfig has no context %q", contextName)
	}
	path, unlock, err := lockFile(path)
	if err != nil {
		return err
	}
	defer unlock()
	dst, err := load(path)
	if err != nil {
		return err
	}
	dst.Clusters[contextName] = src.Clusters[ctx.Cluster].DeepCopy()
	dst.AuthInfos[contextName] = src.AuthInfos[ctx.AuthInfo].DeepCopy()
	c := ctx.DeepCopy()
	c.Cluster, c.AuthInfo = contextName, contextName
	dst.Contexts[contextName] = c
	dst.CurrentContext = contextName
	return write(path, dst)
}

// Remove deletes the context and its same-named cluster and user; if it was
// current, no context is current afterwards. A missing file or context is
// not an error. With path "" every file of KUBECONFIG is looked at, as
// `kubectl config delete-context` finds the file that holds the context.
func Remove(path, contextName string) error {
	if path != "" {
		return removeFrom(path, contextName)
	}
	for _, p := range clientcmd.NewDefaultClientConfigLoadingRules().GetLoadingPrecedence() {
		if err := removeFrom(p, contextName); err != nil {
			return err
		}
	}
	return nil
}

func removeFrom(path, contextName string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	path, unlock, err := lockFile(path)
	if err != nil {
		return err
	}
	defer unlock()
	dst, err := load(path)
	if err != nil {
		return err
	}
	if _, ok := dst.Contexts[contextName]; !ok {
		return nil
	}
	delete(dst.Contexts, contextName)
	delete(dst.Clusters, contextName)
	delete(dst.AuthInfos, contextName)
	if dst.CurrentContext == contextName {
		dst.CurrentContext = ""
	}
	return write(path, dst)
}

// CheckWritable reports, before any work, whether Merge could write the
// kubeconfig at path ("" = the default): it must parse, and an existing
// file must be writable (its permission bits too: root can open anything).
func CheckWritable(path string) error {
	if path == "" {
		path = DefaultPath()
	}
	if _, err := load(path); err != nil {
		return err
	}
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		// Merge will create it: its directory must take a new file.
		if err := checkCreatable(filepath.Dir(path)); err != nil {
			return unwritable(path, err)
		}
		return nil
	}
	if err != nil {
		return unwritable(path, err)
	}
	if err := checkWritable(path, st.Mode()); err != nil {
		return unwritable(path, err)
	}
	return nil
}

// checkCreatable creates and removes a file in dir, making dir first if
// needed; whatever directories it made it removes again, so a probe that
// ends the command leaves no empty ~/.kube behind (Merge makes them when
// it writes).
func checkCreatable(dir string) error {
	var made []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || !errors.Is(err, os.ErrNotExist) || filepath.Dir(d) == d {
			break
		}
		made = append(made, d)
	}
	defer func() {
		for _, d := range made { // deepest first
			_ = os.Remove(d)
		}
	}()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	probe, err := os.CreateTemp(dir, ".labctl-probe-*")
	if err != nil {
		return err
	}
	probe.Close()
	return os.Remove(probe.Name())
}

// MergeFile merges the named context of the kubeconfig file src (a
// cluster's own) into the one at path, as Merge; when that fails, the
// error's next step also says where the cluster's own kubeconfig is, since
// the cluster itself is running.
func MergeFile(path, src, contextName string) error {
	cfg, err := clientcmd.LoadFromFile(src)
	if err != nil {
		return err
	}
	if err := Merge(path, cfg, contextName); err != nil {
		var ue *userr.Error
		if errors.As(err, &ue) {
			ue.Next += fmt.Sprintf("; the cluster is running and its kubeconfig is %s", src)
		}
		return err
	}
	return nil
}

// lockWait is how long a write waits for another writer's lock file.
var lockWait = 5 * time.Second

// lockFile takes kubectl's lock on the kubeconfig at path (after following
// symlinks, so the real file is locked and replaced, and a symlinked
// kubeconfig stays a symlink): <file>.lock, created exclusively, as
// client-go's ModifyConfig does. It returns the resolved path and the
// release.
func lockFile(path string) (string, func(), error) {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	} else if link, lerr := os.Readlink(path); lerr == nil {
		// a dangling symlink: write where it points
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(path), link)
		}
		path = link
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", nil, unwritable(path, err)
	}
	lock := path + ".lock"
	deadline := time.Now().Add(lockWait)
	for {
		f, err := os.OpenFile(lock, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			_ = f.Close()
			return path, func() { _ = os.Remove(lock) }, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", nil, unwritable(path, err)
		}
		if time.Now().After(deadline) {
			return "", nil, userr.New(fmt.Sprintf("kubeconfig %s is locked by %s (another kubectl or labctl is writing it)", path, lock),
				"wait for it to finish, or remove "+lock+" if nothing is writing, and run the command again")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func load(path string) (*clientcmdapi.Config, error) {
	cfg, err := clientcmd.LoadFromFile(path)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		// nothing there yet (a path below a file cannot exist either;
		// writing will say why it cannot be created)
		return clientcmdapi.NewConfig(), nil
	}
	if err != nil {
		return nil, userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("cannot read kubeconfig %s: %v", path, err),
			"fix or move that file, or set KUBECONFIG to another file")
	}
	return cfg, nil
}

func write(path string, cfg *clientcmdapi.Config) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return unwritable(path, err)
	}
	// WriteToFile writes in place; write a sibling and rename so a failure
	// half-way never leaves the user's kubeconfig truncated.
	tmp := path + ".labctl-tmp"
	if err := clientcmd.WriteToFile(*cfg, tmp); err != nil {
		_ = os.Remove(tmp)
		return unwritable(path, err)
	}
	if st, err := os.Stat(path); err == nil {
		if err := os.Chmod(tmp, st.Mode().Perm()); err != nil {
			_ = os.Remove(tmp)
			return unwritable(path, err)
		}
		if err := checkWritable(path, st.Mode()); err != nil {
			_ = os.Remove(tmp)
			return unwritable(path, err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return unwritable(path, err)
	}
	return nil
}

// checkWritable refuses to replace a file the user made read-only: rename
// would succeed in a writable directory, silently defeating that choice.
// root can open any file for writing, so the permission bits decide too.
func checkWritable(path string, mode os.FileMode) error {
	if mode.Perm()&0o222 == 0 {
		return &os.PathError{Op: "write", Path: path, Err: syscall.EACCES}
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

func unwritable(path string, err error) error {
	what := fmt.Sprintf("cannot write kubeconfig %s", path)
	if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EROFS) || os.IsPermission(err) {
		what += ": permission denied"
	} else {
		what += ": " + err.Error()
	}
	return userr.Wrap(err, userr.ExitFailure, what, "make it writable, or set KUBECONFIG to a writable file and run the command again")
}
