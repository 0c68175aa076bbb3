package kube

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// GroupVersionResources of the Karpenter CRDs, read and written through the dynamic client.
var (
	NodePoolGVR     = schema.GroupVersionResource{Group: apisv1.Group, Version: apisv1.Version, Resource: "nodepools"}
	NodeClaimGVR    = schema.GroupVersionResource{Group: apisv1.Group, Version: apisv1.Version, Resource: "nodeclaims"}
	EC2NodeClassGVR = schema.GroupVersionResource{Group: apisv1.AWSGroup, Version: apisv1.Version, Resource: "ec2nodeclasses"}
	// AKSNodeClassGVR is the Azure provider's NodeClass at its storage version (v1beta1).
	AKSNodeClassGVR = schema.GroupVersionResource{Group: apisv1.AzureGroup, Version: apisv1.AzureVersion, Resource: "aksnodeclasses"}
	// NodeOverlayGVR is Karpenter's NodeOverlay at the one version it serves (v1alpha1).
	NodeOverlayGVR = schema.GroupVersionResource{Group: apisv1.Group, Version: apisv1.NodeOverlayVersion, Resource: "nodeoverlays"}
	// ProvisioningRequestGVR is Cluster Autoscaler's ProvisioningRequest (autoscaling.x-k8s.io/v1).
	ProvisioningRequestGVR = schema.GroupVersionResource{Group: "autoscaling.x-k8s.io", Version: "v1", Resource: "provisioningrequests"}
)

// NodeClassGVR returns the resource of a NodeClass kind (EC2NodeClass when kind is ""). Error:
// a kind Dovetail does not serve.
func NodeClassGVR(kind string) (schema.GroupVersionResource, error) {
	switch kind {
	case "", apisv1.KindEC2NodeClass:
		return EC2NodeClassGVR, nil
	case apisv1.KindAKSNodeClass:
		return AKSNodeClassGVR, nil
	}
	return schema.GroupVersionResource{}, fmt.Errorf("nodeClass kind %q: want %s or %s", kind, apisv1.KindEC2NodeClass, apisv1.KindAKSNodeClass)
}

// ListKinds maps each CRD resource to its list kind; the dynamic fake client needs it.
var ListKinds = map[schema.GroupVersionResource]string{
	NodePoolGVR:     "NodePoolList",
	NodeClaimGVR:    "NodeClaimList",
	EC2NodeClassGVR: "EC2NodeClassList",
	AKSNodeClassGVR: "AKSNodeClassList",
	NodeOverlayGVR:  "NodeOverlayList",

	ProvisioningRequestGVR: "ProvisioningRequestList",
}

// Kinds tracked by the Watcher's revision map; ChangedSince takes one of these.
const (
	KindPod                 = "Pod"
	KindNode                = "Node"
	KindDaemonSet           = "DaemonSet"
	KindPodDisruptionBudget = "PodDisruptionBudget"
	KindNodePool            = "NodePool"
	KindNodeClaim           = "NodeClaim"
	KindNodeClass           = "NodeClass" // the watched NodeClass kind (EC2NodeClass or AKSNodeClass)
	KindConfigMap           = "ConfigMap"
	KindPVC                 = "PersistentVolumeClaim"
	KindPV                  = "PersistentVolume"
	KindStorageClass        = "StorageClass"
	KindLimitRange          = "LimitRange"
	KindVolumeAttachment    = "VolumeAttachment"
	KindNodeOverlay         = apisv1.KindNodeOverlay
	KindProvisioningRequest = "ProvisioningRequest"
	KindPodTemplate         = "PodTemplate"
	// KindCommitments is the commitments ConfigMap (apisv1.CommitmentsConfigMap), tracked apart
	// from the agent's own ConfigMap.
	KindCommitments = "Commitments"
)
