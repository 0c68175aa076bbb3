package azureapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"sync"
	"time"

	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
)

// Placeholders of the fake account's bootstrap: the shapes AKS hands out, no real secret.
const (
	// LocalTenantID stands for the subscription's Microsoft Entra tenant.
	LocalTenantID = "00000000-0000-0000-0000-000000000000"
	// LocalBootstrapToken has a bootstrap token's shape (<6>.<16> of [a-z0-9]).
	LocalBootstrapToken = "dvtail.0123456789abcdef"
)

var (
	localCAOnce sync.Once
	localCA     string
)

// LocalBootstrap is the cluster-level bootstrap local dev mode and tests launch with: apiServer,
// a cluster CA that is a real self-signed certificate (made once per process with crypto/x509,
// so the fake's node image parses it as a real one would), the placeholder token and tenant.
func LocalBootstrap(apiServer string) azure.Bootstrap {
	localCAOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic("azureapi: generating the local cluster CA key: " + err.Error()) // crypto/rand does not fail on supported platforms
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dovetail-local-ca"},
			NotBefore: time.Unix(0, 0), NotAfter: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			panic("azureapi: self-signing the local cluster CA: " + err.Error()) // the template is fixed and valid
		}
		localCA = base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	})
	return azure.Bootstrap{APIServer: apiServer, CA: localCA, Token: LocalBootstrapToken, TenantID: LocalTenantID}
}
