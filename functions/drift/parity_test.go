package drift_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/drift"
	"github.com/dovetail-dev/dovetail/localdev/scenarios"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/preview"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

// recorder passes every published event on and keeps the disruption sequence's commands (taint,
// drain, hand-off) in order, as "<kind> <node or NodeClaim> <ID>" (disruption.CommandLines).
type recorder struct {
	next  queue.Publisher
	lines []string
	// launches are the CreateNodeClaim commands' reasons, in order.
	launches []string
}

func (r *recorder) Publish(ctx context.Context, subject, id string, data []byte) error {
	if env, err := events.Decode(data); err == nil && env.Type == events.TypeCommand {
		if c, err := (events.Codec{}).Command(ctx, env); err == nil {
			switch c.Kind {
			case events.CommandTaintNode, events.CommandDrainNode, events.CommandDeleteNodeClaim, events.CommandDeleteNode:
				r.lines = append(r.lines, disruption.CommandLines([]disruption.SequenceStep{{Commands: []events.Command{*c}}})...)
			case events.CommandCreateNodeClaim:
				r.launches = append(r.launches, c.Reason)
			}
		}
	}
	return r.next.Publish(ctx, subject, id, data)
}

// previewCommands runs `dovetail plan --disruption`'s preview on snap and returns the commands
// of its first round's drift decisions.
func previewCommands(t *testing.T, o preview.Options, snap *events.Snapshot) []string {
	t.Helper()
	res, err := preview.Run(snap, o)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	if len(res.Rounds) > 0 {
		for _, d := range res.Rounds[0].Decisions {
			if d.Function == preview.FunctionDrift {
				out = append(out, d.Commands...)
			}
		}
	}
	return out
}

// Issue 25: the preview shows exactly what the functions will do. On the same snapshot, the
// drift function's published taint, drain and hand-off commands (kinds, targets and IDs) are
// the preview's, for a drifted node (replacement launched, then tainted) and for an expired one
// (handed off at once).
func TestPreviewCommandsAreTheDriftFunctions(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(*events.Snapshot)
		want  []string // the command kinds, in order
	}{
		{"drift", func(s *events.Snapshot) {
			s.NodeClasses[0].EC2.Status.AMIs = []apisv1.AMI{{ID: "ami-2"}}
		}, []string{"TaintNode"}},
		{"expiry", func(s *events.Snapshot) {
			s.NodeClaims[0].Spec.ExpireAfter = apisv1.MustParseNillableDuration("1h")
			s.Time.Time = s.NodeClaims[0].CreationTimestamp.Add(61 * time.Minute)
		}, []string{"DeleteNodeClaim"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, h := setup(t)
			snap := w.Snapshot()
			c.setup(snap)
			rec := &recorder{next: w}
			h.Publisher = rec
			if _, err := h.Decide(context.Background(), snap); err != nil {
				t.Fatal(err)
			}
			got := previewCommands(t, preview.Options{Catalog: h.Catalog, NodeSettings: h.NodeSettings, NodeClassRules: cloud.RulesOf(h.Provider)}, snap)
			if !reflect.DeepEqual(got, rec.lines) {
				t.Fatalf("preview commands\n%q\nfunction commands\n%q", got, rec.lines)
			}
			if len(got) != len(c.want) {
				t.Fatalf("commands %q, want kinds %v", got, c.want)
			}
			for i, k := range c.want {
				if got[i][:len(k)] != k {
					t.Errorf("command %d: %q, want %s", i, got[i], k)
				}
			}
		})
	}
}

