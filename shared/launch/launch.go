// Package launch turns a planned NodeClaim into a launched instance and the NodeClaim object
// that records it. It is the one place the provision (and later interruption, consolidation
// and drift) functions call the cloud Provider to create capacity, so idempotency is decided once:
// the NodeClaim name and the fleet ClientToken both derive from the decision.
package launch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// Annotations Dovetail puts on the NodeClaims it launches.
const (
	AnnotationClientToken      = "dovetail.dev/client-token"
	AnnotationSnapshotRevision = apisv1.AnnotationSnapshotRevision
)

// Launcher launches planned NodeClaims through a Provider.
type Launcher struct {
	Cluster  string
	Provider cloud.Provider
	Catalog  *catalog.Catalog
}

// Decision identifies what a launch was decided from, for idempotency.
type Decision struct {
	// Revision is the snapshot revision the plan was made on.
	Revision int64
	// Time is the snapshot's time: the clock for marks and timestamps.
	Time time.Time
	// ClusterFacts are the snapshot's discovered cluster facts (Snapshot.ClusterFacts), which
	// the launch hands the provider (cloud.LaunchRequest.ClusterFacts); nil: the provider's
	// flags and defaults alone.
	ClusterFacts *events.ClusterFacts
}

// Result is one launch attempt.
type Result struct {
	NodeClaim *apisv1.NodeClaim // set when an instance was launched
	Instance  *cloud.Instance
	// Unavailable are offerings the cloud refused during the attempt, as marks to record.
	Unavailable []events.UnavailableOfferingMark
	Err         error
}

// NodeClaimName is "<nodepool>-<10 hex>" from the cluster, the snapshot revision, the claim's
// pods and its slot (a static NodeClaim's, which has no pods), so a redelivered decision names
// (and launches) the same NodeClaim.
func NodeClaimName(cluster string, d Decision, plan *provisioning.NodeClaimPlan) string {
	keys := make([]string, 0, len(plan.Pods))
	for _, p := range plan.Pods {
		keys = append(keys, p.Namespace+"/"+p.Name)
	}
	sort.Strings(keys)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%s\x00", cluster, d.Revision, plan.NodePool.Name)
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
	}
	if plan.Slot != "" {
		// Hashed only when set, so every pod-driven name stays what it was.
		fmt.Fprintf(h, "slot\x00%s\x00", plan.Slot)
	}
	name := plan.NodePool.Name
	if len(name) > 52 {
		name = name[:52]
	}
	return name + "-" + hex.EncodeToString(h.Sum(nil))[:10]
}

// ClientToken is the fleet idempotency token for a NodeClaim launched from these offerings: at
// most 64 ASCII characters (the EC2 ClientToken limit). A redelivered decision makes the same
// plan and so the same token (the fleet answers with its instance); a re-plan of the same pods
// in the same decision (after a refusal) offers other offerings and gets a new token, since EC2
// answers a token reused with other parameters with IdempotentParameterMismatch, even when the
// first request launched nothing.
func ClientToken(cluster, nodeClaimName string, offerings []cloud.OfferingRef) string {
	h := sha256.New()
	h.Write([]byte(cluster + "/" + nodeClaimName))
	for _, o := range offerings {
		fmt.Fprintf(h, "\x00%s/%s", o.String(), o.ReservationID)
	}
	return "dovetail-" + hex.EncodeToString(h.Sum(nil))[:48]
}

