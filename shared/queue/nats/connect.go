// Package nats is Dovetail's NATS JetStream transport: one stream per cluster, a Publisher that
// deduplicates by message id, and a Consumer over durable pull consumers that acks after success,
// redelivers with backoff on failure and moves poison or exhausted messages to the cluster's
// dead-letter subject. The embedded server of local dev and tests is shared/queue/nats/natsembed;
// roles, permissions and the clients' credential flags are shared/queue/nats/natsauth.
package nats

import (
	"errors"
	"fmt"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
)

// Connect dials url with settings suited to long-running workers: a client name, unlimited
// reconnects, and errors logged rather than lost; opts (credentials, TLS, inbox prefix: see
// ClientOptions) follow.
func Connect(url, clientName string, opts ...natsgo.Option) (*natsgo.Conn, error) {
	if url == "" {
		return nil, errors.New("nats url: required")
	}
	all := append([]natsgo.Option{
		natsgo.Name(clientName),
		natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(250 * time.Millisecond),
	}, opts...)
	nc, err := natsgo.Connect(url, all...)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", url, err)
	}
	return nc, nil
}

// ClientOptions turns c (checked by natsauth.Client.Check against url) into nats.go options for
// a client of role in cluster: the credentials (nats.UserCredentials or nats.NkeyOptionFromSeed),
// TLS (required, with c's CA and client certificate when given) and the role's reply inbox
// prefix (natsauth.InboxPrefix), the only inbox the role's permissions let it subscribe to.
func ClientOptions(c natsauth.Client, url, cluster string, role natsauth.Role) ([]natsgo.Option, error) {
	requireTLS, err := c.Check(url)
	if err != nil {
		return nil, err
	}
	opts := []natsgo.Option{natsgo.CustomInboxPrefix(natsauth.InboxPrefix(cluster, role))}
	switch {
	case c.CredsFile != "":
		opts = append(opts, natsgo.UserCredentials(c.CredsFile))
	case c.NkeySeedFile != "":
		o, err := natsgo.NkeyOptionFromSeed(c.NkeySeedFile)
		if err != nil {
			// nats.go's error names neither the flag nor the seed's content.
			return nil, fmt.Errorf("--%s %s: %w", natsauth.FlagNkeySeed, c.NkeySeedFile, err)
		}
		opts = append(opts, o)
	}
	if requireTLS {
		opts = append(opts, natsgo.Secure())
	}
	if c.TLSCAFile != "" {
		opts = append(opts, natsgo.RootCAs(c.TLSCAFile))
	}
	if c.TLSCertFile != "" {
		opts = append(opts, natsgo.ClientCert(c.TLSCertFile, c.TLSKeyFile))
	}
	return opts, nil
}

// Dial is Connect with ClientOptions: how the agent, the workers, the Scheduled Events DaemonSet
// and dovetail audit --nats connect.
func Dial(url, clientName, cluster string, role natsauth.Role, c natsauth.Client) (*natsgo.Conn, error) {
	opts, err := ClientOptions(c, url, cluster, role)
	if err != nil {
		return nil, err
	}
	return Connect(url, clientName, opts...)
}

// ConnectionState is nil while nc is connected, else an error naming its state (RECONNECTING,
// CLOSED) and the last error the connection saw, for readiness probes. The URL is left out: it
// may carry credentials.
func ConnectionState(nc *natsgo.Conn) error {
	if nc.IsConnected() {
		return nil
	}
	if err := nc.LastError(); err != nil {
		return fmt.Errorf("NATS connection %s: %w", nc.Status(), err)
	}
	return fmt.Errorf("NATS connection %s", nc.Status())
}
