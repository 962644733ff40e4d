// Package reference provides the course's reference operator (operator/ in
// this repository, embedded into labctl) as a project directory on disk, so
// a user with only the labctl binary can deploy it.
package reference

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	postgresoperator "github.com/example/postgres-operator"
)

// Source is the embedded project.
var Source fs.FS = postgresoperator.Source

// Dir returns a directory holding the reference operator's source,
// extracting it into cacheDir/reference/<content hash> the first time.
func Dir(cacheDir string) (string, error) {
	sum, err := hash(Source)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cacheDir, "reference", sum[:16])
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return dir, nil
	}
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.CopyFS(tmp, Source); err != nil {
		return "", fmt.Errorf("extract the reference operator: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o644); err != nil {
		return "", err
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return dir, nil
}

func hash(fsys fs.FS) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(raw))
		h.Write(raw)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}
