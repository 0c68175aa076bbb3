package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EC2NodeClass is karpenter.k8s.aws/v1 EC2NodeClass: how an AWS node is launched (AMI, subnets,
// security groups, user data, kubelet settings, block devices, metadata options).
// +kubebuilder:object:root=true
type EC2NodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              EC2NodeClassSpec   `json:"spec"`
	Status            EC2NodeClassStatus `json:"status,omitempty"`
}

// EC2NodeClassSpec mirrors the karpenter.k8s.aws/v1 spec.
type EC2NodeClassSpec struct {
	SubnetSelectorTerms              []SubnetSelectorTerm              `json:"subnetSelectorTerms"`
	SecurityGroupSelectorTerms       []SecurityGroupSelectorTerm       `json:"securityGroupSelectorTerms"`
	CapacityReservationSelectorTerms []CapacityReservationSelectorTerm `json:"capacityReservationSelectorTerms,omitempty"`
	AssociatePublicIPAddress         *bool                             `json:"associatePublicIPAddress,omitempty"`
	// IPPrefixCount is the number of IPv4 prefixes assigned to the primary network interface (>= 0).
	IPPrefixCount    *int32            `json:"ipPrefixCount,omitempty"`
	AMISelectorTerms []AMISelectorTerm `json:"amiSelectorTerms,omitempty"`
	// AMIFamily is AL2, AL2023, Bottlerocket, Windows2019, Windows2022 or Custom; implied by an alias.
	AMIFamily           *string               `json:"amiFamily,omitempty"`
	UserData            *string               `json:"userData,omitempty"`
	Role                string                `json:"role,omitempty"`
	InstanceProfile     *string               `json:"instanceProfile,omitempty"`
	Tags                map[string]string     `json:"tags,omitempty"`
	Kubelet             *KubeletConfiguration `json:"kubelet,omitempty"`
	BlockDeviceMappings []BlockDeviceMapping  `json:"blockDeviceMappings,omitempty"`
	InstanceStorePolicy *string               `json:"instanceStorePolicy,omitempty"`
	DetailedMonitoring  *bool                 `json:"detailedMonitoring,omitempty"`
	MetadataOptions     *MetadataOptions      `json:"metadataOptions,omitempty"`
	Context             *string               `json:"context,omitempty"`
	// EnclaveOptions turns on AWS Nitro Enclaves.
	EnclaveOptions *EnclaveOptions `json:"enclaveOptions,omitempty"`
	// PlacementGroupSelector names the one placement group every instance of the class launches
	// into (see placementgroup.go).
	PlacementGroupSelector *PlacementGroupSelector `json:"placementGroupSelector,omitempty"`
	// The fields below are decoded so manifests that set them load, and refused by
	// ValidationSucceeded=False (UnsupportedEC2NodeClassFields): Dovetail does not launch with
	// them yet.
	NetworkInterfaces  []NetworkInterface  `json:"networkInterfaces,omitempty"`
	ConnectionTracking *ConnectionTracking `json:"connectionTracking,omitempty"`
	CPUOptions         *CPUOptions         `json:"cpuOptions,omitempty"`
}

// PlacementGroupSelector selects one placement group by id or name.
type PlacementGroupSelector struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

// NetworkInterface is one network interface of the launch (EFA multi-card setups).
type NetworkInterface struct {
	NetworkCardIndex int32 `json:"networkCardIndex"`
	DeviceIndex      int32 `json:"deviceIndex"`
	// InterfaceType is "interface" or "efa-only".
	InterfaceType string `json:"interfaceType"`
}

// ConnectionTracking are the primary interface's connection tracking timeouts, in seconds.
type ConnectionTracking struct {
	TCPEstablishedTimeout *int32 `json:"tcpEstablishedTimeout,omitempty"`
	UDPStreamTimeout      *int32 `json:"udpStreamTimeout,omitempty"`
	UDPTimeout            *int32 `json:"udpTimeout,omitempty"`
}

// CPUOptions are the instance's CPU options.
type CPUOptions struct {
	// NestedVirtualization is "enabled" or "disabled".
	NestedVirtualization *string `json:"nestedVirtualization,omitempty"`
}

// EnclaveOptions says whether instances are enabled for AWS Nitro Enclaves.
type EnclaveOptions struct {
	Enabled *bool `json:"enabled,omitempty"`
}

// SubnetSelectorTerm selects subnets by id or tags.
type SubnetSelectorTerm struct {
	Tags map[string]string `json:"tags,omitempty"`
	ID   string            `json:"id,omitempty"`
	// CIDR selects subnets by their IPv4 CIDR block.
	CIDR string `json:"cidr,omitempty"`
}

// SecurityGroupSelectorTerm selects security groups by id, name or tags.
type SecurityGroupSelectorTerm struct {
	Tags map[string]string `json:"tags,omitempty"`
	ID   string            `json:"id,omitempty"`
	Name string            `json:"name,omitempty"`
}

// CapacityReservationSelectorTerm selects ODCRs by id, owner or tags.
type CapacityReservationSelectorTerm struct {
	Tags    map[string]string `json:"tags,omitempty"`
	ID      string            `json:"id,omitempty"`
	OwnerID string            `json:"ownerID,omitempty"`
	// InstanceMatchCriteria is "open" or "targeted".
	InstanceMatchCriteria string `json:"instanceMatchCriteria,omitempty"`
}

// AMISelectorTerm selects AMIs: an alias ("al2023@latest", "bottlerocket@v1.20.0"), an id, a
// name/owner pair, tags, or an SSM parameter.
type AMISelectorTerm struct {
	Alias        string            `json:"alias,omitempty"`
	Tags         map[string]string `json:"tags,omitempty"`
	ID           string            `json:"id,omitempty"`
	Name         string            `json:"name,omitempty"`
	Owner        string            `json:"owner,omitempty"`
	SSMParameter string            `json:"ssmParameter,omitempty"`
}

