// Package v1beta1 reads Karpenter's karpenter.sh/v1beta1 NodePool and karpenter.k8s.aws/v1beta1
// EC2NodeClass manifests and converts them to the v1 types Dovetail works with, following
// Karpenter's own v1 conversion (see convert.go). Shapes follow pkg/apis/v1beta1 of
// kubernetes-sigs/karpenter (v0.33-v0.37) and aws/karpenter-provider-aws.
package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// API versions read by this package.
const (
	GroupVersion    = "karpenter.sh/v1beta1"
	AWSGroupVersion = "karpenter.k8s.aws/v1beta1"
)

// Consolidation policies of v1beta1 (the only two its CRD enum allows).
const (
	ConsolidationPolicyWhenEmpty         = "WhenEmpty"
	ConsolidationPolicyWhenUnderutilized = "WhenUnderutilized"
)

// NodePool is karpenter.sh/v1beta1 NodePool.
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodePoolSpec   `json:"spec"`
	Status            NodePoolStatus `json:"status,omitempty"`
}

// NodePoolSpec is the v1beta1 spec: expireAfter lives under disruption and kubelet under the
// template spec.
type NodePoolSpec struct {
	Template NodeClaimTemplate `json:"template"`
	// Disruption is nil when omitted; the v1beta1 CRD then defaults it to
	// {consolidationPolicy: WhenUnderutilized, expireAfter: 720h}.
	Disruption *Disruption         `json:"disruption,omitempty"`
	Limits     corev1.ResourceList `json:"limits,omitempty"`
	Weight     *int32              `json:"weight,omitempty"`
}

// Disruption is the v1beta1 disruption block.
type Disruption struct {
	// ConsolidateAfter is a duration or "Never"; required with WhenEmpty, forbidden with WhenUnderutilized.
	ConsolidateAfter *v1.NillableDuration `json:"consolidateAfter,omitempty"`
	// ConsolidationPolicy is WhenEmpty or WhenUnderutilized (default).
	ConsolidationPolicy string `json:"consolidationPolicy,omitempty"`
	// ExpireAfter is a duration or "Never" (default 720h); it moves to template.spec.expireAfter in v1.
	ExpireAfter *v1.NillableDuration `json:"expireAfter,omitempty"`
	// Budgets default to [{nodes: "10%"}].
	Budgets []Budget `json:"budgets,omitempty"`
}

// Budget is a v1beta1 disruption budget (no reasons in v1beta1).
type Budget struct {
	Nodes    string           `json:"nodes"`
	Schedule *string          `json:"schedule,omitempty"`
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// NodeClaimTemplate is the v1beta1 template.
type NodeClaimTemplate struct {
	ObjectMeta v1.ObjectMeta `json:"metadata,omitempty"`
	Spec       NodeClaimSpec `json:"spec"`
}

// NodeClaimSpec is the v1beta1 template spec.
type NodeClaimSpec struct {
	Taints        []corev1.Taint                            `json:"taints,omitempty"`
	StartupTaints []corev1.Taint                            `json:"startupTaints,omitempty"`
	Requirements  []v1.NodeSelectorRequirementWithMinValues `json:"requirements"`
	Resources     v1.ResourceRequirements                   `json:"resources,omitempty"`
	// Kubelet moved to EC2NodeClass.spec.kubelet in v1.
	Kubelet      *v1.KubeletConfiguration `json:"kubelet,omitempty"`
	NodeClassRef *NodeClassReference      `json:"nodeClassRef"`
}

// NodeClassReference is the v1beta1 reference: apiVersion instead of v1's group.
type NodeClassReference struct {
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name"`
	APIVersion string `json:"apiVersion,omitempty"`
}

// NodePoolStatus is the v1beta1 status.
type NodePoolStatus struct {
	Resources  corev1.ResourceList `json:"resources,omitempty"`
	Conditions []metav1.Condition  `json:"conditions,omitempty"`
}

// EC2NodeClass is karpenter.k8s.aws/v1beta1 EC2NodeClass.
type EC2NodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              EC2NodeClassSpec      `json:"spec"`
	Status            v1.EC2NodeClassStatus `json:"status,omitempty"`
}

// EC2NodeClassSpec is the v1beta1 spec: amiFamily is required and there are no aliases.
type EC2NodeClassSpec struct {
	SubnetSelectorTerms        []SubnetSelectorTerm        `json:"subnetSelectorTerms"`
	SecurityGroupSelectorTerms []SecurityGroupSelectorTerm `json:"securityGroupSelectorTerms"`
	AssociatePublicIPAddress   *bool                       `json:"associatePublicIPAddress,omitempty"`
	AMISelectorTerms           []AMISelectorTerm           `json:"amiSelectorTerms,omitempty"`
	// AMIFamily is AL2, AL2023, Bottlerocket, Ubuntu, Custom, Windows2019 or Windows2022.
	AMIFamily           *string                 `json:"amiFamily"`
	UserData            *string                 `json:"userData,omitempty"`
	Role                string                  `json:"role,omitempty"`
	InstanceProfile     *string                 `json:"instanceProfile,omitempty"`
	Tags                map[string]string       `json:"tags,omitempty"`
	BlockDeviceMappings []v1.BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`
	InstanceStorePolicy *string                 `json:"instanceStorePolicy,omitempty"`
	DetailedMonitoring  *bool                   `json:"detailedMonitoring,omitempty"`
	// MetadataOptions defaults (v1beta1 CRD) to hop limit 2, unlike v1's 1.
	MetadataOptions *v1.MetadataOptions `json:"metadataOptions,omitempty"`
	Context         *string             `json:"context,omitempty"`
}

// SubnetSelectorTerm selects subnets by id or tags.
type SubnetSelectorTerm struct {
	Tags map[string]string `json:"tags,omitempty"`
	ID   string            `json:"id,omitempty"`
}

// SecurityGroupSelectorTerm selects security groups by id, name or tags.
type SecurityGroupSelectorTerm struct {
	Tags map[string]string `json:"tags,omitempty"`
	ID   string            `json:"id,omitempty"`
	Name string            `json:"name,omitempty"`
}

// AMISelectorTerm selects AMIs by id, name/owner or tags.
type AMISelectorTerm struct {
	Tags  map[string]string `json:"tags,omitempty"`
	ID    string            `json:"id,omitempty"`
	Name  string            `json:"name,omitempty"`
	Owner string            `json:"owner,omitempty"`
}
