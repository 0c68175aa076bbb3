package scenarios

import (
	"context"
	"io"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/lifecycle"
)

// The lifecycle function's DisruptionBlocked condition reaches the NodeClaim through the real
// agent (SetNodeClaimStatus applied to the in-memory API server): a pod annotated
// karpenter.sh/do-not-disrupt on the node sets it True naming the pod, and removing the
// annotation removes the condition.
func TestDisruptionBlockedConditionLandsOnTheNodeClaim(t *testing.T) {
	w := NewWorld(Start, 10*time.Second, io.Discard)
	defer w.Close()
	ctx := context.Background()
	if err := w.AddPools([]apisv1.NodePool{spotPool()}, []apisv1.NodeClass{{EC2: ptr(defaultClass(OldAMI))}}); err != nil {
		t.Fatal(err)
	}
	pods := webPods(2, "500m", "1Gi", 30)
	pods[1].Annotations = map[string]string{apisv1.AnnotationDoNotDisrupt: "true"}
	if err := w.AddPods(pods...); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	blocked := func() *metav1.Condition {
		t.Helper()
		snap := w.Snapshot()
		if len(snap.NodeClaims) != 1 {
			t.Fatalf("%d NodeClaims; want the one launched for both pods", len(snap.NodeClaims))
		}
		for i, c := range snap.NodeClaims[0].Status.Conditions {
			if c.Type == lifecycle.ConditionDisruptionBlocked {
				return &snap.NodeClaims[0].Status.Conditions[i]
			}
		}
		return nil
	}
	// Boot (10 s), registration, the pods bound, then a lifecycle decision that sees them.
	for range 3 {
		if err := w.Step(ctx, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if bound, total := w.PodsBound(); bound != 2 || total != 2 {
		t.Fatalf("%d/%d pods bound", bound, total)
	}
	want := "DoNotDisrupt Pod/default/web-1: pod default/web-1 is annotated karpenter.sh/do-not-disrupt"
	if c := blocked(); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "DoNotDisrupt" || c.Message != want {
		t.Fatalf("DisruptionBlocked %+v; want True, DoNotDisrupt, %q", c, want)
	}
	p, err := w.Cluster.Kube.CoreV1().Pods("default").Get(ctx, "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(p.Annotations, apisv1.AnnotationDoNotDisrupt)
	if _, err := w.Cluster.Kube.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := w.Step(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if c := blocked(); c != nil {
		t.Fatalf("DisruptionBlocked %+v after the annotation went; want none", c)
	}
}
