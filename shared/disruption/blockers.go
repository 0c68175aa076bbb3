package disruption

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// BlockerKind classifies why a node is not disrupted. Each kind is one rule of Candidates,
// Consolidate or evaluate; a new rule (a quarantined controller, a rate hold) adds a kind and the
// check that returns it, and every reader (the consolidate function's report, the
// DisruptionBlocked condition, `dovetail explain`, the preview) gets it from here.
type BlockerKind string

// Blocker kinds, in the order Candidates checks them.
const (
	BlockerNoNodePool        BlockerKind = "NoNodePool"
	BlockerNoNodeClaim       BlockerKind = "NoNodeClaim"
	BlockerDisrupting        BlockerKind = "Disrupting"
	BlockerNotInitialized    BlockerKind = "NotInitialized"
	BlockerDoNotDisrupt      BlockerKind = "DoNotDisrupt"
	BlockerNodePoolDeleting  BlockerKind = "NodePoolDeleting"
	BlockerStaticNodePool    BlockerKind = "StaticNodePool"
	BlockerConsolidateAfter  BlockerKind = "ConsolidateAfter"
	BlockerUnknownPrice      BlockerKind = "UnknownPrice"
	BlockerNoController      BlockerKind = "NoController"
	BlockerPDB               BlockerKind = "PodDisruptionBudget"
	BlockerPolicy            BlockerKind = "ConsolidationPolicy"
	BlockerBudget            BlockerKind = "DisruptionBudget"
	BlockerBalanced          BlockerKind = "Balanced"
	BlockerPendingPods       BlockerKind = "PendingPods"
	BlockerNoPlace           BlockerKind = "NoPlace"
	BlockerNoCheaperReplace  BlockerKind = "NoCheaperReplacement"
	BlockerReplacementPolicy BlockerKind = "ReplacementRule"
)

// BlockerProvisioningRequest: a live ProvisioningRequest booking holds capacity on the node, or
// a best-effort-atomic-scale-up request launched it and its pods are not all bound
// (bookings.go). Checked after the do-not-disrupt annotations.
const BlockerProvisioningRequest BlockerKind = "ProvisioningRequest"

// ObjectRef names the Kubernetes object a blocker is about (Namespace empty for cluster-scoped
// kinds: Node, NodeClaim, NodePool).
type ObjectRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// String is Kind/name or Kind/namespace/name.
func (o ObjectRef) String() string {
	if o.Namespace != "" {
		return o.Kind + "/" + o.Namespace + "/" + o.Name
	}
	return o.Kind + "/" + o.Name
}

// Blocker is one reason a node is not disrupted, with the object it comes from.
type Blocker struct {
	Kind    BlockerKind `json:"kind"`
	Object  ObjectRef   `json:"object"`
	Message string      `json:"message"`
}

func nodeRef(n *Node) ObjectRef { return ObjectRef{Kind: "Node", Name: n.Name()} }
func poolRef(name string) ObjectRef {
	return ObjectRef{Kind: "NodePool", Name: name}
}
func podObject(p *corev1.Pod) ObjectRef {
	ns := p.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return ObjectRef{Kind: "Pod", Namespace: ns, Name: p.Name}
}

// Blockers returns every reason n is not a consolidation candidate (Candidates' rules, in its
// order), or none. Candidates stops at the first; this goes on, so one read names them all.
func (s *State) Blockers(n *Node) []Blocker { return s.blockers(n, rules{all: true}) }

// rules says which of Candidates' rules blockers checks and whether it stops at the first.
type rules struct {
	// all goes on after the first blocker.
	all bool
	// standing skips the rules whose answer is a node's passing state or needs a catalog
	// (Standing.Blockers): Disrupting, NotInitialized, the consolidateAfter countdown (Never
	// stays) and UnknownPrice.
	standing bool
}

// blockers checks Candidates' rules on n in order, those r selects; without r.all it returns at
// the first.
func (s *State) blockers(n *Node, r rules) []Blocker {
	var out []Blocker
	add := func(b Blocker) bool {
		out = append(out, b)
		return !r.all
	}
	if n.Pool == nil && add(Blocker{BlockerNoNodePool, poolRef(n.Node.Labels[apisv1.LabelNodePool]),
		fmt.Sprintf("nodepool %q does not exist", n.Node.Labels[apisv1.LabelNodePool])}) {
		return out
	}
	if n.Claim == nil && add(Blocker{BlockerNoNodeClaim, nodeRef(n), "no NodeClaim records the node"}) {
		return out
	}
	if !r.standing && n.Disrupting && add(Blocker{BlockerDisrupting, nodeRef(n), "already being disrupted or deleted"}) {
		return out
	}
	if !r.standing && !n.Initialized && add(Blocker{BlockerNotInitialized, nodeRef(n), "not initialized"}) {
		return out
	}
	if apisv1.ObjectDoNotDisrupt(&n.Node.ObjectMeta, s.Now) && add(Blocker{BlockerDoNotDisrupt, nodeRef(n), "node is annotated karpenter.sh/do-not-disrupt"}) {
		return out
	}
	if n.Claim != nil && apisv1.ObjectDoNotDisrupt(&n.Claim.ObjectMeta, s.Now) &&
		add(Blocker{BlockerDoNotDisrupt, ObjectRef{Kind: "NodeClaim", Name: n.Claim.Name}, "nodeclaim is annotated karpenter.sh/do-not-disrupt"}) {
		return out
	}
	for _, b := range s.bookingBlockers(n) {
		if add(b) {
			return out
		}
	}
	if n.Pool != nil {
		for _, b := range s.poolBlockers(n, r.standing) {
			if add(b) {
				return out
			}
		}
	}
	if !r.standing && !n.PriceKnown && add(Blocker{BlockerUnknownPrice, nodeRef(n), fmt.Sprintf("no price for offering %s/%s/%s", n.InstanceType, n.Zone, n.CapacityType)}) {
		return out
	}
	for _, b := range podBlockers(n.Movable, s.Now, r.all) {
		if add(b) {
			return out
		}
	}
	for _, e := range s.PDBs.violations(n.Movable, r.all) {
		if add(Blocker{BlockerPDB, e.object(), e.Error()}) {
			return out
		}
	}
	if n.Pool != nil && len(n.Movable) > 0 && policy(n.Pool) == apisv1.ConsolidationPolicyWhenEmpty {
		add(Blocker{BlockerPolicy, poolRef(n.Pool.Name), fmt.Sprintf("nodepool %q consolidates only empty nodes (WhenEmpty) and the node has %d pod(s)", n.Pool.Name, len(n.Movable))})
	}
	return out
}

