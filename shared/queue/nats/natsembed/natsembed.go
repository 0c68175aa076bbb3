// Package natsembed runs an in-process nats-server with JetStream for local dev and tests. It is
// apart from the transport (shared/queue/nats) so that no function binary links the server:
// a Lambda bootstrap only ever dials a queue (TestLambdaBootstrapsLinkNoNATSServer).
//
// The server runs as production should: TLS only (a throwaway CA and a certificate for
// 127.0.0.1 made at start) and one nkey user per role (natsauth.Roles) with that role's
// permissions (natsauth.For), the keys made in memory. ClientOptions gives a role's client its
// credentials, so every path of local dev and the tests goes through authentication and the
// role's permissions.
package natsembed

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
)

// DefaultCluster is the cluster whose role users Run makes when Options.Cluster is empty: local
// dev's default --cluster.
const DefaultCluster = "dev"

// Options configures Run. The zero value is a loopback server on a random port
// with JetStream stored in a temporary directory removed at shutdown.
type Options struct {
	// StoreDir holds JetStream's files; empty means a new temporary directory, removed after
	// the server shuts down.
	StoreDir string
	// Port is the client port; 0 picks a free one.
	Port int
	// ServerName names the server in logs and advisories; default "dovetail-dev".
	ServerName string
	// Cluster is the cluster the roles' permissions name (natsauth.For); default DefaultCluster.
	Cluster string
	// ReadyTimeout bounds start-up; default 5 s (the server is usually up in ~30 ms).
	ReadyTimeout time.Duration
	// Log enables the server's own log on stderr.
	Log bool
}

// Server is a running embedded server: nats-server's Server, the cluster its users are for, and
// the keys and CA its clients need.
type Server struct {
	*server.Server
	cluster string
	users   map[natsauth.Role]nkeys.KeyPair
	admin   nkeys.KeyPair
	roots   *x509.CertPool
	caPEM   []byte
}

// Run starts an in-process nats-server with JetStream on 127.0.0.1 and returns it and its
// client URL ("tls://127.0.0.1:<port>": TLS only; ClientOptions verify the server). Stop it with
// Shutdown (and WaitForShutdown).
func Run(o Options) (*Server, string, error) {
	cluster := o.Cluster
	if cluster == "" {
		cluster = DefaultCluster
	}
	es := &Server{cluster: cluster, users: map[natsauth.Role]nkeys.KeyPair{}}
	var nkeyUsers []*server.NkeyUser
	for _, role := range natsauth.Roles {
		p, err := natsauth.For(role, cluster)
		if err != nil {
			return nil, "", fmt.Errorf("embedded nats-server: %w", err)
		}
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, "", fmt.Errorf("embedded nats-server: nkey of role %s: %w", role, err)
		}
		pub, _ := kp.PublicKey()
		es.users[role] = kp
		nkeyUsers = append(nkeyUsers, &server.NkeyUser{Nkey: pub, Permissions: serverPermissions(p)})
	}
	// The admin user has every permission: for tests that play several roles on one connection
	// (a test publishes the agent's events and reads the functions' commands). No component of
	// local dev uses it.
	admin, err := nkeys.CreateUser()
	if err != nil {
		return nil, "", fmt.Errorf("embedded nats-server: admin nkey: %w", err)
	}
	adminPub, _ := admin.PublicKey()
	es.admin = admin
	nkeyUsers = append(nkeyUsers, &server.NkeyUser{Nkey: adminPub})

	tlsConfig, roots, caPEM, err := selfSignedTLS()
	if err != nil {
		return nil, "", fmt.Errorf("embedded nats-server: %w", err)
	}
	es.roots, es.caPEM = roots, caPEM

	dir, temp := o.StoreDir, false
	if dir == "" {
		d, err := os.MkdirTemp("", "dovetail-jetstream-*")
		if err != nil {
			return nil, "", fmt.Errorf("jetstream store dir: %w", err)
		}
		dir, temp = d, true
	}
	port := o.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	name := o.ServerName
	if name == "" {
		name = "dovetail-dev"
	}
	timeout := o.ReadyTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	opts := &server.Options{
		ServerName: name,
		Host:       "127.0.0.1", // loopback only: local dev and tests never expose the queue
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		NoSigs:     true,
		NoLog:      !o.Log,
		Nkeys:      nkeyUsers,
		TLS:        true,
		TLSConfig:  tlsConfig,
		TLSTimeout: 2,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		if temp {
			os.RemoveAll(dir)
		}
		return nil, "", fmt.Errorf("embedded nats-server: %w", err)
	}
	if o.Log {
		s.ConfigureLogger()
	}
	go s.Start()
	if !s.ReadyForConnections(timeout) {
		s.Shutdown()
		if temp {
			os.RemoveAll(dir)
		}
		return nil, "", fmt.Errorf("embedded nats-server not ready after %s", timeout)
	}
	if temp {
		go func() {
			s.WaitForShutdown()
			os.RemoveAll(dir)
		}()
	}
	es.Server = s
	return es, s.ClientURL(), nil
}

