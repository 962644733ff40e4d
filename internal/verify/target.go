// Package verify resolves what a lab is verified against: the student's
// project directory and the operator running in the cluster. `labctl
// verify` and the honesty suite resolve it through this one path, so the
// fallbacks (--project, the operator's own project, the current
// directory) are written once. Measure is how a grade (labctl grade, -o
// classroom) runs the checks: what could not be decided is measured again.
package verify

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/operator"
	"github.com/labctl/labctl/internal/reference"
)

// Finder finds the operator under test in a cluster. projectDir is the
// student's project when known ("" otherwise); it tells operators apart on
// clusters where it runs in-cluster.
type Finder func(ctx context.Context, c *cluster.Cluster, projectDir string) (*operator.Operator, error)

// Request says what to resolve.
type Request struct {
	Cluster *cluster.Cluster
	// Reference is the reference project the lab builds on.
	Reference reference.Project
	// Project is --project, made absolute and checked (see CheckProject);
	// "" when not given.
	Project string
	// WorkDir is the current directory, the last place a project is
	// looked for.
	WorkDir string
	// Find finds the operator; nil means FindOperatorFor(Reference.Name).
	Find Finder
	// Operatorless is a lab that judges no running operator (lab 6.2, the
	// student's own tests: labs.Lab.Operatorless). A running one still
	// tells where its project is.
	Operatorless bool
}

// Target is what a lab is verified against.
type Target struct {
	// Project is the project's directory ("" when there is none to read).
	Project string
	// Operator is the operator under test (nil for a lab without one).
	Operator *operator.Operator
	// OtherProject is the project name of the operator running when it is
	// another reference project than the lab's ("" when it is the lab's).
	OtherProject string
}

// CheckProject refuses a --project that cannot be the lab's: a lab with an
// operator needs a kubebuilder project; lab 1.4 (a CRD only) reads plain
// files.
func CheckProject(dir string, ref reference.Project) error {
	if ref.Operator && !IsProject(dir) {
		return fmt.Errorf("%s is not a kubebuilder project (it has no PROJECT or no go.mod)", dir)
	}
	return nil
}

// Resolve finds the operator (for a lab that has one) and the project to
// read: --project; else the running operator's own project directory;
// else the current directory when it is a project (or, for a lab without
// an operator, whatever it holds).
func Resolve(ctx context.Context, r Request) (*Target, error) {
	t := &Target{Project: r.Project}
	find := r.Find
	if find == nil {
		find = FindOperatorFor(r.Reference.Name)
	}
	switch {
	case r.Reference.Operator && r.Operatorless:
		if t.Project == "" {
			// Nothing is judged of it, so a cluster without one is no error.
			if op, err := find(ctx, r.Cluster, ""); err == nil && op != nil {
				t.Project = existingDir(op.ProjectDir)
			}
		}
	case r.Reference.Operator:
		op, err := find(ctx, r.Cluster, r.Project)
		if err != nil {
			return nil, err
		}
		t.Operator = op
		if op != nil && op.ProjectName != "" {
			if other, ok := reference.ByProjectName(op.ProjectName); ok && other.Name != r.Reference.Name {
				t.OtherProject = op.ProjectName
			}
		}
	case t.Project == "":
		// Lab 1.4 has no operator and no kubebuilder project: its files
		// (website-crd.yaml) are in the current directory, if anywhere.
		t.Project = r.WorkDir
	}
	if t.Project == "" && t.Operator != nil {
		t.Project = existingDir(t.Operator.ProjectDir)
	}
	if t.Project == "" && r.WorkDir != "" && IsProject(r.WorkDir) {
		t.Project = r.WorkDir
	}
	return t, nil
}

// existingDir is dir when it is a directory that exists, else "".
func existingDir(dir string) string {
	if dir == "" {
		return ""
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return ""
	}
	return dir
}

// FindOperatorFor finds the operator under test of a lab built on the
// reference project ref, the way the cluster runs operators: where it
// cannot tell which project runs (a Deployment), it looks for the one of
// --project, the current directory, or the reference project, which
// shares its names with the course's project.
func FindOperatorFor(ref string) Finder {
	return func(ctx context.Context, c *cluster.Cluster, projectDir string) (*operator.Operator, error) {
		if projectDir == "" {
			if wd, err := os.Getwd(); err == nil && IsProject(wd) {
				projectDir = wd
			}
		}
		return c.CurrentOperator(ctx, projectDir, ref)
	}
}

// IsProject reports whether dir looks like a kubebuilder project.
func IsProject(dir string) bool {
	for _, f := range []string{"PROJECT", "go.mod"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return false
		}
	}
	return true
}
