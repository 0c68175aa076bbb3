// Package sqs is Dovetail's Amazon SQS transport (aws-sdk-go-v2): a Publisher that sends with
// SendMessageBatch to FIFO queues (message group = cluster, deduplication id = event id) and a
// Consumer that long-polls a queue, deletes a message after its handler succeeds, leaves a failed
// one to come back after a backoff, and moves poison messages to the dead-letter queue with the
// reason as a message attribute.
//
// One queue carries one subject: the cluster's events queues carry queue.EventsSubject, its
// command queue queue.CommandsSubject. Routes maps subjects to queue URLs; FanOut sends a subject
// to more queues (an SQS message reaches one consumer, so each function that reads the agent's
// events has a queue of its own).
package sqs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dovetail-dev/dovetail/shared/queue"
)

// Limits of one SendMessageBatch call (Amazon SQS Developer Guide, "Amazon SQS message quotas"):
// at most 10 entries, and the classic 256 KiB (262,144 bytes) for one message and for the sum of
// a batch. AWS has since allowed up to 1 MiB per message, but Dovetail's events are sized for the
// classic limit (events.DefaultMaxInlineBytes) and infra/aws sets MaximumMessageSize to it.
const (
	MaxBatchEntries = 10
	MaxMessageBytes = 256 << 10
)

// Message attributes Dovetail sets. SQS attribute names allow [A-Za-z0-9_.-] and must not start
// with "AWS." or "Amazon." (SQS API reference, MessageAttributeValue).
const (
	// AttrID is the publisher's message id (the CloudEvents id); the consumer returns it as
	// queue.Message.ID, also on standard queues that have no deduplication id.
	AttrID = "dovetail-id"
	// AttrSubject is the queue.Message.Subject the message was published on.
	AttrSubject = "dovetail-subject"
)

// API is the part of *sqs.Client this package calls; the real client implements it.
type API interface {
	SendMessage(ctx context.Context, in *awssqs.SendMessageInput, opts ...func(*awssqs.Options)) (*awssqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *awssqs.SendMessageBatchInput, opts ...func(*awssqs.Options)) (*awssqs.SendMessageBatchOutput, error)
	ReceiveMessage(ctx context.Context, in *awssqs.ReceiveMessageInput, opts ...func(*awssqs.Options)) (*awssqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *awssqs.DeleteMessageInput, opts ...func(*awssqs.Options)) (*awssqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *awssqs.ChangeMessageVisibilityInput, opts ...func(*awssqs.Options)) (*awssqs.ChangeMessageVisibilityOutput, error)
}

var _ API = (*awssqs.Client)(nil)

// Publisher publishes to SQS queues. It implements queue.Publisher.
//
// On a FIFO queue (URL ending in ".fifo") every message gets MessageGroupId = the subject's
// cluster, so SQS delivers one cluster's messages in order, one group in flight at a time (DESIGN
// invariant 3), and MessageDeduplicationId = the message id, so SQS drops a re-send of the same
// id within its 5-minute deduplication interval. Ids longer than 128 characters or with
// characters SQS refuses are replaced by "sha256-<hex>" of the id (still deterministic).
type Publisher struct {
	Client API
	// Routes maps a subject (queue.EventsSubject(cluster), queue.CommandsSubject(cluster)) to
	// the URL of its queue. A subject without a route is refused.
	Routes map[string]string
	// FanOut lists further queue URLs of a subject: every message published on it goes to
	// Routes[subject] and to each of these, in the same order, each queue deduplicating on its
	// own (FIFO). A subject may be routed by FanOut alone. Duplicate URLs are sent to once.
	FanOut map[string][]string
	// MaxBatchBytes caps the summed size of one SendMessageBatch call; 0 means MaxMessageBytes.
	MaxBatchBytes int
}

var _ queue.Publisher = (*Publisher)(nil)

// Entry is one message of PublishBatch.
type Entry struct {
	Subject string
	ID      string
	Data    []byte
}

// EntryError is one entry SQS refused (or that could not be sent at all).
type EntryError struct {
	Subject, ID string
	// QueueURL is the queue it was not stored in (with FanOut, the others may hold it).
	QueueURL string
	// Code is SQS's error code (e.g. "InvalidParameterValue"), or "" for a call that failed whole.
	Code string
	// SenderFault is SQS's verdict that the entry itself is wrong: re-sending it unchanged fails again.
	SenderFault bool
	Err         error
}