// KubeletConfiguration is the subset of kubelet settings Karpenter exposes; they change allocatable.
type KubeletConfiguration struct {
	ClusterDNS                  []string                   `json:"clusterDNS,omitempty"`
	MaxPods                     *int32                     `json:"maxPods,omitempty"`
	PodsPerCore                 *int32                     `json:"podsPerCore,omitempty"`
	SystemReserved              map[string]string          `json:"systemReserved,omitempty"`
	KubeReserved                map[string]string          `json:"kubeReserved,omitempty"`
	EvictionHard                map[string]string          `json:"evictionHard,omitempty"`
	EvictionSoft                map[string]string          `json:"evictionSoft,omitempty"`
	EvictionSoftGracePeriod     map[string]metav1.Duration `json:"evictionSoftGracePeriod,omitempty"`
	EvictionMaxPodGracePeriod   *int32                     `json:"evictionMaxPodGracePeriod,omitempty"`
	ImageGCHighThresholdPercent *int32                     `json:"imageGCHighThresholdPercent,omitempty"`
	ImageGCLowThresholdPercent  *int32                     `json:"imageGCLowThresholdPercent,omitempty"`
	CPUCFSQuota                 *bool                      `json:"cpuCFSQuota,omitempty"`
}

// BlockDeviceMapping is one EBS volume of the launch template.
type BlockDeviceMapping struct {
	DeviceName *string      `json:"deviceName,omitempty"`
	EBS        *BlockDevice `json:"ebs,omitempty"`
	RootVolume bool         `json:"rootVolume,omitempty"`
}

// BlockDevice is an EBS volume's settings.
type BlockDevice struct {
	DeleteOnTermination *bool   `json:"deleteOnTermination,omitempty"`
	Encrypted           *bool   `json:"encrypted,omitempty"`
	IOPS                *int64  `json:"iops,omitempty"`
	KMSKeyID            *string `json:"kmsKeyID,omitempty"`
	SnapshotID          *string `json:"snapshotID,omitempty"`
	Throughput          *int64  `json:"throughput,omitempty"`
	// VolumeInitializationRate is the snapshot download rate in MiB/s (100-300); needs SnapshotID.
	VolumeInitializationRate *int32             `json:"volumeInitializationRate,omitempty"`
	VolumeSize               *resource.Quantity `json:"volumeSize,omitempty"`
	VolumeType               *string            `json:"volumeType,omitempty"`
}

// MetadataOptions are the instance metadata service settings (IMDSv2 required, hop limit 1 by default).
type MetadataOptions struct {
	HTTPEndpoint            *string `json:"httpEndpoint,omitempty"`
	HTTPProtocolIPv6        *string `json:"httpProtocolIPv6,omitempty"`
	HTTPPutResponseHopLimit *int64  `json:"httpPutResponseHopLimit,omitempty"`
	HTTPTokens              *string `json:"httpTokens,omitempty"`
}

// EC2NodeClassStatus holds what the AWS provider resolved (subnets, security groups, AMIs).
type EC2NodeClassStatus struct {
	Subnets         []Subnet           `json:"subnets,omitempty"`
	SecurityGroups  []SecurityGroup    `json:"securityGroups,omitempty"`
	AMIs            []AMI              `json:"amis,omitempty"`
	InstanceProfile string             `json:"instanceProfile,omitempty"`
	Conditions      []metav1.Condition `json:"conditions,omitempty"`
	// CapacityReservations are the resolved on-demand capacity reservations.
	CapacityReservations []CapacityReservation `json:"capacityReservations,omitempty"`
}

// CapacityReservation is a resolved on-demand capacity reservation (ODCR or capacity block).
type CapacityReservation struct {
	AvailabilityZone      string       `json:"availabilityZone"`
	EndTime               *metav1.Time `json:"endTime,omitempty"`
	ID                    string       `json:"id"`
	InstanceMatchCriteria string       `json:"instanceMatchCriteria"`
	InstanceType          string       `json:"instanceType"`
	OwnerID               string       `json:"ownerID"`
	// ReservationType is "default" or "capacity-block".
	ReservationType string `json:"reservationType,omitempty"`
	// State is "active" or "expiring".
	State string `json:"state,omitempty"`
	// Interruptible reports a capacity reservation that may be interrupted.
	Interruptible *bool `json:"interruptible,omitempty"`
}

// LabelTopologyZoneID is the well-known label of an EC2 node's zone ID ("use1-az1"), the
// account-independent name of its Availability Zone (Karpenter's AWS provider
// pkg/apis/v1/labels.go LabelTopologyZoneID; its value comes from the subnet's
// AvailabilityZoneId, DescribeSubnets).
const LabelTopologyZoneID = "topology.k8s.aws/zone-id"

// Subnet is a resolved subnet.
type Subnet struct {
	ID     string `json:"id"`
	Zone   string `json:"zone"`
	ZoneID string `json:"zoneID,omitempty"`
}

// SecurityGroup is a resolved security group.
type SecurityGroup struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// AMI is a resolved image with the requirements (arch, GPU) it serves.
type AMI struct {
	ID           string                           `json:"id"`
	Name         string                           `json:"name,omitempty"`
	Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
	// Deprecated reports an AMI that EC2 marks deprecated.
	Deprecated bool `json:"deprecated,omitempty"`
}

// EC2NodeClassList is a list of EC2NodeClasses.
// +kubebuilder:object:root=true
type EC2NodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EC2NodeClass `json:"items"`
}
