// Creating a cluster: the node's mounts, then kind's create with progress.

package kind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	kindexec "sigs.k8s.io/kind/pkg/exec"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/userr"
)

func (p *Provider) create(ctx context.Context, e *engine.Engine, api API, s *iostreams.IOStreams, step *iostreams.Step, name, nodeImage string) error {
	node := ControlPlaneNode(name)
	ct, err := e.InspectContainer(ctx, node)
	if err != nil {
		return engineError(e, "cannot inspect container "+node, err)
	}
	if ct.Exists && ct.Labels[clusterLabel] != name {
		return userr.New(fmt.Sprintf("the name %q is taken: a %s container %s exists that is not a node of kind cluster %q", name, e.Name, node, name),
			fmt.Sprintf("remove it (`%s rm -f %s`) or choose another name with --name", e.Name, node))
	}
	facts, err := e.Facts(ctx)
	if err != nil {
		return engineError(e, "cannot read what "+e.Name+" says about its host", err)
	}
	warn := s.Styles().Warning.Render("!")
	mountDir, err := p.mountDir(name, facts)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(mountDir, 0o755); err != nil {
		return userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("cannot create %s: %v", mountDir, err), "check its permissions")
	}
	policy := filepath.Join(mountDir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(cluster.AuditPolicy), 0o644); err != nil {
		return userr.Wrap(err, userr.ExitFailure, "cannot write the audit policy: "+err.Error(), "check the disk and XDG_STATE_HOME")
	}
	if facts.Snap {
		fmt.Fprintf(s.ErrOut, "%s Docker from snap cannot read hidden directories: the cluster's audit policy is in %s (removed by `labctl down`)\n", warn, mountDir)
	}
	if facts.CgroupV1() {
		fmt.Fprintf(s.ErrOut, "%s this host uses cgroup v1, which kubelet 1.35+ refuses by default: the cluster's kubelet is configured with failCgroupV1: false (cgroup v2 is the long-term fix)\n", warn)
	}
	httpPort, httpsPort := p.ingressPorts(e, facts, s)
	img := nodeImage
	if img == "" {
		img = p.NodeImage
	}
	if img == "" {
		img = NodeImage
	}
	wait := p.WaitReady
	if wait == 0 {
		wait = 5 * time.Minute
	}
	cfg := ClusterConfig(ConfigOptions{Name: name, NodeImage: img, PolicyHostPath: policy, HTTPPort: httpPort, HTTPSPort: httpsPort, CgroupV1: facts.CgroupV1()})
	st := &state{Engine: e.Name, Creating: true, HTTPPort: httpPort, HTTPSPort: httpsPort}
	if mountDir != p.Dir(name) {
		st.MountDir = mountDir
	}
	if err := p.saveState(name, st); err != nil {
		return userr.Wrap(err, userr.ExitFailure, "cannot save the cluster's state: "+err.Error(), "check the disk and XDG_STATE_HOME")
	}
	kc := p.kubeconfigFile(name)
	done := make(chan error, 1)
	go func() { done <- api.Create(cfg, kc, wait) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		// kind's library takes no context: let it finish in the
		// background is not an option (the process exits), so say what
		// may be left behind.
		return userr.Wrap(ctx.Err(), userr.ExitInterrupted, "interrupted while kind was creating the cluster",
			fmt.Sprintf("the next `labctl up` deletes the half-made cluster and creates it again (or `labctl down --provider kind --name %s` removes it)", name))
	}
	if err != nil {
		return userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("kind could not create cluster %q: %s%s", name, oneLine(err), commandSaid(err)),
			fmt.Sprintf("run with -v for kind's output; `%s ps -a` shows its containers; then `labctl up` again", e.Name))
	}
	st.Creating = false
	if err := p.saveState(name, st); err != nil {
		return userr.Wrap(err, userr.ExitFailure, "cannot save the cluster's state: "+err.Error(), "check the disk and XDG_STATE_HOME")
	}
	return nil
}

// mountDir is where the files the node mounts from the host live: the
// cluster's state directory, except for Docker from snap, which cannot
// see hidden directories such as ~/.local/state (kind's known issues).
func (p *Provider) mountDir(name string, f *engine.Facts) (string, error) {
	if !f.Snap {
		return p.Dir(name), nil
	}
	root := p.VisibleRoot
	if root == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", userr.Wrap(err, userr.ExitEnvironment, "Docker from snap needs the audit policy in a visible directory of $HOME, and $HOME is unknown", "set HOME")
		}
		root = filepath.Join(home, "labctl", "kind")
	}
	return filepath.Join(root, name), nil
}

// commandSaid is the last line a command kind ran printed before it
// failed (the engine's own reason, e.g. runc's), for the one-line error:
// kind's error says only "exit status 126".
func commandSaid(err error) string {
	var re *kindexec.RunError
	if !errors.As(err, &re) {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(re.Output)), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
		return ": " + last
	}
	return ""
}
