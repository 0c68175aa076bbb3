package fake

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// This file is what the fake's Azure face (shared/cloud/fake/azureapi) needs: Azure has no fleet
// call, so the face decides the VM (its name, size, zone and priority come from the request) and
// the fake only runs it: capacity, boot, Node registration, preemption and deletion.

// VMLaunch is one Azure VM to run.
type VMLaunch struct {
	// Name is the VM name, also its computer name and so the Node name (lower case on AKS).
	Name string
	// ProviderID is azure:///subscriptions/…/virtualMachines/<name>.
	ProviderID string
	// Offering is the size, zone (<region>-<n>) and capacity type asked for.
	Offering cloud.OfferingRef
	// Tags are the VM's tags as the caller reports them (Dovetail's keys).
	Tags map[string]string
	// Labels and Taints are what the kubelet is given (read from the custom data).
	Labels map[string]string
	Taints []corev1.Taint
	// Settings change the node's capacity (maxPods, OS disk size).
	Settings catalog.NodeSettings
	// OSImage is reported in nodeInfo.osImage ("Ubuntu 22.04.5 LTS").
	OSImage string
	// JoinError, when set, is why the node image's provisioning cannot start a kubelet that
	// joins (a missing bootstrap variable, a malformed CA or token, a label the kubelet refuses):
	// the VM runs and no Node ever registers, as on Azure.
	JoinError string
	// AwaitsProvisioning: the custom data only prepares the node image (AgentBaker's
	// cloud-config in bootstrappingclient mode); the kubelet is configured and started by the
	// provisioning command, delivered later by ProvisionVM. Labels, Taints, Settings and
	// JoinError are then ProvisionVM's.
	AwaitsProvisioning bool
}

// CapacityError is a launch the fake refused for capacity, with the code its rules gave.
type CapacityError struct{ Code string }

func (e *CapacityError) Error() string { return "capacity: " + e.Code }

// LaunchVM runs a VM as Azure would once its create call is accepted: an offering the catalog
// does not sell or marks unavailable, or one an InjectICE rule matches, is refused with a
// *CapacityError (code SkuNotAvailable, or the rule's); a name already running returns that VM.
// The VM boots after BootDelay and registers its Node like an EC2 instance does.
func (c *Cloud) LaunchVM(l VMLaunch) (cloud.Instance, error) {
	it := c.catalog.Get(l.Offering.InstanceType)
	if it == nil {
		return cloud.Instance{}, &CapacityError{Code: "SkuNotAvailable"}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.CreateCalls++
	if inst, ok := c.instances[l.Name]; ok && inst.State != cloud.StateTerminated {
		c.stats.IdempotentReplays++
		return inst.snapshot(), nil
	}
	off, ok := findOffering(it, l.Offering.Zone, l.Offering.CapacityType)
	if !ok || !off.Available {
		c.stats.ICEs++
		return cloud.Instance{}, &CapacityError{Code: "SkuNotAvailable"}
	}
	if code, iced := c.iceCode(l.Offering); iced {
		c.stats.ICEs++
		c.stats.ICEErrors++
		return cloud.Instance{}, &CapacityError{Code: code}
	}
	ip, ok := c.allocateIP(l.Offering.Zone)
	if !ok {
		return cloud.Instance{}, &CapacityError{Code: "SubnetIsFull"}
	}
	now := c.clock.Now()
	ref := l.Offering
	ref.PricePerHour = off.PricePerHour
	inst := &instance{
		Instance: cloud.Instance{ID: l.Name, ProviderID: l.ProviderID, InstanceType: ref.InstanceType, Zone: ref.Zone,
			CapacityType: ref.CapacityType, PricePerHour: ref.PricePerHour, State: cloud.StatePending, LaunchTime: now, Tags: copyMap(l.Tags)},
		nodeName: strings.ToLower(l.Name), privateIP: ip, labels: copyMap(l.Labels), taints: append([]corev1.Taint(nil), l.Taints...),
		settings: l.Settings, osImage: l.OSImage, bootAt: now.Add(c.bootDelay), neverJoins: c.bootFails(ref) || l.JoinError != "",
		awaitsProvisioning: l.AwaitsProvisioning,
	}
	if l.JoinError != "" {
		c.logger.Warn("fake azure VM: its node image cannot bootstrap a kubelet; no Node will register", "vm", l.Name, "reason", l.JoinError)
	}
	c.instances[l.Name] = inst
	c.stats.Launches++
	return inst.snapshot(), nil
}

// VMProvisioning is what a VM's provisioning command gives its kubelet (VMLaunch's fields of
// the same names).
type VMProvisioning struct {
	Labels    map[string]string
	Taints    []corev1.Taint
	Settings  catalog.NodeSettings
	JoinError string
}

// ProvisionVM runs the provisioning command of a VM launched with AwaitsProvisioning: its Node
// registers from p once the VM has booted, or never when p.JoinError is set. Errors: no such
// running VM, or one that is not waiting (a command run twice changes nothing on a node that
// has joined, so the fake refuses to pretend it does).
func (c *Cloud) ProvisionVM(name string, p VMProvisioning) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	inst, ok := c.instances[name]
	switch {
	case !ok || inst.State == cloud.StateTerminated || inst.State == cloud.StateShuttingDown:
		return fmt.Errorf("VM %s: %w", name, cloud.ErrNotFound)
	case !inst.awaitsProvisioning:
		return fmt.Errorf("VM %s has already been provisioned", name)
	}
	inst.labels, inst.taints, inst.settings = copyMap(p.Labels), append([]corev1.Taint(nil), p.Taints...), p.Settings
	inst.awaitsProvisioning = false
	if p.JoinError != "" {
		inst.neverJoins = true
		c.logger.Warn("fake azure VM: its provisioning command cannot bootstrap a kubelet; no Node will register", "vm", name, "reason", p.JoinError)
	}
	return nil
}

// lookupAzure finds a VM by its providerID (ARM ids compare case-insensitively). Called with
// c.mu held.
func (c *Cloud) lookupAzure(providerID string) (*instance, error) {
	name := providerID[strings.LastIndex(providerID, "/")+1:]
	if inst, ok := c.instances[name]; ok && strings.EqualFold(inst.ProviderID, providerID) {
		return inst, nil
	}
	return nil, fmt.Errorf("%s: %w", providerID, cloud.ErrNotFound)
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
