package realcluster

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// These tests need no control plane: they check the credentials and files Start writes, and the
// errors for missing binaries and bad manifests. The control plane itself is exercised by
// realcluster_e2e_test.go and the e2e suite (build tag e2e, `make e2e`).

func parseCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE" {
		t.Fatalf("not a PEM certificate: %q", data)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCertificatesChainToTheCA(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ca, err := newAuthority(now)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	if !ca.cert.IsCA || ca.cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Fatalf("CA certificate: IsCA=%v keyUsage=%v, want a signing CA", ca.cert.IsCA, ca.cert.KeyUsage)
	}

	srv, err := ca.serving(now, "kube-apiserver", []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	sc := parseCert(t, srv.CertPEM)
	if _, err := sc.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1", CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("serving certificate does not verify for 127.0.0.1: %v", err)
	}
	if _, err := sc.Verify(x509.VerifyOptions{Roots: roots, DNSName: "example.com", CurrentTime: now}); err == nil {
		t.Error("serving certificate verifies for example.com, want only its SANs")
	}
	// Valid from a minute before start (clock skew between processes) for certValidity.
	if got, want := sc.NotAfter.Sub(sc.NotBefore), certValidity+time.Minute; got != want {
		t.Errorf("validity %s, want %s", got, want)
	}

	// The API server maps CN to the user and O to the groups (Kubernetes docs, "X509 client certificates").
	cl, err := ca.client(now, "system:kube-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	cc := parseCert(t, cl.CertPEM)
	if _, err := cc.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate does not verify for client auth: %v", err)
	}
	if cc.Subject.CommonName != "system:kube-scheduler" || len(cc.Subject.Organization) != 0 {
		t.Errorf("subject %v, want CN=system:kube-scheduler and no groups", cc.Subject)
	}
	admin, err := ca.client(now, "dovetail-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	if o := parseCert(t, admin.CertPEM).Subject.Organization; len(o) != 1 || o[0] != "system:masters" {
		t.Errorf("admin groups %v, want [system:masters]", o)
	}
	if _, err := cc.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now.Add(25 * time.Hour)}); err == nil {
		t.Error("client certificate still valid after 25 h, want expiry after certValidity (24 h)")
	}
}

func TestServiceAccountKeyPair(t *testing.T) {
	priv, pub, err := newServiceAccountKey()
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := pem.Decode(priv)
	key, err := x509.ParsePKCS8PrivateKey(pb.Bytes)
	if err != nil {
		t.Fatalf("private key is not PKCS#8: %v", err)
	}
	ub, _ := pem.Decode(pub)
	pk, err := x509.ParsePKIXPublicKey(ub.Bytes)
	if err != nil {
		t.Fatalf("public key is not PKIX: %v", err)
	}
	ek, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		t.Fatalf("private key is %T, want ECDSA", key)
	}
	if !ek.PublicKey.Equal(pk) {
		t.Error("public key does not match the private key")
	}
}

func TestKubeconfigRoundTrip(t *testing.T) {
	now := time.Now()
	ca, err := newAuthority(now)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.client(now, "u")
	if err != nil {
		t.Fatal(err)
	}
	data, err := kubeconfig("https://127.0.0.1:6443", ca.pem, "u", &kp, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := restConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || string(cfg.CAData) != string(ca.pem) || string(cfg.CertData) != string(kp.CertPEM) || string(cfg.KeyData) != string(kp.KeyPEM) {
		t.Errorf("round trip lost data: host %q, CA %d bytes, cert %d bytes, key %d bytes", cfg.Host, len(cfg.CAData), len(cfg.CertData), len(cfg.KeyData))
	}
	if cfg.QPS != 100 || cfg.Burst != 200 {
		t.Errorf("QPS/Burst = %v/%d, want 100/200", cfg.QPS, cfg.Burst)
	}
	tok := (&ControlPlane{Server: "https://127.0.0.1:1", CAPEM: ca.pem}).TokenConfig("t0k")
	if tok.BearerToken != "t0k" || len(tok.CertData) != 0 || string(tok.CAData) != string(ca.pem) {
		t.Errorf("token config: %+v", tok)
	}
}

func TestBinariesMissingSaysHowToBuild(t *testing.T) {
	o := Options{BinDir: t.TempDir()}
	_, _, _, err := o.Binaries()
	if err == nil || !strings.Contains(err.Error(), "make controlplane") {
		t.Fatalf("err = %v, want one telling to run make controlplane", err)
	}
	for _, n := range []string{"controlplane", "kwok"} {
		if err := os.WriteFile(filepath.Join(o.BinDir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cp, kwok, etcd, err := o.Binaries()
	if err != nil {
		t.Fatal(err)
	}
	if cp != filepath.Join(o.BinDir, "controlplane") || kwok != filepath.Join(o.BinDir, "kwok") ||
		strings.Join(etcd, " ") != cp+" etcd" {
		t.Errorf("binaries %q %q %q", cp, kwok, etcd)
	}
	o.Etcd = "/nonexistent/etcd"
	if _, _, _, err := o.Binaries(); err == nil || !strings.Contains(err.Error(), "/nonexistent/etcd") {
		t.Errorf("external etcd missing: err = %v", err)
	}
}

func TestReadObjectsNamesTheBadDocument(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("a.yaml", "# comment only\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n---\n")
	objs, err := readObjects(good)
	if err != nil || len(objs) != 1 || objs[0].GetName() != "x" {
		t.Fatalf("readObjects = %v, %v; want the one Namespace x", objs, err)
	}
	for body, want := range map[string]string{
		"kind: Namespace\nmetadata: {name: x}\n":                                         "document 1: apiVersion: required",
		"apiVersion: v1\nmetadata: {name: x}\n":                                          "document 1: kind: required",
		"---\napiVersion: v1\nkind: Namespace\n":                                         "document 1: metadata.name: required",
		"apiVersion: v1\nkind: [\n":                                                      "document 1",
		"---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: x\n": "document 2: apiVersion: required",
	} {
		p := write("bad.yaml", body)
		if _, err := readObjects(p); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%q: err = %v, want it to name %s and %q", body, err, p, want)
		}
	}
	write("b.yml", "")
	write("c.txt", "")
	files, err := expandYAML([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(files, ","); got != strings.Join([]string{good, filepath.Join(dir, "b.yml"), filepath.Join(dir, "bad.yaml")}, ",") {
		t.Errorf("expandYAML = %v, want the YAML files in name order", files)
	}
}

func TestFreePortsAreDistinct(t *testing.T) {
	ports, err := freePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("ports %v: want 5 distinct positive ports", ports)
		}
		seen[p] = true
	}
}

func TestStagesAreEmbedded(t *testing.T) {
	// kwok needs a node stage and a pod stage, or it exits "no stages found".
	for _, want := range []string{"name: node-ready", "name: pod-running", "name: pod-stop", "name: pod-delete", "kind: Stage"} {
		if !strings.Contains(string(kwokStages), want) {
			t.Errorf("stages.yaml lacks %q", want)
		}
	}
}
