// Package testproject writes tiny kubebuilder-shaped projects for the
// tests of deploying an operator: a go.mod, a PROJECT, a manager's main and
// the config/default (Namespace, ServiceAccount, manager Deployment) that
// labctl reads. Their managers build in a second and need no modules.
package testproject

import (
	"os"
	"path/filepath"
	"strings"
)

// Managers, by how they start.
const (
	// Ready serves /readyz on --health-probe-bind-address, as a
	// kubebuilder manager does once it runs, and does nothing else.
	Ready = `package main

import (
	"flag"
	"net/http"
)

func main() {
	probe := flag.String("health-probe-bind-address", "", "")
	flag.String("kubeconfig", "", "")
	flag.String("metrics-bind-address", "", "")
	flag.Bool("leader-elect", false, "")
	flag.Parse()
	http.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })
	panic(http.ListenAndServe(*probe, nil))
}
`
	// Crashes panics at start (a nil map), as a student's sometimes does.
	Crashes = `package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "INFO	setup	starting manager")
	fmt.Fprintln(os.Stderr, "INFO	setup	registering controllers")
	var widgets map[string]int
	widgets["first"]++ // panics: assignment to entry in nil map
}
`
	// Hangs never serves /readyz: it blocks before starting, as a manager
	// stuck on a lock or a cache that never syncs does.
	Hangs = `package main

import (
	"os"
	"time"
)

func main() {
	os.Stderr.WriteString("INFO	setup	waiting for something that never comes\n")
	time.Sleep(time.Hour)
}
`
)

const manifests = `apiVersion: v1
kind: Namespace
metadata: {name: NAME-system}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: NAME-controller-manager, namespace: NAME-system}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: NAME-controller-manager, namespace: NAME-system}
spec:
  selector: {matchLabels: {app: NAME}}
  template:
    metadata: {labels: {app: NAME}}
    spec:
      serviceAccountName: NAME-controller-manager
      containers: [{name: manager, image: controller:latest}]
`

// Write writes the project name (its projectName, namespace NAME-system)
// into dir with main as its manager's cmd/main.go.
func Write(dir, name, main string) error {
	for file, content := range map[string]string{
		"go.mod":                            "module example.com/" + name + "\n\ngo 1.22\n",
		"PROJECT":                           "projectName: " + name + "\n",
		"cmd/main.go":                       main,
		"config/default/kustomization.yaml": "resources:\n- manager.yaml\n",
		"config/default/manager.yaml":       strings.ReplaceAll(manifests, "NAME", name),
	} {
		path := filepath.Join(dir, filepath.FromSlash(file))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// SetMain replaces the manager's main of the project in dir.
func SetMain(dir, main string) error {
	return os.WriteFile(filepath.Join(dir, "cmd", "main.go"), []byte(main), 0o644)
}
