package deploy

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/cluster/kind"
	"github.com/labctl/labctl/internal/cluster/local"
	"github.com/labctl/labctl/internal/fslock"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/reference"
	"github.com/labctl/labctl/internal/userr"
	"github.com/labctl/labctl/internal/xdg"
)

// ResolveProject returns the project in dir, or the embedded reference
// operator (extracted into the user's cache) when dir is empty.
func ResolveProject(dir string) (*Project, error) {
	return ResolveProjectFor(dir, "")
}

// ResolveProjectFor returns the project in dir, or, when dir is empty, the
// embedded reference project named ref ("" = the Database operator; see
// reference.Lookup), extracted into the user's cache.
func ResolveProjectFor(dir, ref string) (*Project, error) {
	if dir == "" {
		ref, err := reference.Lookup(ref)
		if err != nil {
			return nil, userr.Wrap(err, userr.ExitUsage, err.Error(), "`labctl labs` lists the labs and their projects")
		}
		cache, err := cacheDir()
		if err != nil {
			return nil, err
		}
		dir, err = ref.Dir(cache)
		if err != nil {
			return nil, userr.Wrap(err, userr.ExitFailure, err.Error(), "check free disk space in "+cache)
		}
	}
	return LoadProject(dir)
}

// cacheDir is $XDG_CACHE_HOME/labctl (or the OS user cache dir).
func cacheDir() (string, error) {
	dir, err := xdg.CacheDir()
	if err != nil {
		return "", userr.Env("no cache directory for labctl", "set XDG_CACHE_HOME")
	}
	return dir, nil
}

// Options tune Deploy.
type Options struct {
	Streams *iostreams.IOStreams
	// Kind is the kind provider to load images with (its engine choice);
	// nil means the default one.
	Kind *kind.Provider
	// TiedToParent makes a local manager die with this process (tests).
	TiedToParent bool
}

// Deploy puts the operator of projectDir ("" = the reference operator)
// onto c the way c's provider supports: a supervised local process on the
// local provider, an image and a Deployment on kind or an existing cluster.
func Deploy(ctx context.Context, c *cluster.Cluster, projectDir string, o Options) (*Operator, error) {
	if c.Provider != local.ProviderName {
		op, handled, err := InClusterFor(ctx, c, projectDir, o.Streams, o.Kind)
		if !handled {
			return nil, userr.New(fmt.Sprintf("labctl cannot deploy into a %s cluster", c.Provider), "use `labctl up --provider local` or `--provider kind`")
		}
		return op, err
	}
	p, err := ResolveProject(projectDir)
	if err != nil {
		return nil, err
	}
	// Two `labctl up` at once: the second waits for the first's deploy
	// instead of stopping its manager half-way through.
	if c.Env.StateDir != "" {
		unlock, err := fslock.Lock(ctx, filepath.Join(c.Env.StateDir, "deploy.lock"))
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	return RunLocal(ctx, c, p, LocalOptions{Streams: o.Streams, TiedToParent: o.TiedToParent})
}
