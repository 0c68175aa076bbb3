package v1

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Placement groups of an EC2NodeClass (spec.placementGroupSelector), as karpenter-provider-aws
// v1.14 names them (pkg/apis/v1/ec2nodeclass_status.go, labels.go and
// pkg/controllers/nodeclass/placementgroup.go).
const (
	// ConditionPlacementGroupReady says spec.placementGroupSelector resolved to an available
	// placement group (DescribePlacementGroups); True when the class selects none. Karpenter
	// keeps the resolved group in memory, not in the status, so the condition is all the CRD
	// records of it.
	ConditionPlacementGroupReady = "PlacementGroupReady"
	// ReasonPlacementGroupNotFound: no available placement group has the selector's name or id.
	ReasonPlacementGroupNotFound = "PlacementGroupNotFound"

	// LabelPlacementGroupID is the id ("pg-0123456789abcdef0") of the placement group an instance
	// launched into, on its NodeClaim and Node.
	LabelPlacementGroupID = "karpenter.k8s.aws/placement-group-id"
	// LabelPlacementGroupPartition is the partition number ("1".."7") of an instance in a
	// partition placement group, as EC2 reports it (DescribeInstances Placement.PartitionNumber).
	LabelPlacementGroupPartition = "karpenter.k8s.aws/placement-group-partition"
)

// Placement group strategies (EC2 PlacementStrategy: cluster, partition, spread).
const (
	PlacementStrategyCluster   = "cluster"
	PlacementStrategyPartition = "partition"
	PlacementStrategySpread    = "spread"
)

// PlacementGroup is a resolved placement group.
type PlacementGroup struct {
	ID   string
	Name string
	// Strategy is PlacementStrategyCluster, PlacementStrategyPartition or PlacementStrategySpread.
	Strategy string
	// PartitionCount is the number of partitions of a partition group (1..7), 0 otherwise.
	PartitionCount int32
	// SpreadLevel is "rack" or "host" for a spread group, "" otherwise.
	SpreadLevel string
}

// CapacityScope is the scope of the NodeClass's launches for unavailable-offering marks: for an
// EC2NodeClass with a placement group selector, "pg-<id digits>" for an id selector and
// "pgname-" and 16 hex digits of SHA-256 of the name for a name selector (names are any ASCII;
// the scope must be a ConfigMap-key-safe token), "" otherwise. Capacity errors of a launch into
// a placement group are marked in its scope, so other NodeClasses still use the offering, as
// Karpenter scopes them by placement group.
func (n NodeClass) CapacityScope() string {
	if n.EC2 == nil || n.EC2.Spec.PlacementGroupSelector == nil {
		return ""
	}
	sel := n.EC2.Spec.PlacementGroupSelector
	if sel.ID != "" {
		return sel.ID
	}
	sum := sha256.Sum256([]byte(sel.Name))
	return "pgname-" + hex.EncodeToString(sum[:8])
}

// Describe names the selector as a user wrote it: `name "ml"` or `id "pg-0abc"`.
func (s PlacementGroupSelector) Describe() string {
	if s.ID != "" {
		return fmt.Sprintf("id %q", s.ID)
	}
	return fmt.Sprintf("name %q", s.Name)
}
