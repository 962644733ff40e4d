package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pelletier/go-toml"

	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	kindexec "sigs.k8s.io/kind/pkg/exec"

	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/userr"
)

// LoadOptions say which image goes into which nodes.
type LoadOptions struct {
	Engine *engine.Engine
	// Nodes are the kind cluster's node containers.
	Nodes []nodes.Node
	// Ref is the image as built (Image.Ref, or a tag that LocalName
	// resolves).
	Ref string
	// TempDir holds the archive while loading (default os.TempDir()).
	TempDir string
	// IDCache is a file remembering, per engine image ID, the ID the
	// nodes report for it ("" = none). They differ with Docker's
	// containerd image store (the engine's ID is the index digest, the
	// node's the config digest) and when Podman converts the config for
	// a docker-archive; with the cache, an unchanged image is recognised
	// without saving it again.
	IDCache  string
	Progress func(format string, args ...any)
}

// Loaded describes the image on the nodes.
type Loaded struct {
	// Ref is the name the nodes know the image by: what the Deployment
	// must use (Podman builds: localhost/NAME:TAG).
	Ref string
	// ID is the image ID on every node.
	ID string
	// LoadedInto and Skipped name the nodes that got the image and those
	// that already had this ID.
	LoadedInto, Skipped []string
}

// Load puts the image into every node: `<engine> save` to a Docker archive,
// kind's nodeutils.LoadImageArchive on each node that lacks this image ID,
// then `crictl inspecti` on the node to confirm the ID. Nodes that already
// have the same ID are skipped; when all have the engine's ID, nothing is
// saved at all.
func Load(ctx context.Context, o LoadOptions) (*Loaded, error) {
	e := o.Engine
	if o.Progress == nil {
		o.Progress = func(string, ...any) {}
	}
	if len(o.Nodes) == 0 {
		return nil, userr.New("the kind cluster has no nodes to load the image into", "run `labctl down` and `labctl up` to recreate it")
	}
	ref := e.LocalName(o.Ref)
	engineID, err := e.ImageID(ctx, ref)
	if err != nil {
		return nil, userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("%s has no image %s", e.Name, ref),
			"build it first (labctl up builds it from the project), or check the name with `"+e.Name+" images`")
	}
	out := &Loaded{Ref: ref}

	// Fast path: every node already has what the engine has, by the ID
	// the node reports for it.
	ids := readIDCache(o.IDCache)
	nodeID := engineID
	if id, ok := ids[engineID]; ok {
		nodeID = id
	}
	need := map[string]bool{}
	for _, n := range o.Nodes {
		if id, err := nodeutils.ImageID(n, ref); err == nil && id == nodeID {
			continue
		}
		need[n.String()] = true
	}
	if len(need) == 0 {
		out.ID = nodeID
		for _, n := range o.Nodes {
			out.Skipped = append(out.Skipped, n.String())
		}
		return out, nil
	}

	o.Progress("%s save %s", e.Name, ref)
	dir, err := os.MkdirTemp(o.TempDir, "labctl-load-")
	if err != nil {
		return nil, userr.Wrap(err, userr.ExitFailure, "cannot create a temporary directory: "+err.Error(), "check the disk space of TMPDIR")
	}
	defer os.RemoveAll(dir)
	archive := filepath.Join(dir, "image.tar")
	if err := saveTo(ctx, e, ref, archive); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("`%s save` of %s failed: %s", e.Name, ref, userr.Message(err)),
			"check the disk space of TMPDIR and that `"+e.Name+" images` lists the image")
	}
	a, err := ReadArchive(archive)
	if err != nil {
		return nil, userr.Wrap(err, userr.ExitFailure, err.Error(), "report this with the output of `"+e.Name+" version`")
	}
	entry, ok := a.Find(ref)
	if !ok {
		return nil, userr.New(fmt.Sprintf("the archive %s saved does not contain %s", e.Name, ref),
			"report this with the output of `"+e.Name+" version`")
	}
	out.ID = entry.ID
	if ids[engineID] != entry.ID {
		ids[engineID] = entry.ID
		writeIDCache(o.IDCache, ids)
	}

	for i, n := range o.Nodes {
		name := n.String()
		if !need[name] {
			out.Skipped = append(out.Skipped, name)
			continue
		}
		// The archive's ID can differ from the engine's (Podman converts
		// the config to Docker's format): compare again.
		if id, err := nodeutils.ImageID(n, ref); err == nil && id == entry.ID {
			out.Skipped = append(out.Skipped, name)
			continue
		}
		o.Progress("loading into node %s (%d/%d)", name, i+1, len(o.Nodes))
		if err := loadInto(ctx, e, n, archive); err != nil {
			return nil, userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("cannot load %s into node %s: %s", ref, name, userr.Message(err)),
				fmt.Sprintf("check the node with `%s exec %s crictl images`; `labctl reset --cluster` recreates the cluster", e.Name, name))
		}
		id, err := nodeutils.ImageID(n, ref)
		if err != nil {
			return nil, userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("node %s does not list %s after loading it: %s", name, ref, userr.Message(err)),
				fmt.Sprintf("check `%s exec %s crictl images`", e.Name, name))
		}
		if id != entry.ID {
			return nil, userr.New(fmt.Sprintf("node %s has %s with ID %s after loading, expected %s", name, ref, short(id), short(entry.ID)),
				fmt.Sprintf("remove the old image (`%s exec %s crictl rmi %s`) and run labctl up again", e.Name, name, ref))
		}
		out.LoadedInto = append(out.LoadedInto, name)
	}
	return out, nil
}

