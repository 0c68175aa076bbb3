package kube

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/manifests"
)

// The list calls run against client-go's dynamic fake (the real API server's answers, paging
// included, are checked by the e2e suite's TestPlanLiveCluster). A resource the cluster does
// not serve (404) is reported, not an error; what ListState returns, written by WriteList,
// reads back as a dump.
func TestListStateWritesAKubectlList(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop"},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	pool := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
		"metadata": map[string]any{"name": "default"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"requirements": []any{},
			"nodeClassRef": map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}}}
	kinds := map[schema.GroupVersionResource]string{}
	for gvr, k := range ListKinds {
		kinds[gvr] = k
	}
	for _, r := range StateResources {
		if r.GVR.Group == "" || r.GVR.Group == "apps" || r.GVR.Group == "policy" || r.GVR.Group == "storage.k8s.io" {
			kinds[r.GVR] = r.Kind + "List"
		}
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, kinds, node, pod, pool)
	// Created through its resource: the fake's constructor would file it under a guessed plural.
	discount := "-30%"
	overlay, err := ToUnstructured(&apisv1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: "m-discount"}, Spec: apisv1.NodeOverlaySpec{PriceAdjustment: &discount}},
		apisv1.NodeOverlayGroupVersion, apisv1.KindNodeOverlay)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Resource(NodeOverlayGVR).Create(context.Background(), overlay, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dc.PrependReactor("list", "aksnodeclasses", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "karpenter.azure.com", Resource: "aksnodeclasses"}, "")
	})
	list, notServed, err := ListState(context.Background(), dc, DumpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(notServed, ",") != "aksnodeclasses.karpenter.azure.com/v1beta1" {
		t.Errorf("not served: %v", notServed)
	}
	var kindsGot []string
	for _, it := range list.Items {
		kindsGot = append(kindsGot, it.GetAPIVersion()+" "+it.GetKind())
		if len(it.GetManagedFields()) != 0 {
			t.Errorf("%s %s keeps managedFields; kubectl drops them by default", it.GetKind(), it.GetName())
		}
	}
	if got := strings.Join(kindsGot, ", "); got != "v1 Node, v1 Pod, karpenter.sh/v1 NodePool, karpenter.sh/v1alpha1 NodeOverlay" {
		t.Errorf("items %s", got)
	}
	var b bytes.Buffer
	if err := WriteList(&b, list); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "apiVersion: v1\nitems:\n") || !strings.Contains(b.String(), "\nkind: List\n") {
		t.Errorf("not a kubectl List:\n%s", b.String())
	}
	set, err := manifests.LoadReader("dump.yaml", &b)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Nodes) != 1 || len(set.Pods) != 1 || len(set.NodePools) != 1 || len(set.NodeOverlays) != 1 || len(set.Warnings) != 0 {
		t.Errorf("read back %d nodes, %d pods, %d pools, %d overlays, warnings %v", len(set.Nodes), len(set.Pods), len(set.NodePools), len(set.NodeOverlays), set.Warnings)
	}

	dc.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", nil)
	})
	if _, _, err := ListState(context.Background(), dc, DumpOptions{}); err == nil || !strings.Contains(err.Error(), "listing pods") ||
		!strings.Contains(err.Error(), "plan-rbac.yaml") {
		t.Errorf("forbidden: %v, want it to name the resource and the ClusterRole", err)
	}
}
