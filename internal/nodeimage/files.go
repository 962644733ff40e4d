package nodeimage

import (
	"io/fs"
	"os"
	"path/filepath"

	"github.com/labctl/labctl/internal/filecopy"
)

// executables reports whether dir holds every named executable.
func executables(dir string, names ...string) bool {
	for _, n := range names {
		st, err := os.Stat(filepath.Join(dir, n))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

func copyExecutable(src, dst string) error {
	return copyFile(src, dst, 0o755)
}

func copyFile(src, dst string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp := dst + ".tmp"
	if err := filecopy.Into(tmp, os.O_TRUNC, mode, src); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// copyTree copies the regular files under src into dst, keeping their
// modes (kind's scripts stay executable).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		// The module cache is read-only: give the copy write permission.
		return copyFile(p, filepath.Join(dst, rel), info.Mode().Perm()|0o644)
	})
}

// fsCopy copies the embedded tree under root into dst.
func fsCopy(fsys fs.FS, root, dst string) error {
	return fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
}