// Launch asks the provider for one instance from the plan's offerings and returns the NodeClaim
// recording it (status.providerID, capacity, allocatable, Launched condition). When every
// offering is refused, Result.Err is a *cloud.InsufficientCapacityError and Unavailable lists
// the marks to record; a launch that succeeded after refusals (Instance.Refused) lists those
// too. Each mark lasts its offering's TTL (events.UnavailableOfferingTTL when the provider set none).
func (l *Launcher) Launch(ctx context.Context, d Decision, plan *provisioning.NodeClaimPlan, nodeClass apisv1.NodeClass) Result {
	name := NodeClaimName(l.Cluster, d, plan)
	offs := make([]cloud.OfferingRef, 0, len(plan.Offerings))
	for _, o := range plan.Offerings {
		offs = append(offs, cloud.OfferingRef{InstanceType: o.InstanceType.Name, Zone: o.Zone, CapacityType: o.CapacityType, PricePerHour: o.PricePerHour,
			ReservationID: o.ReservationID, ReservationType: o.ReservationType})
	}
	token := ClientToken(l.Cluster, name, offs)
	nc := l.nodeClaim(name, token, d, plan)
	tags := map[string]string{}
	for k, v := range nodeClass.Tags() {
		tags[k] = v
	}
	// Dovetail's own tags win over the NodeClass's: termination is scoped by them.
	tags[apisv1.TagCluster] = l.Cluster
	tags[apisv1.TagNodePool] = plan.NodePool.Name
	tags[apisv1.TagNodeClaim] = name
	tags["Name"] = name
	// The node registers with the pool's taints, its startup taints and karpenter.sh/unregistered
	// (as Karpenter's user data registers it): no pod lands before the lifecycle function has
	// synced the NodeClaim onto the Node and removed that taint.
	taints := append(append(append([]corev1.Taint(nil), plan.Taints...), plan.StartupTaints...),
		corev1.Taint{Key: apisv1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute})
	inst, err := l.Provider.Create(ctx, cloud.LaunchRequest{
		ClientToken: token, Cluster: l.Cluster, NodeClaim: nc, NodeClass: nodeClass,
		Offerings: offs, Labels: plan.Labels, Taints: taints, Tags: tags, ClusterFacts: d.ClusterFacts,
	})
	var res Result
	var refused []cloud.UnavailableOffering
	if ice := (*cloud.InsufficientCapacityError)(nil); errors.As(err, &ice) {
		refused = ice.Unavailable
	} else if err == nil && inst != nil {
		refused = inst.Refused // offerings a one-by-one launch was refused before this one
	}
	for _, u := range refused {
		key := u.Offering.Key()
		key.Scope = u.Scope
		res.Unavailable = append(res.Unavailable, events.MarkUnavailableFor(key, u.Code, d.Time, u.TTL))
	}
	if err != nil {
		res.Err = fmt.Errorf("launching nodeclaim %s: %w", name, err)
		return res
	}
	l.record(nc, inst, nodeClass)
	withOverlayCapacity(nc, plan, inst.InstanceType)
	// What drift later compares (image, NodeClass hash, networking) is the cloud's to record.
	if rules := cloud.RulesOf(l.Provider); rules != nil {
		rules.RecordLaunch(nc, nodeClass, inst)
	}
	res.NodeClaim, res.Instance = nc, inst
	return res
}

// nodeClaim builds the NodeClaim the plan describes, before launch.
func (l *Launcher) nodeClaim(name, token string, d Decision, plan *provisioning.NodeClaimPlan) *apisv1.NodeClaim {
	tmpl := plan.NodePool.Spec.Template
	labels := map[string]string{}
	for k, v := range plan.Labels {
		labels[k] = v
	}
	labels[apisv1.LabelNodePool] = plan.NodePool.Name
	annotations := map[string]string{AnnotationClientToken: token, AnnotationSnapshotRevision: strconv.FormatInt(d.Revision, 10),
		// Drift compares these with the NodePool's hash at decision time (shared/apis/v1/drift.go).
		apisv1.AnnotationNodePoolHash: apisv1.NodePoolHash(plan.NodePool), apisv1.AnnotationNodePoolHashVersion: apisv1.NodePoolHashVersion}
	for k, v := range tmpl.ObjectMeta.Annotations {
		annotations[k] = v
	}
	// Written on every NodeClaim, as Karpenter's scheduler does; the AWS provider leaves the
	// NodeClass's spec.context off a relaxed launch, and the created metric is labelled by it.
	annotations[apisv1.AnnotationNodeClaimMinValuesRelaxed] = strconv.FormatBool(plan.MinValuesRelaxed)
	// Karpenter marks a NodeClaim whose instance types were overlaid (nodeclaimtemplate.go); the
	// AWS provider launches a price-overlaid one with the prioritized fleet strategies.
	if plan.PriceOverlayApplied() {
		annotations[apisv1.AnnotationPriceOverlayApplied] = "true"
	}
	if plan.CapacityOverlayApplied() {
		annotations[apisv1.AnnotationCapacityOverlayApplied] = "true"
	}
	if len(plan.Pods) > 0 {
		keys := make([]string, 0, len(plan.Pods))
		for _, p := range plan.Pods {
			keys = append(keys, p.Namespace+"/"+p.Name)
		}
		sort.Strings(keys)
		annotations[apisv1.AnnotationPlannedPods] = strings.Join(keys, ",")
	}
	reqs := make([]apisv1.NodeSelectorRequirementWithMinValues, 0, len(plan.Requirements)+1)
	for _, k := range plan.Requirements.Keys() {
		if k == corev1.LabelInstanceTypeStable {
			continue
		}
		r := plan.Requirements[k]
		for _, nsr := range r.NodeSelectorRequirements() {
			reqs = append(reqs, apisv1.NodeSelectorRequirementWithMinValues{NodeSelectorRequirement: nsr, MinValues: r.MinValues})
		}
	}
	reqs = append(reqs, apisv1.NodeSelectorRequirementWithMinValues{NodeSelectorRequirement: corev1.NodeSelectorRequirement{
		Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: plan.InstanceTypeOptions()}})
	requests := plan.Requests.Add(plan.Cheapest().DaemonOverhead)
	return &apisv1.NodeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: apisv1.GroupVersion, Kind: "NodeClaim"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: labels, Annotations: annotations,
			// Deleting the NodeClaim runs the termination path (shared/lifecycle) before it goes.
			Finalizers:        []string{events.FinalizerTermination},
			CreationTimestamp: metav1.NewTime(d.Time),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: apisv1.GroupVersion, Kind: "NodePool",
				Name: plan.NodePool.Name, UID: plan.NodePool.UID, BlockOwnerDeletion: ptr(true)}},
		},
		Spec: apisv1.NodeClaimSpec{
			Taints: plan.Taints, StartupTaints: plan.StartupTaints, Requirements: reqs, NodeClassRef: plan.NodeClassRef,
			Resources:              apisv1.ResourceRequirements{Requests: requests.List()},
			ExpireAfter:            tmpl.Spec.ExpireAfter,
			TerminationGracePeriod: tmpl.Spec.TerminationGracePeriod,
		},
	}
}

