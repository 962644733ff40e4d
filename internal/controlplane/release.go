package controlplane

import (
	"fmt"
	"os"
	"strings"
)

// MirrorEnv names a mirror of the release sites (an air gap's web server, a
// file:// copy): the same host/path layout under another root.
const MirrorEnv = "LABCTL_CONTROLPLANE_MIRROR"

// DefaultMirror is the release sites themselves: an artifact's Path is the
// host and path of its official URL.
const DefaultMirror = "https://"

// Artifact is one file of an official release and how to verify it.
type Artifact struct {
	// Component is the executable it provides.
	Component string
	Version   string
	// Path is host/path of the official URL (dl.k8s.io/release/...), so a
	// mirror made with `wget -x` serves it under its own root unchanged.
	Path string
	// SumPath is the checksum file beside it. kwok's releases publish
	// none (a 404: only a pin verifies kwok), but a mirror may add one.
	SumPath string
	// SumName is the artifact's entry in a SHA256SUMS-style list; "" when
	// SumPath holds the bare hash of this one file (dl.k8s.io's .sha256).
	SumName string
	// Member is the executable inside a .tar.gz artifact, "" when Path is
	// the executable itself.
	Member string
}

// ReleaseArtifacts lists what the official releases of v provide for
// linux/arch: the Kubernetes server binaries from dl.k8s.io, etcd's tarball
// and kwok's binary from their GitHub releases. Only linux is released for
// the Kubernetes server binaries.
func ReleaseArtifacts(v Versions, goos, arch string) ([]Artifact, error) {
	if goos != "linux" || (arch != "amd64" && arch != "arm64") {
		return nil, fmt.Errorf("no official control-plane binaries for %s/%s", goos, arch)
	}
	var out []Artifact
	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		p := fmt.Sprintf("dl.k8s.io/release/%s/bin/linux/%s/%s", v.Kubernetes, arch, c)
		out = append(out, Artifact{Component: c, Version: v.Kubernetes, Path: p, SumPath: p + ".sha256"})
	}
	etcdDir := fmt.Sprintf("github.com/etcd-io/etcd/releases/download/%s/", v.Etcd)
	etcdTar := fmt.Sprintf("etcd-%s-linux-%s", v.Etcd, arch)
	out = append(out, Artifact{Component: "etcd", Version: v.Etcd, Path: etcdDir + etcdTar + ".tar.gz",
		SumPath: etcdDir + "SHA256SUMS", SumName: etcdTar + ".tar.gz", Member: etcdTar + "/etcd"})
	kwok := fmt.Sprintf("github.com/kubernetes-sigs/kwok/releases/download/%s/kwok-linux-%s", v.Kwok, arch)
	out = append(out, Artifact{Component: "kwok", Version: v.Kwok, Path: kwok, SumPath: kwok + ".sha256"})
	return out, nil
}

// mirrorRoot is the --mirror flag, else $LABCTL_CONTROLPLANE_MIRROR, else
// the release sites; always ending in a slash or "://".
func mirrorRoot(flag string) string {
	m := flag
	if m == "" {
		m = os.Getenv(MirrorEnv)
	}
	if m == "" {
		return DefaultMirror
	}
	if !strings.HasSuffix(m, "/") {
		m += "/"
	}
	return m
}

// parseSum finds the sha256 for name in a checksum file of `<hash>  <file>`
// lines as sha256sum writes them; name "" takes the first line's hash
// (a file of one artifact, as dl.k8s.io's bare .sha256).
func parseSum(content, name string) (string, bool) {
	for _, line := range strings.Split(content, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 1 && name == "":
			return validHex(f[0])
		case len(f) >= 2 && name != "" && strings.TrimPrefix(f[1], "*") == name:
			return validHex(f[0])
		}
	}
	return "", false
}

func validHex(s string) (string, bool) {
	s = strings.ToLower(s)
	if len(s) != 64 || strings.Trim(s, "0123456789abcdef") != "" {
		return "", false
	}
	return s, true
}
