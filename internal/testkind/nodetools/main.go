// Command nodetools is the init and the few shell tools of testkind's node
// image, one static multi-call binary chosen by argv[0]:
//
//   - init: starts containerd, prints a ready line once containerd says it
//     booted, passes SIGTERM on and exits with containerd;
//   - cat, mkdir, cp: the commands kind's nodeutils and its create path run
//     in a node (`cat /kind/version`, `mkdir -p DIR`, `cp /dev/stdin FILE`).
//
// A kind node image runs systemd; this one runs nothing but containerd, so
// it is a test fixture, never a node for users.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

// ReadyLine is what init prints when containerd has booted. kind waits for
// a node's log to match "Reached target .*Multi-User System.*" (systemd's
// line) before it goes on; this says the same for the only service here.
const ReadyLine = "Reached target Multi-User System (testkind: containerd is up)"

// bootedLine is what containerd logs once every plugin is loaded and it
// serves its socket.
const bootedLine = "containerd successfully booted"

func main() {
	name := filepath.Base(os.Args[0])
	args := os.Args[1:]
	if name == "nodetools" && len(args) > 0 {
		name, args = args[0], args[1:]
	}
	var err error
	switch name {
	case "init":
		err = initNode()
	case "cat":
		err = cat(args)
	case "mkdir":
		err = mkdir(args)
	case "cp":
		err = cp(args)
	default:
		err = fmt.Errorf("unknown command %q (init, cat, mkdir, cp)", name)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			os.Exit(ee.ExitCode())
		}
		os.Exit(1)
	}
}

func initNode() error {
	for _, d := range []string{"/run/containerd", "/var/lib/containerd", "/tmp"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	cmd := exec.Command("/usr/local/bin/containerd", "--config", "/etc/containerd/config.toml")
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		for s := range sig {
			_ = cmd.Process.Signal(s)
		}
	}()
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		ready := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Println(line)
			if !ready && strings.Contains(line, bootedLine) {
				ready = true
				fmt.Println(ReadyLine)
			}
		}
		_, _ = io.Copy(os.Stdout, pr)
	}()
	err := cmd.Wait()
	pw.Close()
	return err
}

func cat(files []string) error {
	if len(files) == 0 {
		files = []string{"-"}
	}
	for _, f := range files {
		var r io.Reader = os.Stdin
		if f != "-" {
			fh, err := os.Open(f)
			if err != nil {
				return err
			}
			defer fh.Close()
			r = fh
		}
		if _, err := io.Copy(os.Stdout, r); err != nil {
			return err
		}
	}
	return nil
}

func mkdir(args []string) error {
	parents := false
	var dirs []string
	for _, a := range args {
		if a == "-p" {
			parents = true
			continue
		}
		dirs = append(dirs, a)
	}
	for _, d := range dirs {
		var err error
		if parents {
			err = os.MkdirAll(d, 0o755)
		} else {
			err = os.Mkdir(d, 0o755)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func cp(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: cp SRC DST")
	}
	in, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(args[1])
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