// record fills in what the launch decided: the offering's labels, provider ID and resources.
// Capacity and allocatable are the instance type's under the NodeClass's node settings
// (cloud.NodeSettingsFor: kubelet, root volume, instance-store RAID0), the figures the plan
// packed against and the node will report; decisions taken before the node registers count the
// in-flight NodeClaim by them. A NodeClass whose settings do not parse (the plan refused it
// already) records the catalog's defaults.
func (l *Launcher) record(nc *apisv1.NodeClaim, inst *cloud.Instance, nodeClass apisv1.NodeClass) {
	nc.Labels[corev1.LabelInstanceTypeStable] = inst.InstanceType
	nc.Labels[corev1.LabelTopologyZone] = inst.Zone
	nc.Labels[apisv1.LabelCapacityType] = inst.CapacityType
	// An instance in a capacity reservation is labelled with it (Karpenter's reserved NodeClaim
	// labels); the labels the plan put there for a launch that ended elsewhere go.
	delete(nc.Labels, apisv1.LabelCapacityReservationID)
	delete(nc.Labels, apisv1.LabelCapacityReservationType)
	if inst.CapacityReservationID != "" {
		nc.Labels[apisv1.LabelCapacityReservationID] = inst.CapacityReservationID
		nc.Labels[apisv1.LabelCapacityReservationType] = inst.CapacityReservationType
	}
	if l.Catalog != nil {
		settings, err := cloud.NodeSettingsFor(nodeClass)
		it := l.Catalog.Get(inst.InstanceType)
		if err == nil {
			// The type as the NodeClass's AMI family offers it (a Windows node's os and build).
			it = it.ForAMIFamily(settings.AMIFamily)
		}
		if it != nil {
			for k, v := range it.Labels {
				nc.Labels[k] = v
			}
			nc.Status.Capacity = it.Capacity
			nc.Status.Allocatable = it.Allocatable()
			if err == nil {
				c, a := it.ResourcesWith(settings)
				nc.Status.Capacity, nc.Status.Allocatable = c.List(), a.List()
			}
		}
	}
	nc.Status.ProviderID = inst.ProviderID
	nc.Status.Conditions = []metav1.Condition{{Type: apisv1.ConditionLaunched, Status: metav1.ConditionTrue,
		Reason: "Launched", LastTransitionTime: nc.CreationTimestamp}}
}

// withOverlayCapacity adds the extended resources NodeOverlays gave the launched type under the
// claim's NodePool to its status capacity and allocatable, as Karpenter records a NodeClaim from
// the overlaid instance type, so the next decision counts them on the claim in flight.
func withOverlayCapacity(nc *apisv1.NodeClaim, plan *provisioning.NodeClaimPlan, instanceType string) {
	for _, o := range plan.Offerings {
		if o.InstanceType.Name != instanceType || len(o.InstanceType.OverlayCapacity) == 0 {
			continue
		}
		nc.Status.Capacity, nc.Status.Allocatable = nc.Status.Capacity.DeepCopy(), nc.Status.Allocatable.DeepCopy()
		if nc.Status.Capacity == nil {
			nc.Status.Capacity = corev1.ResourceList{}
		}
		if nc.Status.Allocatable == nil {
			nc.Status.Allocatable = corev1.ResourceList{}
		}
		for name, q := range o.InstanceType.OverlayCapacity {
			nc.Status.Capacity[name], nc.Status.Allocatable[name] = q.DeepCopy(), q.DeepCopy()
		}
		return
	}
}

func ptr[T any](v T) *T { return &v }
