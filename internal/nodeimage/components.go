package nodeimage

import (
	"fmt"
	"path"
	"strings"
)

// SandboxImage is the pause image kind's containerd configuration names
// (sandbox_image in images/base/files/etc/containerd/config.toml): kind
// preloads it instead of the pause image kubeadm lists.
const SandboxImage = "registry.k8s.io/pause:3.10"

// Component is one preloaded image: its name as kubeadm (or kind's
// containerd configuration) asks for it and the binary that serves it.
type Component struct {
	Name string
	// Binary is the executable copied into the image: "controlplane"
	// (the multi-call etcd and control plane), "kubenode" (kube-proxy),
	// "coredns" or "pause".
	Binary string
	// Command is the name the pod runs it by (a symlink to Binary).
	Command string
}

// binaries maps the repository's last element to the binary and command.
var binaries = map[string][2]string{
	"kube-apiserver":          {"controlplane", "kube-apiserver"},
	"kube-controller-manager": {"controlplane", "kube-controller-manager"},
	"kube-scheduler":          {"controlplane", "kube-scheduler"},
	"etcd":                    {"controlplane", "etcd"},
	"kube-proxy":              {"kubenode", "kube-proxy"},
	"pause":                   {"pause", "pause"},
	"coredns":                 {"coredns", "coredns"},
}

// Components are the images built for the names kubeadm lists (`kubeadm
// config images list`): those labctl can serve from its own binaries,
// with kubeadm's pause replaced by SandboxImage as kind's build does.
// Names with no binary here are left out.
func Components(kubeadmImages []string) []Component {
	var out []Component
	for _, name := range append(kubeadmImages, SandboxImage) {
		repo, _, _ := strings.Cut(name, ":")
		bin, ok := binaries[path.Base(repo)]
		if !ok || (path.Base(repo) == "pause" && name != SandboxImage) {
			continue
		}
		out = append(out, Component{Name: name, Binary: bin[0], Command: bin[1]})
	}
	return out
}

// Dockerfile is the component's image on top of base.
func (c Component) Dockerfile(base string) string {
	links := ""
	entry := fmt.Sprintf(`["/usr/local/bin/%s"]`, c.Command)
	if c.Command != c.Binary {
		links = fmt.Sprintf("RUN ln -s %s /usr/local/bin/%s\n", c.Binary, c.Command)
	}
	if c.Command == "pause" {
		entry = `["/usr/local/bin/pause"]`
	}
	r := strings.NewReplacer("{{BASE}}", base, "{{BIN}}", c.Binary, "{{LINKS}}", links, "{{ENTRYPOINT}}", entry)
	return r.Replace(componentDockerfile)
}
