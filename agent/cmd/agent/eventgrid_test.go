package main

// The agent's Event Grid transport, built from flags as in production, against egtest (a mock
// at the edge of Event Grid's data plane: no emulator runs offline) through the real SDK clients,
// and Azurite for the claim checks.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/dovetail-dev/dovetail/events"

	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/queue/azureblob"
	"github.com/dovetail-dev/dovetail/shared/queue/azureblob/azuritetest"
	"github.com/dovetail-dev/dovetail/shared/queue/eventgrid"
	"github.com/dovetail-dev/dovetail/shared/queue/eventgrid/egtest"
)

func TestEventGridTransportRequiresEndpoints(t *testing.T) {
	_, _, _, err := eventGridTransport(options{cluster: "c1"}, nil)
	if err == nil || !strings.Contains(err.Error(), "--eventgrid-topic-endpoint") {
		t.Fatalf("error = %v, want the missing flags named", err)
	}
}

func TestEventGridTransportPublishesEventsAndConsumesCommands(t *testing.T) {
	az := azuritetest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	az.Container(ctx, t, "claims")
	t.Setenv(azureblob.EnvConnectionString, az.ConnectionString())
	eg := egtest.New()
	defer eg.Close()
	t.Setenv(eventgrid.EnvTopicKey, eg.Key)
	t.Setenv(eventgrid.EnvNamespaceKey, eg.Key)
	// The function's side of the events topic: what Event Grid pushes.
	var mu sync.Mutex
	var pushed []json.RawMessage
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var batch []json.RawMessage
		_ = json.Unmarshal(b, &batch)
		mu.Lock()
		pushed = append(pushed, batch...)
		mu.Unlock()
	}))
	defer sink.Close()
	eg.AddTopic("events", egtest.PushSubscription{Name: "provision", Endpoint: sink.URL})
	eg.AddNamespaceTopic("commands", egtest.QueueSubscription{Name: "agent"})
	o := options{cluster: "agent-eg", egTopicEndpoint: eg.TopicEndpoint("events"), egNamespace: eg.URL,
		commandsTopic: "commands", commandsSubscription: "agent", blobContainer: "claims",
		azureClientOptions: azcore.ClientOptions{Transport: eg.Client()}}
	pub, cons, blobs, err := eventGridTransport(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := command(t, o.cluster, "pods-pending-1")
	if err := pub.Publish(ctx, queue.EventsSubject(o.cluster), "pods-pending-1", ev); err != nil {
		t.Fatal(err)
	}
	eg.WaitDelivered()
	if len(pushed) != 1 || !strings.Contains(string(pushed[0]), `"id":"pods-pending-1"`) {
		t.Fatalf("pushed %s", pushed)
	}
	// The agent sends no commands itself.
	if err := pub.Publish(ctx, queue.CommandsSubject(o.cluster), "cmd-1", command(t, o.cluster, "cmd-1")); err == nil {
		t.Fatal("the agent's publisher routed a command")
	}
	// A command sent by a function reaches the agent's consumer.
	fpub, err := eventgrid.Config{Cluster: o.cluster, NamespaceEndpoint: eg.URL, CommandsTopic: "commands", ClientOptions: o.azureClientOptions}.Publisher()
	if err != nil {
		t.Fatal(err)
	}
	if err := fpub.Publish(ctx, queue.CommandsSubject(o.cluster), "cmd-1", command(t, o.cluster, "cmd-1")); err != nil {
		t.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	var msg queue.Message
	err = cons.Consume(cctx, func(_ context.Context, m queue.Message) error { msg = m; stop(); return nil })
	if err != nil || msg.ID != "cmd-1" || msg.Subject != queue.CommandsSubject(o.cluster) || msg.Attempt != 1 {
		t.Fatalf("consume: %v, %+v", err, msg)
	}
	uri, err := blobs.Put(ctx, o.cluster+"/x.json.zst", []byte("blob"))
	if err != nil || uri != az.BlobEndpoint+"/claims/"+azureblob.DefaultPrefix+o.cluster+"/x.json.zst" {
		t.Fatalf("claim-check put: %q %v", uri, err)
	}
}

// command is a valid command event of cluster with id.
func command(t *testing.T, cluster, id string) []byte {
	t.Helper()
	b, err := events.NewEvent(cluster, "provision", events.TypeCommand, id, &events.Command{ID: id, Kind: events.CommandDeleteNode,
		Cluster: cluster, NodeName: "n1", SnapshotRevision: 1, Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
