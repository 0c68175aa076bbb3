package lifecycle

import (
	"fmt"
	"k8s.io/apimachinery/pkg/api/resource"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/apis"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/quarantine"
)

// This file is what Karpenter's NodeClass status and termination controllers and its NodePool
// counter, readiness and validation controllers do, decided from one snapshot: NodeClass
// finalizers and release, and the NodePool status kubectl shows (NODES, READY, CPU, MEMORY).

// ReasonAwaitingReconciliation is NodeClassReady=Unknown for a NodePool whose NodeClass has no
// status yet.
const ReasonAwaitingReconciliation = "AwaitingReconciliation"

// NodeClassAction is what the lifecycle function does with one NodeClass (it needs the cloud).
type NodeClassAction struct {
	NodeClass apisv1.NodeClass
	// Resolve asks for the class's status to be resolved and written (StatusCommand).
	Resolve bool
	// Release asks for what was created for the class (its instance profile) to be deleted, and
	// then Finish published: the class is being deleted and no NodeClaim uses it any more.
	Release bool
	Finish  []events.Command
}

// nodeClasses decides each NodeClass's finalizer, resolution and release (EC2NodeClass and
// AKSNodeClass, each with its provider's finalizer).
func (d *decider) nodeClasses() {
	classes := append([]apisv1.NodeClass(nil), d.snap.NodeClasses...)
	sort.Slice(classes, func(i, j int) bool { return classes[i].Name() < classes[j].Name() })
	for _, c := range classes {
		fin := finalizerOf(c)
		if fin == "" {
			continue
		}
		m := c.Meta()
		has := hasString(m.Finalizers, fin)
		if m.DeletionTimestamp == nil {
			if !has {
				d.cmd(events.Command{ID: events.CommandID(d.snap.Cluster, "add-finalizer", c.Kind(), m.Name, string(m.UID)),
					Kind: events.CommandAddFinalizer, NodeClass: classRef(c), Finalizer: fin,
					Reason: "NodeClass deletion waits for its NodeClaims and releases what was created for it"})
			}
			d.out.NodeClasses = append(d.out.NodeClasses, NodeClassAction{NodeClass: c, Resolve: true})
			continue
		}
		if !has {
			continue
		}
		if users := d.claimsOf(c); len(users) > 0 {
			d.transition("", "", "NodeClassTerminating", fmt.Sprintf("%s %s waits for NodeClaims %s", c.Kind(), m.Name, strings.Join(users, ", ")))
			continue
		}
		d.out.NodeClasses = append(d.out.NodeClasses, NodeClassAction{NodeClass: c, Release: true, Finish: []events.Command{d.stamp(events.Command{
			ID:   events.CommandID(d.snap.Cluster, "remove-finalizer", c.Kind(), m.Name, string(m.UID)),
			Kind: events.CommandRemoveFinalizer, NodeClass: classRef(c), Finalizer: fin,
			Reason: "no NodeClaim uses the NodeClass and what was created for it is released"})}})
	}
}

// finalizerOf is the termination finalizer of a NodeClass's kind ("" for the zero NodeClass).
func finalizerOf(c apisv1.NodeClass) string {
	switch {
	case c.EC2 != nil:
		return events.FinalizerNodeClassTermination
	case c.AKS != nil:
		return events.FinalizerAKSNodeClassTermination
	}
	return ""
}

// stamp sets the cluster and revision of a command published later.
func (d *decider) stamp(c events.Command) events.Command {
	c.Cluster, c.SnapshotRevision = d.snap.Cluster, d.snap.Revision
	return c
}

// claimsOf names the NodeClaims whose nodeClassRef is c, sorted.
func (d *decider) claimsOf(c apisv1.NodeClass) []string {
	var out []string
	for i := range d.snap.NodeClaims {
		nc := &d.snap.NodeClaims[i]
		if c.Matches(nc.Spec.NodeClassRef) {
			out = append(out, nc.Name)
		}
	}
	sort.Strings(out)
	return out
}

// classRef is the NodeClass a command targets: kind and metadata only.
func classRef(c apisv1.NodeClass) *apisv1.NodeClass {
	switch {
	case c.EC2 != nil:
		return &apisv1.NodeClass{EC2: &apisv1.EC2NodeClass{TypeMeta: c.EC2.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: c.EC2.Name, UID: c.EC2.UID}}}
	case c.AKS != nil:
		return &apisv1.NodeClass{AKS: &apisv1.AKSNodeClass{TypeMeta: c.AKS.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: c.AKS.Name, UID: c.AKS.UID}}}
	}
	return nil
}

