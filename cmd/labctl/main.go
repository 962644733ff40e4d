// Command labctl runs, checks and grades the labs of the Building Kubernetes
// Operators course.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/cli/root"
	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/cluster/existing"
	"github.com/labctl/labctl/internal/cluster/kind"
	"github.com/labctl/labctl/internal/cluster/local"
	"github.com/labctl/labctl/internal/deploy"
	"github.com/labctl/labctl/internal/grade"
	"github.com/labctl/labctl/internal/homedir"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/supervise"
	"github.com/labctl/labctl/internal/userr"
)

// version is set with -ldflags "-X main.version=..." (make build).
var version = "dev"

// labctlVersion is the -ldflags version, else the module version the Go
// command recorded: `go install github.com/labctl/labctl/cmd/labctl@v1.2.0`
// stamps v1.2.0, which the Classroom workflow pins.
func labctlVersion() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
}

func main() {
	// labctl re-executes itself to supervise operator managers, and to
	// grade each submission in a box of its own.
	supervise.MaybeRun()
	grade.MaybeRun()
	os.Exit(run())
}

func run() int {
	// client-go logs retries and timeouts through klog straight to stderr;
	// labctl reports what matters itself, in one line per failure.
	// Errors from retrying watches (retrywatcher.go) pass klog's stderr
	// threshold whatever its output; a discarding logger takes everything.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	// controller-runtime prints a goroutine dump ("log.SetLogger(...) was
	// never called") 30s into any command that uses its client without a
	// logger; labctl reports through its own output, so set one, once.
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	streams := iostreams.System()
	if note, err := homedir.Ensure(); err != nil {
		fmt.Fprintln(streams.ErrOut, streams.Styles().Failure.Render("error:")+" "+userr.Message(err))
		return userr.Code(err)
	} else if note != "" {
		fmt.Fprintln(streams.ErrOut, note)
	}
	kindProv, existingProv := &kind.Provider{}, &existing.Provider{Operators: deploy.FromRegistry{}}
	kindProv.Operators = deploy.IntoKind{Provider: kindProv}
	f := &cmdutil.Factory{
		IOStreams: streams,
		Version:   labctlVersion(),
		Providers: &cluster.Providers{ByName: map[string]cluster.Provider{
			local.ProviderName:    &local.Provider{Operators: deploy.AsProcess{}},
			kind.ProviderName:     kindProv,
			existing.ProviderName: existingProv,
		}, Detect: kindProv.Detect(local.ProviderName), Fallback: local.ProviderName},
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cmd := root.NewCommand(f)
	cmd.PersistentFlags().StringVar(&kindProv.Engine, "engine", "", "container engine for kind: docker or podman (default: $KIND_EXPERIMENTAL_PROVIDER, else the first that runs)")
	cmd.PersistentFlags().StringVar(&existingProv.Context, "context", "", "kubeconfig context of the existing provider (default: the current context)")
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return userr.ExitOK
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || userr.Code(err) == userr.ExitInterrupted) {
		var ue *userr.Error
		if errors.As(err, &ue) && ue.Code == userr.ExitInterrupted {
			fmt.Fprintln(streams.ErrOut, userr.Message(err))
		} else {
			fmt.Fprintln(streams.ErrOut, "interrupted")
		}
		return userr.ExitInterrupted
	}
	var silent *cmdutil.SilentError
	if !errors.As(err, &silent) {
		fmt.Fprintln(streams.ErrOut, streams.Styles().Failure.Render("error:")+" "+userr.Message(err))
	}
	return userr.Code(err)
}
