// Package homedir makes sure labctl knows the user's home directory before
// anything derives a path from it. Without HOME, Go and client-go fall back
// to the working directory (./.kube/config) or the shared /tmp
// (/tmp/.local/state): a cluster's keys would land where anyone can read
// them.
package homedir

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/labctl/labctl/internal/userr"
)

// Ensure sets HOME from the user database when it is unset and returns a
// note saying so; it fails (exit 4) when there is no home to use.
func Ensure() (note string, err error) {
	if os.Getenv("HOME") != "" {
		return "", nil
	}
	u, err := user.Current()
	home := ""
	if err == nil {
		home = u.HomeDir
	}
	if st, serr := os.Stat(home); home == "" || home == "/" || serr != nil || !st.IsDir() {
		return "", userr.Env("HOME is not set and your user has no home directory in the user database",
			"set HOME to a directory of yours (labctl keeps clusters under $HOME/.local/state and merges contexts into $HOME/.kube/config)")
	}
	if err := os.Setenv("HOME", home); err != nil {
		return "", err
	}
	// client-go computed these from the empty HOME when it was loaded.
	clientcmd.RecommendedConfigDir = filepath.Join(home, clientcmd.RecommendedHomeDir)
	clientcmd.RecommendedHomeFile = filepath.Join(clientcmd.RecommendedConfigDir, clientcmd.RecommendedFileName)
	return fmt.Sprintf("note: HOME is not set; using %s, the home directory of user %s", home, u.Username), nil
}
