// Package xdg resolves labctl's cache directory, the one place that reads
// XDG_CACHE_HOME: the control-plane binaries, the deployed projects' build
// state and doctor's disk check must all agree on it.
package xdg

import (
	"fmt"
	"os"
	"path/filepath"
)

// CacheDir is $XDG_CACHE_HOME/labctl (or labctl in the OS user cache dir,
// ~/.cache on Linux), joined with sub.
func CacheDir(sub ...string) (string, error) {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		var err error
		if base, err = os.UserCacheDir(); err != nil {
			return "", fmt.Errorf("cannot find a cache directory (set XDG_CACHE_HOME): %w", err)
		}
	}
	return filepath.Join(append([]string{base, "labctl"}, sub...)...), nil
}
