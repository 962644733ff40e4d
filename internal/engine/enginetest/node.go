package enginetest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"

	"sigs.k8s.io/kind/pkg/cluster/nodes"
	kindexec "sigs.k8s.io/kind/pkg/exec"
)

// Node is a fake kind node container. It answers the commands kind's
// nodeutils runs (containerd config dump, ctr images import, crictl
// inspecti) from an in-memory image store, so image loading is tested
// through kind's own code.
type Node struct {
	Name     string
	RoleName string
	// Trace, when set, sees every command as "NODE: LINE".
	Trace func(string)

	mu     sync.Mutex
	images map[string]string // normalised ref → image ID
	calls  []string
	// ImportErr makes `ctr images import` fail.
	ImportErr error
	// AllPlatformsErr makes only `ctr images import --all-platforms` fail
	// (an archive listing blobs it does not hold).
	AllPlatformsErr error
	// ImportedID, when set, is the ID the node records on import instead
	// of the archive's (a node that keeps a stale image).
	ImportedID string
}

var _ nodes.Node = (*Node)(nil)

// NewNode returns a control-plane node named name.
func NewNode(name string) *Node {
	return &Node{Name: name, RoleName: "control-plane", images: map[string]string{}}
}

// SetImage puts an image on the node, as if loaded earlier.
func (n *Node) SetImage(ref, id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.images[normalize(ref)] = id
}

// ImageID returns the ID the node has for ref ("" when none).
func (n *Node) ImageID(ref string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.images[normalize(ref)]
}

// Calls returns the commands run on the node.
func (n *Node) Calls() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.calls...)
}

// Imports counts `ctr images import` runs.
func (n *Node) Imports() int {
	c := 0
	for _, l := range n.Calls() {
		if strings.HasPrefix(l, "ctr ") && strings.Contains(l, " import ") {
			c++
		}
	}
	return c
}

func (n *Node) String() string              { return n.Name }
func (n *Node) Role() (string, error)       { return n.RoleName, nil }
func (n *Node) IP() (string, string, error) { return "172.18.0.2", "", nil }
func (n *Node) SerialLogs(io.Writer) error  { return nil }

// Command implements kind's exec.Cmder.
func (n *Node) Command(name string, args ...string) kindexec.Cmd {
	return &nodeCmd{n: n, name: name, args: args}
}

// CommandContext implements kind's exec.Cmder.
func (n *Node) CommandContext(_ context.Context, name string, args ...string) kindexec.Cmd {
	return n.Command(name, args...)
}

type nodeCmd struct {
	n      *Node
	name   string
	args   []string
	stdin  io.Reader
	stdout io.Writer
}

func (c *nodeCmd) SetEnv(...string) kindexec.Cmd      { return c }
func (c *nodeCmd) SetStdin(r io.Reader) kindexec.Cmd  { c.stdin = r; return c }
func (c *nodeCmd) SetStdout(w io.Writer) kindexec.Cmd { c.stdout = w; return c }
func (c *nodeCmd) SetStderr(io.Writer) kindexec.Cmd   { return c }
func (c *nodeCmd) fail(msg string) error              { return c.runErr(errors.New(msg)) }
func (c *nodeCmd) runErr(inner error) *kindexec.RunError {
	return &kindexec.RunError{Command: append([]string{c.name}, c.args...), Inner: inner}
}

func (c *nodeCmd) Run() error {
	line := strings.Join(append([]string{c.name}, c.args...), " ")
	c.n.mu.Lock()
	c.n.calls = append(c.n.calls, line)
	c.n.mu.Unlock()
	if c.n.Trace != nil {
		c.n.Trace(c.n.Name + ": " + line)
	}
	out := c.stdout
	if out == nil {
		out = io.Discard
	}
	switch {
	case line == "containerd config dump":
		_, _ = io.WriteString(out, "version = 2\n[plugins]\n  [plugins.\"io.containerd.grpc.v1.cri\"]\n    [plugins.\"io.containerd.grpc.v1.cri\".containerd]\n      snapshotter = \"overlayfs\"\n")
		return nil
	case c.name == "ctr" && contains(c.args, "import"):
		if c.n.ImportErr != nil {
			return c.runErr(c.n.ImportErr)
		}
		if c.n.AllPlatformsErr != nil && contains(c.args, "--all-platforms") {
			return c.runErr(c.n.AllPlatformsErr)
		}
		if c.stdin == nil {
			return c.fail("ctr: no archive on stdin")
		}
		tags, id, err := readArchive(c.stdin)
		if err != nil {
			return c.runErr(err)
		}
		c.n.mu.Lock()
		if c.n.ImportedID != "" {
			id = c.n.ImportedID
		}
		for _, t := range tags {
			c.n.images[normalize(t)] = id
		}
		c.n.mu.Unlock()
		return nil
	case c.name == "crictl" && len(c.args) == 2 && c.args[0] == "inspecti":
		c.n.mu.Lock()
		id, ok := c.n.images[normalize(c.args[1])]
		c.n.mu.Unlock()
		if !ok {
			return c.fail(fmt.Sprintf("no such image %q present", c.args[1]))
		}
		raw, _ := json.Marshal(map[string]any{"status": map[string]any{"id": id, "repoTags": []string{normalize(c.args[1])}}})
		_, _ = out.Write(raw)
		return nil
	}
	return c.fail("fake node: unexpected command: " + line)
}

func contains(args []string, s string) bool {
	for _, a := range args {
		if a == s {
			return true
		}
	}
	return false
}

// readArchive reads a Docker archive's first image: its tags and the
// sha256 of its config.
func readArchive(r io.Reader) ([]string, string, error) {
	tr := tar.NewReader(r)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, "", err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		var b bytes.Buffer
		if _, err := io.Copy(&b, tr); err != nil {
			return nil, "", err
		}
		files[path.Clean(h.Name)] = b.Bytes()
	}
	var m []struct {
		Config   string
		RepoTags []string
	}
	if err := json.Unmarshal(files["manifest.json"], &m); err != nil || len(m) == 0 {
		return nil, "", fmt.Errorf("ctr: archive has no usable manifest.json")
	}
	cfg, ok := files[path.Clean(m[0].Config)]
	if !ok {
		return nil, "", fmt.Errorf("ctr: config %s missing", m[0].Config)
	}
	sum := sha256.Sum256(cfg)
	return m[0].RepoTags, "sha256:" + hex.EncodeToString(sum[:]), nil
}

// normalize expands a name as containerd does (docker.io/library/...:latest).
func normalize(ref string) string {
	name, tag := ref, "latest"
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		name, tag = ref[:i], ref[i+1:]
	}
	first, _, found := strings.Cut(name, "/")
	if !found || (first != "localhost" && !strings.ContainsAny(first, ".:")) {
		if !strings.Contains(name, "/") {
			name = "library/" + name
		}
		name = "docker.io/" + name
	}
	return name + ":" + tag
}
