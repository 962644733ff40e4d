// Package reference provides the course's reference projects, embedded into
// labctl, as project directories on disk, so a user with only the labctl
// binary can deploy them: the Database operator (operator/ in this
// repository), the Hello World operator (hello-world-operator/) and lab
// 1.4's Website CRD, which has no operator at all.
package reference

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/labctl/labctl/internal/reference/archive"
)

// Names of the reference projects, as labs name them (`project:` in a lab).
const (
	Postgres = "postgres"
	Hello    = "hello"
	Website  = "website"
)

// Project is one reference project.
type Project struct {
	// Name is what labs call it.
	Name string
	// Source is the project's files.
	Source fs.FS
	// RepoDir is its directory in this repository (for the tests, which
	// copy and patch it).
	RepoDir string
	// Operator says whether the project has a manager to deploy; a
	// project without one (lab 1.4's CRD) is applied by the student.
	Operator bool
	// ProjectName is PROJECT's projectName, which the course's own
	// project shares ("" without an operator).
	ProjectName string
}

//go:embed website
var website embed.FS

// The operators are Go modules of their own, which labctl's module zip
// leaves out (and a replace directive would break `go install
// github.com/labctl/labctl/cmd/labctl@version`), so their sources are
// embedded as text archives (txtar), regenerated with `make generate`;
// TestArchivesMatchTheProjects fails when one is stale.
//
//go:generate go run ./gen -o postgres.txtar ../../operator
//go:generate go run ./gen -o hello.txtar ../../hello-world-operator
var (
	//go:embed postgres.txtar
	postgresZip []byte
	//go:embed hello.txtar
	helloZip []byte
)

func archiveFS(data []byte) fs.FS {
	fsys, err := archive.Open(data)
	if err != nil {
		panic(err) // go generate wrote it and the test read it
	}
	return fsys
}

func websiteFS() fs.FS {
	sub, err := fs.Sub(website, "website")
	if err != nil {
		panic(err) // the embed directive guarantees the directory
	}
	return sub
}

var postgresSource = archiveFS(postgresZip)

var projects = []Project{
	{Name: Postgres, Source: postgresSource, RepoDir: "operator", Operator: true, ProjectName: "postgres-operator"},
	{Name: Hello, Source: archiveFS(helloZip), RepoDir: "hello-world-operator", Operator: true, ProjectName: "hello-world-operator"},
	{Name: Website, Source: websiteFS(), RepoDir: filepath.Join("internal", "reference", "website")},
}

// Source is the Database operator, the default project.
var Source fs.FS = postgresSource

// Lookup finds a reference project by name; "" is the Database operator.
func Lookup(name string) (Project, error) {
	if name == "" {
		name = Postgres
	}
	i := slices.IndexFunc(projects, func(p Project) bool { return p.Name == name })
	if i < 0 {
		var names []string
		for _, p := range projects {
			names = append(names, p.Name)
		}
		return Project{}, fmt.Errorf("no reference project %q (there are %s)", name, strings.Join(names, ", "))
	}
	return projects[i], nil
}

// ByProjectName finds the reference project whose kubebuilder projectName
// is name (postgres-operator, hello-world-operator): the project a running
// operator belongs to.
func ByProjectName(name string) (Project, bool) {
	i := slices.IndexFunc(projects, func(p Project) bool { return p.ProjectName != "" && p.ProjectName == name })
	if i < 0 {
		return Project{}, false
	}
	return projects[i], true
}

// Dir returns a directory holding the Database operator's source; see
// Project.Dir.
func Dir(cacheDir string) (string, error) {
	p, _ := Lookup(Postgres)
	return p.Dir(cacheDir)
}

// Dir returns a directory holding the project's source, extracting it
// into cacheDir/reference/<content hash> the first time.
func (p Project) Dir(cacheDir string) (string, error) {
	sum, err := hash(p.Source)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cacheDir, "reference", sum[:16])
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return dir, nil
	}
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.CopyFS(tmp, p.Source); err != nil {
		return "", fmt.Errorf("extract the reference project %s: %w", p.Name, err)
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o644); err != nil {
		return "", err
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return dir, nil
}

func hash(fsys fs.FS) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(raw))
		h.Write(raw)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}
