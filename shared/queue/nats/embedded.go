// Package nats is Dovetail's NATS JetStream transport: an embedded server for local dev and
// tests, one stream per cluster, a Publisher that deduplicates by message id, and a Consumer over
// durable pull consumers that acks after success, redelivers with backoff on failure and moves
// poison or exhausted messages to the cluster's dead-letter subject.
package nats

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
)

// EmbeddedOptions configures RunEmbedded. The zero value is a loopback server on a random port
// with JetStream stored in a temporary directory removed at shutdown.
type EmbeddedOptions struct {
	// StoreDir holds JetStream's files; empty means a new temporary directory, removed after
	// the server shuts down.
	StoreDir string
	// Port is the client port; 0 picks a free one.
	Port int
	// ServerName names the server in logs and advisories; default "dovetail-dev".
	ServerName string
	// ReadyTimeout bounds start-up; default 5 s (the server is usually up in ~30 ms).
	ReadyTimeout time.Duration
	// Log enables the server's own log on stderr.
	Log bool
}

// RunEmbedded starts an in-process nats-server with JetStream on 127.0.0.1 and returns it and its
// client URL ("nats://127.0.0.1:<port>"). Stop it with Shutdown (and WaitForShutdown).
func RunEmbedded(o EmbeddedOptions) (*server.Server, string, error) {
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
	return s, s.ClientURL(), nil
}

// Connect dials url with settings suited to long-running workers: a client name, unlimited
// reconnects, and errors logged rather than lost.
func Connect(url, clientName string) (*natsgo.Conn, error) {
	if url == "" {
		return nil, errors.New("nats url: required")
	}
	nc, err := natsgo.Connect(url,
		natsgo.Name(clientName),
		natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(250*time.Millisecond),
	)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", url, err)
	}
	return nc, nil
}
