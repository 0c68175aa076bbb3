package v1

// Well-known Azure labels, their values and the Azure annotations. Source: the constants of
// Azure/karpenter-provider-azure pkg/apis/v1beta1/labels.go (commit
// 00ae11268ef84e134ea41d7701262d2d246decd4, the commit of the previous copy of infra/crds'
// karpenter.azure.com_aksnodeclasses.yaml); the Go names follow the provider's. The
// karpenter.azure.com labels describe the VM size (SKU) and are set on nodes and offered as
// NodePool requirements; the kubernetes.azure.com ones are those AKS itself writes.
const (
	LabelSKUName    = AzureGroup + "/sku-name"    // Standard_D4pls_v6
	LabelSKUFamily  = AzureGroup + "/sku-family"  // D
	LabelSKUSeries  = AzureGroup + "/sku-series"  // Dpls_v6
	LabelSKUVersion = AzureGroup + "/sku-version" // the number after "v" (6); 1 when the name has none

	LabelSKUCPU    = AzureGroup + "/sku-cpu"    // vCPUs
	LabelSKUMemory = AzureGroup + "/sku-memory" // memory, from the SKU's MemoryGB capability

	// LabelSKUAcceleratedNetworking is "true" or "false".
	LabelSKUAcceleratedNetworking = AzureGroup + "/sku-networking-accelerated"
	// LabelSKUStoragePremiumCapable is "true" or "false" (premium SSD support).
	LabelSKUStoragePremiumCapable = AzureGroup + "/sku-storage-premium-capable"
	// LabelSKUStorageEphemeralOSMaxSize is the largest ephemeral OS disk the size supports (the
	// larger of its cache disk and its resource disk).
	LabelSKUStorageEphemeralOSMaxSize = AzureGroup + "/sku-storage-ephemeralos-maxsize"

	LabelSKUGPUName         = AzureGroup + "/sku-gpu-name"         // the accelerator parsed from the size name (A100, T4...)
	LabelSKUGPUManufacturer = AzureGroup + "/sku-gpu-manufacturer" // ManufacturerNvidia or ManufacturerAMD
	LabelSKUGPUCount        = AzureGroup + "/sku-gpu-count"        // GPUs per VM

	// LabelPlacementScope is PlacementScopeZonal or PlacementScopeRegional.
	LabelPlacementScope = AzureGroup + "/placement-scope"

	// LabelSKUHyperVGeneration is "1" or "2"; restricted (users may not set it on a NodePool).
	LabelSKUHyperVGeneration = AzureGroup + "/sku-hyperv-generation"

	// AKSLabelDomain is the label domain AKS writes.
	AKSLabelDomain = "kubernetes.azure.com"

	AKSLabelCPU                     = AKSLabelDomain + "/sku-cpu"    // same value as LabelSKUCPU
	AKSLabelMemory                  = AKSLabelDomain + "/sku-memory" // same value as LabelSKUMemory
	AKSLabelCluster                 = AKSLabelDomain + "/cluster"
	AKSLabelKubeletIdentityClientID = AKSLabelDomain + "/kubelet-identity-client-id"
	AKSLabelMode                    = AKSLabelDomain + "/mode"             // ModeSystem or ModeUser
	AKSLabelScaleSetPriority        = AKSLabelDomain + "/scalesetpriority" // ScaleSetPrioritySpot or ScaleSetPriorityRegular
	AKSLabelPriority                = AKSLabelDomain + "/priority"         // PrioritySpot or PriorityRegular
	AKSLabelOSSKU                   = AKSLabelDomain + "/os-sku"           // OSSKUUbuntu, OSSKUAzureLinux, OSSKUWindows2022, OSSKUWindows2025
	AKSLabelFIPSEnabled             = AKSLabelDomain + "/fips_enabled"     // "true" or absent
	AKSLabelOSSKUEffective          = AKSLabelDomain + "/os-sku-effective" // Ubuntu2204, Ubuntu2404, AzureLinux2, AzureLinux3
	AKSLabelOSSKURequested          = AKSLabelDomain + "/os-sku-requested" // the imageFamily asked for

	// Legacy AKS labels outside kubernetes.azure.com; restricted.
	AKSLabelLegacyAgentPool      = "agentpool"
	AKSLabelLegacyStorageProfile = "storageprofile"
	AKSLabelLegacyStorageTier    = "storagetier"
	AKSLabelLegacyAccelerator    = "accelerator"

	// Annotations the provider writes on NodeClaims.
	AnnotationAKSNodeClassHash        = AzureGroup + "/aksnodeclass-hash"
	AnnotationAKSNodeClassHashVersion = AzureGroup + "/aksnodeclass-hash-version"
	AnnotationAKSMachineResourceID    = AzureGroup + "/aks-machine-resource-id"

	// TerminationFinalizerAzure is the provider's NodeClass termination finalizer.
	TerminationFinalizerAzure = AzureGroup + "/termination"
)

// Values of the labels above.
const (
	HyperVGenerationV1     = "1"
	HyperVGenerationV2     = "2"
	ManufacturerNvidia     = "nvidia"
	ManufacturerAMD        = "amd"
	PlacementScopeZonal    = "zonal"
	PlacementScopeRegional = "regional"

	ModeUser   = "user"
	ModeSystem = "system"

	ScaleSetPriorityRegular = "regular" // written by the provider only, to ease scheduling
	ScaleSetPrioritySpot    = "spot"
	PriorityRegular         = "regular"
	PrioritySpot            = "spot"

	OSSKUUbuntu      = "Ubuntu"
	OSSKUAzureLinux  = "AzureLinux"
	OSSKUWindows2022 = "Windows2022"
	OSSKUWindows2025 = "Windows2025"
)

// AzureWellKnownLabels are the labels the provider adds to Karpenter's well-known labels: keys a
// NodePool may require and that every Azure instance type defines (provider AzureWellKnownLabels).
var AzureWellKnownLabels = []string{
	LabelSKUName, LabelSKUFamily, LabelSKUSeries, LabelSKUVersion,
	LabelSKUCPU, LabelSKUMemory, AKSLabelCPU, AKSLabelMemory,
	LabelSKUAcceleratedNetworking,
	LabelSKUStoragePremiumCapable, LabelSKUStorageEphemeralOSMaxSize,
	LabelSKUGPUName, LabelSKUGPUManufacturer, LabelSKUGPUCount,
	LabelPlacementScope,
	AKSLabelCluster, AKSLabelMode, AKSLabelScaleSetPriority, AKSLabelPriority, AKSLabelOSSKU, AKSLabelFIPSEnabled,
}

// AzureRestrictedLabelDomains are label domains a NodePool may not set labels in, except the
// well-known labels (provider RestrictedLabelDomains). kubernetes.azure.com is not one: users may
// set some labels there.
var AzureRestrictedLabelDomains = []string{AzureGroup}

// AzureRestrictedLabels are labels a NodePool may not set (provider RestrictedLabels).
var AzureRestrictedLabels = []string{
	LabelSKUHyperVGeneration,
	AKSLabelLegacyAgentPool, AKSLabelLegacyStorageProfile, AKSLabelLegacyStorageTier, AKSLabelLegacyAccelerator,
	AKSLabelDomain + "/accelerator",
	AKSLabelDomain + "/agentpool",
	AKSLabelDomain + "/agentpool-family",
	AKSLabelDomain + "/availability-zone",
	AKSLabelDomain + "/network-policy",
	AKSLabelDomain + "/storageprofile",
	AKSLabelDomain + "/storagetier",
}
