package preview

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// assume gives a cluster without NodePools the assumed NodePool (AssumedNodePool) and marks it
// for migration in the first round.
func (r *runner) assume() error {
	kind := r.o.NodeClassKind
	if kind == "" {
		kind = apisv1.KindEC2NodeClass
	}
	np, class, what, err := AssumedNodePool(kind)
	if err != nil {
		return err
	}
	r.w.snap.NodePools = append(r.w.snap.NodePools, *np)
	if apisv1.FindNodeClass(r.w.snap.NodeClasses, np.Spec.Template.Spec.NodeClassRef).IsZero() {
		r.w.snap.NodeClasses = append(r.w.snap.NodeClasses, class)
	}
	r.res.Assumed, r.res.AssumedWhat = np, what
	r.migrating = true
	return nil
}

// migrate drains the node groups onto the assumed NodePool, as switching to Dovetail means
// (the node groups scaled to zero, their pods pending, the provision function placing them).
// AKS system node pools stay (a cluster must keep one).
// A node stays where a pod may not be evicted (karpenter.sh/do-not-disrupt, no controller to
// recreate it, a PodDisruptionBudget allowing no disruption: kubectl drain stops there too), or
// where a pod has no place on the NodePool (a node selector only the node group satisfies).
func (r *runner) migrate() error {
	drain := r.drainable()
	if len(drain) == 0 {
		return nil
	}
	var plan *provisioning.Plan
	for len(drain) > 0 {
		in, _ := disruption.EvacuationInput(r.w.snap, r.o.Catalog, r.o.NodeSettings, drain, nil)
		in.Policies, in.Requests = r.o.Policies, r.reqs
		var err error
		if plan, err = provisioning.Solve(in); err != nil {
			return err
		}
		stay := map[string]bool{}
		for _, u := range plan.Unschedulable {
			node := r.podNode(podKey(u.Pod))
			if !stay[node] {
				stay[node] = true
				r.block(Blocker{Node: node, Function: FunctionMigration, Kind: disruption.BlockerNoPlace,
					Reason: fmt.Sprintf("node group node kept: pod %s has no place on NodePool %s: %s", podKey(u.Pod), r.res.Assumed.Name, u.Reason)})
			}
		}
		if len(stay) == 0 {
			break
		}
		kept := drain[:0]
		for _, n := range drain {
			if !stay[n] {
				kept = append(kept, n)
			}
		}
		drain, plan = kept, nil
	}
	if plan == nil {
		return nil
	}
	d := Decision{Function: FunctionMigration, Action: ActionReplace, Reason: ReasonNodeGroupDrained,
		Why: fmt.Sprintf("%d node group node(s) drained; their pods placed on the other nodes and on NodePool %s", len(drain), r.res.Assumed.Name)}
	for _, n := range drain {
		d.Nodes = append(d.Nodes, r.w.ref(n))
		d.PricePerHourBefore += d.Nodes[len(d.Nodes)-1].PricePerHour
	}
	var err error
	if d.Moved, d.Launched, err = r.apply(plan); err != nil {
		return err
	}
	d.PricePerHourAfter = launchedPrice(d.Launched)
	for _, n := range drain {
		r.w.leaving[n] = true
	}
	r.add(d)
	return nil
}

// drainable lists the nodes no NodePool manages whose pods may all be evicted, reporting the
// others.
func (r *runner) drainable() []string {
	var all []*corev1.Pod
	for i := range r.w.snap.Pods {
		all = append(all, &r.w.snap.Pods[i])
	}
	pdbs := disruption.NewPDBs(r.w.snap.PDBs, all)
	var out []string
	for i := range r.w.snap.Nodes {
		n := &r.w.snap.Nodes[i]
		if kind, _ := NodeOwner(n); kind == OwnerNodePool || disruption.MarkedForDeletion(n, r.w.claimOf(n)) {
			continue
		}
		var why string
		var kind disruption.BlockerKind
		if n.Labels[apisv1.AKSLabelMode] == apisv1.ModeSystem {
			r.block(Blocker{Node: n.Name, Function: FunctionMigration, Kind: BlockerSystemPool,
				Reason: "node group node kept: an AKS system node pool (kubernetes.azure.com/mode=system): AKS needs one, node auto-provisioning does not replace it"})
			continue
		}
		for _, p := range r.w.pods(n.Name) {
			if !disruption.Evacuable(p) {
				continue
			}
			if b, ok := disruption.PodsBlocker([]*corev1.Pod{p}, r.w.now()); ok {
				why, kind = b.Message, b.Kind
			} else if err := pdbs.Check([]*corev1.Pod{p}); err != nil {
				why, kind = err.Error(), disruption.BlockerPDB
			}
			if why != "" {
				break
			}
		}
		if why != "" {
			r.block(Blocker{Node: n.Name, Function: FunctionMigration, Kind: kind, Reason: "node group node kept: " + why})
			continue
		}
		out = append(out, n.Name)
	}
	sort.Strings(out)
	return out
}

// podNode is the node a pod is bound to in the world.
func (r *runner) podNode(pod string) string {
	for i := range r.w.snap.Pods {
		if podKey(&r.w.snap.Pods[i]) == pod {
			return r.w.snap.Pods[i].Spec.NodeName
		}
	}
	return ""
}

// lowerBound is what no arrangement of the converged cluster can beat, USD per hour: the nodes
// Dovetail keeps as they are (not managed by a NodePool, or held by a pod that may never be
// moved: do-not-disrupt, no controller, a PodDisruptionBudget allowing no disruption) at their
// price, plus the fit-cut bound (shared/provisioning/lowerbound, through provisioning.Solve)
// of placing every other pod of the NodePools' nodes on new nodes of the NodePools. It returns
// the bound and the kept part.
func (r *runner) lowerBound() (float64, float64, error) {
	st, err := disruption.NewState(r.w.snap, r.o.Catalog, r.o.NodeSettings)
	if err != nil {
		return 0, 0, err
	}
	st.Policies, st.Requests = r.o.Policies, r.reqs
	prices := map[string]NodeCost{}
	for _, n := range SnapshotCost(r.w.snap, r.o.Catalog).Nodes {
		prices[n.Name] = n
	}
	var kept float64
	var pods []*corev1.Pod
	for _, n := range st.Nodes {
		held := n.Pool == nil || n.Claim == nil
		for _, p := range n.Movable {
			held = held || disruption.PodsBlock([]*corev1.Pod{p}, r.w.now()) != "" || st.PDBs.Check([]*corev1.Pod{p}) != nil
		}
		if held {
			kept += prices[n.Name()].PricePerHour
			continue
		}
		for _, p := range n.Movable {
			q := p.DeepCopy()
			q.Spec.NodeName, q.Status = "", corev1.PodStatus{Phase: corev1.PodPending}
			pods = append(pods, q)
		}
	}
	if len(pods) == 0 {
		return kept, kept, nil
	}
	in := provisioning.InputFromSnapshot(r.w.snap, r.o.Catalog, r.o.NodeSettings)
	in.Policies, in.Requests = r.o.Policies, r.reqs
	in.Pods, in.Nodes, in.BoundPods, in.NodeClaims = pods, nil, nil, nil
	plan, err := provisioning.Solve(in)
	if err != nil {
		return 0, 0, err
	}
	return kept + plan.LowerBoundPerHour, kept, nil
}
