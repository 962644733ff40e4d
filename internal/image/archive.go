package image

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
)

// ArchiveEntry is one image of a Docker archive (`docker save`, `podman
// save --format docker-archive`), as its manifest.json lists it.
type ArchiveEntry struct {
	Config   string   `json:"Config"`
	RepoTags []string `json:"RepoTags"`
	Layers   []string `json:"Layers"`
	// ID is the sha256 of the config blob: the image ID containerd (and so
	// `crictl inspecti`) reports after importing the archive.
	ID string `json:"-"`
}

// Archive is what labctl reads from an image archive.
type Archive struct {
	Entries []ArchiveEntry
	// Files are the archive's file names (for tests and diagnostics).
	Files []string
}

// ReadArchive parses a Docker archive: manifest.json and each image's
// config digest. Docker 25+ writes an OCI layout with a manifest.json
// beside it; older Docker and Podman write <id>.json configs. Both work.
func ReadArchive(file string) (*Archive, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var manifest []byte
	digests := map[string]string{}
	a := &Archive{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read image archive %s: %w", file, err)
		}
		name := path.Clean(h.Name)
		a.Files = append(a.Files, name)
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if name == "manifest.json" {
			if manifest, err = io.ReadAll(tr); err != nil {
				return nil, err
			}
			continue
		}
		if strings.HasSuffix(name, ".json") || strings.HasPrefix(name, "blobs/") {
			hash := sha256.New()
			if _, err := io.Copy(hash, tr); err != nil {
				return nil, err
			}
			digests[name] = "sha256:" + hex.EncodeToString(hash.Sum(nil))
		}
	}
	if manifest == nil {
		return nil, fmt.Errorf("image archive %s has no manifest.json: not a Docker archive", file)
	}
	if err := json.Unmarshal(manifest, &a.Entries); err != nil {
		return nil, fmt.Errorf("image archive %s: bad manifest.json: %w", file, err)
	}
	for i := range a.Entries {
		e := &a.Entries[i]
		id, ok := digests[path.Clean(e.Config)]
		if !ok {
			return nil, fmt.Errorf("image archive %s: config %s listed in manifest.json is missing", file, e.Config)
		}
		e.ID = id
	}
	return a, nil
}

// Find returns the entry tagged ref (normalised, so postgres-operator:latest
// matches docker.io/library/postgres-operator:latest).
func (a *Archive) Find(ref string) (*ArchiveEntry, bool) {
	want := Normalize(ref)
	for i := range a.Entries {
		for _, t := range a.Entries[i].RepoTags {
			if Normalize(t) == want {
				return &a.Entries[i], true
			}
		}
	}
	return nil, false
}

// Normalize expands an image name as containerd and the kubelet do:
// no registry means docker.io, a single component means library/, no tag
// means :latest.
func Normalize(ref string) string {
	name, tag := ref, "latest"
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		name, tag = ref[:i], ref[i+1:]
	}
	if !hasDomain(name) {
		if !strings.Contains(name, "/") {
			name = "library/" + name
		}
		name = "docker.io/" + name
	}
	return name + ":" + tag
}

func hasDomain(name string) bool {
	first, _, found := strings.Cut(name, "/")
	return found && (first == "localhost" || strings.ContainsAny(first, ".:"))
}

// HasFile reports whether the archive lists the file.
func (a *Archive) HasFile(name string) bool { return slices.Contains(a.Files, name) }
