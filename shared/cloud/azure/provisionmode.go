package azure

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure/customdata"
)

// The CustomScript VM extension that runs the provisioning command in bootstrappingclient mode,
// as the Azure Karpenter provider creates it for Linux (instance.go getCSExtension): its name,
// publisher, type and handler version; the command goes in protectedSettings.commandToExecute
// (it carries the bootstrap token: the extension encrypts protected settings and ARM never
// returns them).
const (
	CSEExtensionName    = "cse-agent-karpenter"
	CSEPublisher        = "Microsoft.Azure.Extensions"
	CSEType             = "CustomScript"
	CSETypeHandlerVer   = "2.0"
	cseCommandToExecute = "commandToExecute"
)

// nodeBootstrap is what one VM create boots with: its custom data, and in bootstrappingclient
// mode the provisioning command its CustomScript extension runs. Both modes build the contract
// first and check it as the local rendering does (labels the kubelet refuses, a malformed CA or
// token are refused before any call), so the two modes refuse the same requests.
func (p *Provider) nodeBootstrap(ctx context.Context, req cloud.LaunchRequest, nc *apisv1.AKSNodeClass, settings catalog.NodeSettings,
	o cloud.OfferingRef, it *catalog.InstanceType, subnet, image string) (customData, cse string, err error) {
	c, err := p.contract(req, nc, settings, o, it, subnet, image)
	if err != nil {
		return "", "", err
	}
	local, err := customdata.Render(c)
	if err != nil || p.o.ProvisionMode != ProvisionModeBootstrappingClient {
		return local, "", err
	}
	v, err := provisionValues(c, nc, it, subnet, image)
	if err != nil {
		return "", "", err
	}
	if err := v.Validate(); err != nil {
		return "", "", err
	}
	b, err := p.o.NodeBootstrapping.Get(ctx, v)
	if err != nil {
		return "", "", fmt.Errorf("asking AKS for the bootstrapping data of %s: %w", it.Name, err)
	}
	if len(b.CustomData) > customdata.MaxBase64Bytes {
		return "", "", fmt.Errorf("node bootstrapping: customData of %d characters exceeds Azure's %d", len(b.CustomData), customdata.MaxBase64Bytes)
	}
	return b.CustomData, b.CSE, nil
}

// provisionValues is the NodeBootstrapping request of one node: the agent pool profile AKS
// renders the contract from (the provider's ConstructProvisionValues: an empty name, as the
// provider sends, the size, OS type and SKU, the image's distro, the kubelet's labels and
// taints, the Kubernetes version, the subnet, mode User, architecture, max pods and, for an
// NVIDIA size, the GPU profile) and the size's vCPUs and GiB; nodeBootstrap has
// ProvisionValues.Validate check it before it is sent. What the profile Dovetail sends cannot carry (the AKSNodeClass's kubelet
// settings and sysctls) is refused, naming the field, rather than dropped.
func provisionValues(c customdata.Contract, nc *apisv1.AKSNodeClass, it *catalog.InstanceType, subnet, image string) (ProvisionValues, error) {
	if len(c.Sysctls) > 0 {
		return ProvisionValues{}, fmt.Errorf("%s %s: spec.linuxOSConfig.sysctls is not sent to AKS in provision mode %s", apisv1.KindAKSNodeClass, nc.Name, ProvisionModeBootstrappingClient)
	}
	k := c.Kubelet
	if k.CPUManagerPolicy != "" || k.TopologyManagerPolicy != "" || k.ContainerLogMaxSize != "" || len(k.AllowedUnsafeSysctls) > 0 ||
		k.ImageGCHigh != 0 || k.ImageGCLow != 0 || k.ContainerLogMaxFiles != 0 || k.PodMaxPids != 0 {
		return ProvisionValues{}, fmt.Errorf("%s %s: spec.kubelet is not sent to AKS in provision mode %s", apisv1.KindAKSNodeClass, nc.Name, ProvisionModeBootstrappingClient)
	}
	distro, ok := distros[definitionOf(image)]
	if !ok || it.Azure == nil {
		return ProvisionValues{}, fmt.Errorf("node bootstrapping: no AKS distro for image %q on %s", image, it.Name)
	}
	osSKU := int32(osSKUUbuntu)
	if apisv1.OSSKUForImageFamily(nc.ImageFamily()) == apisv1.OSSKUAzureLinux {
		osSKU = osSKUAzureLinux
	}
	arch := "x64"
	if c.Arch == "arm64" {
		arch = "Arm64"
	}
	taints := make([]string, 0, len(c.Taints))
	for _, t := range c.Taints {
		taints = append(taints, taintString(t))
	}
	sort.Strings(taints)
	var gpu *GPUProfile
	if it.Azure.NVIDIAGPU > 0 {
		// gpu.mode Driver is the only mode an AKSNodeClass passes validation with (honour.go):
		// the image installs the driver, as the provider's GPUDriverInstallationEnabled.
		gpu = &GPUProfile{DriverType: driverTypeCUDA, InstallGPUDriver: true}
		if convergedGPUDriverSizes[strings.ToLower(it.Name)] {
			gpu.DriverType = driverTypeGRID
		}
	}
	return ProvisionValues{
		ProvisionProfile: ProvisionProfile{Name: "", VMSize: it.Name, OSType: osTypeLinux, OSSKU: osSKU, StorageProfile: "ManagedDisks",
			Distro: distro, CustomNodeLabels: c.Labels, OrchestratorVersion: c.KubernetesVersion, VnetCidrs: []string{},
			VnetSubnetID: subnet, Mode: modeUserEnum, Architecture: arch, MaxPods: int32(k.MaxPods), NodeTaints: taints, GPUProfile: gpu},
		ProvisionHelperValues: ProvisionHelperValues{SKUCPU: float64(it.Azure.VCPU), SKUMemory: float64(it.Azure.MemoryMiB) / 1024},
	}, nil
}

