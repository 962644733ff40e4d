package operator

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Fingerprint fingerprints what `go build` of a project reads: every file
// under the project (vendor and embedded assets included), skipping bin/,
// testdata/, hidden directories and tests, by path, mode and content.
// Contents, not sizes and times: a manager cached under this key is the
// build of exactly these sources, whoever set the files' times. toolchain
// (the go command's version and target) is part of the key.
func Fingerprint(dir, toolchain string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "toolchain %s\n", toolchain)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != dir && (strings.HasPrefix(name, ".") || name == "bin" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, "_test.go") || !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(h, "%q %o %d\n", rel, info.Mode().Perm()&0o111, info.Size())
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(h, f)
		return err
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

// SourceFingerprint fingerprints the sources alone (no toolchain): what a
// running manager was built from, to tell later whether they changed.
func SourceFingerprint(dir string) (string, error) { return Fingerprint(dir, "") }
