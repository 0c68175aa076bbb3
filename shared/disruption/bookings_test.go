package disruption

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/provreq"
)

// request adds a ProvisioningRequest ml/<name> of the class with one pod set of n pods of cpu
// (PodTemplate ml/<name>), Provisioned=True since provisionedAgo before the snapshot.
func (c *csCluster) request(name, class string, n int32, cpu string, provisionedAgo time.Duration) {
	c.snap.PodTemplates = append(c.snap.PodTemplates, corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"job": name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}})
	c.snap.ProvisioningRequests = append(c.snap.ProvisioningRequests, apisv1.ProvisioningRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID("uid-pr-" + name),
			CreationTimestamp: metav1.NewTime(c.snap.Time.Add(-time.Hour))},
		Spec: apisv1.ProvisioningRequestSpec{ProvisioningClassName: class,
			PodSets: []apisv1.PodSet{{PodTemplateRef: apisv1.Reference{Name: name}, Count: n}}},
		Status: apisv1.ProvisioningRequestStatus{Conditions: []metav1.Condition{{Type: apisv1.ProvisioningRequestProvisioned,
			Status: metav1.ConditionTrue, Reason: provreq.ReasonCapacityIsFound, LastTransitionTime: metav1.NewTime(c.snap.Time.Add(-provisionedAgo))}}},
	})
}

// requestBlocker returns n's blocker of kind ProvisioningRequest, or nil.
func requestBlocker(s *State, node string) *Blocker {
	for _, b := range s.Blockers(s.Node(node)) {
		if b.Kind == BlockerProvisioningRequest {
			return &b
		}
	}
	return nil
}

// An empty m5.large (1930m allocatable) next to an m5.xlarge whose 3-CPU pod leaves 920m: a
// check-capacity booking of one 1500m pod fits only the empty node, so while the booking lives
// (Provisioned 2 minutes ago, window 10 minutes) the empty node is not consolidated and its
// blocker names the request; once the window is over (11 minutes) or the consumer is bound
// elsewhere, emptiness deletes it (0.096 USD/h).
func TestCsBookingKeepsEmptyNode(t *testing.T) {
	build := func(ago time.Duration, consumerBound bool) *csCluster {
		c := csNewCluster(t, csT0)
		c.pool("default", csM5OnDemand()...)
		c.node("a", "default", "m5.xlarge", "on-demand")
		c.node("b", "default", "m5.large", "on-demand")
		c.pod("p1", "a", "3", "1Gi")
		c.request("train", apisv1.ProvisioningClassCheckCapacity, 1, "1500m", ago)
		if consumerBound {
			p := c.pod("consumer", "a", "100m", "100Mi")
			p.Namespace = "ml"
			p.Annotations = map[string]string{apisv1.AnnotationConsumeProvisioningRequest: "train"}
		}
		return c
	}
	s := build(2*time.Minute, false).state()
	b := requestBlocker(s, "b")
	if b == nil {
		t.Fatalf("node b has no ProvisioningRequest blocker: %+v", s.Blockers(s.Node("b")))
	}
	if want := (ObjectRef{Kind: "ProvisioningRequest", Namespace: "ml", Name: "train"}); b.Object != want {
		t.Errorf("blocker object %v, want %v", b.Object, want)
	}
	if requestBlocker(s, "a") != nil {
		t.Errorf("node a (no room for the booking) is blocked by the request")
	}
	if d, r := Consolidate(s, Options{}); d != nil {
		t.Fatalf("decision %s within the booking window (tried %v)", d, r.Tried)
	}
	for name, c := range map[string]*csCluster{"window over": build(11*time.Minute, false), "consumer bound": build(2*time.Minute, true)} {
		d, r := Consolidate(c.state(), Options{})
		if d == nil {
			t.Fatalf("%s: no decision: %v", name, r.Tried)
		}
		if csNames(d) != "[b]" || d.Method != MethodDelete || !csNear(d.Savings, 0.096) {
			t.Errorf("%s: %s, want delete [b] saving 0.096", name, d)
		}
	}
}

// Booked room is not free room. Two m5.large (1930m): a holds 1000m, b 500m. Without a booking
// one node's pod moves beside the other's (1500m ≤ 1930m) and its node goes (a, by disruption
// cost order, 0.096 USD/h). A booking of 800m takes room on one of
// them (a: 930m free, b: 1430m): on a, b's 500m pod no longer fits there (130m left); on b, b
// is blocked and a's 1000m pod does not fit b's 630m left. Either way nothing is consolidated.
func TestCsBookingIsNotFreeRoom(t *testing.T) {
	build := func(book bool) *csCluster {
		c := csNewCluster(t, csT0)
		c.pool("default", csM5OnDemand()...)
		c.node("a", "default", "m5.large", "on-demand")
		c.node("b", "default", "m5.large", "on-demand")
		c.pod("p1", "a", "1", "1Gi")
		c.pod("p2", "b", "500m", "1Gi")
		if book {
			c.request("train", apisv1.ProvisioningClassCheckCapacity, 1, "800m", time.Minute)
		}
		return c
	}
	d, r := Consolidate(build(false).state(), Options{})
	if d == nil || csNames(d) != "[a]" || !csNear(d.Savings, 0.096) {
		t.Fatalf("without a booking: %v (tried %v), want a deleted saving 0.096", d, r.Tried)
	}
	s := build(true).state()
	if d, r := Consolidate(s, Options{}); d != nil {
		t.Fatalf("with the booking: %s (tried %v), want no decision", d, r.Tried)
	}
	if requestBlocker(s, "a") == nil && requestBlocker(s, "b") == nil {
		t.Errorf("neither node carries the booking")
	}
}

// A node launched for a best-effort-atomic-scale-up request (its NodeClaim annotated) is kept
// while the request's pods are not all bound, within the booking window, even where the
// booking's pods were placed elsewhere; with every pod bound it is an ordinary node.
func TestCsAtomicRequestNodesProtected(t *testing.T) {
	build := func(bound bool) *csCluster {
		c := csNewCluster(t, csT0)
		c.pool("default", csM5OnDemand()...)
		c.node("a", "default", "m5.large", "on-demand")
		c.node("b", "default", "m5.xlarge", "on-demand")
		c.snap.NodeClaims[0].Annotations = map[string]string{provreq.AnnotationProvisioningRequest: "ml/gang", provreq.AnnotationProvisioningRequestNodes: "1"}
		c.pod("p1", "b", "3", "1Gi")
		c.request("gang", apisv1.ProvisioningClassBestEffortAtomicScaleUp, 1, "100m", time.Minute)
		if bound {
			p := c.pod("consumer", "b", "100m", "100Mi")
			p.Namespace = "ml"
			p.Annotations = map[string]string{apisv1.AnnotationConsumeProvisioningRequest: "gang"}
		}
		return c
	}
	s := build(false).state()
	b := requestBlocker(s, "a")
	if b == nil || b.Object.Name != "gang" || b.Object.Namespace != "ml" {
		t.Fatalf("node a blocker %+v, want the ProvisioningRequest ml/gang", b)
	}
	if d, _ := Consolidate(s, Options{}); d != nil && csNames(d) == "[a]" {
		t.Fatalf("decision %s removes the atomic request's node", d)
	}
	d, r := Consolidate(build(true).state(), Options{})
	if d == nil || csNames(d) != "[a]" || !csNear(d.Savings, 0.096) {
		t.Fatalf("with the pod bound: %v (tried %v), want delete [a] saving 0.096", d, r.Tried)
	}
}
