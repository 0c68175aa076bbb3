package kube

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// GroupVersionResources of the Karpenter CRDs, read and written through the dynamic client.
var (
	NodePoolGVR     = schema.GroupVersionResource{Group: apisv1.Group, Version: apisv1.Version, Resource: "nodepools"}
	NodeClaimGVR    = schema.GroupVersionResource{Group: apisv1.Group, Version: apisv1.Version, Resource: "nodeclaims"}
	EC2NodeClassGVR = schema.GroupVersionResource{Group: apisv1.AWSGroup, Version: apisv1.Version, Resource: "ec2nodeclasses"}
)

// ListKinds maps each CRD resource to its list kind; the dynamic fake client needs it.
var ListKinds = map[schema.GroupVersionResource]string{
	NodePoolGVR:     "NodePoolList",
	NodeClaimGVR:    "NodeClaimList",
	EC2NodeClassGVR: "EC2NodeClassList",
}

// Kinds tracked by the Watcher's revision map; ChangedSince takes one of these.
const (
	KindPod                 = "Pod"
	KindNode                = "Node"
	KindDaemonSet           = "DaemonSet"
	KindPodDisruptionBudget = "PodDisruptionBudget"
	KindNodePool            = "NodePool"
	KindNodeClaim           = "NodeClaim"
	KindEC2NodeClass        = "EC2NodeClass"
	KindConfigMap           = "ConfigMap"
	KindPVC                 = "PersistentVolumeClaim"
	KindPV                  = "PersistentVolume"
	KindStorageClass        = "StorageClass"
	KindLimitRange          = "LimitRange"
)