// StatusCommand returns the SetNodeClassStatus command that writes resolved's status onto the
// snapshot's class current, or nil when current already has it (conditions compared without
// their lastTransitionTime, which the agent keeps).
func StatusCommand(snap *events.Snapshot, current, resolved apisv1.NodeClass) *events.Command {
	var target *apisv1.NodeClass
	switch {
	case current.EC2 != nil && resolved.EC2 != nil:
		have, want := current.EC2.Status, resolved.EC2.Status
		if sameStatus(have.Conditions, want.Conditions, func() bool {
			have.Conditions, want.Conditions = nil, nil
			return equality.Semantic.DeepEqual(have, want)
		}) {
			return nil
		}
		target = &apisv1.NodeClass{EC2: &apisv1.EC2NodeClass{TypeMeta: current.EC2.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: current.EC2.Name, UID: current.EC2.UID},
			Status: resolved.EC2.DeepCopy().Status}}
	case current.AKS != nil && resolved.AKS != nil:
		have, want := current.AKS.Status, resolved.AKS.Status
		if sameStatus(have.Conditions, want.Conditions, func() bool {
			have.Conditions, want.Conditions = nil, nil
			return equality.Semantic.DeepEqual(have, want)
		}) {
			return nil
		}
		target = &apisv1.NodeClass{AKS: &apisv1.AKSNodeClass{TypeMeta: current.AKS.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: current.AKS.Name, UID: current.AKS.UID},
			Status: resolved.AKS.DeepCopy().Status}}
	default:
		return nil
	}
	ready := meta.FindStatusCondition(target.Conditions(), apisv1.ConditionReady)
	summary := "unknown"
	if ready != nil {
		summary = string(ready.Status)
	}
	m := current.Meta()
	return &events.Command{ID: events.CommandID(snap.Cluster, fmt.Sprint(snap.Revision), "nodeclass-status", m.Name, string(m.UID)),
		Kind: events.CommandSetNodeClassStatus, Cluster: snap.Cluster, SnapshotRevision: snap.Revision,
		NodeClass: target, Reason: "NodeClass status resolved: Ready=" + summary}
}

// sameStatus reports whether two statuses agree: the same conditions (without their
// lastTransitionTime, which the agent keeps) and the rest equal by rest().
func sameStatus(have, want []metav1.Condition, rest func() bool) bool {
	return sameConditions(have, want) && rest()
}

// NeedsResolve reports whether a class's status is missing or older than its spec (Ready's
// observedGeneration behind the generation): then it is resolved whatever the refresh interval.
func NeedsResolve(c apisv1.NodeClass) bool {
	r := meta.FindStatusCondition(c.Conditions(), apisv1.ConditionReady)
	m := c.Meta()
	return r == nil || m == nil || r.ObservedGeneration != m.Generation
}

func sameConditions(a, b []metav1.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range b {
		y := meta.FindStatusCondition(a, x.Type)
		if y == nil || y.Status != x.Status || y.Reason != x.Reason || y.Message != x.Message || y.ObservedGeneration != x.ObservedGeneration {
			return false
		}
	}
	return true
}

// nodePools writes each NodePool's status: the NodeClaims it has (status.nodes), the capacity
// they hold (status.resources: the sum of their status.capacity, Karpenter's counter), and the
// conditions ValidationSucceeded, NodeClassReady, NodeRegistrationHealthy (registrationHealth),
// SpendWithinLimits, WorkloadsQuarantined (shared/quarantine) and Ready. Nothing is written when the status
// already says so.
func (d *decider) nodePools() {
	pools := make([]*apisv1.NodePool, 0, len(d.snap.NodePools))
	for i := range d.snap.NodePools {
		pools = append(pools, &d.snap.NodePools[i])
	}
	sort.Slice(pools, func(i, j int) bool { return pools[i].Name < pools[j].Name })
	for _, np := range pools {
		want := d.poolStatus(np)
		have := np.Status
		if sameConditions(have.Conditions, want.Conditions) && sameResources(have.Resources, want.Resources) &&
			ptrEq(have.Nodes, want.Nodes) && have.NodeClassObservedGeneration == want.NodeClassObservedGeneration {
			continue
		}
		ready := meta.FindStatusCondition(want.Conditions, apisv1.ConditionReady)
		d.cmd(events.Command{ID: events.CommandID(d.snap.Cluster, fmt.Sprint(d.snap.Revision), "nodepool-status", np.Name, string(np.UID)),
			Kind:     events.CommandSetNodePoolStatus,
			NodePool: &apisv1.NodePool{TypeMeta: np.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: np.Name, UID: np.UID}, Status: want},
			Reason:   fmt.Sprintf("NodePool %s: %d nodes, Ready=%s", np.Name, *want.Nodes, ready.Status)})
	}
}

// PoolUsage is what a NodePool's status reports: its NodeClaims' summed capacity and their
// count (status.resources and status.nodes, as Karpenter's NodePool counter controller).
func PoolUsage(snap *events.Snapshot, pool string) (corev1.ResourceList, int64) {
	var nodes int64
	sum := corev1.ResourceList{}
	for i := range snap.NodeClaims {
		nc := &snap.NodeClaims[i]
		if nc.Labels[apisv1.LabelNodePool] != pool {
			continue
		}
		nodes++
		for k, q := range nc.Status.Capacity {
			cur := sum[k]
			cur.Add(q)
			sum[k] = cur
		}
	}
	return sum, nodes
}

