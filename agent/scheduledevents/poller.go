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
	"strings"
	"time"

	"github.com/dovetail-dev/dovetail/events/notices"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

// DefaultURL is the IMDS Scheduled Events endpoint (Azure "Scheduled Events for Linux VMs",
// api-version 2020-07-01, the version whose documents events/notices decodes).
const DefaultURL = "http://169.254.169.254/metadata/scheduledevents?api-version=2020-07-01"

// DefaultComputeResourceIDURL is IMDS's resource ID of this VM as plain text (Azure "Azure Instance
// Metadata Service": compute/resourceId, "the fully qualified ID of the resource", api-version
// 2019-03-11 and later).
const DefaultComputeResourceIDURL = "http://169.254.169.254/metadata/instance/compute/resourceId?api-version=2021-02-01&format=text"

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
	// ComputeURL is IMDS's resourceId of this VM (DefaultComputeResourceIDURL when empty); it is
	// read once, unless ResourceID is set.
	ComputeURL string
	// ResourceID is this VM's Azure resource ID (read from ComputeURL when empty).
	ResourceID string
	// Publisher and Cluster: documents go to queue.NoticesSubject(Cluster), each wrapped in a
	// CloudEvent of type notices.ScheduledEventsCloudEventType (the document as its JSON data)
	// whose subject is ResourceID: a document names VMs by name only, and a VM name is unique
	// only within its resource group, so the interruption function resolves the names in the
	// reading VM's subscription and resource group (notices.AzureVMID.Resolve) and never acts on
	// a name alone.
	Publisher queue.Publisher
	Cluster   string
	// Node is the node's name, for the logs (optional).
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
	body, err := p.get(ctx, url, maxDocumentBytes)
	if err != nil {
		return false, fmt.Errorf("scheduled events: %w", err)
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
	if p.ResourceID == "" {
		if p.ResourceID, err = p.resourceID(ctx); err != nil {
			return false, fmt.Errorf("scheduled events: %w", err)
		}
	}
	data, err := p.cloudEvent(id, body, time.Now())
	if err != nil {
		return false, fmt.Errorf("scheduled events: %w", err)
	}
	if err := p.Publisher.Publish(ctx, queue.NoticesSubject(p.Cluster), id, data); err != nil {
		return false, fmt.Errorf("scheduled events: publishing: %w", err)
	}
	p.last = digest
	return true, nil
}

// get reads url from IMDS (with the Metadata header it requires), at most limit bytes; an answer
// other than 200 is an error.
func (p *Poller) get(ctx context.Context, url string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Metadata", "true") // IMDS refuses requests without it
	client := p.Client
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", req.URL.Path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("IMDS answered %s for %s", resp.Status, req.URL.Path)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("IMDS answered more than %d bytes for %s", limit, req.URL.Path)
	}
	return body, nil
}

// maxResourceIDBytes bounds IMDS's resourceId answer (an ARM ID is well under 1 KiB).
const maxResourceIDBytes = 4096

// resourceID reads this VM's resource ID from IMDS and checks it is a VM's.
func (p *Poller) resourceID(ctx context.Context) (string, error) {
	url := p.ComputeURL
	if url == "" {
		url = DefaultComputeResourceIDURL
	}
	b, err := p.get(ctx, url, maxResourceIDBytes)
	if err != nil {
		return "", fmt.Errorf("this VM's resource ID: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if _, ok := notices.ParseAzureVMID(id); !ok {
		return "", fmt.Errorf("this VM's resource ID: IMDS answered %q, not a VM resource ID", id)
	}
	return id, nil
}

// cloudEvent wraps a document as this VM's notice (notices.WrapScheduledEvents).
func (p *Poller) cloudEvent(id string, doc []byte, now time.Time) ([]byte, error) {
	return notices.WrapScheduledEvents(p.Cluster, p.ResourceID, id, doc, now)
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
	if p.Node != "" {
		log = log.With("node", p.Node)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		published, err := p.Poll(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("scheduled events poll failed", "err", err)
		case published:
			log.Info("published a scheduled events document", "cluster", p.Cluster, "vm", p.ResourceID)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
