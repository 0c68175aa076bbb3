package v1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// AnnotationNodePoolHashVersion names the version of the NodePoolHash rule a NodeClaim's
// karpenter.sh/nodepool-hash was computed with. Drift compares hashes only when the versions
// agree, so changing the rule (a new hashed field) does not roll every node.
const AnnotationNodePoolHashVersion = "karpenter.sh/nodepool-hash-version"

// NodePoolHashVersion is the current version of the NodePoolHash rule.
const NodePoolHashVersion = "v1"

// NodePoolHash returns the hex SHA-256 (first 16 characters) of the NodePool template fields that
// shape a node once it is launched: template labels and annotations, taints, startup taints and
// the NodeClass reference. Left out, as in Karpenter's drift rules ("Disruption": behavioral
// fields and special cases): requirements (drift checks them against the node's labels instead,
// so widening them rolls nothing), resources, expireAfter and terminationGracePeriod, and the
// pool-level weight, limits and disruption settings. Taint order does not matter; map keys are
// sorted by encoding/json, so the hash is deterministic.
func NodePoolHash(np *NodePool) string {
	t := np.Spec.Template
	sortTaints := func(in []corev1.Taint) []corev1.Taint {
		out := append([]corev1.Taint(nil), in...)
		sort.Slice(out, func(i, j int) bool {
			a, b := out[i], out[j]
			if a.Key != b.Key {
				return a.Key < b.Key
			}
			if a.Value != b.Value {
				return a.Value < b.Value
			}
			return a.Effect < b.Effect
		})
		return out
	}
	shaped := struct {
		Labels        map[string]string   `json:"labels,omitempty"`
		Annotations   map[string]string   `json:"annotations,omitempty"`
		Taints        []corev1.Taint      `json:"taints,omitempty"`
		StartupTaints []corev1.Taint      `json:"startupTaints,omitempty"`
		NodeClassRef  *NodeClassReference `json:"nodeClassRef,omitempty"`
	}{t.ObjectMeta.Labels, t.ObjectMeta.Annotations, sortTaints(t.Spec.Taints), sortTaints(t.Spec.StartupTaints), t.Spec.NodeClassRef}
	b, _ := json.Marshal(shaped) // plain strings and structs: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// What a NodeClaim records at launch about its NodeClass, so drift can compare it with the
// NodeClass's current status later. The AMI goes in status.imageID (Karpenter's field).
const (
	// AnnotationSubnetID is the subnet the instance was launched in.
	AnnotationSubnetID = "dovetail.dev/subnet-id"
	// AnnotationSecurityGroupIDs is the sorted, comma-separated security group ids of the instance.
	AnnotationSecurityGroupIDs = "dovetail.dev/security-group-ids"
)
