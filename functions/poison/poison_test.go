// Package poison_test proves, for every function's own handler, that each class of record that
// can never be processed is poison (queue.ErrPoison, dead-lettered at once with its reason by
// every transport) and not a transient error (which on a FIFO queue would hold the cluster's
// message group for the redrive's whole course). The transports' side, that poison goes to the
// dead-letter queue at once and later records of its group still run, is tested in
// shared/queue/nats, shared/queue/sqs and shared/runtime (Lambda, also under the Runtime
// Interface Emulator in functions/provision/cmd/provision).
package poison_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/events/notices"
	"github.com/dovetail-dev/dovetail/functions/consolidate"
	"github.com/dovetail-dev/dovetail/functions/drift"
	"github.com/dovetail-dev/dovetail/functions/interruption"
	"github.com/dovetail-dev/dovetail/functions/lifecycle"
	"github.com/dovetail-dev/dovetail/functions/provision"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

const cluster = "prod"

var at = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// event wraps an already-encoded payload in a valid envelope of type typ.
func event(t *testing.T, typ string, payload []byte, opts ...func(*events.Codec)) []byte {
	t.Helper()
	c := events.Codec{Now: func() time.Time { return at }}
	for _, o := range opts {
		o(&c)
	}
	b, err := c.NewEvent(context.Background(), cluster, "agent", typ, "ev-1", payload)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func zst(s string) []byte {
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	return enc.EncodeAll([]byte(s), nil)
}

// records are the classes of undecodable event records, each with what its reason must name.
func records(t *testing.T) []struct {
	name, reason string
	data         []byte
} {
	head := `{"schemaVersion":1,"cluster":"prod","revision":1,"time":"2026-03-01T12:00:00Z",`
	var nodes strings.Builder
	for i := range events.MaxNodes + 1 {
		fmt.Fprintf(&nodes, `%s{"metadata":{"name":"n%d"}}`, map[bool]string{true: "", false: ","}[i == 0], i)
	}
	other, err := events.NewEvent("other", "agent", events.TypeSnapshot, "ev-2", &events.Snapshot{Cluster: "other", Revision: 1, Time: metav1.NewTime(at)})
	if err != nil {
		t.Fatal(err)
	}
	return []struct {
		name, reason string
		data         []byte
	}{
		{"the 37-byte envelope whose data_base64 is a number", "data_base64", []byte(`{"specversion":"1.0","data_base64":5}`)},
		{"not JSON", "not a JSON object", []byte("this is not a CloudEvent")},
		{"unknown event type", "type", []byte(`{"specversion":"1.0","id":"x","type":"dev.dovetail.unknown.v1","source":"dovetail/prod/agent","time":"2026-03-01T12:00:00Z","datacontenttype":"application/json+zstd","dovetailschema":1,"data_base64":"AA=="}`)},
		{"zstd bomb of 2,000,000 empty pods", "over a decoding limit",
			event(t, events.TypeSnapshot, zst(head+`"pods":[{}`+strings.Repeat(`,{}`, 1_999_999)+`]}`))},
		{"more nodes than a cluster has", "more than 5000 nodes", event(t, events.TypeSnapshot, zst(head+`"nodes":[`+nodes.String()+`]}`))},
		// Issue 23: a snapshot whose NodePool carries a label value that breaks out of the AL2
		// bootstrap script's quotes; the API server would refuse it, so it is poison, and the
		// reason names the NodePool and the field.
		{"a snapshot whose NodePool label breaks shell quotes", "snapshot.nodePools[0].spec.template.metadata.labels[team]",
			event(t, events.TypeSnapshot, zst(head+`"nodePools":[{"metadata":{"name":"default"},"spec":{"template":{"metadata":{"labels":{"team":"x' ; touch /pwned ; '"}}}}}]}`))},
		{"corrupt compression", "not a zstd frame", event(t, events.TypeSnapshot, []byte("definitely not zstd"))},
		{"a snapshot of another cluster", "snapshot.cluster", other},
		{"a claim check whose blob is gone", "dataref", event(t, events.TypeSnapshot, zst(head+`"nodes":[]}`), func(c *events.Codec) {
			c.Blobs, c.MaxInlineBytes = &events.MemoryBlobStore{}, 1 // stored in a store the handler never sees
		})},
	}
}

func TestEveryFunctionTreatsUndecodableRecordsAsPoison(t *testing.T) {
	codec := events.Codec{Blobs: &events.MemoryBlobStore{}}
	latest := &interruption.LatestSnapshot{Cluster: cluster, Codec: codec}
	handlers := map[string]queue.Handler{
		"provision":   (&provision.Handler{Cluster: cluster, Codec: codec}).Handle,
		"consolidate": (&consolidate.Handler{Cluster: cluster, Codec: codec}).Handle,
		"drift":       (&drift.Handler{Cluster: cluster, Codec: codec}).Handle,
		"lifecycle":   (&lifecycle.Handler{Cluster: cluster, Codec: codec}).Handle,
		// The interruption function's snapshot source (its Lambda event source for the agent's events).
		"interruption (snapshots)": latest.Observe,
	}
	for _, r := range records(t) {
		for name, h := range handlers {
			err := h(context.Background(), queue.Message{ID: "ev-1", Data: r.data, Attempt: 1})
			if !errors.Is(err, queue.ErrPoison) || !strings.Contains(err.Error(), r.reason) {
				t.Errorf("%s: %s: %v, want poison naming %q", name, r.name, err, r.reason)
			}
		}
	}
}

func TestUndecodableNoticesArePoison(t *testing.T) {
	h := &interruption.Handler{Cluster: cluster}
	for _, c := range []struct {
		name, reason string
		data         []byte
	}{
		{"not JSON", "not a JSON object", []byte("x")},
		{"an unknown format", "not a known notice format", []byte(`{"hello":"world"}`)},
		{"an EventBridge event of another kind", "detail-type", []byte(`{"version":"0","id":"1","detail-type":"Something","source":"aws.ec2","time":"2026-03-01T12:00:00Z","detail":{}}`)},
		{"more than 1 MiB", "more than the 1048576", []byte(`{"x":"` + strings.Repeat("a", 1<<20) + `"}`)},
		{"nested 1,000 deep", "nested deeper than 32", []byte(`{"x":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`)},
	} {
		err := h.Handle(context.Background(), queue.Message{ID: "n-1", Data: c.data, Attempt: 1})
		if !errors.Is(err, queue.ErrPoison) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: %v, want poison naming %q", c.name, err, c.reason)
		}
	}
}

