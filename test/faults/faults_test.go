//go:build linux

package faults

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// where a case runs.
type world int

const (
	alone    world = iota // its own empty world, no cluster
	onShared              // the shared cluster, with the reference operator
)

// fault is one row: a command, the world and fault it meets, and what the
// user must see.
type fault struct {
	name  string
	args  []string
	world world
	// setup prepares the fault (files, environment) and may rewrite args
	// (placeholders: {file}, {empty}, {project}).
	setup func(t *testing.T, e *env)
	code  int
	// stderr is a regexp the error line (the last line of stderr) must
	// match; for exit 0, one that stderr must match.
	stderr string
	// stdout, when set, is a regexp stdout must match.
	stdout string
	// multiLine allows progress lines before the error line (commands
	// that did work before failing); the error is still one line.
	multiLine bool
	// check runs after the command, before the leftover count.
	check func(t *testing.T, e *env, r result)
	// keep names clusters the case is meant to leave running.
	keep []string
}

const lab = "lab-8.2"

func usage(name string, stderr string, args ...string) fault {
	return fault{name: name, args: args, code: 2, stderr: stderr}
}

// The fault table. Cases that need a cluster of their own (a killed API
// server, an interrupted or failed up, two ups at once) are tests below.
var faults = []fault{
	// Command-line mistakes: exit 2, one line, a hint.
	usage("unknown command", `^error: unknown command "bogus": `+"`labctl --help`", "bogus"),
	usage("misspelt command suggests", "did you mean `labctl status`", "stauts"),
	usage("unknown flag", `^error: unknown flag: --bogus: see `+"`labctl up --help`", "up", "--bogus"),
	usage("unknown shorthand flag", `unknown shorthand flag: 'z'`, "status", "-z"),
	usage("verify without a lab", `^error: labctl verify takes LAB, got 0 argument\(s\)`, "verify"),
	usage("verify with two labs", `labctl verify takes LAB, got 2`, "verify", "lab-8.2", "lab-3.4"),
	usage("up with an argument", `labctl up takes no arguments, got "extra"`, "up", "extra"),
	usage("down with an argument", `labctl down takes no arguments`, "down", "now"),
	usage("version with an argument", `labctl version takes no arguments`, "version", "x"),
	usage("labs with an unknown subcommand", `labctl labs has no command "bogus"`, "labs", "bogus"),
	usage("labs show without a lab", `labctl labs show takes LAB`, "labs", "show"),
	usage("grade without a lab", `labctl grade takes LAB \[SUBMISSION...\], got 0`, "grade"),
	usage("project and no-operator together", `--no-operator and --project cannot be used together`, "up", "--project", "x", "--no-operator"),
	usage("project and reference together", `--project and --reference cannot be used together`, "up", "--project", "x", "--reference"),
	usage("jobs not a number", `^error: invalid value "abc" for --jobs: expected a whole number: see `+"`labctl grade --help`", "grade", lab, "--jobs", "abc"),
	usage("timeout not a duration", `invalid value "soon" for --timeout: expected a duration`, "verify", lab, "--timeout", "soon"),
	usage("bool flag given a word", `invalid argument "maybe" for "--keep"|invalid value "maybe" for --keep`, "verify", lab, "--keep=maybe"),
	usage("completion for an unknown shell", `labctl cannot write completion for the shell "tcsh": use one of: bash, fish, powershell, zsh`, "completion", "tcsh"),
	usage("completion without a shell", `name the shell to write completion for`, "completion"),
	usage("global flag then unknown command", `unknown command "bogus"`, "--no-color", "bogus"),
	usage("unknown provider", `unknown provider "vagrant": use one of: auto, existing, kind, local`, "up", "--provider", "vagrant"),
	usage("invalid cluster name", `invalid cluster name "Bad_Name"`, "up", "--provider", "local", "--name", "Bad_Name", "--no-operator"),

	// Bad values of good flags.
	usage("verify negative timeout", `--timeout must be positive, got -5s`, "verify", lab, "--timeout", "-5s"),
	usage("verify zero timeout", `--timeout must be positive`, "verify", lab, "--timeout", "0s"),
	usage("verify unknown language", `unknown language "fr": use --lang en or --lang ru`, "verify", lab, "--lang", "fr"),
	usage("verify unknown lab", `there is no lab "lab-0.0"`, "verify", "lab-0.0"),
	usage("verify unknown task", `lab-8.2 has no task "99.9"`, "verify", lab, "--task", "99.9"),
	usage("verify unknown output", `unknown output format "yaml"`, "verify", lab, "-o", "yaml"),
	usage("grade jobs zero", `--jobs must be 1 or more`, "grade", lab, "--jobs", "0", "{empty}"),
	usage("grade jobs negative", `--jobs must be 1 or more`, "grade", lab, "--jobs", "-1", "{empty}"),
	usage("grade zero timeout", `--timeout must be positive`, "grade", lab, "--timeout", "0s", "{empty}"),
	usage("grade unknown language", `unknown language "de"`, "grade", lab, "--lang", "de", "{empty}"),
	usage("grade unknown lab", `no lab "lab-0.0"`, "grade", "lab-0.0", "{empty}"),
	usage("grade missing submission", `/no/such/submission`, "grade", lab, "/no/such/submission"),
	usage("grade missing roster", `cannot read the class list`, "grade", lab, "--roster", "/no/such/roster.csv"),

	// Directories that are not what they should be.
	usage("verify project missing", `--project /no/such/project: the directory does not exist`, "verify", lab, "--project", "/no/such/project"),
	usage("verify project is a file", `--project .*/file is a file, not a directory`, "verify", lab, "--project", "{file}"),
	usage("verify project is empty", `.*/empty is not a kubebuilder project`, "verify", lab, "--project", "{empty}"),
	usage("up project missing: nothing started", `--project /typo: the directory does not exist`, "up", "--provider", "local", "--project", "/typo"),
	usage("up project is a file", `--project .*/file is a file, not a directory`, "up", "--provider", "local", "--project", "{file}"),
	usage("up project is empty", `.*/empty is not a kubebuilder project: go.mod is missing`, "up", "--provider", "local", "--project", "{empty}"),
	usage("solution apply is a file", `--apply .*/file is a file, not a directory`, "solution", lab, "--apply", "{file}"),
	usage("solution apply missing", `--apply /no/such/dir: the directory does not exist`, "solution", lab, "--apply", "/no/such/dir"),

	// Case-insensitive languages, everywhere.
	{name: "labs accepts --lang EN", args: []string{"labs", "--lang", "EN"}, stdout: lab},
	{name: "labs show accepts --lang RU", args: []string{"labs", "show", lab, "--lang", "RU"}, stdout: "Каркас API Backup"},
	{name: "solution accepts --lang En", args: []string{"solution", lab, "--lang", "En"}},
	{name: "verify accepts --lang EN (then finds no cluster)", args: []string{"verify", lab, "--lang", "EN"}, code: 1,
		stderr: `^error: no running cluster named "k8s-operators-course": run ` + "`labctl up` first"},
	{name: "grade accepts --lang EN (then checks the submission)", args: []string{"grade", lab, "--lang", "EN", "/no/such/submission"}, code: 2,
		stderr: `^error: .*/no/such/submission`},
	{name: "completion bash works", args: []string{"completion", "bash"}, stdout: "bash completion"},
	{name: "help exits 0", args: []string{"--help"}, stdout: "Usage:"},

	// Clusters that are not there, or broken.
	{name: "down of a missing cluster succeeds", args: []string{"down", "--name", "ghost"}, stderr: `No cluster named "ghost": nothing to delete`},
	{name: "status of a missing cluster", args: []string{"status", "--name", "ghost"}, code: 1, stderr: `no cluster named "ghost": run ` + "`labctl up --name ghost`"},
	{name: "status with no clusters", args: []string{"status", "--provider", "local"}, stdout: "No clusters"},
	{name: "verify a missing cluster", args: []string{"verify", lab, "--name", "ghost", "--provider", "local"}, code: 1, stderr: `no running cluster named "ghost"|there is no local cluster`},
	{name: "one corrupt state.json: status lists the others", args: []string{"status", "--provider", "local"},
		setup:  func(t *testing.T, e *env) { corruptState(t, e, "broken"); stoppedState(t, e, "stopped") },
		stdout: `(?s)local cluster broken: broken — the state of local cluster "broken" is unreadable.*local cluster stopped .*degraded`,
		keep:   []string{"broken", "stopped"}},
	{name: "corrupt state.json: up says how to recover", args: []string{"up", "--provider", "local", "--name", "broken", "--no-operator"},
		setup: func(t *testing.T, e *env) { corruptState(t, e, "broken") },
		code:  1, stderr: "unreadable .*run `labctl down --name broken`", keep: []string{"broken"}},
	{name: "corrupt state.json: down removes it", args: []string{"down", "--provider", "local", "--name", "broken"},
		setup: func(t *testing.T, e *env) { corruptState(t, e, "broken") }, multiLine: true},
	{name: "stopped cluster: verify says it is not running", args: []string{"verify", lab, "--provider", "local", "--name", "stopped"},
		setup: func(t *testing.T, e *env) { stoppedState(t, e, "stopped") },
		code:  1, stderr: `local cluster "stopped" is not running: run ` + "`labctl up --provider local --name stopped`", keep: []string{"stopped"}},
	{name: "stopped cluster: down cleans it", args: []string{"down", "--name", "stopped"},
		setup: func(t *testing.T, e *env) { stoppedState(t, e, "stopped") }, multiLine: true},

	// The user's files.
	{name: "corrupt KUBECONFIG: up refuses before starting anything", args: []string{"up", "--provider", "local", "--no-operator"},
		setup: func(t *testing.T, e *env) { writeFile(t, e.kubeconfig, "{{{ not yaml", 0o600) },
		code:  1, stderr: `cannot read kubeconfig .*config.*: fix or move that file`},
	{name: "read-only kubeconfig is not overwritten, even by root", args: []string{"up", "--provider", "local", "--no-operator"},
		setup: func(t *testing.T, e *env) { writeFile(t, e.kubeconfig, readOnlyKubeconfig, 0o444) },
		code:  1, stderr: `cannot write kubeconfig .*: permission denied`,
		check: func(t *testing.T, e *env, _ result) {
			raw, _ := os.ReadFile(e.kubeconfig)
			assert.Equal(t, readOnlyKubeconfig, string(raw))
		}},
	{name: "HOME unset: the user database's home, said", args: []string{"labs"},
		setup: func(t *testing.T, e *env) { e.extra["HOME"] = "" }, stderr: `^note: HOME is not set; using /`, stdout: lab},
}

