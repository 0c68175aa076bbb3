package kube

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// TestWatcherSnapshotsAKSNodeClasses: an agent on AKS (NodeClassKind AKSNodeClass) watches
// karpenter.azure.com/v1beta1 aksnodeclasses and carries them in its snapshots; the
// EC2NodeClass in the same cluster is not watched.
func TestWatcherSnapshotsAKSNodeClasses(t *testing.T) {
	family := apisv1.ImageFamilyAzureLinux
	aks, err := ToUnstructured(&apisv1.AKSNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "azl"}, Spec: apisv1.AKSNodeClassSpec{ImageFamily: &family}},
		apisv1.AzureGroupVersion, apisv1.KindAKSNodeClass)
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), ListKinds, aks, nodeClassObj(t, "ec2"), nodePoolObj(t, "default"))
	clk := testingclock.NewFakeClock(t0)
	w, err := NewWatcher(fake.NewClientset(), dyn, WatcherOptions{Namespace: testNamespace, Clock: clk, SyncTimeout: 10 * time.Second, NodeClassKind: apisv1.KindAKSNodeClass})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); w.Shutdown() })
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	snap, err := NewSnapshotBuilder(w, "test", clk).Build()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.NodeClasses) != 1 || snap.NodeClasses[0].AKS == nil || snap.NodeClasses[0].Name() != "azl" || snap.NodeClasses[0].AKS.ImageFamily() != family {
		t.Fatalf("snapshot NodeClasses %+v, want the one AKSNodeClass", snap.NodeClasses)
	}
	if _, err := NewWatcher(fake.NewClientset(), dyn, WatcherOptions{Namespace: testNamespace, NodeClassKind: "GCENodeClass"}); err == nil {
		t.Error("an unknown NodeClass kind was accepted")
	}
}
