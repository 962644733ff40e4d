package kubeconfig

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/labctl/labctl/internal/userr"
)

func config(name, server string) *clientcmdapi.Config {
	c := clientcmdapi.NewConfig()
	c.Clusters[name] = &clientcmdapi.Cluster{Server: server}
	c.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: "t-" + name}
	c.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	c.CurrentContext = name
	return c
}

func TestMergeKeepsEverythingElseAndRemoveTakesOnlyOurs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	require.NoError(t, clientcmd.WriteToFile(*config("mine", "https://mine"), path))

	require.NoError(t, Merge(path, config("labctl-x", "https://127.0.0.1:1"), "labctl-x"))
	got, err := clientcmd.LoadFromFile(path)
	require.NoError(t, err)
	assert.Equal(t, "labctl-x", got.CurrentContext)
	assert.Equal(t, "https://mine", got.Clusters["mine"].Server)
	assert.Equal(t, "t-mine", got.AuthInfos["mine"].Token)
	assert.Equal(t, "https://127.0.0.1:1", got.Clusters["labctl-x"].Server)

	// merging again replaces only our entry
	require.NoError(t, Merge(path, config("labctl-x", "https://127.0.0.1:2"), "labctl-x"))
	got, _ = clientcmd.LoadFromFile(path)
	assert.Equal(t, "https://127.0.0.1:2", got.Clusters["labctl-x"].Server)
	assert.Len(t, got.Contexts, 2)

	require.NoError(t, Remove(path, "labctl-x"))
	got, _ = clientcmd.LoadFromFile(path)
	assert.NotContains(t, got.Contexts, "labctl-x")
	assert.Contains(t, got.Contexts, "mine")
	assert.Empty(t, got.CurrentContext, "the removed context is no longer current")
}

func TestMergeCreatesAMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "config")
	require.NoError(t, Merge(path, config("labctl-x", "https://h"), "labctl-x"))
	_, err := os.Stat(path)
	require.NoError(t, err)
}

func TestRemoveWithoutFileOrContextIsFine(t *testing.T) {
	assert.NoError(t, Remove(filepath.Join(t.TempDir(), "none"), "labctl-x"))
}

func TestCorruptKubeconfigIsNotOverwritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(path, []byte("{{{ not yaml"), 0o600))
	err := Merge(path, config("labctl-x", "https://h"), "labctl-x")
	require.Error(t, err)
	assert.Contains(t, userr.Message(err), "cannot read kubeconfig")
	raw, _ := os.ReadFile(path)
	assert.Equal(t, "{{{ not yaml", string(raw), "the user's file is left as it was")
}

func TestUnwritableLocation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	err := Merge(filepath.Join(file, "config"), config("labctl-x", "https://h"), "labctl-x")
	require.Error(t, err)
	msg := userr.Message(err)
	assert.Contains(t, msg, "cannot write kubeconfig")
	assert.Contains(t, msg, "set KUBECONFIG to a writable file")
}

// A kubeconfig made read-only stays as it is, even for root, whom open(2)
// would let write it.
func TestReadOnlyKubeconfigIsNotReplaced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	require.NoError(t, clientcmd.WriteToFile(*config("mine", "https://mine"), path))
	require.NoError(t, os.Chmod(path, 0o444))
	before, _ := os.ReadFile(path)
	err := Merge(path, config("labctl-x", "https://h"), "labctl-x")
	require.Error(t, err)
	assert.Contains(t, userr.Message(err), "permission denied")
	after, _ := os.ReadFile(path)
	assert.Equal(t, string(before), string(after))
	_, err = os.Stat(path + ".labctl-tmp")
	assert.ErrorIs(t, err, os.ErrNotExist, "no temporary file left")
}