// Enum values of the NodeBootstrapping swagger (provider provisionclients/models/enums.go).
const (
	osTypeLinux     = 2
	osSKUUbuntu     = 1
	osSKUAzureLinux = 7
	modeUserEnum    = 2
	driverTypeGRID  = 2
	driverTypeCUDA  = 3
)

// convergedGPUDriverSizes are the NVIDIA sizes whose driver is the converged (GRID) one, by
// lower-case name: the provider's pkg/utils/gpu.go ConvergedGPUDriverSizes (vanilla CUDA drivers
// fail to install on them).
var convergedGPUDriverSizes = map[string]bool{
	"standard_nv6ads_a10_v5": true, "standard_nv12ads_a10_v5": true, "standard_nv18ads_a10_v5": true,
	"standard_nv36ads_a10_v5": true, "standard_nv72ads_a10_v5": true, "standard_nv36adms_a10_v5": true,
	"standard_nc8ads_a10_v4": true, "standard_nc16ads_a10_v4": true, "standard_nc32ads_a10_v4": true,
}

// distros are AgentBaker's distro names of the AKS node image definitions (the provider's
// imagefamily Distro of each DefaultImages entry).
var distros = map[string]string{
	"2204gen2containerd": "aks-ubuntu-containerd-22.04-gen2", "2204containerd": "aks-ubuntu-containerd-22.04",
	"2204gen2arm64containerd": "aks-ubuntu-arm64-containerd-22.04-gen2",
	"2404gen2containerd":      "aks-ubuntu-containerd-24.04-gen2", "2404containerd": "aks-ubuntu-containerd-24.04",
	"2404gen2arm64containerd": "aks-ubuntu-arm64-containerd-24.04-gen2",
	"V3gen2":                  "aks-azurelinux-v3-gen2", "V3": "aks-azurelinux-v3", "V3gen2arm64": "aks-azurelinux-v3-arm64-gen2",
}

// definitionOf is the image definition of a community gallery image id ("" for another shape).
func definitionOf(id string) string {
	parts := strings.Split(strings.TrimPrefix(id, "/"), "/")
	if len(parts) != 6 {
		return ""
	}
	return parts[3]
}

// taintString is a taint as AKS node taints spell it: key=value:Effect.
func taintString(t corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// createCSE runs the provisioning command on the VM as the CustomScript extension, waiting for
// the operation (the provider creates it once the VM create has completed). Errors are ARM's.
func (p *Provider) createCSE(ctx context.Context, vm, cse string, tags map[string]*string) error {
	ext := armcompute.VirtualMachineExtension{
		Location: to.Ptr(p.o.Location), Tags: tags,
		Properties: &armcompute.VirtualMachineExtensionProperties{
			Publisher: to.Ptr(CSEPublisher), Type: to.Ptr(CSEType), TypeHandlerVersion: to.Ptr(CSETypeHandlerVer),
			AutoUpgradeMinorVersion: to.Ptr(true), Settings: map[string]any{},
			ProtectedSettings: map[string]any{cseCommandToExecute: cse},
		},
	}
	poller, err := p.exts.BeginCreateOrUpdate(ctx, p.o.ResourceGroup, vm, CSEExtensionName, ext, nil)
	if err != nil {
		return fmt.Errorf("creating extension %s on VM %s: %w", CSEExtensionName, vm, err)
	}
	if _, err := poller.PollUntilDone(ctx, p.poll()); err != nil {
		return fmt.Errorf("creating extension %s on VM %s: %w", CSEExtensionName, vm, err)
	}
	return nil
}
