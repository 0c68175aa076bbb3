package provisioning

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
)

// BaselineInstanceType is the Cluster-Autoscaler-style static node group Dovetail's plans are
// compared with on AWS: m5.2xlarge (8 vCPU, 32 GiB), the general-purpose size EKS managed node
// group examples use.
const BaselineInstanceType = "m5.2xlarge"

// AzureBaselineInstanceType is the baseline on Azure: Standard_D8s_v5, the D-series size of
// the same shape.
const AzureBaselineInstanceType = "Standard_D8s_v5"

// Baseline is what a static node group of one instance type, on demand, pays for pods.
type Baseline struct {
	InstanceType string
	Nodes        int
	PricePerHour float64 // USD per hour
	// Unplaceable counts the pods that type cannot hold.
	Unplaceable int
}

// StaticBaseline packs pods onto a static group of BaselineInstanceType (the Azure one when the
// catalog has no m5.2xlarge) on-demand nodes beside in's existing nodes, bound pods and
// DaemonSets, with the same packer: the cost a Cluster-Autoscaler node group of that one shape
// would pay for them. The group carries the template labels of in's first NodePool (what a
// managed node group's template gives the workloads' selectors).
func StaticBaseline(in Input, pods []*corev1.Pod, cat *catalog.Catalog) (Baseline, error) {
	b := Baseline{InstanceType: BaselineInstanceType}
	if cat.Get(BaselineInstanceType) == nil {
		b.InstanceType = AzureBaselineInstanceType
	}
	np := &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "static-" + strings.ToLower(strings.ReplaceAll(b.InstanceType, "_", "-"))}}
	np.Spec.Template.Spec.Requirements = []apisv1.NodeSelectorRequirementWithMinValues{
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{b.InstanceType}}},
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{apisv1.CapacityTypeOnDemand}}},
	}
	if len(in.NodePools) > 0 {
		np.Spec.Template.ObjectMeta.Labels = in.NodePools[0].Spec.Template.ObjectMeta.Labels
	}
	static := Input{Catalog: cat, Nodes: in.Nodes, BoundPods: in.BoundPods, DaemonSets: in.DaemonSets,
		LimitRanges: in.LimitRanges, NodeSettings: in.NodeSettings, NodePools: []*apisv1.NodePool{np}, Pods: pods}
	plan, err := Solve(static)
	if err != nil {
		return b, err
	}
	b.Nodes, b.Unplaceable = len(plan.NodeClaims), len(plan.Unschedulable)
	b.PricePerHour = float64(b.Nodes) * cat.DearestPrice(b.InstanceType, "", apisv1.CapacityTypeOnDemand)
	return b, nil
}
