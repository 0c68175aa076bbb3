package ec2class

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// recordPlacement labels a NodeClaim launched into a placement group with the group's id
// (karpenter.k8s.aws/placement-group-id) and, once EC2 reports it, its partition
// (karpenter.k8s.aws/placement-group-partition), as Karpenter's instanceToNodeClaim and its
// placement group registration hook do (pkg/cloudprovider/cloudprovider.go,
// registrationhooks/placementgrouphook.go: the partition comes from DescribeInstances
// Placement.PartitionNumber). Registration copies NodeClaim labels onto the Node.
func recordPlacement(nc *apisv1.NodeClaim, inst *cloud.Instance) {
	if inst == nil || inst.PlacementGroupID == "" {
		return
	}
	if nc.Labels == nil {
		nc.Labels = map[string]string{}
	}
	nc.Labels[apisv1.LabelPlacementGroupID] = inst.PlacementGroupID
	if inst.PlacementPartition > 0 {
		nc.Labels[apisv1.LabelPlacementGroupPartition] = strconv.Itoa(int(inst.PlacementPartition))
	}
}

// placementGroupDrift is Karpenter's isPlacementGroupDrifted (pkg/cloudprovider/drift.go): the
// NodeClaim's placement-group-id label must equal the id the class resolves to ("" for none).
// Dovetail knows that id without a call only when the class selects none (a labelled NodeClaim
// drifted) or selects by id (a label with another id, or none once PlacementGroupReady is True,
// drifted). A class that selects by name records no resolved id anywhere (the CRD's status has
// no field for it), so such a NodeClaim is compared by the static hash alone, which changes
// whenever the selector does.
func placementGroupDrift(nc *apisv1.NodeClaim, class *apisv1.EC2NodeClass) cloud.Drift {
	have := nc.Labels[apisv1.LabelPlacementGroupID]
	sel := class.Spec.PlacementGroupSelector
	var want string
	switch {
	case sel == nil:
	case sel.ID != "" && meta.IsStatusConditionTrue(class.Status.Conditions, apisv1.ConditionPlacementGroupReady):
		want = sel.ID
	default:
		return cloud.Drift{}
	}
	if have == want {
		return cloud.Drift{}
	}
	detail := fmt.Sprintf("NodeClaim in placement group %q, EC2NodeClass %s selects %q", have, class.Name, want)
	return cloud.Drift{Kind: DriftPlacementGroup, Field: "NodeClaim label " + apisv1.LabelPlacementGroupID + " (against spec.placementGroupSelector)", Detail: detail}
}
