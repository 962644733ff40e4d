/*
Copyright 2026 The labctl authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package integration_test runs against a cluster where the operator is
// deployed (make deploy, or labctl up): the kubeconfig's current context
// (KUBECONFIG, ~/.kube/config) says which.
package integration_test

import (
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	databasev1 "github.com/example/postgres-operator/api/v1"
)

const (
	// operatorTimeout bounds what the deployed operator must do: create
	// children, roll a change out, clean up. A kind cluster pulls
	// PostgreSQL and starts its pod first.
	operatorTimeout = 5 * time.Minute
	pollInterval    = time.Second
)

var (
	k8sClient client.Client
	// namespace is where the specs create their Databases: the
	// kubeconfig's context may grant no more than that one.
	namespace = "default"
)

func TestIntegration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Integration Suite")
}

var _ = BeforeSuite(func() {
	// The client must know the Database type to send and read it.
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(databasev1.AddToScheme(scheme))

	cfg, err := config.GetConfig()
	Expect(err).NotTo(HaveOccurred(), "no kubeconfig for the cluster the operator runs in")
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	if ns := os.Getenv("INTEGRATION_NAMESPACE"); ns != "" {
		namespace = ns
	}
})
