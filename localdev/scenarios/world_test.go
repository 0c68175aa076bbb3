package scenarios

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

// publish hands c to the World as a function would publish it.
func publish(t *testing.T, w *World, c events.Command) {
	t.Helper()
	data, err := events.NewEvent(Cluster, "test", events.TypeCommand, c.ID, &c)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Publish(context.Background(), queue.CommandsSubject(Cluster), c.ID, data); err != nil {
		t.Fatal(err)
	}
}

// The World applies commands through the real agent, so what kube.Applier refuses stays refused:
// a TaintNode with a taint the functions never write is invalid (the agent adds only
// karpenter.sh/disrupted:NoSchedule), and a DrainNode of a node that is not tainted
// karpenter.sh/disrupted is refused (a drain follows the taint that reserves its disruption).
// The lenient stand-in agent the scenarios had applied both.
func TestWorldAppliesThroughTheAgent(t *testing.T) {
	var out strings.Builder
	w := NewWorld(Start, 10*time.Second, &out)
	defer w.Close()
	ctx := context.Background()
	if err := w.AddPools([]apisv1.NodePool{spotPool()}, []apisv1.NodeClass{{EC2: ptr(defaultClass(OldAMI))}}); err != nil {
		t.Fatal(err)
	}
	if err := w.AddPods(webPods(2, "500m", "1Gi", 30)...); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Step(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	snap := w.Snapshot()
	if len(snap.Nodes) != 1 || len(snap.Pods) != 2 {
		t.Fatalf("%d nodes, %d bound pods; want the one node launched for both pods", len(snap.Nodes), len(snap.Pods))
	}
	node := snap.Nodes[0].Name

	publish(t, w, events.Command{ID: "forged-taint", Kind: events.CommandTaintNode, Cluster: Cluster, SnapshotRevision: snap.Revision, NodeName: node,
		Taint: &corev1.Taint{Key: "example.com/evict", Effect: corev1.TaintEffectNoExecute}})
	if len(w.Failed) != 1 || !strings.Contains(w.Failed[0], "command.taint") {
		t.Fatalf("failed %q; want the forged taint dead-lettered naming command.taint", w.Failed)
	}
	publish(t, w, events.Command{ID: "untainted-drain", Kind: events.CommandDrainNode, Cluster: Cluster, SnapshotRevision: snap.Revision, NodeName: node})
	if len(w.Refused) != 1 || !strings.Contains(w.Refused[0], "not tainted "+apisv1.TaintKeyDisrupted) {
		t.Fatalf("refused %q; want the drain of an untainted node refused", w.Refused)
	}
	n := w.Node(node)
	if n == nil {
		t.Fatalf("node %s is gone", node)
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key == "example.com/evict" || taint.Key == apisv1.TaintKeyDisrupted {
			t.Fatalf("node %s has taint %s after the refusals; want neither the forged nor a disruption taint", node, taint.ToString())
		}
	}
	if bound, total := w.PodsBound(); bound != 2 || total != 2 || w.Evictions != 0 {
		t.Fatalf("%d/%d pods bound, %d evicted; want both still running", bound, total, w.Evictions)
	}
	if !strings.Contains(out.String(), "agent: refused DrainNode on Node/"+node) {
		t.Errorf("the refusal is not printed:\n%s", out.String())
	}
}
