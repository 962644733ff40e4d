package local

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the set of keys and certificates one local cluster uses. Clients
// authenticate with certificates signed by the cluster's own CA; the
// user name (CN) tells components apart in the audit log.
type pki struct{ dir string }

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

// Client identities. All are cluster admins (system:masters); the operator
// never uses these: it has only a ServiceAccount token.
const (
	userAdmin     = "labctl-admin"
	userKCM       = "system:kube-controller-manager"
	userScheduler = "system:kube-scheduler"
	userKwok      = "labctl-kwok"
)

var clientUsers = map[string]string{
	"admin":     userAdmin,
	"kcm":       userKCM,
	"scheduler": userScheduler,
	"kwok":      userKwok,
}

// generate writes ca.{crt,key}, apiserver.{crt,key}, the etcd server and
// client pairs, sa.{key,pub} and a client pair per entry in clientUsers,
// all readable only by their owner. Existing files are kept (a restart
// after reboot must reuse them, or old tokens and kubeconfigs break);
// pairs missing from an older cluster's set are issued by its CA.
func (p pki) generate() error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(p.dir, 0o700); err != nil {
		return err
	}
	if _, err := os.Stat(p.path("ca.crt")); err == nil {
		return p.complete()
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "labctl-ca"},
		NotBefore:             now,
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return err
	}
	ca, _ := x509.ParseCertificate(caDER)
	for name, tmpl := range p.leaves() {
		if err := p.issue(ca, caKey, name, tmpl); err != nil {
			return err
		}
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	if err := writeKey(p.path("sa.key"), saKey); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return err
	}
	if err := os.WriteFile(p.path("sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return err
	}
	if err := writeKey(p.path("ca.key"), caKey); err != nil {
		return err
	}
	// ca.crt last: its presence marks a complete set.
	return os.WriteFile(p.path("ca.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600)
}

// leaves are the certificates the CA issues, by file name.
func (p pki) leaves() map[string]*x509.Certificate {
	local := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	out := map[string]*x509.Certificate{
		"apiserver": {
			Subject:     pkix.Name{CommonName: "kube-apiserver"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			IPAddresses: append(local, net.ParseIP("10.0.0.1")),
		},
		// etcd accepts only clients with a certificate of this CA: nothing
		// but the API server (and labctl's health check) reaches it.
		"etcd-server": {
			Subject:     pkix.Name{CommonName: "etcd"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			DNSNames:    []string{"localhost"},
			IPAddresses: local,
		},
		"etcd-client": {
			Subject:     pkix.Name{CommonName: "kube-apiserver-etcd-client"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		},
	}
	for file, user := range clientUsers {
		out[file] = &x509.Certificate{
			Subject:     pkix.Name{CommonName: user, Organization: []string{"system:masters"}},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
	}
	return out
}

// complete issues the pairs an existing set lacks.
func (p pki) complete() error {
	var missing []string
	for name := range p.leaves() {
		if _, err := os.Stat(p.path(name + ".crt")); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	caPEM, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return err
	}
	keyPEM, err := os.ReadFile(p.path("ca.key"))
	if err != nil {
		return err
	}
	cb, _ := pem.Decode(caPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return fmt.Errorf("%s: unreadable CA", p.dir)
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return err
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return fmt.Errorf("%s: the CA key cannot sign", p.dir)
	}
	leaves := p.leaves()
	for _, name := range missing {
		if err := p.issue(ca, signer, name, leaves[name]); err != nil {
			return err
		}
	}
	return nil
}

// issue writes name.{crt,key}: a new key certified by ca.
func (p pki) issue(ca *x509.Certificate, caKey crypto.Signer, name string, tmpl *x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now().Add(-time.Hour)
	tmpl.SerialNumber = serial()
	tmpl.NotBefore, tmpl.NotAfter = now, now.AddDate(10, 0, 0)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return err
	}
	return writePair(p.path(name), der, key)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

func writePair(base string, der []byte, key crypto.Signer) error {
	if err := os.WriteFile(base+".crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	return writeKey(base+".key", key)
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("marshal key: %w", err)
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}