// BatchError lists the entries of a PublishBatch that were not stored; the others were.
// Re-publishing all entries is safe on FIFO queues (deduplicated by id within 5 minutes).
type BatchError struct {
	Failed []EntryError
}

func (e *BatchError) Error() string {
	parts := make([]string, 0, len(e.Failed))
	for _, f := range e.Failed {
		parts = append(parts, fmt.Sprintf("%s id %s to %s: %v", f.Subject, f.ID, f.QueueURL, f.Err))
	}
	return fmt.Sprintf("sqs publish: %d entries failed: %s", len(e.Failed), strings.Join(parts, "; "))
}

// Retryable reports whether every failed entry may succeed when sent again (none is the sender's fault).
func (e *BatchError) Retryable() bool {
	for _, f := range e.Failed {
		if f.SenderFault {
			return false
		}
	}
	return true
}

// Publish sends one message (a batch of one). A nil error means SQS stored it or had stored the
// same id already.
func (p *Publisher) Publish(ctx context.Context, subject, id string, data []byte) error {
	return p.PublishBatch(ctx, []Entry{{Subject: subject, ID: id, Data: data}})
}

// PublishBatch sends entries in as few SendMessageBatch calls as the limits allow: the entries
// of each queue (an entry goes to every queue of its subject), in order, at most MaxBatchEntries
// and MaxBatchBytes per call (FIFO order within a group is the order of a batch's entries;
// queues are independent, so the order between queues is not kept). It returns nil when all
// were stored, a *BatchError naming those that were not, or an error for bad arguments (nothing
// sent).
func (p *Publisher) PublishBatch(ctx context.Context, entries []Entry) error {
	maxBytes := p.MaxBatchBytes
	if maxBytes <= 0 {
		maxBytes = MaxMessageBytes
	}
	type prepared struct {
		url   string
		entry Entry
		req   types.SendMessageBatchRequestEntry
		size  int
	}
	// Entries grouped by queue, queues in order of first use, entries in order within each.
	byURL := map[string][]prepared{}
	var urls []string
	for i, e := range entries {
		qs, req, size, err := p.prepare(e)
		if err != nil {
			return fmt.Errorf("sqs publish entries[%d]: %w", i, err)
		}
		if size > maxBytes {
			return fmt.Errorf("sqs publish entries[%d] (id %s): message is %d bytes with its attributes, limit %d (claim-check large payloads)",
				i, e.ID, size, maxBytes)
		}
		for _, url := range qs {
			if _, ok := byURL[url]; !ok {
				urls = append(urls, url)
			}
			r := req
			if !IsFIFO(url) {
				r.MessageGroupId, r.MessageDeduplicationId = nil, nil
			}
			byURL[url] = append(byURL[url], prepared{url: url, entry: e, req: r, size: size})
		}
	}
	preps := make([]prepared, 0, len(entries))
	for _, url := range urls {
		preps = append(preps, byURL[url]...)
	}
	var failed []EntryError
	for start := 0; start < len(preps); {
		end, bytes := start, 0
		for end < len(preps) && end-start < MaxBatchEntries && preps[end].url == preps[start].url && bytes+preps[end].size <= maxBytes {
			bytes += preps[end].size
			end++
		}
		chunk := preps[start:end]
		reqs := make([]types.SendMessageBatchRequestEntry, len(chunk))
		byBatchID := make(map[string]Entry, len(chunk))
		for i := range chunk {
			reqs[i] = chunk[i].req
			// Batch entry ids must be unique within the call, [A-Za-z0-9_-]{1,80}.
			reqs[i].Id = aws.String("m" + strconv.Itoa(i))
			byBatchID[*reqs[i].Id] = chunk[i].entry
		}
		out, err := p.Client.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: aws.String(chunk[0].url), Entries: reqs})
		if err != nil {
			// The call failed whole (after the SDK's own retries): nothing of it is known stored.
			for _, c := range chunk {
				failed = append(failed, EntryError{Subject: c.entry.Subject, ID: c.entry.ID, QueueURL: c.url, Err: err})
			}
		} else {
			for _, f := range out.Failed {
				e := byBatchID[aws.ToString(f.Id)]
				failed = append(failed, EntryError{Subject: e.Subject, ID: e.ID, QueueURL: chunk[0].url, Code: aws.ToString(f.Code), SenderFault: f.SenderFault,
					Err: fmt.Errorf("%s: %s", aws.ToString(f.Code), aws.ToString(f.Message))})
			}
		}
		start = end
	}
	if len(failed) > 0 {
		return &BatchError{Failed: failed}
	}
	return nil
}

