package consolidate

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/preview"
)

// Issue 25: the preview shows exactly what the functions will do. On the snapshot of
// TestReplaceThenDrainThenTerminate (an m5.2xlarge holding 2 × 500m, replaced by an m5.large),
// the consolidate function's taint commands (kind, node, ID) are the preview's first-round
// consolidation commands.
func TestPreviewCommandsAreTheConsolidateFunctions(t *testing.T) {
	e := newEnv(t)
	const oldID = "i-0123456789abcdef0"
	if err := e.cloud.AddInstance(cloud.Instance{ID: oldID, Zone: "us-east-1a", InstanceType: "m5.2xlarge", CapacityType: "on-demand",
		Tags: map[string]string{apisv1.TagCluster: cluster}}); err != nil {
		t.Fatal(err)
	}
	n, nc := node("old", "m5.2xlarge", cloud.AWSProviderID("us-east-1a", oldID))
	snap := &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: cluster, Revision: 10, Time: metav1.NewTime(now),
		NodePools: []apisv1.NodePool{pool()}, Nodes: []corev1.Node{n}, NodeClaims: []apisv1.NodeClaim{nc},
		Pods: []corev1.Pod{pod("p1", "old"), pod("p2", "old")}}
	res, err := preview.Run(snap, preview.Options{Catalog: e.h.Catalog, NodeSettings: e.h.NodeSettings})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, d := range res.Rounds[0].Decisions {
		if d.Function == preview.FunctionConsolidation {
			want = append(want, d.Commands...)
		}
	}
	if out := e.handle(snap); out.Decision == nil {
		t.Fatalf("no consolidation: %+v", out.Report)
	}
	var got []string
	for _, c := range e.commands() {
		if c.Kind == events.CommandTaintNode || c.Kind == events.CommandDrainNode || c.Kind == events.CommandDeleteNodeClaim {
			got = append(got, disruption.CommandLines([]disruption.SequenceStep{{Commands: []events.Command{c}}})...)
		}
	}
	if len(got) != 1 || !reflect.DeepEqual(got, want) {
		t.Fatalf("function commands %q, preview commands %q; want the one TaintNode of node old in both", got, want)
	}
}
