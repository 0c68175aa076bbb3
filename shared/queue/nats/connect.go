// Package nats is Dovetail's NATS JetStream transport: one stream per cluster, a Publisher that
// deduplicates by message id, and a Consumer over durable pull consumers that acks after success,
// redelivers with backoff on failure and moves poison or exhausted messages to the cluster's
// dead-letter subject. The embedded server of local dev and tests is shared/queue/nats/natsembed.
package nats

import (
	"errors"
	"fmt"
	"time"

	natsgo "github.com/nats-io/nats.go"
)

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