func TestMergeWritesThroughASymlinkUnderKubectlsLock(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "dotfiles", "kubeconfig")
	require.NoError(t, os.MkdirAll(filepath.Dir(real), 0o700))
	require.NoError(t, clientcmd.WriteToFile(*config("mine", "https://mine"), real))
	link := filepath.Join(dir, "config")
	require.NoError(t, os.Symlink(real, link))

	require.NoError(t, Merge(link, config("labctl-x", "https://127.0.0.1:1"), "labctl-x"))
	target, err := os.Readlink(link)
	require.NoError(t, err, "the kubeconfig is still a symlink")
	assert.Equal(t, real, target)
	got, err := clientcmd.LoadFromFile(real)
	require.NoError(t, err)
	assert.Equal(t, "https://127.0.0.1:1", got.Clusters["labctl-x"].Server)
	assert.NoFileExists(t, real+".lock", "the lock is released")

	// another writer holds kubectl's lock: Merge waits, then says so in one line
	lockWait = 200 * time.Millisecond
	t.Cleanup(func() { lockWait = 5 * time.Second })
	require.NoError(t, os.WriteFile(real+".lock", nil, 0o600))
	err = Merge(link, config("labctl-y", "https://127.0.0.1:2"), "labctl-y")
	require.Error(t, err)
	assert.Contains(t, userr.Message(err), "is locked by "+real+".lock")
	got, _ = clientcmd.LoadFromFile(real)
	assert.NotContains(t, got.Contexts, "labctl-y", "nothing written without the lock")
	require.NoError(t, os.Remove(real+".lock"))
}

func TestRemoveFindsTheContextInAnyFileOfKUBECONFIG(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	require.NoError(t, clientcmd.WriteToFile(*config("mine", "https://mine"), first))
	require.NoError(t, clientcmd.WriteToFile(*config("labctl-x", "https://127.0.0.1:1"), second))
	t.Setenv("KUBECONFIG", first+string(os.PathListSeparator)+second)

	require.NoError(t, Remove("", "labctl-x"))
	got, err := clientcmd.LoadFromFile(second)
	require.NoError(t, err)
	assert.NotContains(t, got.Contexts, "labctl-x")
	got, err = clientcmd.LoadFromFile(first)
	require.NoError(t, err)
	assert.Contains(t, got.Contexts, "mine", "the other file is untouched")
}

// Before any work: a kubeconfig that Merge would have to create where no
// file can be is refused; one that can be created is not, and nothing is
// left behind by asking.
func TestCheckWritableBeforeAnything(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	err := CheckWritable(filepath.Join(file, "config"))
	require.Error(t, err)
	assert.Contains(t, userr.Message(err), "cannot write kubeconfig")

	home := t.TempDir()
	require.NoError(t, CheckWritable(filepath.Join(home, ".kube", "deeper", "config")))
	assert.NoDirExists(t, filepath.Join(home, ".kube"), "the directories the probe made are gone again")

	existing := filepath.Join(t.TempDir(), ".kube")
	require.NoError(t, os.Mkdir(existing, 0o700))
	require.NoError(t, CheckWritable(filepath.Join(existing, "config")))
	left, err := os.ReadDir(existing)
	require.NoError(t, err)
	assert.Empty(t, left, "no probe file is left")
	assert.DirExists(t, existing, "a directory the user had stays")
}

// A merge from a cluster's own kubeconfig file that fails says where that
// file is: the cluster runs, only the user's kubeconfig lacks it.
func TestMergeFileSaysWhereTheClustersKubeconfigIs(t *testing.T) {
	src := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*config("labctl-x", "https://h"), src))
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	err := MergeFile(filepath.Join(file, "config"), src, "labctl-x")
	require.Error(t, err)
	assert.Contains(t, userr.Message(err), "the cluster is running and its kubeconfig is "+src)

	dst := filepath.Join(t.TempDir(), "config")
	require.NoError(t, MergeFile(dst, src, "labctl-x"))
	got, err := clientcmd.LoadFromFile(dst)
	require.NoError(t, err)
	assert.Equal(t, "labctl-x", got.CurrentContext)
}
