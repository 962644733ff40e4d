package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/reference"
	"github.com/labctl/labctl/internal/userr"
)

// ResolveProject returns the project in dir, or the embedded reference
// operator (extracted into the user's cache) when dir is empty.
func ResolveProject(dir string) (*Project, error) {
	if dir == "" {
		cache, err := cacheDir()
		if err != nil {
			return nil, err
		}
		dir, err = reference.Dir(cache)
		if err != nil {
			return nil, userr.Wrap(err, userr.ExitFailure, err.Error(), "check free disk space in "+cache)
		}
	}
	return LoadProject(dir)
}

// cacheDir is $XDG_CACHE_HOME/labctl (or the OS user cache dir).
func cacheDir() (string, error) {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		var err error
		if base, err = os.UserCacheDir(); err != nil {
			return "", userr.Env("no cache directory for labctl", "set XDG_CACHE_HOME")
		}
	}
	return filepath.Join(base, "labctl"), nil
}

// Deploy puts the operator of projectDir ("" = the reference operator)
// onto c the way c's provider supports.
func Deploy(ctx context.Context, c *cluster.Cluster, projectDir string, s *iostreams.IOStreams) (*Operator, error) {
	p, err := ResolveProject(projectDir)
	if err != nil {
		return nil, err
	}
	if c.Env.StateDir != "" {
		return RunLocal(ctx, c, p, LocalOptions{Streams: s})
	}
	return nil, userr.New(fmt.Sprintf("deploying into a %s cluster is not wired yet", c.Provider), "use `labctl up --provider local`")
}
