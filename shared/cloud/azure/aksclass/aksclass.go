// Package aksclass holds the AKSNodeClass rules of the Azure cloud that the neutral packages ask
// for through cloud.NodeClassRules: what a launch records on its NodeClaim and when a NodeClaim
// has drifted from its AKSNodeClass. The rules and their reasons are karpenter-provider-azure's
// (pkg/cloudprovider/drift.go, v1.14: static fields, Kubernetes version, kubelet identity, image,
// checked in that order for VM nodes). Pure: no SDK, no clock, no I/O; what the provider reads
// from the API server and ARM (the Node, the VM's image) travels in the snapshot and the
// NodeClaim.
package aksclass

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// Drift reasons, spelled as the provider's cloudprovider.DriftReason constants.
const (
	// DriftNodeClass: the AKSNodeClass spec changed (karpenter.azure.com/aksnodeclass-hash on the
	// NodeClaim differs from apisv1.AKSNodeClassHash of the class, same hash version).
	DriftNodeClass cloud.DriftReason = "NodeClassDrift"
	// DriftK8sVersion: the Node's kubelet version is not the class's status.kubernetesVersion
	// (the control plane was upgraded).
	DriftK8sVersion cloud.DriftReason = "K8sVersionDrift"
	// DriftKubeletIdentity: the Node's kubernetes.azure.com/kubelet-identity-client-id is not the
	// kubelet identity the provider is configured with.
	DriftKubeletIdentity cloud.DriftReason = "KubeletIdentityDrift"
	// DriftImage: the NodeClaim's status.imageID is not among the class's status.images (a new
	// node image version was published and resolved; the old one left the status).
	DriftImage cloud.DriftReason = "ImageDrift"
)

// Rules are the AKSNodeClass rules of one deployment.
type Rules struct {
	// KubeletIdentityClientID is the kubelet managed identity the provider gives nodes
	// (--aks-kubelet-identity-client-id); "" skips the kubelet identity check (nothing to
	// compare with, e.g. `dovetail plan` offline).
	KubeletIdentityClientID string
}

var _ cloud.NodeClassRules = Rules{}

// RecordLaunch records on the launched NodeClaim the class's hash and hash version (as the
// provider's Create annotates the NodeClaim) and status.imageID = the image the VM boots
// (inst.ImageID, read from its storageProfile.imageReference) when the class's images were
// resolved. A class of another kind records nothing.
func (Rules) RecordLaunch(nc *apisv1.NodeClaim, class apisv1.NodeClass, inst *cloud.Instance) {
	if class.AKS == nil {
		return
	}
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[apisv1.AnnotationAKSNodeClassHash] = apisv1.AKSNodeClassHash(class.AKS)
	nc.Annotations[apisv1.AnnotationAKSNodeClassHashVersion] = apisv1.AKSNodeClassHashVersion
	// A class launched before its images resolved boots the family's "latest" version, which
	// no resolved status lists: left unrecorded, it is not compared (else every such node would
	// drift as soon as the status resolves).
	if inst != nil && len(class.AKS.Status.Images) > 0 {
		nc.Status.ImageID = inst.ImageID
	}
}

// IsDrifted checks, in the provider's order, the static hash, the Kubernetes version, the
// kubelet identity and the image. Like the provider, the version and image checks wait for
// their status to be ready (KubernetesVersionReady, ImagesReady true), and the identity check
// passes a Node without the label. Unlike the provider, which returns an error for a NodeClaim
// without status.imageID and drifts a Node reporting no kubelet version, a value not known on
// either side is not compared (Dovetail's rule: drift needs two known values that differ).
// A class of another kind is not drifted.
func (r Rules) IsDrifted(nc *apisv1.NodeClaim, node *corev1.Node, nodeClass apisv1.NodeClass) cloud.Drift {
	class := nodeClass.AKS
	if class == nil || nc == nil {
		return cloud.Drift{}
	}
	if h, ok := nc.Annotations[apisv1.AnnotationAKSNodeClassHash]; ok && h != "" &&
		nc.Annotations[apisv1.AnnotationAKSNodeClassHashVersion] == apisv1.AKSNodeClassHashVersion {
		if want := apisv1.AKSNodeClassHash(class); h != want {
			return cloud.Drift{Kind: DriftNodeClass, Field: "AKSNodeClass spec (karpenter.azure.com/aksnodeclass-hash)",
				Detail: fmt.Sprintf("aksnodeclass-hash %s, AKSNodeClass %s now hashes to %s", h, class.Name, want)}
		}
	}
	// A Node being deleted is not checked (the provider's getNodeForDrift).
	if node != nil && node.DeletionTimestamp == nil {
		if d := r.nodeDrift(node, class); d.Kind != "" {
			return d
		}
	}
	if img := nc.Status.ImageID; img != "" && len(class.Status.Images) > 0 && ready(class, apisv1.ConditionImagesReady) {
		ids := make([]string, 0, len(class.Status.Images))
		for _, i := range class.Status.Images {
			if i.ID == img {
				return cloud.Drift{}
			}
			ids = append(ids, i.ID)
		}
		return cloud.Drift{Kind: DriftImage, Field: "NodeClaim status.imageID (against the AKSNodeClass's status.images)",
			Detail: fmt.Sprintf("image %s is not among AKSNodeClass %s's images [%s]", img, class.Name, strings.Join(ids, ", "))}
	}
	return cloud.Drift{}
}

// nodeDrift is the provider's Kubernetes version and kubelet identity checks on the Node.
func (r Rules) nodeDrift(node *corev1.Node, class *apisv1.AKSNodeClass) cloud.Drift {
	want := class.Status.KubernetesVersion
	got := strings.TrimPrefix(node.Status.NodeInfo.KubeletVersion, "v")
	if want != "" && got != "" && ready(class, apisv1.ConditionKubernetesVersionReady) && got != want {
		return cloud.Drift{Kind: DriftK8sVersion, Field: "Node status.nodeInfo.kubeletVersion (against the AKSNodeClass's status.kubernetesVersion)",
			Detail: fmt.Sprintf("node %s runs kubelet %s, AKSNodeClass %s now provisions %s", node.Name, got, class.Name, want)}
	}
	// Nodes launched before the label existed (provider < 1.4.0) carry none: not drifted.
	id := node.Labels[apisv1.AKSLabelKubeletIdentityClientID]
	if id != "" && r.KubeletIdentityClientID != "" && id != r.KubeletIdentityClientID {
		return cloud.Drift{Kind: DriftKubeletIdentity, Field: "Node label " + apisv1.AKSLabelKubeletIdentityClientID + " (against the provider's kubelet identity)",
			Detail: fmt.Sprintf("node %s has kubelet identity %s, the provider now gives %s", node.Name, id, r.KubeletIdentityClientID)}
	}
	return cloud.Drift{}
}

// ReservationExpiring is false: an Azure VM runs in no expiring reservation Dovetail launches into.
func (Rules) ReservationExpiring(*apisv1.NodeClaim, apisv1.NodeClass, time.Time) (time.Time, bool) {
	return time.Time{}, false
}

// ready reports whether the class's condition typ is True, as the provider's GetImages and
// GetKubernetesVersion require before drift reads the status.
func ready(class *apisv1.AKSNodeClass, typ string) bool {
	return meta.IsStatusConditionTrue(class.Status.Conditions, typ)
}