// TestEveryFunctionDeadLettersEventTypesItDoesNotHandle is issue 25's one rule for event types:
// a Dovetail event of a type a function does not handle (here a command, which belongs on the
// commands subject, arriving on the events subject) is poison naming the type and the function,
// in every function; drift and lifecycle used to acknowledge it, losing it without a word.
func TestEveryFunctionDeadLettersEventTypesItDoesNotHandle(t *testing.T) {
	cmd := events.Command{ID: "c-1", Kind: events.CommandDrainNode, Cluster: cluster, SnapshotRevision: 1, NodeName: "n1"}
	data, err := events.Codec{Now: func() time.Time { return at }}.NewEvent(context.Background(), cluster, "consolidate", events.TypeCommand, cmd.ID, &cmd)
	if err != nil {
		t.Fatal(err)
	}
	codec := events.Codec{Blobs: &events.MemoryBlobStore{}}
	handlers := map[string]queue.Handler{
		provision.Component:   (&provision.Handler{Cluster: cluster, Codec: codec}).Handle,
		consolidate.Component: (&consolidate.Handler{Cluster: cluster, Codec: codec}).Handle,
		drift.Component:       (&drift.Handler{Cluster: cluster, Codec: codec}).Handle,
		lifecycle.Component:   (&lifecycle.Handler{Cluster: cluster, Codec: codec}).Handle,
	}
	for name, h := range handlers {
		err := h(context.Background(), queue.Message{ID: "c-1", Data: data, Attempt: 1})
		want := fmt.Sprintf("type: %q is not handled by the %s function", events.TypeCommand, name)
		if !errors.Is(err, queue.ErrPoison) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want poison naming %q", name, err, want)
		}
	}
	// The interruption function reads cloud notices, not Dovetail events: the same record is not
	// a notice format it knows, and is poison too.
	err = (&interruption.Handler{Cluster: cluster}).Handle(context.Background(), queue.Message{ID: "c-1", Data: data, Attempt: 1})
	if !errors.Is(err, queue.ErrPoison) || !strings.Contains(err.Error(), "notice") {
		t.Errorf("interruption: %v, want poison naming the notice", err)
	}
	// A notice of a kind the function has no rule for is poison as well, not recorded as
	// informational.
	_, err = (&interruption.Handler{Cluster: cluster}).Decide(context.Background(), notices.Notice{ID: "n-1", Kind: "Hibernation"}, 1)
	if want := `kind: "Hibernation" is not handled by the interruption function`; !errors.Is(err, queue.ErrPoison) || !strings.Contains(err.Error(), want) {
		t.Errorf("interruption: unknown kind: %v, want poison naming %q", err, want)
	}
}
