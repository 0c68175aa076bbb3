package cloud

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dovetail-dev/dovetail/shared/catalog"
)

// Well-known node labels the kubelet and the cloud provider set on every node (k8s.io/api/core/v1
// well_known_labels.go). The beta and failure-domain forms are deprecated but still written by the
// kubelet, and old selectors still use them.
const (
	LabelHostname            = "kubernetes.io/hostname"
	LabelArch                = "kubernetes.io/arch"
	LabelOS                  = "kubernetes.io/os"
	LabelInstanceType        = "node.kubernetes.io/instance-type"
	LabelZone                = "topology.kubernetes.io/zone"
	LabelRegion              = "topology.kubernetes.io/region"
	LabelArchBeta            = "beta.kubernetes.io/arch"
	LabelOSBeta              = "beta.kubernetes.io/os"
	LabelInstanceTypeBeta    = "beta.kubernetes.io/instance-type"
	LabelZoneFailureDomain   = "failure-domain.beta.kubernetes.io/zone"
	LabelRegionFailureDomain = "failure-domain.beta.kubernetes.io/region"
)

// PrivateDNSName is the EC2 "IP name" hostname of a private IPv4 address: ip-10-0-32-4.ec2.internal
// in us-east-1, ip-10-0-32-4.<region>.compute.internal elsewhere (EC2 User Guide, "EC2 instance
// hostname types"). On EKS the node name is this name.
func PrivateDNSName(ip netip.Addr, region string) string {
	host := "ip-" + strings.ReplaceAll(ip.String(), ".", "-")
	if region == "us-east-1" {
		return host + ".ec2.internal"
	}
	return host + "." + region + ".compute.internal"
}

// NodeSpec is what a booting instance's kubelet knows besides its instance type and instance.
type NodeSpec struct {
	// Name is the node name; on EKS the instance's private DNS name (see PrivateDNSName). Required.
	Name string
	// InternalIP is the private IPv4 address; optional, reported as an InternalIP address.
	InternalIP string
	// Region is the instance's region (us-east-1). Required.
	Region string
	// Labels are the labels the kubelet registers with (--node-labels): the NodePool template's
	// labels and the NodeClaim's single-valued requirements, including karpenter.sh/nodepool.
	Labels map[string]string
	// Taints are the taints the kubelet registers with (--register-with-taints): the NodeClaim's
	// taints and startup taints.
	Taints []corev1.Taint
	// Settings are the NodeClass settings that change capacity and allocatable (AMI family,
	// kubelet maxPods / reservations / eviction, root volume size); see NodeSettingsFor. nil means
	// the catalog's defaults (AL2023, default kubelet, 20Gi root volume).
	Settings *catalog.NodeSettings
	// KubeletVersion is reported in status.nodeInfo ("v1.37.2"). Optional.
	KubeletVersion string
	// OSImage is reported in status.nodeInfo ("Amazon Linux 2023", "Bottlerocket OS"). Optional.
	OSImage string
	// Now is the heartbeat and transition time of the node conditions.
	Now time.Time
}

