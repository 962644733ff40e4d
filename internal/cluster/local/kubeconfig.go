// The cluster's own kubeconfigs and client certificates, and the merge into the user's.

package local

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/kubeconfig"
)

func adminTLS(l layout) (*tls.Config, error) { return clientTLS(l, "admin") }

// clientTLS authenticates with the pki's pair name.{crt,key}.
func clientTLS(l layout, name string) (*tls.Config, error) {
	k := l.pki()
	cert, err := tls.LoadX509KeyPair(k.path(name+".crt"), k.path(name+".key"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(k.path("ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// writeKubeconfigs writes one kubeconfig per client identity plus the
// cluster's admin kubeconfig (dir/kubeconfig, context labctl-NAME).
func (p *Provider) writeKubeconfigs(l layout, st *state) error {
	k := l.pki()
	server := fmt.Sprintf("https://127.0.0.1:%d", st.Ports.APIServer)
	ca, err := os.ReadFile(k.path("ca.crt"))
	if err != nil {
		return err
	}
	for file := range clientUsers {
		cfg, err := adminConfig(k, file, ContextName(st.Name), server, ca)
		if err != nil {
			return err
		}
		path := l.kubeconfig(file)
		if file == "admin" {
			path = l.file("kubeconfig")
		}
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			return err
		}
	}
	return nil
}

func adminConfig(k pki, file, name, server string, ca []byte) (*clientcmdapi.Config, error) {
	crt, err := os.ReadFile(k.path(file + ".crt"))
	if err != nil {
		return nil, err
	}
	key, err := os.ReadFile(k.path(file + ".key"))
	if err != nil {
		return nil, err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	return cfg, nil
}

func restConfig(l layout) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", l.file("kubeconfig"))
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 200, 400
	return cfg, nil
}

func (p *Provider) mergeKubeconfig(opts cluster.UpOptions, dir string, st *state) error {
	if opts.SkipKubeconfigMerge {
		return nil
	}
	path := opts.KubeconfigPath
	if path == "" {
		path = kubeconfig.DefaultPath()
	}
	if err := kubeconfig.MergeFile(path, layout{dir}.file("kubeconfig"), ContextName(st.Name)); err != nil {
		return err
	}
	st.UserKubeconfig = path
	return st.save(dir)
}