// saveTo streams `<engine> save` into file.
func saveTo(ctx context.Context, e *engine.Engine, ref, file string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := e.Save(ctx, ref, f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readIDCache reads the engine ID → node ID map (empty when absent or
// unreadable: the cache only saves work).
func readIDCache(file string) map[string]string {
	ids := map[string]string{}
	if file == "" {
		return ids
	}
	if raw, err := os.ReadFile(file); err == nil {
		_ = json.Unmarshal(raw, &ids)
	}
	return ids
}

// writeIDCache keeps the map small: only the latest image per engine ID
// matters, and old builds' IDs are never asked for again.
func writeIDCache(file string, ids map[string]string) {
	if file == "" {
		return
	}
	for len(ids) > 64 {
		for k := range ids {
			delete(ids, k)
			break
		}
	}
	raw, _ := json.Marshal(ids)
	_ = os.WriteFile(file, raw, 0o644)
}

// loadInto imports the archive into a node as kind's `load` does (`ctr
// images import --all-platforms`). An archive saved from Docker's
// containerd image store may list manifests whose blobs it does not hold
// (attestations, other platforms), and that import then fails on them;
// labctl retries with only the engine's platform, which is all the node
// runs.
func loadInto(ctx context.Context, e *engine.Engine, n nodes.Node, archive string) error {
	err := withArchive(archive, func(r io.Reader) error { return nodeutils.LoadImageArchive(n, r) })
	if err == nil || !missingContent(err) {
		return err
	}
	f, ferr := e.Facts(ctx)
	if ferr != nil || f.Arch == "" {
		return err
	}
	snapshotter, serr := snapshotter(n)
	if serr != nil {
		return err
	}
	return withArchive(archive, func(r io.Reader) error {
		return n.Command("ctr", "--namespace=k8s.io", "images", "import", "--digests", "--platform=linux/"+f.Arch, "--snapshotter="+snapshotter, "-").SetStdin(r).Run()
	})
}

func withArchive(archive string, fn func(io.Reader) error) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	return fn(f)
}

// missingContent recognises ctr's complaint about blobs an archive lists
// but does not hold.
func missingContent(err error) bool {
	msg := err.Error()
	var re *kindexec.RunError
	if errors.As(err, &re) {
		msg += " " + string(re.Output)
	}
	return strings.Contains(msg, "content digest") || strings.Contains(msg, "not found")
}

// snapshotter is the snapshotter the node's CRI uses, read from
// `containerd config dump` as kind reads it for its own import.
func snapshotter(n nodes.Node) (string, error) {
	var out strings.Builder
	if err := n.Command("containerd", "config", "dump").SetStdout(&out).Run(); err != nil {
		return "", err
	}
	cfg, err := toml.Load(out.String())
	if err != nil {
		return "", err
	}
	path := []string{"plugins", "io.containerd.cri.v1.images", "snapshotter"}
	if v, _ := cfg.Get("version").(int64); v == 2 {
		path = []string{"plugins", "io.containerd.grpc.v1.cri", "containerd", "snapshotter"}
	}
	s, ok := cfg.GetPath(path).(string)
	if !ok || s == "" {
		return "", fmt.Errorf("no snapshotter in the node's containerd config")
	}
	return s, nil
}

func short(id string) string {
	if len(id) > 19 {
		return id[:19]
	}
	return id
}
