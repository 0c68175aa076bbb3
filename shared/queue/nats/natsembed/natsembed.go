// Package natsembed runs an in-process nats-server with JetStream for local dev and tests. It is
// apart from the transport (shared/queue/nats) so that no function binary links the server:
// a Lambda bootstrap only ever dials a queue (TestLambdaBootstrapsLinkNoNATSServer).
package natsembed

import (
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

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
	// ReadyTimeout bounds start-up; default 5 s (the server is usually up in ~30 ms).
	ReadyTimeout time.Duration
	// Log enables the server's own log on stderr.
	Log bool
}

// Run starts an in-process nats-server with JetStream on 127.0.0.1 and returns it and its
// client URL ("nats://127.0.0.1:<port>"). Stop it with Shutdown (and WaitForShutdown).
func Run(o Options) (*server.Server, string, error) {
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
