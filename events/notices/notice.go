// Package notices decodes the cloud notices the interruption function receives — AWS EventBridge
// events (EC2 spot interruption, rebalance recommendation, instance state change, capacity
// reservation interruption, AWS Health scheduled change; bare or inside an SQS ReceiveMessage
// response) and Azure notices (IMDS Scheduled Events documents, Event Grid HealthResources
// events in CloudEvents or Event Grid schema) — into one Notice type.
//
// Every error wraps events.ErrMalformed and names the field that is missing, malformed or not a
// notice Dovetail handles, so a handler dead-letters the message with that reason instead of
// dropping it (DESIGN invariant 6).
package notices

import (
	"fmt"
	"strings"
	"time"

	"github.com/dovetail-dev/dovetail/events"
)

// Kind is what a notice means for the nodes it names.
type Kind string

// Notice kinds.
const (
	// KindSpotInterruption: EC2 reclaims a spot instance at Deadline (2 minutes after Time).
	KindSpotInterruption Kind = "SpotInterruption"
	// KindRebalance: EC2 says a spot instance is at elevated risk of interruption; nothing is
	// reclaimed yet and there is no deadline.
	KindRebalance Kind = "Rebalance"
	// KindStateChange: the instance entered State (pending, running, stopping, stopped,
	// shutting-down, terminated; for Azure, deallocating).
	KindStateChange Kind = "StateChange"
	// KindScheduledChange: AWS Health scheduled maintenance or retirement starting at Deadline,
	// or an Azure Scheduled Event Reboot/Redeploy/Freeze not before Deadline.
	KindScheduledChange Kind = "ScheduledChange"
	// KindCapacityReservationInterruption: EC2 reclaims an instance of an interruptible
	// capacity reservation at Deadline (2 minutes after Time).
	KindCapacityReservationInterruption Kind = "CapacityReservationInterruption"
	// KindPreemption: Azure evicts a Spot VM (Scheduled Events Preempt: not before Deadline, at
	// least 30 s after the document appears; Event Grid VirtualMachinePreempted: already done).
	KindPreemption Kind = "Preemption"
	// KindTermination: Azure deletes the VM (Scheduled Events Terminate, user or platform).
	KindTermination Kind = "Termination"
	// KindAvailabilityChange: Azure Resource Health availability changed (State is the new
	// availabilityState: Available, Unavailable, Degraded, Unknown). Informational.
	KindAvailabilityChange Kind = "AvailabilityChange"
)

// Clouds a notice comes from.
const (
	CloudAWS   = "aws"
	CloudAzure = "azure"
)

// SpotInterruptionWarning is the notice EC2 gives before it reclaims a spot instance: two
// minutes (EC2 User Guide, "Spot Instance interruption notices"). Interruptible capacity
// reservations give the same two minutes (EC2 User Guide, "Monitor interruptible Capacity
// Reservations with EventBridge and CloudTrail").
const SpotInterruptionWarning = 2 * time.Minute

// Notice is one cloud notice about one or more instances.
type Notice struct {
	Kind  Kind   `json:"kind"`
	Cloud string `json:"cloud"`
	// ID is the cloud's event id (EventBridge id, Event Grid id, Scheduled Events EventId).
	ID string `json:"id"`
	// Type is the cloud's own name of the notice: the EventBridge detail-type, the AWS Health
	// eventTypeCode, the Event Grid event type, or the Scheduled Events EventType.
	Type string `json:"type"`
	// Time is when the cloud issued the notice.
	Time time.Time `json:"time"`
	// Deadline is when the cloud acts on the instance (zero when it does not or it is unknown):
	// Time+2 min for a spot or capacity-reservation interruption (or the event's
	// instance-termination-time), AWS Health startTime, Scheduled Events NotBefore.
	Deadline time.Time `json:"deadline,omitzero"`
	// InstanceIDs are EC2 instance ids ("i-…") or Azure VM names (Scheduled Events "Resources",
	// e.g. "aks-nodepool1-12345678-vmss_3"), in the order the notice lists them.
	InstanceIDs []string `json:"instanceIDs,omitempty"`
	// ResourceIDs are Azure resource ids ("/subscriptions/…/virtualMachines/…") when the notice
	// gives them (Event Grid). A node's providerID is "azure://" + resource id.
	ResourceIDs []string `json:"resourceIDs,omitempty"`
	// Zone is the availability zone when the notice names it (NTH-style ARN), else "".
	Zone   string `json:"zone,omitempty"`
	Region string `json:"region,omitempty"`
	// State is the new instance state (KindStateChange), the new availability state
	// (KindAvailabilityChange) or the Scheduled Events EventStatus (Scheduled, Started).
	State string `json:"state,omitempty"`
	// Action is what EC2 does at the deadline (terminate, stop, hibernate) for interruptions,
	// or the Scheduled Events EventType (Preempt, Terminate, Reboot, Redeploy, Freeze).
	Action string `json:"action,omitempty"`
	// Description is the cloud's human text, when it gives one.
	Description string `json:"description,omitempty"`
}

// Names returns the instance ids and resource ids the notice names, for matching nodes.
func (n *Notice) Names() []string {
	return append(append([]string(nil), n.InstanceIDs...), n.ResourceIDs...)
}

// maxReasonBytes bounds an error's reason: a value echoed in it is cut, so a hostile notice
// cannot make every log line and dead-letter reason as large as itself.
const maxReasonBytes = 512

