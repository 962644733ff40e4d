package deploy

import (
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