// NodeFor builds the Node object a kubelet on EKS registers for inst, an instance of type it:
// name and addresses, labels (spec.Labels — what the user data gives the kubelet — then the facts
// the kubelet and the AWS cloud provider set: kubernetes.io/hostname, os and arch,
// node.kubernetes.io/instance-type, topology.kubernetes.io/zone and region, with their beta
// forms; nothing else, so the catalog's and Karpenter's labels come only from registration),
// spec.providerID and taints, status capacity and allocatable from the catalog, the
// Ready/pressure conditions of a healthy kubelet, and nodeInfo. Facts of the instance win over
// spec.Labels when they disagree. It returns an error naming the field for an invalid name, label
// or taint, or when it does not match inst.
func NodeFor(it *catalog.InstanceType, inst Instance, spec NodeSpec) (*corev1.Node, error) {
	if it == nil {
		return nil, errors.New("instanceType: nil")
	}
	if inst.InstanceType != it.Name {
		return nil, fmt.Errorf("instance.instanceType: %q does not match catalog type %q", inst.InstanceType, it.Name)
	}
	if inst.ProviderID == "" {
		return nil, errors.New("instance.providerID: required")
	}
	if errs := validation.IsDNS1123Subdomain(spec.Name); len(errs) > 0 {
		return nil, fmt.Errorf("name: %q: %s", spec.Name, strings.Join(errs, "; "))
	}
	if spec.Region == "" {
		return nil, errors.New("region: required")
	}

	// Only what the kubelet is given (spec.Labels, from the user data) and what the kubelet and
	// the cloud provider set themselves: no catalog label, no capacity type. The rest of a
	// NodeClaim's labels arrive through registration (shared/lifecycle).
	labels := map[string]string{}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	arch, os := it.Labels[LabelArch], it.Labels[LabelOS]
	if os == "" {
		os = "linux"
	}
	facts := map[string]string{
		LabelHostname:            spec.Name,
		LabelInstanceType:        it.Name,
		LabelInstanceTypeBeta:    it.Name,
		LabelZone:                inst.Zone,
		LabelZoneFailureDomain:   inst.Zone,
		LabelRegion:              spec.Region,
		LabelRegionFailureDomain: spec.Region,
		LabelOS:                  os,
		LabelOSBeta:              os,
	}
	if arch != "" {
		facts[LabelArch] = arch
		facts[LabelArchBeta] = arch
	}
	// A Windows kubelet also labels its node with the OS build it runs
	// (node.kubernetes.io/windows-build, set by the kubelet on Windows since Kubernetes 1.17);
	// the type carries it when a Windows AMI family offers it (catalog ForAMIFamily).
	if b := it.Labels[corev1.LabelWindowsBuild]; os == string(corev1.Windows) && b != "" {
		facts[corev1.LabelWindowsBuild] = b
	}
	for k, v := range facts {
		labels[k] = v
	}
	if err := validateLabels(labels); err != nil {
		return nil, err
	}
	for i, t := range spec.Taints {
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			return nil, fmt.Errorf("taints[%d].key: %q: %s", i, t.Key, strings.Join(errs, "; "))
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("taints[%d].effect: %q is not NoSchedule, PreferNoSchedule or NoExecute", i, t.Effect)
		}
	}

	// The same computation the solver packs against, so the node offers what was planned.
	capacity, allocatable := it.Capacity.DeepCopy(), it.Allocatable()
	if spec.Settings != nil {
		c, a := it.ResourcesWith(*spec.Settings)
		capacity, allocatable = c.List(), a.List()
	}

	now := metav1.NewTime(spec.Now)
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	addresses := []corev1.NodeAddress{}
	if spec.InternalIP != "" {
		addresses = append(addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: spec.InternalIP})
	}
	addresses = append(addresses,
		corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: spec.Name},
		corev1.NodeAddress{Type: corev1.NodeHostName, Address: spec.Name})

	node := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Labels: labels},
		Spec: corev1.NodeSpec{
			ProviderID: inst.ProviderID,
			Taints:     append([]corev1.Taint(nil), spec.Taints...),
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			// Reasons and messages are the ones the kubelet writes for a healthy node.
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
			},
			Addresses: addresses,
			NodeInfo: corev1.NodeSystemInfo{
				Architecture:    arch,
				OperatingSystem: os,
				KubeletVersion:  spec.KubeletVersion,
				OSImage:         spec.OSImage,
			},
		},
	}
	return node, nil
}

// validateLabels checks every key and value against the Kubernetes label syntax, in key order
// so the error is deterministic.
func validateLabels(labels map[string]string) error {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("labels[%q]: invalid key: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(labels[k]); len(errs) > 0 {
			return fmt.Errorf("labels[%q]: invalid value %q: %s", k, labels[k], strings.Join(errs, "; "))
		}
	}
	return nil
}
