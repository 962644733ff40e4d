package classroom

import (
	_ "embed"
	"fmt"
	"io"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"text/template"

	"golang.org/x/mod/semver"
	kindversion "sigs.k8s.io/kind/pkg/cmd/kind/version"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/controlplane"
	"github.com/labctl/labctl/internal/grade"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/reference"
	"github.com/labctl/labctl/internal/report"
)

// WorkflowPath is where the workflow goes in a template repository.
const WorkflowPath = ".github/workflows/classroom.yml"

// Providers the workflow can run labctl with on a GitHub-hosted runner.
const (
	ProviderKind  = "kind"  // Docker is there: real pods
	ProviderLocal = "local" // a local control plane, its binaries cached
)

// Providers lists them, the default first.
var Providers = []string{ProviderKind, ProviderLocal}

// runner is what the workflow does differently for a provider.
type runner struct {
	// Text describes the cluster in the workflow's header comment.
	Text string
	// JobTimeout and UpTimeout bound the job and `labctl up`, in minutes.
	JobTimeout, UpTimeout int
	// CachesControlPlane: the control-plane binaries are built once and
	// cached between runs (a cold build takes up to 40 minutes).
	CachesControlPlane bool
	// KindLogs: on failure, `kind export logs` joins labctl's logs.
	KindLogs bool
}

var runners = map[string]runner{
	// A kind cluster and an image build take minutes.
	ProviderKind:  {Text: "kind, in the runner's Docker", JobTimeout: 50, UpTimeout: 20, KindLogs: true},
	ProviderLocal: {Text: "local: a control plane with a kwok node", JobTimeout: 75, UpTimeout: 15, CachesControlPlane: true},
}

// SupportsProvider reports whether the workflow can run labctl with
// --provider name.
func SupportsProvider(name string) bool {
	_, ok := runners[name]
	return ok
}

// DefaultGoVersion is set up when the repository has no go.mod: the Go
// labctl itself needs.
const DefaultGoVersion = "1.26"

// Actions the workflow uses, pinned to full commit SHAs (the tag they
// were released as in the comment): a moved tag cannot change what runs.
var (
	ActionCheckout     = "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1"
	ActionSetupGo      = "actions/setup-go@b7ad1dad31e06c5925ef5d2fc7ad053ef454303e # v7.0.0"
	ActionCacheRestore = "actions/cache/restore@27d5ce7f107fe9357f9df03efb73ab90386fccae # v5.0.5"
	ActionCacheSave    = "actions/cache/save@27d5ce7f107fe9357f9df03efb73ab90386fccae # v5.0.5"
	ActionUpload       = "actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f # v7.0.0"
	ActionReporter     = "classroom-resources/autograding-grading-reporter@d13b5912daf5042ac1b71bc38bdb4a6bcd61d8ca # v1"
)

//go:embed workflow.yml.tmpl
var workflowText string

var workflowTemplate = template.Must(template.New("classroom.yml").Parse(workflowText))

// WorkflowOptions say what the workflow grades and how.
type WorkflowOptions struct {
	Lab *labs.Lab
	// Provider is ProviderKind or ProviderLocal.
	Provider string
	// LabctlVersion is what `go install` fetches (see InstallVersion).
	LabctlVersion string
	// GoVersionFile is the repository's go.mod to take Go's version from
	// ("" when it has none: DefaultGoVersion is set up).
	GoVersionFile string
	// Lang is the language of the titles, hints and feedback students see
	// ("": verify's default, English on GitHub's runners).
	Lang string
	// Credit is how verify scores tasks ("": task credit).
	Credit string
	// PolicyFile is the grading policy verify applies, a path inside the
	// repository ("" for none; see PolicyPath).
	PolicyFile string
}

// PolicyPath is where `classroom init --policy` puts the grading policy in
// a template repository.
const PolicyPath = ".github/labctl-policy.yaml"

var (
	labIDPattern   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	goFilePattern  = regexp.MustCompile(`^[A-Za-z0-9._/-]+$`)
	errBadProvider = fmt.Errorf("the workflow runs labctl with --provider %s", strings.Join(Providers, " or "))
)