func (d *decider) poolStatus(np *apisv1.NodePool) apisv1.NodePoolStatus {
	sum, nodes := PoolUsage(d.snap, np.Name)
	st := apisv1.NodePoolStatus{Nodes: &nodes, Resources: sum}
	gen := np.Generation
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		apisv1.SetCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	if errs := apis.ValidateNodePool(np); len(errs) > 0 {
		msg := errs.ToAggregate().Error()
		if len(msg) > 1024 {
			msg = msg[:1021] + "..."
		}
		set(apisv1.ConditionValidationSucceeded, metav1.ConditionFalse, apisv1.ReasonValidationFailed, msg)
	} else if bad := apisv1.UnsupportedNodePoolFields(np); len(bad) > 0 {
		set(apisv1.ConditionValidationSucceeded, metav1.ConditionFalse, apisv1.ReasonNotSupported, strings.Join(bad, "; "))
	} else {
		set(apisv1.ConditionValidationSucceeded, metav1.ConditionTrue, apisv1.ConditionValidationSucceeded, "")
	}
	ref := np.Spec.Template.Spec.NodeClassRef
	class := apisv1.FindNodeClass(d.snap.NodeClasses, ref)
	switch {
	case class.IsZero():
		name := ""
		if ref != nil {
			name = ref.Kind + " " + ref.Name
		}
		set(apisv1.ConditionNodeClassReady, metav1.ConditionFalse, apisv1.ReasonNodeClassNotFound, fmt.Sprintf("NodeClass %s not found", name))
	default:
		st.NodeClassObservedGeneration = class.Meta().Generation
		// Karpenter keeps it only for a NodePool whose NodeClass exists (registrationhealth).
		apisv1.SetCondition(&st.Conditions, registrationHealth(np, class.Meta().Generation, d.registrations[np.Name]))
		r := meta.FindStatusCondition(class.Conditions(), apisv1.ConditionReady)
		switch {
		case r == nil:
			set(apisv1.ConditionNodeClassReady, metav1.ConditionUnknown, ReasonAwaitingReconciliation, class.Kind()+" "+class.Name()+" has no status yet")
		case r.Status == metav1.ConditionTrue:
			set(apisv1.ConditionNodeClassReady, metav1.ConditionTrue, apisv1.ConditionNodeClassReady, "")
		default:
			set(apisv1.ConditionNodeClassReady, r.Status, apisv1.ReasonNodeClassNotReady, class.NotReady())
		}
	}
	if typ, status, reason, msg, ok := d.spendCondition(np, sum, nodes); ok {
		set(typ, status, reason, msg)
	}
	// Outside Ready's dependents: a pool holding a sick workload's replicas still launches.
	q := quarantine.PoolCondition(d.quarantined(), np)
	set(q.Type, q.Status, q.Reason, q.Message)
	apisv1.SetReadyFromDependents(&st.Conditions, gen, apisv1.NodePoolReadyDependents)
	return st
}

// spendCondition is the SpendWithinLimits condition of a NodePool with spec.limits or a price
// guardrail: False (LimitReached) naming each limit its NodeClaims have reached — the solver
// then launches nothing more that needs it — else True. ok is false for a pool without limits.
func (d *decider) spendCondition(np *apisv1.NodePool, usage corev1.ResourceList, nodes int64) (typ string, status metav1.ConditionStatus, reason, msg string, ok bool) {
	maxPrice, priced, err := apisv1.MaxPricePerHour(np)
	if len(np.Spec.Limits) == 0 && (!priced || err != nil) {
		return "", "", "", "", false
	}
	var reached []string
	for _, k := range slices.Sorted(maps.Keys(np.Spec.Limits)) {
		limit := np.Spec.Limits[k]
		used := usage[k]
		if k == "nodes" {
			used = *resource.NewQuantity(nodes, resource.DecimalSI)
		}
		if used.Cmp(limit) >= 0 {
			reached = append(reached, fmt.Sprintf("spec.limits %s: %s of %s", k, used.String(), limit.String()))
		}
	}
	if priced && err == nil && d.o.PricePerHour != nil {
		spent := 0.0
		for i := range d.snap.NodeClaims {
			if nc := &d.snap.NodeClaims[i]; nc.Labels[apisv1.LabelNodePool] == np.Name {
				spent += d.o.PricePerHour(nc.Labels)
			}
		}
		// Reached once no more node of the pool's cheapest kind could fit is unknowable here;
		// reached means the cap is spent.
		if spent >= maxPrice {
			reached = append(reached, fmt.Sprintf("%s: %.4f of %.4f USD/h", apisv1.AnnotationMaxPricePerHour, spent, maxPrice))
		}
	}
	if len(reached) > 0 {
		return apisv1.ConditionSpendWithinLimits, metav1.ConditionFalse, apisv1.ReasonLimitReached, strings.Join(reached, "; "), true
	}
	return apisv1.ConditionSpendWithinLimits, metav1.ConditionTrue, apisv1.ConditionSpendWithinLimits, "", true
}

func sameResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range b {
		p, ok := a[k]
		if !ok || p.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

func ptrEq(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
