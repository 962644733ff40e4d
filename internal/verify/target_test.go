package verify

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/operator"
	"github.com/labctl/labctl/internal/reference"
)

// project makes a directory that looks like a kubebuilder project.
func project(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"PROJECT", "go.mod"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), nil, 0o644))
	}
	return dir
}

func running(op *operator.Operator) Finder {
	return func(context.Context, *cluster.Cluster, string) (*operator.Operator, error) { return op, nil }
}

// The project is --project, else the running operator's own, else the
// current directory when it is a project.
func TestResolveProjectFallbacks(t *testing.T) {
	postgres, err := reference.Lookup(reference.Postgres)
	require.NoError(t, err)
	flag, opDir, wd := project(t), project(t), project(t)
	ctx := context.Background()

	got, err := Resolve(ctx, Request{Reference: postgres, Project: flag, WorkDir: wd, Find: running(&operator.Operator{ProjectDir: opDir})})
	require.NoError(t, err)
	assert.Equal(t, flag, got.Project)

	got, err = Resolve(ctx, Request{Reference: postgres, WorkDir: wd, Find: running(&operator.Operator{ProjectDir: opDir})})
	require.NoError(t, err)
	assert.Equal(t, opDir, got.Project, "the operator's own project before the current directory")

	got, err = Resolve(ctx, Request{Reference: postgres, WorkDir: wd, Find: running(&operator.Operator{ProjectDir: filepath.Join(opDir, "gone")})})
	require.NoError(t, err)
	assert.Equal(t, wd, got.Project, "an operator's project that is gone is passed over")

	got, err = Resolve(ctx, Request{Reference: postgres, WorkDir: t.TempDir(), Find: running(&operator.Operator{})})
	require.NoError(t, err)
	assert.Empty(t, got.Project, "a current directory that is no project is not read")
}

// A lab without an operator (1.4) never looks for one and reads the
// current directory, project or not.
func TestResolveWithoutOperator(t *testing.T) {
	website, err := reference.Lookup(reference.Website)
	require.NoError(t, err)
	wd := t.TempDir()
	got, err := Resolve(context.Background(), Request{Reference: website, WorkDir: wd, Find: func(context.Context, *cluster.Cluster, string) (*operator.Operator, error) {
		t.Error("looked for an operator")
		return nil, nil
	}})
	require.NoError(t, err)
	assert.Equal(t, wd, got.Project)
	assert.Nil(t, got.Operator)
	assert.NoError(t, CheckProject(wd, website), "lab 1.4's files need no kubebuilder project")
}

// An operatorless lab (6.2) takes no operator, and a cluster with none is
// no error; a running one still tells where its project is.
func TestResolveOperatorless(t *testing.T) {
	postgres, err := reference.Lookup(reference.Postgres)
	require.NoError(t, err)
	opDir, wd := project(t), project(t)
	ctx := context.Background()

	got, err := Resolve(ctx, Request{Reference: postgres, Operatorless: true, WorkDir: wd, Find: running(&operator.Operator{ProjectDir: opDir})})
	require.NoError(t, err)
	assert.Nil(t, got.Operator, "no operator is judged")
	assert.Equal(t, opDir, got.Project, "the operator's own project before the current directory")

	none := func(context.Context, *cluster.Cluster, string) (*operator.Operator, error) {
		return nil, errors.New("no operator is running")
	}
	got, err = Resolve(ctx, Request{Reference: postgres, Operatorless: true, WorkDir: wd, Find: none})
	require.NoError(t, err)
	assert.Equal(t, wd, got.Project)
}

// The operator of another reference project is named, so verify can say
// which `labctl up` to run; --project must be a kubebuilder project.
func TestResolveNamesAnotherProjectsOperator(t *testing.T) {
	postgres, err := reference.Lookup(reference.Postgres)
	require.NoError(t, err)
	hello, err := reference.Lookup(reference.Hello)
	require.NoError(t, err)
	got, err := Resolve(context.Background(), Request{Reference: hello, Find: running(&operator.Operator{ProjectName: postgres.ProjectName})})
	require.NoError(t, err)
	assert.Equal(t, postgres.ProjectName, got.OtherProject)

	got, err = Resolve(context.Background(), Request{Reference: postgres, Find: running(&operator.Operator{ProjectName: postgres.ProjectName})})
	require.NoError(t, err)
	assert.Empty(t, got.OtherProject)

	assert.ErrorContains(t, CheckProject(t.TempDir(), postgres), "is not a kubebuilder project")
	assert.NoError(t, CheckProject(project(t), postgres))
}
