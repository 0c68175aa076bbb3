package kube

import (
	"context"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/pager"
	sigsyaml "sigs.k8s.io/yaml"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// StateResource is one resource `dovetail plan --kubeconfig` lists.
type StateResource struct {
	GVR  schema.GroupVersionResource
	Kind string
	// Optional resources are CustomResourceDefinitions a cluster may not have (Karpenter's on a
	// Cluster-Autoscaler cluster, AKSNodeClass on EKS): not served means none.
	Optional bool
}

// StateResources are what `kubectl get nodes,pods,pdb,daemonsets,nodepools,ec2nodeclasses,
// aksnodeclasses,nodeclaims,nodeoverlays,limitranges,pvc,pv,storageclasses,provisioningrequests,
// podtemplates -A` lists, in that order: the
// cluster state `dovetail plan` reads. cmd/dovetail/plan-rbac.yaml grants exactly list on them
// (a test holds the two together).
var StateResources = []StateResource{
	{GVR: schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, Kind: "Node"},
	{GVR: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Kind: "Pod"},
	{GVR: schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}, Kind: "PodDisruptionBudget"},
	{GVR: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}, Kind: "DaemonSet"},
	{GVR: NodePoolGVR, Kind: "NodePool", Optional: true},
	{GVR: EC2NodeClassGVR, Kind: "EC2NodeClass", Optional: true},
	{GVR: AKSNodeClassGVR, Kind: "AKSNodeClass", Optional: true},
	{GVR: NodeClaimGVR, Kind: "NodeClaim", Optional: true},
	{GVR: NodeOverlayGVR, Kind: apisv1.KindNodeOverlay, Optional: true},
	{GVR: schema.GroupVersionResource{Version: "v1", Resource: "limitranges"}, Kind: "LimitRange"},
	{GVR: schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, Kind: "PersistentVolumeClaim"},
	{GVR: schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}, Kind: "PersistentVolume"},
	{GVR: schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}, Kind: "StorageClass"},
	{GVR: ProvisioningRequestGVR, Kind: KindProvisioningRequest, Optional: true},
	{GVR: schema.GroupVersionResource{Version: "v1", Resource: "podtemplates"}, Kind: KindPodTemplate},
}

// DumpPageSize is how many objects one list call asks for, as kubectl's --chunk-size default.
const DumpPageSize = 500

// DumpOptions tune ListState.
type DumpOptions struct {
	// ShowManagedFields keeps metadata.managedFields, as `kubectl get --show-managed-fields`;
	// without it they are dropped, as kubectl drops them by default.
	ShowManagedFields bool
}

// ListState lists every StateResources resource in all namespaces through the dynamic client,
// with list calls only (paged, DumpPageSize at a time, as kubectl does), and returns them as the
// v1 List `kubectl get ... -A -o yaml` prints: each item with its apiVersion and kind, in the
// resources' order and the server's order within each. notServed names the optional resources
// the cluster does not serve (their CRD is not installed). Errors name the resource: a 403 says
// which permission is missing (cmd/dovetail/plan-rbac.yaml grants them).
func ListState(ctx context.Context, dc dynamic.Interface, o DumpOptions) (list *unstructured.UnstructuredList, notServed []string, err error) {
	list = &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List",
		"metadata": map[string]any{"resourceVersion": ""}}}
	for _, r := range StateResources {
		items, err := listAll(ctx, dc.Resource(r.GVR))
		if r.Optional && apierrors.IsNotFound(err) {
			notServed = append(notServed, r.GVR.Resource+"."+groupOrCore(r.GVR.Group)+"/"+r.GVR.Version)
			continue
		}
		if err != nil {
			if apierrors.IsForbidden(err) {
				return nil, nil, fmt.Errorf("listing %s: %w (the ClusterRole in cmd/dovetail/plan-rbac.yaml grants list on every resource dovetail plan reads)", r.GVR.GroupResource(), err)
			}
			return nil, nil, fmt.Errorf("listing %s: %w", r.GVR.GroupResource(), err)
		}
		for _, it := range items {
			it.SetAPIVersion(r.GVR.GroupVersion().String())
			it.SetKind(r.Kind)
			if !o.ShowManagedFields {
				it.SetManagedFields(nil)
			}
			list.Items = append(list.Items, *it)
		}
	}
	return list, notServed, nil
}

func groupOrCore(g string) string {
	if g == "" {
		return "core"
	}
	return g
}

// listAll pages through one resource in all namespaces.
func listAll(ctx context.Context, ri dynamic.NamespaceableResourceInterface) ([]*unstructured.Unstructured, error) {
	p := pager.New(pager.SimplePageFunc(func(opts metav1.ListOptions) (runtime.Object, error) {
		return ri.List(ctx, opts)
	}))
	p.PageSize = DumpPageSize
	var out []*unstructured.Unstructured
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("unexpected list item type %T", obj)
		}
		out = append(out, u)
		return nil
	})
	return out, err
}

// WriteList writes the list as `kubectl get -o yaml` prints it (the JSON form converted to YAML
// by sigs.k8s.io/yaml, as kubectl's YAML printer does).
func WriteList(w io.Writer, list *unstructured.UnstructuredList) error {
	b, err := sigsyaml.Marshal(list.UnstructuredContent())
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// GetCommitments gets the commitments ConfigMap (apisv1.CommitmentsConfigMap) of namespace, as
// `kubectl get configmap -n NAMESPACE dovetail-commitments -o yaml` would, with its apiVersion
// and kind: the agent reads it from its own namespace. nil when there is none. A 403 names the
// Role in cmd/dovetail/plan-rbac.yaml that grants get on that one ConfigMap.
func GetCommitments(ctx context.Context, dc dynamic.Interface, namespace string, o DumpOptions) (*unstructured.Unstructured, error) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	u, err := dc.Resource(gvr).Namespace(namespace).Get(ctx, apisv1.CommitmentsConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("getting ConfigMap %s/%s: %w (the Role in cmd/dovetail/plan-rbac.yaml grants get on it)", namespace, apisv1.CommitmentsConfigMap, err)
	}
	if err != nil {
		return nil, fmt.Errorf("getting ConfigMap %s/%s: %w", namespace, apisv1.CommitmentsConfigMap, err)
	}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	if !o.ShowManagedFields {
		u.SetManagedFields(nil)
	}
	return u, nil
}
