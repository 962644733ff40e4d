// Package kubeconfig merges cluster contexts into the user's kubeconfig and
// removes them again, never touching entries labctl did not write.
package kubeconfig

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

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
// not an error.
func Remove(path, contextName string) error {
	if path == "" {
		path = DefaultPath()
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
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
	if err != nil {
		return nil // created by Merge; write says why when it cannot be
	}
	if err := checkWritable(path, st.Mode()); err != nil {
		return unwritable(path, err)
	}
	return nil
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
