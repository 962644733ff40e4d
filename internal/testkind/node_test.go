package testkind

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPrivilegeShim(t *testing.T) {
	dir := t.TempDir()
	// The "engine" prints its arguments, one per bracket.
	fake := filepath.Join(dir, "engine")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\nfor a do printf '[%s]' \"$a\"; done\n"), 0o755))
	shim := filepath.Join(dir, "docker")
	require.NoError(t, os.WriteFile(shim, []byte(privilegeShim(fake, "unable to apply caps", []string{"SYS_RESOURCE", "SYS_TIME"}, []string{"--ulimit=nproc=9:9"})), 0o755))
	run := func(args ...string) string {
		out, err := exec.Command(shim, args...).CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	assert.Equal(t, "[run][--ulimit=nproc=9:9][--name][n][--cap-add=ALL][--cap-drop=SYS_RESOURCE][--cap-drop=SYS_TIME][--label][a b][img]",
		run("run", "--name", "n", "--privileged", "--label", "a b", "img"))
	assert.Equal(t, "[exec][-i][node][cp][/dev/stdin][/kind/kubeadm.conf]",
		run("exec", "--privileged", "-i", "node", "cp", "/dev/stdin", "/kind/kubeadm.conf"))
	assert.Equal(t, "[build][-t][x:1][.]", run("build", "-t", "x:1", "."))
	assert.Equal(t, "[run][--ulimit=nproc=9:9][img][echo][it's \"quoted\"]", run("run", "img", "echo", `it's "quoted"`))
}

func TestCapabilitiesOutside(t *testing.T) {
	// The bounding set of this project's VMs: all of 0..40 but SYS_RESOURCE.
	missing, err := capabilitiesOutside(0x1fffeffffff)
	require.NoError(t, err)
	assert.Equal(t, []string{"SYS_RESOURCE"}, missing)
	_, err = capabilitiesOutside(1<<41 - 1)
	assert.Error(t, err)
}
