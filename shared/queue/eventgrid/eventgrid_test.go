package eventgrid_test

// The Event Grid transport through the real azeventgrid and aznamespaces SDK clients against
// egtest, a mock at the edge (no Event Grid emulator runs offline) written from the documented
// REST shapes; dead letters go to Azurite (the real Blob protocol).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/eventgrid/aznamespaces"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/queue/azureblob"
	"github.com/dovetail-dev/dovetail/shared/queue/azureblob/azuritetest"
	"github.com/dovetail-dev/dovetail/shared/queue/eventgrid"
	"github.com/dovetail-dev/dovetail/shared/queue/eventgrid/egtest"
)

const cluster = "aks1"

func TestMain(m *testing.M) {
	code := m.Run()
	azuritetest.StopShared()
	os.Exit(code)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func setup(t *testing.T, sub egtest.QueueSubscription) (*egtest.Server, eventgrid.Config) {
	t.Helper()
	eg := egtest.New()
	t.Cleanup(eg.Close)
	t.Setenv(eventgrid.EnvTopicKey, eg.Key)
	t.Setenv(eventgrid.EnvNamespaceKey, eg.Key)
	eg.AddTopic("events")
	eg.AddNamespaceTopic(eventgrid.DefaultCommandsTopic, sub)
	return eg, eventgrid.Config{Cluster: cluster, EventsTopicEndpoint: eg.TopicEndpoint("events"), NamespaceEndpoint: eg.URL,
		ClientOptions: azcore.ClientOptions{Transport: eg.Client()}}
}

func command(t *testing.T, id string) []byte {
	t.Helper()
	b, err := events.NewEvent(cluster, "provision", events.TypeCommand, id, &events.Command{ID: id, Kind: events.CommandUntaintNode, Cluster: cluster, NodeName: "n1", Taint: &corev1.Taint{Key: "k", Effect: corev1.TaintEffectNoSchedule},
		SnapshotRevision: 3, Reason: "test"}, events.WithTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Events go to the custom topic, commands to the namespace topic; unrouted subjects, ids that
// are not the event's, non-CloudEvents and events above 1 MB are refused before sending.
func TestPublisherRoutesAndRefuses(t *testing.T) {
	eg, cfg := setup(t, egtest.QueueSubscription{Name: "agent"})
	pub, err := cfg.Publisher()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	snap, err := events.NewEvent(cluster, "agent", events.TypeSnapshot, "snapshot-1", &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion,
		Cluster: cluster, Revision: 1, Time: metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, queue.EventsSubject(cluster), "snapshot-1", snap); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, queue.CommandsSubject(cluster), "cmd-1", command(t, "cmd-1")); err != nil {
		t.Fatal(err)
	}
	if eg.Published("events") != 1 || eg.Published(eventgrid.DefaultCommandsTopic) != 1 {
		t.Fatalf("published: events %d, commands %d", eg.Published("events"), eg.Published(eventgrid.DefaultCommandsTopic))
	}
	huge := strings.Replace(string(command(t, "cmd-2")), `"source"`, `"pad":"`+strings.Repeat("x", eventgrid.MaxEventBytes)+`","source"`, 1)
	for name, c := range map[string]struct{ subject, id, data, want string }{
		"unrouted":     {queue.DeadLetterSubject(cluster), "cmd-1", string(command(t, "cmd-1")), "no topic routed"},
		"id mismatch":  {queue.CommandsSubject(cluster), "other", string(command(t, "cmd-1")), "is not the message id"},
		"not an event": {queue.CommandsSubject(cluster), "x", "hello", "not a structured CloudEvent"},
		"too large":    {queue.CommandsSubject(cluster), "cmd-2", huge, "limit 1048576"},
	} {
		if err := pub.Publish(ctx, c.subject, c.id, []byte(c.data)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if eg.Published(eventgrid.DefaultCommandsTopic) != 1 {
		t.Fatal("a refused event reached the service")
	}
}

// run consumes in the background until the returned stop is called.
func run(t *testing.T, cfg eventgrid.Config, cc eventgrid.ConsumerConfig, h queue.Handler) (stop func()) {
	t.Helper()
	rc, err := cfg.Receiver()
	if err != nil {
		t.Fatal(err)
	}
	cc.Receiver, cc.Source, cc.Subject, cc.Logger, cc.MaxWait = rc, "agent", queue.CommandsSubject(cluster), quiet, 10*time.Second
	cons, err := eventgrid.NewConsumer(cc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cons.Consume(ctx, h) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A failed command is released and delivered again (deliveryCount 2), then acknowledged; a
// poison one is written with its reason to the dead-letter container and acknowledged, so Event
// Grid dead-letters nothing; one whose handler keeps failing is dead-lettered with its last
// error on its last allowed delivery.
func TestConsumerRedeliversAndDeadLettersWithReason(t *testing.T) {
	az := azuritetest.Shared(t)
	dlc := az.Container(context.Background(), t, "consumer-dl")
	eg, cfg := setup(t, egtest.QueueSubscription{Name: "agent"})
	pub, _ := cfg.Publisher()
	ctx := context.Background()
	for _, id := range []string{"flaky", "poison", "always-fails"} {
		if err := pub.Publish(ctx, queue.CommandsSubject(cluster), id, command(t, id)); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	attempts := map[string][]int{}
	dead := &azureblob.DeadLetters{Container: dlc}
	stop := run(t, cfg, eventgrid.ConsumerConfig{DeadLetters: dead, MaxDeliveries: 3,
		ReleaseDelays: []aznamespaces.ReleaseDelay{aznamespaces.ReleaseDelayNoDelay}},
		func(ctx context.Context, m queue.Message) error {
			mu.Lock()
			attempts[m.ID] = append(attempts[m.ID], m.Attempt)
			mu.Unlock()
			if _, err := events.Decode(m.Data); err != nil {
				t.Errorf("delivered event %s does not decode: %v", m.ID, err)
			}
			switch {
			case m.ID == "poison":
				return fmt.Errorf("%w: command.kind: unknown", queue.ErrPoison)
			case m.ID == "flaky" && m.Attempt == 1:
				return errors.New("API server unavailable")
			case m.ID == "always-fails":
				return errors.New("still failing")
			}
			return nil
		})
	waitFor(t, "every command settled", func() bool { return eg.Pending(eventgrid.DefaultCommandsTopic, "agent") == 0 })
	stop()
	want := map[string][]int{"flaky": {1, 2}, "poison": {1}, "always-fails": {1, 2, 3}}
	if !reflect.DeepEqual(attempts, want) {
		t.Fatalf("deliveries %v, want %v", attempts, want)
	}
	if dl := eg.DeadLetters(); len(dl) != 0 {
		t.Fatalf("Event Grid dead letters %+v, want none (the consumer wrote them with reasons)", dl)
	}
	for id, reason := range map[string]string{"poison": "poison message: command.kind: unknown", "always-fails": "failed 3 of 3 deliveries; last error: still failing"} {
		d := readDeadLetter(t, dlc, dead.Name(azureblob.DeadLetter{Source: "agent", EventID: id}))
		if d.Reason != reason || d.EventID != id || d.Source != "agent" {
			t.Errorf("dead letter of %s: %+v, want reason %q", id, d, reason)
		}
	}
}

// Without a dead-letter writer a poison command is rejected: Event Grid dead-letters it.
func TestConsumerRejectsPoisonWithoutWriter(t *testing.T) {
	eg, cfg := setup(t, egtest.QueueSubscription{Name: "agent"})
	pub, _ := cfg.Publisher()
	if err := pub.Publish(context.Background(), queue.CommandsSubject(cluster), "poison", command(t, "poison")); err != nil {
		t.Fatal(err)
	}
	stop := run(t, cfg, eventgrid.ConsumerConfig{}, func(context.Context, queue.Message) error {
		return fmt.Errorf("%w: bad", queue.ErrPoison)
	})
	waitFor(t, "the rejection", func() bool { return len(eg.DeadLetters()) == 1 })
	stop()
	if d := eg.DeadLetters()[0]; d.Reason != "Rejected" || d.DeliveryAttempts != 1 || !strings.Contains(string(d.Event), `"poison"`) {
		t.Fatalf("dead letter %+v", d)
	}
}

// The lock is renewed while a handler runs longer than it: the command is acknowledged once,
// never delivered again.
func TestConsumerRenewsLock(t *testing.T) {
	eg, cfg := setup(t, egtest.QueueSubscription{Name: "agent", LockDuration: 3 * time.Second})
	pub, _ := cfg.Publisher()
	if err := pub.Publish(context.Background(), queue.CommandsSubject(cluster), "slow", command(t, "slow")); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	stop := run(t, cfg, eventgrid.ConsumerConfig{LockDuration: 3 * time.Second}, func(context.Context, queue.Message) error {
		calls.Add(1)
		time.Sleep(5 * time.Second)
		return nil
	})
	waitFor(t, "the acknowledgement", func() bool { return eg.Pending(eventgrid.DefaultCommandsTopic, "agent") == 0 })
	stop()
	if calls.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", calls.Load())
	}
}

func readDeadLetter(t *testing.T, c *container.Client, name string) azureblob.DeadLetter {
	t.Helper()
	resp, err := c.NewBlobClient(name).DownloadStream(context.Background(), nil)
	if err != nil {
		t.Fatalf("dead letter %s: %v", name, err)
	}
	defer resp.Body.Close()
	var d azureblob.DeadLetter
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		t.Fatal(err)
	}
	return d
}

// A CloudEvent whose data is JSON keeps it as "data" through ParseCloudEvent and EventBytes (the
// SDK alone would write it back as data_base64, and a subscriber reading "data" would find
// none); binary data, Dovetail's application/json+zstd events, stays data_base64.
func TestJSONDataStaysJSON(t *testing.T) {
	for name, c := range map[string]struct{ in, want, not string }{
		"json":             {`{"specversion":"1.0","id":"1","source":"s","type":"t","datacontenttype":"application/json","data":{"a":1}}`, `"data":{"a":1}`, "data_base64"},
		"cloudevents+json": {`{"specversion":"1.0","id":"1","source":"s","type":"t","datacontenttype":"application/cloudevents+json; charset=utf-8","data":[1,2]}`, `"data":[1,2]`, "data_base64"},
		"zstd":             {`{"specversion":"1.0","id":"1","source":"s","type":"t","datacontenttype":"application/json+zstd","data_base64":"AAEC"}`, `"data_base64":"AAEC"`, `"data":`},
	} {
		ce, err := eventgrid.ParseCloudEvent([]byte(c.in))
		if err != nil {
			t.Fatal(err)
		}
		out, err := eventgrid.EventBytes(ce)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), c.want) || strings.Contains(string(out), c.not) {
			t.Errorf("%s: %s, want %s and no %s", name, out, c.want, c.not)
		}
	}
}