// prepare validates an entry and builds its request entry for its queues (the FIFO fields are
// set when any of them is FIFO; PublishBatch clears them for standard queues); size is what SQS
// counts against the message limit: body bytes plus each attribute's name, type and value bytes
// (SQS Developer Guide, "Amazon SQS message attributes").
func (p *Publisher) prepare(e Entry) (urls []string, req types.SendMessageBatchRequestEntry, size int, err error) {
	if e.ID == "" {
		return nil, req, 0, errors.New("id: required (it is the deduplication id)")
	}
	urls = p.queues(e.Subject)
	if len(urls) == 0 {
		return nil, req, 0, fmt.Errorf("subject %q: no queue URL routed for it", e.Subject)
	}
	attrs := map[string]types.MessageAttributeValue{
		AttrID:      {DataType: aws.String("String"), StringValue: aws.String(e.ID)},
		AttrSubject: {DataType: aws.String("String"), StringValue: aws.String(e.Subject)},
	}
	req = types.SendMessageBatchRequestEntry{MessageBody: aws.String(string(e.Data)), MessageAttributes: attrs}
	for _, url := range urls {
		if IsFIFO(url) {
			cluster, err := ClusterOf(e.Subject)
			if err != nil {
				return nil, req, 0, err
			}
			req.MessageGroupId = aws.String(cluster)
			req.MessageDeduplicationId = aws.String(DeduplicationID(e.ID))
			break
		}
	}
	return urls, req, MessageSize(string(e.Data), attrs), nil
}

// queues returns the queue URLs of a subject: Routes[subject], then FanOut[subject], without
// empty or repeated URLs.
func (p *Publisher) queues(subject string) []string {
	var out []string
	for _, u := range append([]string{p.Routes[subject]}, p.FanOut[subject]...) {
		if u != "" && !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	return out
}

// MessageSize is the size SQS counts for a message: body bytes plus, per attribute, the bytes of
// its name, data type and value.
func MessageSize(body string, attrs map[string]types.MessageAttributeValue) int {
	n := len(body)
	for name, a := range attrs {
		n += len(name) + len(aws.ToString(a.DataType)) + len(aws.ToString(a.StringValue)) + len(a.BinaryValue)
	}
	return n
}

// IsFIFO reports whether a queue URL names a FIFO queue (FIFO queue names end in ".fifo").
func IsFIFO(queueURL string) bool { return strings.HasSuffix(queueURL, ".fifo") }

// ClusterOf returns the cluster of a Dovetail subject "dovetail.<cluster>.<kind>". Cluster names
// are RFC 1123 labels, so they contain no '.' and the split is unambiguous.
func ClusterOf(subject string) (string, error) {
	parts := strings.Split(subject, ".")
	if len(parts) != 3 || parts[0] != "dovetail" || parts[1] == "" {
		return "", fmt.Errorf("subject %q: not of the form dovetail.<cluster>.<kind>", subject)
	}
	return parts[1], nil
}

// dedupIDRE is what SQS accepts as MessageDeduplicationId: 1-128 alphanumerics and punctuation
// (SQS API reference, SendMessage MessageDeduplicationId).
var dedupIDRE = regexp.MustCompile("^[A-Za-z0-9!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~]{1,128}$")

// DeduplicationID maps a message id to a valid MessageDeduplicationId: itself when SQS accepts
// it, else "sha256-" and the hex SHA-256 of the id (71 characters).
func DeduplicationID(id string) string {
	if dedupIDRE.MatchString(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "sha256-" + hex.EncodeToString(sum[:])
}
