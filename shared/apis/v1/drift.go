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

// Static drift of an EC2NodeClass (Karpenter's "NodeClassDrift"): the NodeClaim records the hash
// of its class's static fields at launch; a different hash now means the class changed in a way
// that only a new node picks up (user data, kubelet, block devices, metadata options, tags, role,
// instance profile...).
const (
	AnnotationEC2NodeClassHash        = "karpenter.k8s.aws/ec2nodeclass-hash"
	AnnotationEC2NodeClassHashVersion = "karpenter.k8s.aws/ec2nodeclass-hash-version"
	// EC2NodeClassHashVersion is the version of Dovetail's EC2NodeClassHash rule. It differs from
	// Karpenter's own versions ("v5"), so NodeClaims Karpenter launched are not compared with a
	// hash computed by another rule (no drift is inferred from a rule change).
	EC2NodeClassHashVersion = "dovetail-v1"
)

// EC2NodeClassHash is the hash of an EC2NodeClass's static fields: 16 hex digits of SHA-256 of
// its spec with the fields Karpenter leaves out of its hash removed (subnet, security group,
// capacity reservation and AMI selector terms and ipPrefixCount: they drift through the resolved
// status instead), spec.amiFamily replaced by the resolved family (so writing "AL2023" next to
// an al2023 alias changes nothing), and list order ignored where the field is a set (block
// device mappings by device name, cluster DNS).
func EC2NodeClassHash(nc *EC2NodeClass) string {
	s := nc.Spec.DeepCopy()
	s.SubnetSelectorTerms, s.SecurityGroupSelectorTerms, s.CapacityReservationSelectorTerms, s.AMISelectorTerms = nil, nil, nil, nil
	s.IPPrefixCount = nil
	family := nc.AMIFamily()
	s.AMIFamily = &family
	sort.SliceStable(s.BlockDeviceMappings, func(i, j int) bool {
		a, b := s.BlockDeviceMappings[i].DeviceName, s.BlockDeviceMappings[j].DeviceName
		return a != nil && (b == nil || *a < *b)
	})
	if s.Kubelet != nil {
		sort.Strings(s.Kubelet.ClusterDNS)
	}
	b, _ := json.Marshal(s) // plain fields, sorted map keys: deterministic
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// AKSNodeClassHashVersion is the version of Dovetail's AKSNodeClassHash rule, written beside the
// hash as karpenter.azure.com/aksnodeclass-hash-version. The provider's own rule (hashstructure
// over the whole spec, version "v3" in karpenter-provider-azure pkg/apis/v1beta1/aksnodeclass.go)
// yields other digits, so a different version keeps NodeClaims the provider launched from being
// compared with a hash of another rule (no drift is inferred from a rule change), as for EC2.
const AKSNodeClassHashVersion = "dovetail-v1"

// AKSNodeClassHash is the hash of an AKSNodeClass's spec, which the provider hashes whole
// (karpenter-provider-azure AKSNodeClass.Hash: every spec field, slices as sets): 16 hex digits
// of SHA-256 of the spec's JSON with the sets put in order (kubelet allowedUnsafeSysctls, the
// local DNS overrides by zone; tags are a map, which JSON writes in key order). A change of any
// spec field (image family, OS disk, kubelet, sysctls, tags, ...) changes it: such a change
// reaches only new nodes, so older ones drift (the provider's NodeClassDrift).
func AKSNodeClassHash(nc *AKSNodeClass) string {
	s := nc.Spec.DeepCopy()
	if s.Kubelet != nil {
		sort.Strings(s.Kubelet.AllowedUnsafeSysctls)
	}
	if s.LocalDNS != nil {
		for _, o := range [][]AKSLocalDNSZoneOverride{s.LocalDNS.VnetDNSOverrides, s.LocalDNS.KubeDNSOverrides} {
			sort.SliceStable(o, func(i, j int) bool { return o[i].Zone < o[j].Zone })
		}
	}
	b, _ := json.Marshal(s) // plain fields, sorted map keys: deterministic
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}
