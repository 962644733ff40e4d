package cmdutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/labctl/labctl/internal/userr"
)

// Dir checks that a directory flag names a directory and returns its
// absolute path. A missing path and a file are different mistakes and are
// named as such.
func Dir(path, flag string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", userr.Usage(fmt.Sprintf("%s %s: %v", flag, path, err), "pass "+flag+" with a directory")
	}
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", userr.Usage(fmt.Sprintf("%s %s: the directory does not exist", flag, abs), "pass "+flag+" with the path to your kubebuilder project")
	case err != nil:
		return "", userr.Usage(fmt.Sprintf("%s %s: %v", flag, abs, err), "pass "+flag+" with a directory you can read")
	case !st.IsDir():
		return "", userr.Usage(fmt.Sprintf("%s %s is a file, not a directory", flag, abs), "pass "+flag+" with the project's directory (the one holding go.mod and PROJECT)")
	}
	return abs, nil
}
