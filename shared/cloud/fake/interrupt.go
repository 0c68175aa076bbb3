package fake

import (
	"fmt"
	"strings"
	"time"

	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// InterruptionKind names a notice as the EventBridge "detail-type" of the matching AWS event, so a
// caller can turn it into the real event shape (see shared/data/events/aws).
type InterruptionKind string

const (
	// KindSpotInterruption: EC2 will reclaim the spot instance after SpotInterruptionWarning.
	KindSpotInterruption InterruptionKind = "EC2 Spot Instance Interruption Warning"
	// KindRebalanceRecommendation: the spot instance is at elevated risk; nothing is reclaimed.
	KindRebalanceRecommendation InterruptionKind = "EC2 Instance Rebalance Recommendation"
	// KindAzurePreempt: Azure evicts the spot VM (a Scheduled Events "Preempt" event; with
	// evictionPolicy Delete the VM is deleted) at NotBefore, AzurePreemptNotice after the notice.
	KindAzurePreempt InterruptionKind = "Preempt"
)

// AzurePreemptNotice is the warning a Spot VM gets before eviction: Scheduled Events announce a
// Preempt at least 30 seconds ahead (Azure "Scheduled Events for Linux VMs": minimum notice,
// Preempt 30 seconds).
const AzurePreemptNotice = 30 * time.Second

// SpotInterruptionWarning is the notice EC2 gives before reclaiming a spot instance: two minutes
// (EC2 User Guide, "Spot Instance interruption notices").
const SpotInterruptionWarning = 2 * time.Minute

// Interruption is one notice the fake gave.
type Interruption struct {
	Kind         InterruptionKind `json:"kind"`
	InstanceID   string           `json:"instanceID"`
	ProviderID   string           `json:"providerID"`
	InstanceType string           `json:"instanceType"`
	Zone         string           `json:"zone"`
	CapacityType string           `json:"capacityType"`
	// Time is when the notice was given (the fake clock's now).
	Time time.Time `json:"time"`
	// ReclaimTime is when EC2 takes the instance back: Time + SpotInterruptionWarning for a spot
	// interruption, zero for a rebalance recommendation.
	ReclaimTime time.Time `json:"reclaimTime,omitzero"`
}

// Interrupt gives a notice for a pending or running spot instance: it is recorded (see
// Interruptions), passed to Options.OnInterruption, and for KindSpotInterruption the instance
// starts shutting down at the reclaim time (on Tick). Errors: an unknown providerID (wrapping
// cloud.ErrNotFound), an unknown kind, an instance that is not spot, or one already shutting down
// or terminated.
func (c *Cloud) Interrupt(providerID string, kind InterruptionKind) (Interruption, error) {
	c.mu.Lock()
	inst, err := c.lookup(providerID)
	if err != nil {
		c.mu.Unlock()
		return Interruption{}, err
	}
	var fail error
	switch {
	case kind != KindSpotInterruption && kind != KindRebalanceRecommendation && kind != KindAzurePreempt:
		fail = fmt.Errorf("kind: %q is not %q, %q or %q", kind, KindSpotInterruption, KindRebalanceRecommendation, KindAzurePreempt)
	case (kind == KindAzurePreempt) != strings.HasPrefix(inst.ProviderID, "azure://"):
		fail = fmt.Errorf("kind: %q does not happen to %s", kind, inst.ProviderID)
	case inst.CapacityType != "spot":
		fail = fmt.Errorf("%s is %s, only spot instances get %q", inst.ID, inst.CapacityType, kind)
	case inst.State != cloud.StatePending && inst.State != cloud.StateRunning:
		fail = fmt.Errorf("%s is %s, nothing to interrupt", inst.ID, inst.State)
	}
	if fail != nil {
		c.mu.Unlock()
		return Interruption{}, fail
	}
	now := c.clock.Now()
	n := Interruption{
		Kind:         kind,
		InstanceID:   inst.ID,
		ProviderID:   inst.ProviderID,
		InstanceType: inst.InstanceType,
		Zone:         inst.Zone,
		CapacityType: inst.CapacityType,
		Time:         now,
	}
	if kind == KindSpotInterruption || kind == KindAzurePreempt {
		n.ReclaimTime = now.Add(SpotInterruptionWarning)
		if kind == KindAzurePreempt {
			n.ReclaimTime = now.Add(AzurePreemptNotice)
		}
		if inst.reclaimAt.IsZero() || n.ReclaimTime.Before(inst.reclaimAt) {
			inst.reclaimAt = n.ReclaimTime
		}
	}
	c.interruptions = append(c.interruptions, n)
	c.stats.Interruptions++
	callback := c.onInterruption
	c.mu.Unlock()

	if callback != nil {
		callback(n)
	}
	return n, nil
}

// Interruptions returns every notice given so far, oldest first.
func (c *Cloud) Interruptions() []Interruption {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Interruption(nil), c.interruptions...)
}

// SpotNoticeJSON renders a spot interruption as the EventBridge event EC2 sends for it (the
// shape of shared/data/events/aws/ec2_spot_instance_interruption_warning.json, detail-type
// KindSpotInterruption, instance-action "terminate"), with event id id, for the fake's
// placeholder account in us-east-1.
func (n Interruption) SpotNoticeJSON(id string) []byte {
	return []byte(fmt.Sprintf(`{"version":"0","id":%q,"detail-type":%q,"source":"aws.ec2","account":"123456789012","time":%q,"region":"us-east-1",`+
		`"resources":["arn:aws:ec2:us-east-1:123456789012:instance/%s"],"detail":{"instance-id":%q,"instance-action":"terminate"}}`,
		id, KindSpotInterruption, n.Time.UTC().Format(time.RFC3339), n.InstanceID, n.InstanceID))
}