// Cluster is the cluster the server's role users are for.
func (s *Server) Cluster() string { return s.cluster }

// ClientOptions are the nats.go options of a client of role: its nkey, TLS verified by the
// server's CA, and the role's inbox prefix (natsauth.InboxPrefix). It panics on a role not in
// natsauth.Roles (a test's mistake).
func (s *Server) ClientOptions(role natsauth.Role) []natsgo.Option {
	kp, ok := s.users[role]
	if !ok {
		panic(fmt.Sprintf("natsembed: no user for role %q", role))
	}
	return append(s.credentials(kp), natsgo.CustomInboxPrefix(natsauth.InboxPrefix(s.cluster, role)))
}

// AdminOptions are the options of a client with every permission (tests only; see Run).
func (s *Server) AdminOptions() []natsgo.Option { return s.credentials(s.admin) }

// TLSOptions verify the server's certificate and carry no credentials (tests of refusals).
func (s *Server) TLSOptions() []natsgo.Option {
	return []natsgo.Option{natsgo.Secure(&tls.Config{RootCAs: s.roots, MinVersion: tls.VersionTLS12})}
}

func (s *Server) credentials(kp nkeys.KeyPair) []natsgo.Option {
	pub, _ := kp.PublicKey()
	return append(s.TLSOptions(), natsgo.Nkey(pub, kp.Sign))
}

func serverPermissions(p natsauth.Permissions) *server.Permissions {
	sp := func(s natsauth.SubjectPermission) *server.SubjectPermission {
		return &server.SubjectPermission{Allow: s.Allow, Deny: s.Deny}
	}
	return &server.Permissions{Publish: sp(p.Publish), Subscribe: sp(p.Subscribe)}
}

// selfSignedTLS makes a throwaway CA and a server certificate for 127.0.0.1 and localhost,
// valid for a day: the server's TLS config and the pool (and PEM) its clients verify it with.
func selfSignedTLS() (*tls.Config, *x509.CertPool, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("CA key: %w", err)
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "dovetail-dev NATS CA"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("server key: %w", err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("server certificate: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER, caDER}, PrivateKey: key}},
		MinVersion:   tls.VersionTLS12,
	}, roots, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}

// ClientFiles are the files a separate process needs to connect to the server as a role (what
// the Helm chart mounts from Secrets): the server's CA and each role's nkey seed.
type ClientFiles struct {
	// CA is the PEM of the server's CA (--nats-tls-ca).
	CA string
	// Seeds maps each role to its nkey seed file (--nats-nkey-seed).
	Seeds map[natsauth.Role]string
}

// WriteClientFiles writes the CA and every role's seed into dir (0600; dir should be private
// and removed with the server): for `dovetail audit --nats` beside `dovetail dev`, and for tests
// that run a binary against the server.
func (s *Server) WriteClientFiles(dir string) (ClientFiles, error) {
	f := ClientFiles{CA: filepath.Join(dir, "ca.pem"), Seeds: map[natsauth.Role]string{}}
	if err := os.WriteFile(f.CA, s.caPEM, 0o600); err != nil {
		return ClientFiles{}, err
	}
	for _, role := range natsauth.Roles {
		seed, err := s.users[role].Seed()
		if err != nil {
			return ClientFiles{}, err
		}
		path := filepath.Join(dir, string(role)+".nk")
		if err := os.WriteFile(path, seed, 0o600); err != nil {
			return ClientFiles{}, err
		}
		f.Seeds[role] = path
	}
	return f, nil
}
