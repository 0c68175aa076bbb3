package realcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is how long the generated certificates are valid: a control plane here lives for
// one test run or one dev session, a day is ample and an expired leftover is harmless.
const certValidity = 24 * time.Hour

// authority is a throw-away certificate authority generated at start; it signs the API server's
// serving certificate and every component's client certificate.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// keyPair is a signed certificate and its key, PEM encoded.
type keyPair struct {
	CertPEM, KeyPEM []byte
}

func newAuthority(now time.Time) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "dovetail-local-ca"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// serving signs a server certificate for the given IPs and DNS names.
func (a *authority) serving(now time.Time, cn string, ips []net.IP, dns []string) (keyPair, error) {
	return a.sign(now, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		IPAddresses: ips,
		DNSNames:    dns,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// client signs a client certificate. The API server's x509 authenticator takes the user name from
// the common name and the groups from the organizations (Kubernetes docs, "Authenticating: X509
// client certificates").
func (a *authority) client(now time.Time, user string, groups ...string) (keyPair, error) {
	return a.sign(now, &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (a *authority) sign(now time.Time, tmpl *x509.Certificate) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-time.Minute)
	tmpl.NotAfter = now.Add(certValidity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return keyPair{}, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: keyPEM}, nil
}

// newServiceAccountKey returns the service-account signing key (PEM, PKCS#8) and its public key
// (PEM, PKIX): kube-apiserver signs tokens with the first (--service-account-signing-key-file)
// and verifies them with the second (--service-account-key-file); kube-controller-manager signs
// its controllers' tokens with the first (--service-account-private-key-file). ECDSA P-256 keys
// are accepted by all three flags (ES256 tokens).
func newServiceAccountKey() (private, public []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	private, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	return private, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		// crypto/rand does not fail on Linux (getrandom); a constant would still be a valid serial.
		return big.NewInt(1)
	}
	return n
}

// writeFiles writes name → content under dir with owner-only permissions (keys are secrets,
// even throw-away ones).
func writeFiles(dir string, files map[string][]byte) error {
	if len(files) == 0 {
		return errors.New("writeFiles: nothing to write")
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}
