package natsauth

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// Flag names of Client, shared by every NATS client (agent, function workers, the Scheduled
// Events DaemonSet, dovetail audit --nats).
const (
	FlagCreds          = "nats-creds"
	FlagNkeySeed       = "nats-nkey-seed"
	FlagTLSCA          = "nats-tls-ca"
	FlagTLSCert        = "nats-tls-cert"
	FlagTLSKey         = "nats-tls-key"
	FlagInsecureNoAuth = "nats-insecure-no-auth"
)

// Client is how a NATS client authenticates and encrypts: exactly one of a user credentials
// file (CredsFile: the JWT and nkey seed `nsc` writes, for a server in decentralized JWT mode) or
// an nkey seed file (NkeySeedFile: the "SU..." seed `nk -gen user` writes, for a server whose
// config lists the user's public key), and TLS. Paths only: the secrets are read by the NATS
// client at connect and never logged.
type Client struct {
	CredsFile    string
	NkeySeedFile string
	// TLSCAFile is the PEM bundle that verifies the server's certificate; empty: the system roots.
	TLSCAFile string
	// TLSCertFile and TLSKeyFile are the client's certificate and key for a server that requires
	// mutual TLS; both or neither.
	TLSCertFile, TLSKeyFile string
	// InsecureNoAuth allows connecting without credentials and, to a non-loopback server,
	// without TLS: for a throwaway server only.
	InsecureNoAuth bool
}

// envName is runtime.EnvName (DOVETAIL_<FLAG>), spelled here so this package stays free of the
// runtime's imports.
func envName(flag string) string {
	return "DOVETAIL_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func envDefault(flag string) string { return os.Getenv(envName(flag)) }

// AddFlags registers c's flags on fs; each defaults to its environment variable
// (DOVETAIL_NATS_CREDS, ...), as runtime.EnvDefault does for the functions' flags.
func (c *Client) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.CredsFile, FlagCreds, envDefault(FlagCreds),
		"NATS user credentials file (JWT and nkey seed, from nsc) for a server in JWT mode; env "+envName(FlagCreds))
	fs.StringVar(&c.NkeySeedFile, FlagNkeySeed, envDefault(FlagNkeySeed),
		"NATS nkey user seed file (from nk -gen user) for a server that lists the user's public key; env "+envName(FlagNkeySeed))
	fs.StringVar(&c.TLSCAFile, FlagTLSCA, envDefault(FlagTLSCA),
		"PEM CA bundle that verifies the NATS server's certificate; empty: the system roots; env "+envName(FlagTLSCA))
	fs.StringVar(&c.TLSCertFile, FlagTLSCert, envDefault(FlagTLSCert),
		"client certificate (PEM) for a NATS server that requires mutual TLS; env "+envName(FlagTLSCert))
	fs.StringVar(&c.TLSKeyFile, FlagTLSKey, envDefault(FlagTLSKey),
		"key (PEM) of --"+FlagTLSCert+"; env "+envName(FlagTLSKey))
	// As runtime.EnvBool: an unparsable value keeps the safe default.
	insecure, _ := strconv.ParseBool(envDefault(FlagInsecureNoAuth))
	fs.BoolVar(&c.InsecureNoAuth, FlagInsecureNoAuth, insecure,
		"INSECURE: connect to NATS without credentials, and without TLS to a non-loopback server: anyone who reaches the server can publish commands; env "+envName(FlagInsecureNoAuth))
}

// Check validates c for a connection to serverURL (one URL or a comma-separated list) and
// reports whether TLS is required. Rules:
//
//   - Exactly one of CredsFile and NkeySeedFile, unless InsecureNoAuth.
//   - TLSCertFile and TLSKeyFile both or neither.
//   - Every file named exists and is a regular file (so a missing mount fails at start, naming
//     its flag, not at the first reconnect).
//   - TLS is required (the client refuses a plain-text server) when any server is not on a
//     loopback address or a CA or client certificate is given, unless InsecureNoAuth: credentials
//     and commands must not cross a network in clear.
//
// Errors name the flag and the reason.
func (c Client) Check(serverURL string) (requireTLS bool, err error) {
	switch {
	case c.CredsFile != "" && c.NkeySeedFile != "":
		return false, fmt.Errorf("--%s and --%s: give one, not both", FlagCreds, FlagNkeySeed)
	case c.CredsFile == "" && c.NkeySeedFile == "" && !c.InsecureNoAuth:
		return false, fmt.Errorf("--%s or --%s: required: the NATS server must know who publishes commands (--%s to connect without, for a throwaway server only)",
			FlagCreds, FlagNkeySeed, FlagInsecureNoAuth)
	case (c.TLSCertFile == "") != (c.TLSKeyFile == ""):
		return false, fmt.Errorf("--%s and --%s: give both or neither", FlagTLSCert, FlagTLSKey)
	}
	for _, f := range []struct{ flag, path string }{
		{FlagCreds, c.CredsFile}, {FlagNkeySeed, c.NkeySeedFile}, {FlagTLSCA, c.TLSCAFile},
		{FlagTLSCert, c.TLSCertFile}, {FlagTLSKey, c.TLSKeyFile},
	} {
		if f.path == "" {
			continue
		}
		st, err := os.Stat(f.path)
		if err != nil {
			return false, fmt.Errorf("--%s %s: %w", f.flag, f.path, err)
		}
		if !st.Mode().IsRegular() {
			return false, fmt.Errorf("--%s %s: not a regular file", f.flag, f.path)
		}
	}
	loopback, err := allLoopback(serverURL)
	if err != nil {
		return false, err
	}
	if c.TLSCAFile != "" || c.TLSCertFile != "" {
		return true, nil
	}
	return !loopback && !c.InsecureNoAuth, nil
}

// allLoopback reports whether every server of a NATS URL list is on a loopback address
// (localhost, 127.0.0.0/8, ::1).
func allLoopback(serverURL string) (bool, error) {
	if strings.TrimSpace(serverURL) == "" {
		return false, errors.New("nats url: required")
	}
	all := true
	for _, s := range strings.Split(serverURL, ",") {
		s = strings.TrimSpace(s)
		if !strings.Contains(s, "://") {
			s = "nats://" + s // nats.go accepts a bare host:port
		}
		u, err := url.Parse(s)
		if err != nil || u.Hostname() == "" {
			return false, fmt.Errorf("nats url %q: not a URL with a host", s)
		}
		h := u.Hostname()
		ip := net.ParseIP(h)
		if !(h == "localhost" || (ip != nil && ip.IsLoopback())) {
			all = false
		}
	}
	return all, nil
}
