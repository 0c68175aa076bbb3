package drift_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/functions/drift"
	"github.com/dovetail-dev/dovetail/localdev/scenarios"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// TestAKSImageVersionDrift: an AKS node launched through the Azure provider (real SDK over the
// fake ARM) is not drifted while its class resolves the image it booted; once the class
// resolves another node image version (here the gallery's earlier 202611.03.0, as when a bad
// release is rolled back; the fake gallery publishes only those two, and the replacement must
// boot a version that exists), the drift function replaces it with the provider's reason
// ImageDrift (karpenter-provider-azure pkg/cloudprovider/drift.go), asking the provider.
func TestAKSImageVersionDrift(t *testing.T) {
	ctx := context.Background()
	w, err := scenarios.NewAzureWorld(scenarios.Start, 20*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	family := apisv1.ImageFamilyUbuntu2204
	pool := apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{
		Spec: apisv1.NodeClaimSpec{
			NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AzureGroup, Kind: apisv1.KindAKSNodeClass, Name: "default"},
			Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
				{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"Standard_D2s_v5"}}},
				{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
			}}}}}
	w.AddPools([]apisv1.NodePool{pool}, []apisv1.NodeClass{{AKS: &apisv1.AKSNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: apisv1.AKSNodeClassSpec{ImageFamily: &family}}}})
	if err := w.Lifecycle(ctx); err != nil { // resolves the class: images, Kubernetes version
		t.Fatal(err)
	}
	w.AddPods(corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", Controller: ptr(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}})
	if _, err := w.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := w.Step(ctx, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	h := &drift.Handler{Cluster: scenarios.Cluster, Catalog: w.Catalog, NodeSettings: w.NodeSettings, Provider: w.Provider, Publisher: w,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	snap := w.Snapshot()
	const booted = "/versions/202611.18.0"
	if len(snap.Nodes) != 1 || len(snap.NodeClaims) != 1 || !strings.HasSuffix(snap.NodeClaims[0].Status.ImageID, booted) {
		t.Fatalf("want one node launched on the gallery's latest image (…%s), got %d nodes, NodeClaims %d", booted, len(snap.Nodes), len(snap.NodeClaims))
	}
	if d, err := h.Decide(ctx, snap); err != nil || len(d.Steps) != 0 {
		t.Fatalf("nothing drifted yet, got %v %v", d, err)
	}
	// The class resolves the other published release (status.images at 202611.03.0).
	for i := range snap.NodeClasses {
		if c := snap.NodeClasses[i].AKS; c != nil {
			c = c.DeepCopy()
			for j := range c.Status.Images {
				c.Status.Images[j].ID = strings.Replace(c.Status.Images[j].ID, booted, "/versions/202611.03.0", 1)
			}
			snap.NodeClasses[i].AKS = c
		}
	}
	d, err := h.Decide(ctx, snap)
	if err != nil || len(d.Steps) != 1 || d.Steps[0].Step != drift.StepStart || !strings.HasPrefix(d.Steps[0].Why, "ImageDrift: image ") {
		t.Fatalf("want the node's replacement started for ImageDrift, got %v %v", d, err)
	}
}
