//go:build linux

package local_test

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func readAll(r io.ReadCloser) (string, error) {
	defer r.Close()
	b, err := io.ReadAll(r)
	return string(b), err
}

// waitForWrite blocks until path (or its directory) changes, using
// inotify rather than sleeping.
func waitForWrite(t *testing.T, path string) {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	require.NoError(t, err)
	defer unix.Close(fd)
	_, err = unix.InotifyAddWatch(fd, filepath.Dir(path), unix.IN_MODIFY|unix.IN_CREATE|unix.IN_CLOSE_WRITE)
	require.NoError(t, err)
	buf := make([]byte, 4096)
	// a one-second bound: the caller re-checks and enforces its deadline
	_, _ = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 1000)
	_, _ = unix.Read(fd, buf[:0])
}

func writeForeignKubeconfig(t *testing.T, path string) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["mine"] = &clientcmdapi.Cluster{Server: "https://example.invalid"}
	cfg.AuthInfos["mine"] = &clientcmdapi.AuthInfo{Token: "secret"}
	cfg.Contexts["mine"] = &clientcmdapi.Context{Cluster: "mine", AuthInfo: "mine"}
	cfg.CurrentContext = "mine"
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
}
