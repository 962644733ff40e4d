// Package satoken gives a locally run manager the identity it would have
// in a pod: a ServiceAccount token from the TokenRequest API, short-lived
// and refreshed, in a kubeconfig that holds nothing else (no client
// certificate, no impersonation). The API server then authenticates the
// manager as system:serviceaccount:NS:NAME and enforces the project's
// RBAC itself.
package satoken

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TTL is how long a token lives; Refresh renews it at half-life.
const TTL = time.Hour

// Request asks the API server (as cfg, an admin) for a token of the
// ServiceAccount namespace/name, valid for ttl.
func Request(ctx context.Context, cfg *rest.Config, namespace, name string, ttl time.Duration) (string, time.Time, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", time.Time{}, err
	}
	secs := int64(ttl / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, tr.Status.ExpirationTimestamp.Time, nil
}

// WriteToken replaces the token file atomically (client-go re-reads it).
// The file is readable by everyone: its directory decides who reaches it.
func WriteToken(path, token string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(token), 0o644); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// WriteKubeconfig writes a kubeconfig for the API server of cfg (server
// and CA only) that authenticates with the token in tokenFile.
func WriteKubeconfig(cfg *rest.Config, out, namespace, tokenFile string) error {
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			return err
		}
	}
	const name = "manager"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: ca}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{TokenFile: tokenFile}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: namespace}
	kc.CurrentContext = name
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// Refresher renews a token file until its context ends.
type Refresher struct {
	// AdminKubeconfig authenticates the TokenRequests.
	AdminKubeconfig string
	Namespace, Name string
	File            string
	TTL             time.Duration
	// Note reports failures (they are retried).
	Note func(format string, args ...any)
}

// Run renews the token at half its life; a failed request is retried
// every 10 s (and noted) while the current token is still valid.
func (r *Refresher) Run(ctx context.Context) {
	ttl := r.TTL
	if ttl <= 0 {
		ttl = TTL
	}
	next := ttl / 2
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
		if err := r.once(ctx, ttl); err != nil {
			if r.Note != nil {
				r.Note("cannot renew the manager's token: %v", err)
			}
			next = 10 * time.Second
			continue
		}
		next = ttl / 2
	}
}

func (r *Refresher) once(ctx context.Context, ttl time.Duration) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", r.AdminKubeconfig)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tok, _, err := Request(rctx, cfg, r.Namespace, r.Name, ttl)
	if err != nil {
		return err
	}
	return WriteToken(r.File, tok)
}

// Issue requests a first token and writes it and the kubeconfig into dir
// (files "token" and "kubeconfig"); it returns the kubeconfig's path.
func Issue(ctx context.Context, cfg *rest.Config, dir, namespace, name string) (string, error) {
	tok, _, err := Request(ctx, cfg, namespace, name, TTL)
	if err != nil {
		return "", err
	}
	tokenFile := filepath.Join(dir, "token")
	if err := WriteToken(tokenFile, tok); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "kubeconfig")
	return out, WriteKubeconfig(cfg, out, namespace, tokenFile)
}
