// Package crd names Karpenter's own CustomResourceDefinitions, the schema of record of
// Dovetail's API: infra/crds holds karpenter.sh_nodepools.yaml, karpenter.sh_nodeclaims.yaml,
// karpenter.sh_nodeoverlays.yaml and karpenter.k8s.aws_ec2nodeclasses.yaml of
// aws/karpenter-provider-aws Release, unchanged
// (provenance, checksums and licence: infra/crds/KARPENTER.md), so a cluster migrating from
// Karpenter keeps the CRDs it has. Its tests prove parity: every field of those schemas is a
// field of Dovetail's Go types (shared/apis/v1), implemented or refused by a named condition, and
// every Go field is one of the schema's or listed as ahead of the release.
package crd

// Release is the Karpenter release whose CRDs Dovetail targets. (v1.15 needs Go 1.26.9; this
// machine's toolchain is 1.26.8.)
const Release = "v1.14.0"

// File is one upstream CRD file and the kind it defines.
type File struct {
	Name, Group, Kind string
	// SHA256 is the checksum of the file as released: the copy must stay unchanged.
	SHA256 string
	// Version is the one version the CRD serves and stores: "v1", or Karpenter's alpha
	// "v1alpha1" for NodeOverlay.
	Version string
}

// Files are the CRDs of Release Dovetail reads and writes.
var Files = []File{
	{"karpenter.sh_nodepools.yaml", "karpenter.sh", "NodePool", "3bb64a20c80776b77aa19a699ebdaf34480a7b2e7ec4ef890b43225b3517f878", "v1"},
	{"karpenter.sh_nodeclaims.yaml", "karpenter.sh", "NodeClaim", "96037dc241031fe0f7a09ddf78183d885ce6a1dfe115f7b3fbf8a12c564be694", "v1"},
	{"karpenter.k8s.aws_ec2nodeclasses.yaml", "karpenter.k8s.aws", "EC2NodeClass", "62dec59f01c0972d4503ca3ed25f243ba9c2f561be0d964ce7a14c8df406132f", "v1"},
	{"karpenter.sh_nodeoverlays.yaml", "karpenter.sh", "NodeOverlay", "6ff6199aff096cc87cd9508f8c5ae62c6d3452aa90c2828ee36380340f3ece62", "v1alpha1"},
}