// malformed builds an error naming the field, wrapping events.ErrMalformed.
func malformed(field, format string, args ...any) error {
	reason := fmt.Sprintf(format, args...)
	if len(reason) > maxReasonBytes {
		reason = strings.ToValidUTF8(reason[:maxReasonBytes], "") + "..."
	}
	if len(field) > 128 {
		field = field[:128] + "..."
	}
	return fmt.Errorf("%w: notice: %s: %s", events.ErrMalformed, field, reason)
}

// MatchesProviderID reports whether the notice names the instance behind a node's providerID:
//   - AWS "aws:///<zone>/<instance id>": an InstanceIDs entry equals the instance id (EC2
//     instance ids are unique across accounts and regions);
//   - Azure "azure:///subscriptions/…/virtualMachines/<name>" or
//     "…/virtualMachineScaleSets/<set>/virtualMachines/<n>": a ResourceIDs entry equals the
//     resource id, case-insensitively (Azure docs, "Naming rules and restrictions for Azure
//     resources": resource and resource group names are case-insensitive; subscription ids are
//     GUIDs, and ARM itself returns "resourceGroups" in either case). Never by VM name alone: a
//     VM name is unique only within its resource group, so a same-named VM in another
//     subscription or resource group is not this node. A Scheduled Events notice gets resource ids
//     from the VM that read it (DecodeEventGrid); one without them matches no node.
func (n *Notice) MatchesProviderID(providerID string) bool {
	if providerID == "" {
		return false
	}
	switch {
	case strings.HasPrefix(providerID, "aws:///"):
		id := providerID[strings.LastIndexByte(providerID, '/')+1:]
		for _, x := range n.InstanceIDs {
			if x == id {
				return true
			}
		}
	case strings.HasPrefix(strings.ToLower(providerID), "azure://"):
		rid := providerID[len("azure://"):]
		for _, x := range n.ResourceIDs {
			if strings.EqualFold(x, rid) {
				return true
			}
		}
	}
	return false
}

// AzureVMID is a parsed Azure VM resource ID: a VM
// (/subscriptions/<s>/resourceGroups/<g>/providers/Microsoft.Compute/virtualMachines/<name>) or a
// scale set's VM (…/virtualMachineScaleSets/<set>/virtualMachines/<instance id>).
type AzureVMID struct {
	Subscription, ResourceGroup string
	// ScaleSet is "" for a VM; Name is the VM name, or the scale set VM's instance id.
	ScaleSet, Name string
}

// ParseAzureVMID parses a VM resource ID (segment names in any case, as ARM compares them); ok is
// false for anything else.
func ParseAzureVMID(id string) (AzureVMID, bool) {
	parts := strings.Split(strings.TrimPrefix(id, "/"), "/")
	eq := strings.EqualFold
	if len(parts) < 8 || !eq(parts[0], "subscriptions") || !eq(parts[2], "resourceGroups") || !eq(parts[4], "providers") || !eq(parts[5], "Microsoft.Compute") {
		return AzureVMID{}, false
	}
	for _, p := range parts {
		if p == "" {
			return AzureVMID{}, false
		}
	}
	v := AzureVMID{Subscription: parts[1], ResourceGroup: parts[3]}
	switch {
	case len(parts) == 8 && eq(parts[6], "virtualMachines"):
		v.Name = parts[7]
	case len(parts) == 10 && eq(parts[6], "virtualMachineScaleSets") && eq(parts[8], "virtualMachines"):
		v.ScaleSet, v.Name = parts[7], parts[9]
	default:
		return AzureVMID{}, false
	}
	return v, true
}

// String renders the resource ID ("/subscriptions/…").
func (v AzureVMID) String() string {
	base := "/subscriptions/" + v.Subscription + "/resourceGroups/" + v.ResourceGroup + "/providers/Microsoft.Compute/"
	if v.ScaleSet != "" {
		return base + "virtualMachineScaleSets/" + v.ScaleSet + "/virtualMachines/" + v.Name
	}
	return base + "virtualMachines/" + v.Name
}

// Resolve turns the VM names of a Scheduled Events document that v read into resource IDs. IMDS
// lists only VMs that share v's scheduled events (Azure docs, "Scheduled Events for Linux VMs":
// a standalone VM, the VMs of one availability set, or of one scale set placement group), and an
// availability set's VMs are in its resource group, so a name means a VM in v's subscription and
// resource group; a scale set VM is named "<set>_<instance id>" and resolves only within v's own
// scale set. A name that cannot be resolved so is left out: it is matched to no node.
func (v AzureVMID) Resolve(names []string) []string {
	var out []string
	for _, name := range names {
		r := AzureVMID{Subscription: v.Subscription, ResourceGroup: v.ResourceGroup, Name: name}
		if v.ScaleSet != "" {
			set, inst, ok := strings.Cut(name, "_")
			if !ok || !strings.EqualFold(set, v.ScaleSet) || inst == "" || strings.Contains(inst, "/") {
				continue
			}
			r.ScaleSet, r.Name = v.ScaleSet, inst
		} else if strings.Contains(name, "/") {
			continue
		}
		out = append(out, r.String())
	}
	return out
}

// AzureVMName returns the name Scheduled Events use for the VM behind an Azure resource id:
// the VM name for ".../virtualMachines/<name>", "<set>_<n>" for a scale set instance
// ".../virtualMachineScaleSets/<set>/virtualMachines/<n>", "" for anything else.
func AzureVMName(resourceID string) string {
	v, ok := ParseAzureVMID(resourceID)
	switch {
	case !ok:
		return ""
	case v.ScaleSet != "":
		return v.ScaleSet + "_" + v.Name
	}
	return v.Name
}
