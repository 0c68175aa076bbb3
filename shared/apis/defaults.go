package apis

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Karpenter v1 defaults. Sources: kubebuilder default markers in kubernetes-sigs/karpenter
// pkg/apis/v1/nodepool.go and nodeclaim.go (disruption {consolidateAfter: 0s},
// consolidationPolicy WhenEmptyOrUnderutilized, budgets [{nodes: "10%"}], expireAfter 720h) and
// aws/karpenter-provider-aws pkg/apis/v1/ec2nodeclass.go (metadataOptions {httpEndpoint: enabled,
// httpProtocolIPv6: disabled, httpPutResponseHopLimit: 1, httpTokens: required}).
const (
	DefaultConsolidationPolicy     = v1.ConsolidationPolicyWhenEmptyOrUnderutilized
	DefaultConsolidateAfter        = "0s"
	DefaultBudgetNodes             = "10%"
	DefaultExpireAfter             = "720h"
	DefaultHTTPEndpoint            = "enabled"
	DefaultHTTPProtocolIPv6        = "disabled"
	DefaultHTTPPutResponseHopLimit = int64(1)
	DefaultHTTPTokens              = "required"
	DefaultNodeClassKind           = KindEC2NodeClass
)

// SetDefaults fills Karpenter's v1 defaults into a NodePool in place: consolidationPolicy
// WhenEmptyOrUnderutilized, consolidateAfter 0s, budgets [{nodes: "10%"}] (and "10%" for a budget
// without nodes), template.spec.expireAfter 720h, nodeClassRef group karpenter.k8s.aws and kind
// EC2NodeClass when empty. Weight stays unset (an unset weight orders as 0). Idempotent; nil is a no-op.
func SetDefaults(np *v1.NodePool) {
	if np == nil {
		return
	}
	d := &np.Spec.Disruption
	if d.ConsolidationPolicy == "" {
		d.ConsolidationPolicy = DefaultConsolidationPolicy
	}
	if d.ConsolidateAfter == nil || !d.ConsolidateAfter.IsSet() {
		c := v1.MustParseNillableDuration(DefaultConsolidateAfter)
		d.ConsolidateAfter = &c
	}
	if d.Budgets == nil {
		d.Budgets = []v1.Budget{{Nodes: DefaultBudgetNodes}}
	}
	for i := range d.Budgets {
		if d.Budgets[i].Nodes == "" {
			d.Budgets[i].Nodes = DefaultBudgetNodes
		}
	}
	setNodeClaimSpecDefaults(&np.Spec.Template.Spec)
}

// SetNodeClaimDefaults fills a NodeClaim's expireAfter (720h) and nodeClassRef group/kind.
func SetNodeClaimDefaults(nc *v1.NodeClaim) {
	if nc == nil {
		return
	}
	setNodeClaimSpecDefaults(&nc.Spec)
}

func setNodeClaimSpecDefaults(s *v1.NodeClaimSpec) {
	if !s.ExpireAfter.IsSet() {
		s.ExpireAfter = v1.MustParseNillableDuration(DefaultExpireAfter)
	}
	if r := s.NodeClassRef; r != nil {
		if r.Group == "" {
			r.Group = v1.AWSGroup
		}
		if r.Kind == "" {
			r.Kind = DefaultNodeClassKind
		}
	}
}

// SetEC2NodeClassDefaults fills an EC2NodeClass in place: each unset metadataOptions field
// (httpEndpoint enabled, httpProtocolIPv6 disabled, hop limit 1, httpTokens required) and, when
// spec.blockDeviceMappings is empty, the AMI family's default volumes (DefaultBlockDeviceMappings).
// Karpenter applies the volume defaults at launch rather than in the object; Dovetail writes them
// in so every consumer (allocatable ephemeral-storage, the fleet call) sees the same volumes.
func SetEC2NodeClassDefaults(nc *v1.EC2NodeClass) {
	if nc == nil {
		return
	}
	if nc.Spec.MetadataOptions == nil {
		nc.Spec.MetadataOptions = &v1.MetadataOptions{}
	}
	m := nc.Spec.MetadataOptions
	setPtr(&m.HTTPEndpoint, DefaultHTTPEndpoint)
	setPtr(&m.HTTPProtocolIPv6, DefaultHTTPProtocolIPv6)
	setPtr(&m.HTTPPutResponseHopLimit, DefaultHTTPPutResponseHopLimit)
	setPtr(&m.HTTPTokens, DefaultHTTPTokens)
	if len(nc.Spec.BlockDeviceMappings) == 0 {
		nc.Spec.BlockDeviceMappings = DefaultBlockDeviceMappings(nc.AMIFamily())
	}
}

// DefaultBlockDeviceMappings returns the EBS volumes Karpenter gives an AMI family when
// spec.blockDeviceMappings is empty (Karpenter docs, concepts/nodeclasses,
// "spec.blockDeviceMappings"): AL2 and AL2023 one 20Gi gp3 encrypted root volume on /dev/xvda;
// Bottlerocket a 4Gi gp3 encrypted OS volume on /dev/xvda and a 20Gi gp3 encrypted data volume on
// /dev/xvdb; Windows2019/2022 one 50Gi gp3 encrypted volume on /dev/sda1; Custom none (nil).
func DefaultBlockDeviceMappings(family string) []v1.BlockDeviceMapping {
	vol := func(dev, size string) v1.BlockDeviceMapping {
		q := resource.MustParse(size)
		return v1.BlockDeviceMapping{DeviceName: ptrTo(dev), EBS: &v1.BlockDevice{
			Encrypted: ptrTo(true), VolumeSize: &q, VolumeType: ptrTo("gp3"),
		}}
	}
	switch family {
	case v1.AMIFamilyAL2, v1.AMIFamilyAL2023:
		return []v1.BlockDeviceMapping{vol("/dev/xvda", "20Gi")}
	case v1.AMIFamilyBottlerocket:
		return []v1.BlockDeviceMapping{vol("/dev/xvda", "4Gi"), vol("/dev/xvdb", "20Gi")}
	case v1.AMIFamilyWindows2019, v1.AMIFamilyWindows2022, v1.AMIFamilyWindows2025:
		return []v1.BlockDeviceMapping{vol("/dev/sda1", "50Gi")}
	}
	return nil
}

// Kubelet returns the kubelet settings a node of this NodePool and EC2NodeClass gets: the
// NodePool's compatibility.karpenter.sh/v1beta1-kubelet-conversion annotation (written when a
// v1beta1 NodePool is converted) takes precedence over EC2NodeClass.spec.kubelet, as in Karpenter's
// v1 migration guide. Either argument may be nil; the result may be nil. The error names the
// annotation when its JSON is not a kubelet configuration.
func Kubelet(np *v1.NodePool, nc *v1.EC2NodeClass) (*v1.KubeletConfiguration, error) {
	if np != nil {
		if s, ok := np.Annotations[v1.AnnotationKubeletCompatibility]; ok && s != "" {
			k := &v1.KubeletConfiguration{}
			if err := json.Unmarshal([]byte(s), k); err != nil {
				return nil, fmt.Errorf("metadata.annotations[%s]: %w", v1.AnnotationKubeletCompatibility, err)
			}
			return k, nil
		}
	}
	if nc != nil {
		return nc.Spec.Kubelet.DeepCopy(), nil
	}
	return nil, nil
}

func setPtr[T any](p **T, v T) {
	if *p == nil {
		*p = &v
	}
}

func ptrTo[T any](v T) *T { return &v }