// RenderWorkflow writes the workflow. Everything it puts in a shell line
// or a YAML scalar is checked first.
func RenderWorkflow(w io.Writer, o WorkflowOptions) error {
	if o.Lab == nil || !labIDPattern.MatchString(o.Lab.ID) {
		return fmt.Errorf("invalid lab for a workflow")
	}
	run, ok := runners[o.Provider]
	if !ok {
		return errBadProvider
	}
	if err := ValidLabctlVersion(o.LabctlVersion); err != nil {
		return err
	}
	if o.GoVersionFile != "" && !goFilePattern.MatchString(o.GoVersionFile) {
		return fmt.Errorf("invalid go-version-file %q", o.GoVersionFile)
	}
	if o.PolicyFile != "" && !goFilePattern.MatchString(o.PolicyFile) {
		return fmt.Errorf("invalid policy file %q", o.PolicyFile)
	}
	if o.Lang != "" && !slices.Contains(labs.Langs, o.Lang) {
		return fmt.Errorf("invalid language %q", o.Lang)
	}
	if o.Credit != "" && !slices.Contains(grade.Credits, grade.Credit(o.Credit)) {
		return fmt.Errorf("invalid credit %q", o.Credit)
	}
	type task struct {
		ID, Title      string
		Points         int
		Runner, EnvVar string
	}
	data := struct {
		WorkflowOptions
		Runner                                                               runner
		Title                                                                string
		Tasks                                                                []task
		MaxPoints, JobTimeout, UpTimeout                                     int
		GoVersion, ControlPlaneKey, KindVersion, ClusterName                 string
		RunnerID, Runners, VerifyFlags, Module                               string
		Checkout, SetupGo, CacheRestore, CacheSave, UploadArtifact, Reporter string
		// Operator: the lab's project has one to deploy (lab 1.4 has none).
		Operator bool
	}{
		WorkflowOptions: o,
		Runner:          run,
		JobTimeout:      run.JobTimeout,
		UpTimeout:       run.UpTimeout,
		Title:           report.CleanLine(o.Lab.Title.In("en")),
		MaxPoints:       o.Lab.MaxPoints(),
		GoVersion:       DefaultGoVersion,
		ControlPlaneKey: controlplane.DefaultVersions().Key(),
		KindVersion:     "v" + kindversion.Version(),
		ClusterName:     cluster.DefaultName,
		RunnerID:        RunnerID,
		VerifyFlags:     verifyFlags(o),
		Module:          "labctl/labctl",
		Checkout:        ActionCheckout,
		SetupGo:         ActionSetupGo,
		CacheRestore:    ActionCacheRestore,
		CacheSave:       ActionCacheSave,
		UploadArtifact:  ActionUpload,
		Reporter:        ActionReporter,
		Operator:        true,
	}
	if ref, err := reference.Lookup(o.Lab.Project); err == nil {
		data.Operator = ref.Operator
	}
	var runners []string
	for _, t := range o.Lab.Tasks {
		r := TaskRunner(t.ID)
		runners = append(runners, r)
		data.Tasks = append(data.Tasks, task{ID: t.ID, Title: report.CleanLine(t.Title.In("en")), Points: t.Points, Runner: r, EnvVar: ResultsEnv(r)})
	}
	data.Runners = strings.Join(runners, ",")
	return workflowTemplate.Execute(w, data)
}

// verifyFlags are the options verify runs with beyond the lab, provider
// and project (each value checked by RenderWorkflow).
func verifyFlags(o WorkflowOptions) string {
	var f []string
	if o.Lang != "" {
		f = append(f, "--lang "+o.Lang)
	}
	if o.Credit != "" {
		f = append(f, "--credit "+o.Credit)
	}
	if o.PolicyFile != "" {
		f = append(f, "--policy "+o.PolicyFile)
	}
	if len(f) == 0 {
		return ""
	}
	return " " + strings.Join(f, " ")
}

// ValidLabctlVersion accepts a release a workflow can pin (v1.2.0) or
// "latest". A pre-release, a pseudo-version and `git describe` output
// (v1.2.0-3-gabc, -dirty), which `make build` stamps, name no release a
// student's `go install` would find.
func ValidLabctlVersion(v string) error {
	if v == "latest" || (semver.IsValid(v) && semver.Prerelease(v) == "" && semver.Build(v) == "") {
		return nil
	}
	return fmt.Errorf("labctl version %q is not a release go install can fetch: use a release such as v0.1.0, or latest", v)
}

// InstallVersion is the labctl version the workflow installs: flag when
// given, else the version this labctl was built as (the -X main.version
// stamp, else the module version `go install` recorded). "" when neither
// is a version go install can fetch (a build from a work tree).
func InstallVersion(flag, built string) string {
	if flag != "" {
		return flag
	}
	if ValidLabctlVersion(built) == nil && built != "latest" {
		return built
	}
	if info, ok := debug.ReadBuildInfo(); ok && ValidLabctlVersion(info.Main.Version) == nil {
		return info.Main.Version
	}
	return ""
}
