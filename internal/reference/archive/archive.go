// Package archive packs a reference project (operator/,
// hello-world-operator/) into the zip that labctl embeds, and reads a
// project directory the same way, so a test can tell when an archive is
// stale. The projects are Go modules of their own, which a module zip of
// labctl leaves out: without the archives, `go install
// github.com/labctl/labctl/cmd/labctl@version` would have no reference
// operator to embed.
package archive

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Roots are the files and directories of a kubebuilder project that labctl
// deploys and shows: what `make docker-build` and the solutions need, not
// the project's README or its build output.
var Roots = []string{"PROJECT", "go.mod", "go.sum", "Makefile", "Dockerfile", "cmd", "api", "internal", "config", "hack"}

// File is one file of a project.
type File struct {
	Data []byte
	// Executable is whether a user may run it (hack/*.sh); the only mode
	// bit kept, since checkouts differ in the others (umask).
	Executable bool
}

// modTime is every entry's time, so the same files give the same archive.
var modTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Read returns the project's files under dir by slash path, skipping
// names that start with "." or "_" inside its directories (as go:embed
// does: editor and tool droppings).
func Read(dir string) (map[string]File, error) {
	return ReadFS(os.DirFS(dir))
}

// ReadFS is Read of a file system: a project directory or an archive.
func ReadFS(fsys fs.FS) (map[string]File, error) {
	files := map[string]File{}
	for _, root := range Roots {
		err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p != root && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if d.IsDir() {
				return nil
			}
			if !d.Type().IsRegular() {
				return fmt.Errorf("%s is not a regular file", p)
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			data, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			files[p] = File{Data: data, Executable: info.Mode().Perm()&0o111 != 0}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read the project's %s: %w", root, err)
		}
	}
	return files, nil
}

// Write packs the project under dir as a zip: paths sorted, one fixed
// time, so regenerating unchanged sources changes nothing in git.
func Write(w io.Writer, dir string) error {
	files, err := Read(dir)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(w)
	for _, p := range slices.Sorted(maps.Keys(files)) {
		f := files[p]
		h := &zip.FileHeader{Name: p, Method: zip.Deflate, Modified: modTime}
		mode := fs.FileMode(0o644)
		if f.Executable {
			mode = 0o755
		}
		h.SetMode(mode)
		fw, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		if _, err := fw.Write(f.Data); err != nil {
			return err
		}
	}
	return zw.Close()
}

// Open reads an archive Write made.
func Open(data []byte) (fs.FS, error) {
	return zip.NewReader(bytes.NewReader(data), int64(len(data)))
}

// Diff lists how got (an archive's files) differs from want (the
// project's): paths new in the project, removed from it or changed,
// sorted; empty when equal.
func Diff(want, got map[string]File) []string {
	var out []string
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			out = append(out, "new "+p)
		case !bytes.Equal(g.Data, w.Data):
			out = append(out, "changed "+p)
		case g.Executable != w.Executable:
			out = append(out, "mode of "+p)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			out = append(out, "removed "+p)
		}
	}
	slices.Sort(out)
	return out
}

// WriteFile writes the archive of dir to file, replacing it only once
// complete.
func WriteFile(file, dir string) error {
	var buf bytes.Buffer
	if err := Write(&buf, dir); err != nil {
		return err
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Clean(file))
}