const readOnlyKubeconfig = "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\ncurrent-context: \"\"\n"

func TestFaults(t *testing.T) {
	for _, fc := range faults {
		t.Run(fc.name, func(t *testing.T) {
			e := newEnv(t)
			if fc.world == onShared {
				e = sharedEnv(t).caseEnv(t)
			}
			if fc.setup != nil {
				fc.setup(t, e)
			}
			args := expand(t, e, fc.args)
			r := e.run(t, args...)
			assert.Equal(t, fc.code, r.code, "exit code\n%s", r)
			checkStderr(t, r, fc.stderr, !fc.multiLine && fc.code != 0)
			if fc.stdout != "" {
				assert.Regexp(t, fc.stdout, r.stdout, "%s", r)
			}
			if fc.check != nil {
				fc.check(t, e, r)
			}
			assert.Empty(t, e.leftovers(fc.keep...), "left behind")
		})
	}
}

func expand(t *testing.T, e *env, args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		switch a {
		case "{file}":
			a = filepath.Join(e.root, "file")
			writeFile(t, a, "not a directory\n", 0o644)
		case "{empty}":
			a = filepath.Join(e.root, "empty")
			require.NoError(t, os.MkdirAll(a, 0o755))
		}
		out[i] = a
	}
	return out
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), mode))
	require.NoError(t, os.Chmod(path, mode))
}

func corruptState(t *testing.T, e *env, name string) {
	writeFile(t, filepath.Join(e.clustersDir(), name, "state.json"), "{\"name\": \"broken\", ", 0o644)
}

// stoppedState is a cluster whose processes are gone (a reboot).
func stoppedState(t *testing.T, e *env, name string) {
	st := `{"name": "` + name + `", "binDir": "/nonexistent", "ports": {"etcd": 1, "etcdPeer": 2, "apiserver": 3, "kwok": 4},
 "pids": {"etcd": 999999991, "kube-apiserver": 999999992}, "created": "2026-01-01T00:00:00Z"}`
	writeFile(t, filepath.Join(e.clustersDir(), name, "state.json"), st, 0o644)
}

func TestFaultTableIsLarge(t *testing.T) {
	n := len(faults) + len(clusterFaults)
	assert.GreaterOrEqual(t, n, 60, "the issue asks for at least 60 cases")
	seen := map[string]bool{}
	for _, f := range faults {
		assert.False(t, seen[f.name], "duplicate case %q", f.name)
		seen[f.name] = true
		assert.False(t, strings.TrimSpace(f.name) == "")
	}
}
