package localdev

import (
	"context"
	"fmt"
	"os"

	"github.com/dovetail-dev/dovetail/agent"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/queue"
	dnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
)

// startAgent runs the agent against the cluster: its informers feed pending-pod batches to the
// queue, and it applies the commands the functions publish.
//
// It connects as the agent role (natsauth.RoleAgent), as the deployed agent does.
func (e *Env) startAgent(ctx context.Context) error {
	nc, err := dnats.Connect(e.NATSURL, "dovetail-dev-agent", e.NATS.ClientOptions(natsauth.RoleAgent)...)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	pub, err := dnats.NewPublisher(nc)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	cmds, err := dnats.NewConsumer(ctx, nc, dnats.ConsumerConfig{Cluster: e.Options.Cluster, Durable: natsauth.AgentDurable,
		Subject: queue.CommandsSubject(e.Options.Cluster), Logger: e.Options.Log, Workers: agent.DefaultCommandWorkers, Key: agent.CommandKey})
	if err != nil {
		return err
	}
	kc, dc := e.Cluster.Kube, e.Cluster.Dynamic
	if e.Cluster.AgentKube != nil {
		kc, dc = e.Cluster.AgentKube, e.Cluster.AgentDynamic
	}
	kind := apisv1.KindEC2NodeClass
	if e.Options.CloudProvider == CloudAzure {
		kind = apisv1.KindAKSNodeClass
	}
	a, err := agent.New(agent.Config{Cluster: e.Options.Cluster, Namespace: e.Options.Namespace, NodeClassKind: kind,
		Kube: kc, Dynamic: dc, Publisher: pub, Commands: cmds, Blobs: e.blobs, Logger: e.Options.Log, Metrics: e.AgentMetrics,
		SnapshotInterval: e.Options.SnapshotInterval})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	e.Agent = a
	e.goRun(func() error { return a.Run(ctx) })
	select {
	case <-a.Synced():
		e.Progress.Printf("agent: informers synced, watching pending pods (batch window 1 s idle / 10 s max)")
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// blobDir is where claim-checked payloads go in local dev (a temporary directory).
func newBlobDir() (string, error) { return os.MkdirTemp("", "dovetail-blobs-*") }