// Several nodes expiring in one round are handed off together, by the drift function and the
// preview alike: the same hand-off commands, and the same NodeClaims launched for their pods
// (one plan for all of them, disruption.ExpiryInput).
//
// Hand calculation: the pool launches only m5.large on demand (2 vCPU: 1930m allocatable, 2
// CPUs less the EKS kube-reserved 70m). Pods web-0 and web-1 (1 CPU each) and small-0 (500m) go on
// two nodes: one with a web pod and small-0 (430m free), one with the other web pod (930m
// free). Both expire in the same round. Node by node, small-0 would be planned onto the other
// expiring node (930m free) and only the two web pods get NodeClaims; together, all three pods
// are placed on new NodeClaims: two m5.large (1500m and 1000m), three pods in all.
func TestPreviewExpiresARoundsNodesAsTheDriftFunction(t *testing.T) {
	w := scenarios.NewWorld(scenarios.Start, 30*time.Second, nil)
	pool := apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{
		Spec: apisv1.NodeClaimSpec{
			NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: "EC2NodeClass", Name: "default"},
			Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
				{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}}},
				{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
			}}}}}
	class := apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.EC2NodeClassSpec{Role: "KarpenterNodeRole-test"}, Status: apisv1.EC2NodeClassStatus{AMIs: []apisv1.AMI{{ID: "ami-1"}}, InstanceProfile: "test_profile"}}
	w.AddPools([]apisv1.NodePool{pool}, []apisv1.NodeClass{{EC2: &class}})
	for _, p := range []struct{ name, cpu string }{{"web-0", "1"}, {"web-1", "1"}, {"small-0", "500m"}} {
		w.AddPods(corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: "default",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", Controller: ptr(true)}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(p.cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}})
	}
	ctx := context.Background()
	if _, err := w.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Step(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	h := &drift.Handler{Cluster: scenarios.Cluster, Catalog: w.Catalog, NodeSettings: w.NodeSettings, Provider: w.Cloud, Publisher: w, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	snap := w.Snapshot()
	if len(snap.Nodes) != 2 || len(snap.NodeClaims) != 2 || len(snap.Pods) != 3 {
		t.Fatalf("want the three pods on two nodes, got %d nodes, %d NodeClaims, %d bound pods", len(snap.Nodes), len(snap.NodeClaims), len(snap.Pods))
	}
	for i := range snap.NodeClaims {
		snap.NodeClaims[i].Spec.ExpireAfter = apisv1.MustParseNillableDuration("1h")
	}
	snap.Time.Time = snap.NodeClaims[len(snap.NodeClaims)-1].CreationTimestamp.Add(61 * time.Minute)
	rec := &recorder{next: w}
	h.Publisher = rec
	if _, err := h.Decide(ctx, snap); err != nil {
		t.Fatal(err)
	}
	res, err := preview.Run(snap, preview.Options{Catalog: h.Catalog, NodeSettings: h.NodeSettings, NodeClassRules: cloud.RulesOf(h.Provider)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var expiries []preview.Decision
	for _, d := range res.Rounds[0].Decisions {
		if d.Function == preview.FunctionDrift {
			got = append(got, d.Commands...)
			expiries = append(expiries, d)
		}
	}
	if !reflect.DeepEqual(got, rec.lines) {
		t.Fatalf("preview commands\n%q\nfunction commands\n%q", got, rec.lines)
	}
	if len(got) != 2 || !strings.HasPrefix(got[0], "DeleteNodeClaim ") || !strings.HasPrefix(got[1], "DeleteNodeClaim ") {
		t.Fatalf("commands %q, want the two NodeClaims' DeleteNodeClaim", got)
	}
	if len(expiries) != 1 || len(expiries[0].Nodes) != 2 {
		t.Fatalf("preview drift decisions %+v, want one for both expired nodes", expiries)
	}
	// The function's launches: two NodeClaims carrying the three pods between them.
	pods := 0
	for _, r := range rec.launches {
		var n int
		if i := strings.LastIndex(r, "("); i < 0 || func() error { _, err := fmt.Sscanf(r[i:], "(%d pods)", &n); return err }() != nil {
			t.Fatalf("launch reason %q names no pod count", r)
		}
		pods += n
	}
	if len(rec.launches) != 2 || pods != 3 {
		t.Fatalf("function launches %q: want 2 NodeClaims holding all 3 pods", rec.launches)
	}
	// The preview's launches are the function's: the same count and types, the same pods.
	var types []string
	var moved []string
	for _, l := range expiries[0].Launched {
		types = append(types, l.InstanceType)
	}
	for _, m := range expiries[0].Moved {
		moved = append(moved, m.Pod)
	}
	sort.Strings(moved)
	if !reflect.DeepEqual(types, []string{"m5.large", "m5.large"}) || !reflect.DeepEqual(moved, []string{"default/small-0", "default/web-0", "default/web-1"}) {
		t.Fatalf("preview launched %v and moved %v; want two m5.large and all three pods", types, moved)
	}
}
