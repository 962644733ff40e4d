// Package filecopy copies one regular file's bytes into a new file.
package filecopy

import (
	"fmt"
	"io"
	"os"
)

// Into writes src's bytes to dst, opened with os.O_CREATE|os.O_WRONLY|flag
// and mode: os.O_TRUNC to replace what is there, os.O_EXCL to refuse any
// existing dst, a symlink planted there included (a sandbox copying a
// student's files relies on that). A failed copy leaves dst for the
// caller, who picked its name, to remove or rename over.
func Into(dst string, flag int, mode os.FileMode, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|flag, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return out.Close()
}
