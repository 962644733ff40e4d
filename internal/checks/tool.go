package checks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/labctl/labctl/internal/report"
)

func init() {
	Register(Typed(Definition{
		Name:       "tool",
		Doc:        "a command-line tool the lab installs answers on this machine (its version command succeeds); not graded: a grader's machine is not the student's",
		OwnMachine: true,
	}, runTool))
}

type toolParams struct {
	// Command is the executable's name (ginkgo, setup-envtest, dlv).
	Command string `json:"command"`
	// Args make it answer without side effects (default: version).
	Args []string `json:"args"`
	// Install is how the lab installs it, for the hint of a failure.
	Install string `json:"install"`
}

func (p *toolParams) Validate() error {
	if p.Command == "" || strings.ContainsAny(p.Command, `/\`) {
		return errors.New("needs command, a name looked up on PATH")
	}
	return nil
}

// toolTimeout bounds one answer: a version command returns at once.
const toolTimeout = 30 * time.Second

func runTool(ctx context.Context, c *Context, p *toolParams) Outcome {
	if c.run.o.Grading {
		return skip("%s is a tool on the student's own machine, which grading does not see", p.Command)
	}
	args := p.Args
	if len(args) == 0 {
		args = []string{"version"}
	}
	shown := strings.Join(append([]string{p.Command}, args...), " ")
	expected := shown + " succeeds"
	bin, onPath := findTool(ctx, p.Command)
	if bin == "" {
		out := fail("%s is not installed: %s", p.Command, p.Install)
		out.Expected = expected
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, toolTimeout)
	defer cancel()
	var output bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &output, &output
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	first := oneLine(errors.New(strings.TrimSpace(output.String())))
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer within %s", toolTimeout)
		}
		out := fail("%s fails (%v): %s; reinstall it: %s", shown, oneLine(err), first, p.Install)
		out.Expected = expected
		return out
	}
	if !onPath {
		out := pass("%s answers (%s), but %s is not on PATH, so the lab's commands do not find it: add %s to PATH", shown, first, bin, filepath.Dir(bin))
		out.Status = report.Warn
		return out
	}
	return pass("%s: %s", shown, first)
}

// findTool finds a command on PATH, or where go install puts it (GOBIN,
// else the first GOPATH's bin): a student who installed it but never put
// that directory on PATH has it all the same.
func findTool(ctx context.Context, name string) (bin string, onPath bool) {
	if p, err := exec.LookPath(name); err == nil {
		return p, true
	}
	var dirs []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	if gopath := goEnv(ctx, "GOPATH"); gopath != "" {
		dirs = append(dirs, filepath.Join(filepath.SplitList(gopath)[0], "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, false
		}
	}
	return "", false
}

// goEnv is one of go env's variables, or "" when go is not there.
func goEnv(ctx context.Context, name string) string {
	ctx, cancel := context.WithTimeout(ctx, toolTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "env", name).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
