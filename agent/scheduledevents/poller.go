// Package scheduledevents is the node-side half of Azure preemption handling: a poller of the
// VM's Instance Metadata Service Scheduled Events endpoint that publishes each new document on the
// cluster's notices subject, where the interruption function decodes it (events/notices: a
// Preempt is a 30-second spot eviction notice). It runs as a small DaemonSet with host
// networking on Dovetail's AKS nodes (agent/cmd/scheduled-events), since IMDS answers each VM
// about itself only.
//
// It decides nothing: documents are published whole, as IMDS served them (a malformed one is
// dead-lettered by the function with its reason, never dropped here), once per distinct document.
package scheduledevents

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/events/notices"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

// DefaultURL is the IMDS Scheduled Events endpoint (Azure "Scheduled Events for Linux VMs",
// api-version 2020-07-01, the version whose documents events/notices decodes).
const DefaultURL = "http://169.254.169.254/metadata/scheduledevents?api-version=2020-07-01"

// DefaultInterval is how often IMDS is polled: once a second, as Azure recommends for a
// 30-second Preempt notice ("Scheduled Events": poll frequently, at least every few seconds).
const DefaultInterval = time.Second

// maxDocumentBytes bounds a document read from IMDS (a real one is well under 10 KiB).
const maxDocumentBytes = notices.MaxNoticeBytes

// Poller publishes new Scheduled Events documents. Its zero value is not usable: set Publisher
// and Cluster. It keeps only the digest of the last document published, so a restart publishes
// the current document once more (the interruption function is idempotent).
type Poller struct {
	// URL is the Scheduled Events endpoint (DefaultURL when empty).
	URL string
	// Client makes the requests (a client with a 5 s timeout when nil). IMDS must not be
	// reached through a proxy; the default client uses none.
	Client *http.Client
	// Publisher and Cluster: documents go to queue.NoticesSubject(Cluster).
	Publisher queue.Publisher
	Cluster   string
	// CloudEvents wraps each document in a CloudEvent of type
	// notices.ScheduledEventsCloudEventType (the document as its JSON data), for transports
	// that carry CloudEvents only (Event Grid topics); false publishes the document as it is
	// (NATS, whose consumers decode it directly).
	CloudEvents bool
	// Node is the node's name, the CloudEvent's subject (optional).
	Node string
	// Interval between polls (DefaultInterval when 0).
	Interval time.Duration
	Log      *slog.Logger

	last string // digest of the last document published
}

// Poll reads the document once and publishes it when it holds events and differs from the last
// one published. It returns whether it published. Errors: IMDS unreachable or answering other
// than 200, or a failed publish (retried by the next poll).
func (p *Poller) Poll(ctx context.Context) (bool, error) {
	url := p.URL
	if url == "" {
		url = DefaultURL
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, fmt.Errorf("scheduled events: %w", err)
	}
	req.Header.Set("Metadata", "true") // IMDS refuses requests without it
	client := p.Client
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, fmt.Errorf("scheduled events: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes+1))
	if err != nil {
		return false, fmt.Errorf("scheduled events: reading the document: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("scheduled events: IMDS answered %s", resp.Status)
	}
	if empty(body) {
		return false, nil
	}
	sum := sha256.Sum256(body)
	digest := hex.EncodeToString(sum[:])
	if digest == p.last {
		return false, nil
	}
	// The message id is the document's digest: a redelivered publish of the same document is
	// the same message.
	id := "scheduled-events-" + digest[:32]
	data := body
	if p.CloudEvents {
		if data, err = p.cloudEvent(id, body, time.Now()); err != nil {
			return false, fmt.Errorf("scheduled events: %w", err)
		}
	}
	if err := p.Publisher.Publish(ctx, queue.NoticesSubject(p.Cluster), id, data); err != nil {
		return false, fmt.Errorf("scheduled events: publishing: %w", err)
	}
	p.last = digest
	return true, nil
}

// cloudEvent wraps a document: a structured-mode CloudEvent 1.0 with the message id, source
// "dovetail/<cluster>/scheduled-events", the node as subject and the document as JSON data. A
// document that is not JSON is carried as application/octet-stream, so the interruption
// function dead-letters it with its reason instead of it being lost here.
func (p *Poller) cloudEvent(id string, doc []byte, now time.Time) ([]byte, error) {
	e := cloudevents.New(cloudevents.CloudEventsVersionV1)
	e.SetID(id)
	e.SetSource(events.SourcePrefix + "/" + p.Cluster + "/scheduled-events")
	e.SetType(notices.ScheduledEventsCloudEventType)
	e.SetTime(now.UTC())
	if p.Node != "" {
		e.SetSubject(p.Node)
	}
	ct := "application/json"
	if !json.Valid(doc) {
		ct = "application/octet-stream"
	}
	if err := e.SetData(ct, doc); err != nil {
		return nil, fmt.Errorf("building the CloudEvent: %w", err)
	}
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("building the CloudEvent: %w", err)
	}
	return json.Marshal(e)
}

// empty reports a well-formed document without events (the usual answer), which is not
// published; anything else is (a malformed document reaches the function's dead-letter path).
func empty(body []byte) bool {
	var doc struct {
		Events []json.RawMessage `json:"Events"`
	}
	return json.Unmarshal(body, &doc) == nil && doc.Events != nil && len(doc.Events) == 0
}

// Run polls every Interval until ctx ends, logging failed polls (they are retried).
func (p *Poller) Run(ctx context.Context) error {
	interval := p.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	log := p.Log
	if log == nil {
		log = slog.Default()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		published, err := p.Poll(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("scheduled events poll failed", "err", err)
		case published:
			log.Info("published a scheduled events document", "cluster", p.Cluster)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