// poolBlockers are the rules of n's NodePool that keep n from being a candidate: the pool
// being deleted, static, or its consolidateAfter (Never, or, unless standing, not passed since
// the last pod event).
func (s *State) poolBlockers(n *Node, standing bool) []Blocker {
	var out []Blocker
	ref := poolRef(n.Pool.Name)
	if n.Pool.DeletionTimestamp != nil {
		out = append(out, Blocker{BlockerNodePoolDeleting, ref, fmt.Sprintf("nodepool %q is being deleted", n.Pool.Name)})
	}
	if n.Pool.Spec.Replicas != nil {
		// Karpenter's consolidation and emptiness skip a static NodePool's candidates
		// (OwnedByStaticNodePool); its size is spec.replicas, whatever consolidationPolicy says.
		out = append(out, Blocker{BlockerStaticNodePool, ref, fmt.Sprintf("nodepool %q is static (spec.replicas %d): never consolidated", n.Pool.Name, *n.Pool.Spec.Replicas)})
	}
	d := n.Pool.Spec.Disruption
	switch {
	case d.ConsolidateAfter != nil && d.ConsolidateAfter.IsNever():
		out = append(out, Blocker{BlockerConsolidateAfter, ref, fmt.Sprintf("nodepool %q has consolidateAfter Never", n.Pool.Name)})
	case !standing && s.consolidateAfterLeft(n) > 0:
		out = append(out, Blocker{BlockerConsolidateAfter, ref, fmt.Sprintf("pods changed %s ago, consolidateAfter is %s", s.Now.Sub(n.LastPodEvent()).Round(1e9), *d.ConsolidateAfter.Duration)})
	}
	return out
}

// podBlockers are the pods that cannot be moved voluntarily at now: a karpenter.sh/do-not-disrupt
// annotation that protects the pod at now ("true", or a duration not yet run out since the pod
// started: apisv1.PodDoNotDisrupt), or no controller owner (nothing would recreate it
// elsewhere). With all false it returns at the first.
func podBlockers(pods []*corev1.Pod, now time.Time, all bool) []Blocker {
	var out []Blocker
	for _, p := range pods {
		switch {
		case apisv1.PodDoNotDisrupt(p, now):
			out = append(out, Blocker{BlockerDoNotDisrupt, podObject(p), fmt.Sprintf("pod %s is annotated karpenter.sh/do-not-disrupt", podRef(p))})
		case metav1.GetControllerOfNoCopy(p) == nil: // NoCopy: a check, no allocation per pod
			out = append(out, Blocker{BlockerNoController, podObject(p), fmt.Sprintf("pod %s has no controller owner and could not be recreated elsewhere", podRef(p))})
		default:
			continue
		}
		if !all {
			return out
		}
	}
	return out
}

// Standing is a snapshot compiled without a catalog for the rules of Candidates that need none
// (the lifecycle function's DisruptionBlocked condition). Build it with NewStanding; it is
// read-only afterwards.
type Standing struct{ s *State }

// NewStanding compiles snap for Standing.Blockers (snap must not be nil).
func NewStanding(snap *events.Snapshot) *Standing { return &Standing{s: compile(snap, false)} }

// Blockers returns every standing reason the named node is not a consolidation candidate, in
// Candidates' order: the reasons that hold until an object changes (its NodePool being
// deleted or static, consolidateAfter Never, a karpenter.sh/do-not-disrupt annotation on the
// node, its NodeClaim or a pod, a pod without a controller owner, a PodDisruptionBudget, a
// WhenEmpty policy over a node with pods). Left out are the node's passing states (Disrupting,
// NotInitialized), the consolidateAfter countdown (the Consolidatable condition's business), the
// price (UnknownPrice needs the catalog) and the simulation's verdicts (Consolidate's, which
// need the catalog and change with the rest of the cluster). A node that is unknown, has no
// NodeClaim, or whose NodePool is not in the snapshot (not Dovetail's, not registered yet, or a
// pool not listed: an absence is no evidence) has none.
func (st *Standing) Blockers(node string) []Blocker {
	n := st.s.byName[node]
	if n == nil || n.Claim == nil || n.Pool == nil {
		return nil
	}
	return st.s.blockers(n, rules{all: true, standing: true})
}

// PDBs are the snapshot's PodDisruptionBudgets over its bound and pending pods (NewPDBs).
func (st *Standing) PDBs() *PDBs { return st.s.PDBs }
