package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/disruption"
)

// NodeExplanationOutput is what `dovetail explain node -o json` prints: why the node exists,
// why consolidation does not take it (with what removing it would do) and its drift status.
type NodeExplanationOutput struct {
	Origin        NodeOrigin                  `json:"origin"`
	Consolidation *disruption.NodeExplanation `json:"consolidation"`
	Drift         DriftStatus                 `json:"drift"`
}

// NodeOrigin is why a node exists, read from its NodeClaim: the decision annotations Dovetail
// writes (disruption.AnnotationDecision and AnnotationReplaces on a replacement,
// apisv1.AnnotationPlannedPods and AnnotationSnapshotRevision on a provisioned NodeClaim) and a
// static NodePool's spec.replicas.
type NodeOrigin struct {
	Node      string `json:"node"`
	NodeClaim string `json:"nodeClaim,omitempty"`
	NodePool  string `json:"nodePool,omitempty"`
	// LaunchedBy is LaunchedByProvision, LaunchedByDisruption, LaunchedByStatic, or
	// LaunchedByUnknown (a NodeClaim without Dovetail's decision annotations) or LaunchedByNone
	// (no NodeClaim: a node group or a self-managed node).
	LaunchedBy  string   `json:"launchedBy"`
	Decision    string   `json:"decision,omitempty"`
	Replaces    []string `json:"replaces,omitempty"`
	Revision    string   `json:"snapshotRevision,omitempty"`
	PlannedPods []string `json:"plannedPods,omitempty"`
	Message     string   `json:"message"`
}

// LaunchedBy values.
const (
	LaunchedByProvision  = "provision"
	LaunchedByDisruption = "disruption"
	LaunchedByStatic     = "static"
	LaunchedByUnknown    = "unknown"
	LaunchedByNone       = "none"
)

// DriftStatus is the node in the drift function's plan (disruption.PlanDrift): State is
// NotManaged (no NodeClaim or NodePool), NotDrifted, Selected (replaced this round), InProgress, Expired, Blocked or OverBudget; Why is
// the drift or expiry; Blockers name what holds a drifted node.
type DriftStatus struct {
	State    string               `json:"state"`
	Why      string               `json:"why,omitempty"`
	Blockers []disruption.Blocker `json:"blockers,omitempty"`
}

func (w *explainWorld) explainNode(name string) (*NodeExplanationOutput, error) {
	if w.st.Node(name) == nil {
		return nil, usageError{fmt.Errorf("node %s: not in the input", name)}
	}
	c, err := w.st.ExplainNode(name)
	if err != nil {
		return nil, err
	}
	return &NodeExplanationOutput{Origin: w.origin(name), Consolidation: c, Drift: w.drift(name)}, nil
}

// origin reads why the node exists from its NodeClaim.
func (w *explainWorld) origin(node string) NodeOrigin {
	n := w.st.Node(node)
	o := NodeOrigin{Node: node, NodePool: n.Node.Labels[apisv1.LabelNodePool], LaunchedBy: LaunchedByNone}
	nc := n.Claim
	if nc == nil {
		o.Message = "no NodeClaim records the node: it was not launched by Dovetail or Karpenter (a node group or a self-managed node)"
		return o
	}
	o.NodeClaim = nc.Name
	o.Revision = nc.Annotations[apisv1.AnnotationSnapshotRevision]
	switch {
	case nc.Annotations[disruption.AnnotationDecision] != "":
		o.LaunchedBy, o.Decision = LaunchedByDisruption, nc.Annotations[disruption.AnnotationDecision]
		o.Replaces = splitList(nc.Annotations[disruption.AnnotationReplaces])
		o.Message = fmt.Sprintf("NodeClaim %s is a replacement launched by disruption decision %s for node(s) %s",
			nc.Name, o.Decision, strings.Join(o.Replaces, ", "))
	case n.Pool != nil && n.Pool.Spec.Replicas != nil:
		o.LaunchedBy = LaunchedByStatic
		o.Message = fmt.Sprintf("NodeClaim %s keeps static NodePool %s at spec.replicas %d", nc.Name, n.Pool.Name, *n.Pool.Spec.Replicas)
	case nc.Annotations[apisv1.AnnotationPlannedPods] != "":
		o.LaunchedBy = LaunchedByProvision
		o.PlannedPods = splitList(nc.Annotations[apisv1.AnnotationPlannedPods])
		o.Message = fmt.Sprintf("NodeClaim %s was launched by the provision function from NodePool %s for %d pending pod(s): %s",
			nc.Name, o.NodePool, len(o.PlannedPods), strings.Join(o.PlannedPods, ", "))
	default:
		o.LaunchedBy = LaunchedByUnknown
		o.Message = fmt.Sprintf("NodeClaim %s of NodePool %s carries no Dovetail decision annotation (launched by Karpenter, or its planned pods have all been bound)", nc.Name, o.NodePool)
	}
	if o.Revision != "" {
		o.Message += fmt.Sprintf(" (snapshot revision %s)", o.Revision)
	}
	return o
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

// drift finds the node in the drift function's plan.
func (w *explainWorld) drift(node string) DriftStatus {
	if n := w.st.Node(node); n.Claim == nil || n.Pool == nil {
		return DriftStatus{State: "NotManaged", Why: "no NodeClaim or NodePool: the drift function does not replace it"}
	}
	plan := disruption.PlanDrift(w.snap, w.cloud.NodeClassRules)
	for _, c := range plan.Expired {
		if c.Name() == node {
			return DriftStatus{State: "Expired", Why: c.Why()}
		}
	}
	for _, c := range plan.Selected {
		if c.Name() == node {
			return DriftStatus{State: "Selected", Why: c.Why()}
		}
	}
	for _, c := range plan.InProgress {
		if c.Name() == node {
			return DriftStatus{State: "InProgress", Why: c.Why()}
		}
	}
	for _, s := range append(plan.Blocked, plan.OverBudget...) {
		if s.Node == node {
			state := "Blocked"
			if s.Kind == disruption.BlockerBudget {
				state = "OverBudget"
			}
			return DriftStatus{State: state, Why: "drifted", Blockers: []disruption.Blocker{{Kind: s.Kind, Object: s.Object, Message: s.Reason}}}
		}
	}
	return DriftStatus{State: "NotDrifted", Why: "the NodeClaim matches its NodePool and NodeClass, and has not expired"}
}

func writeNodeText(w io.Writer, x *NodeExplanationOutput) {
	c := x.Consolidation
	fmt.Fprintf(w, "Node %s", c.Node)
	if c.NodePool != "" {
		fmt.Fprintf(w, " (NodePool %s", c.NodePool)
		if c.NodeClaim != "" {
			fmt.Fprintf(w, ", NodeClaim %s", c.NodeClaim)
		}
		fmt.Fprint(w, ")")
	}
	fmt.Fprintf(w, ": %s %s in %s, %s\n", c.InstanceType, c.CapacityType, c.Zone, nodePrice(c))
	writeOrigin(w, &x.Origin)
	if len(c.Blockers) == 0 {
		fmt.Fprintln(w, "  Consolidation: no blocker; the consolidate function may delete or replace it")
	} else {
		fmt.Fprintln(w, "  Consolidation blocked by:")
		for _, b := range c.Blockers {
			fmt.Fprintf(w, "    - [%s] %s: %s\n", b.Kind, b.Object, b.Message)
		}
	}
	if r := c.Removal; r != nil {
		writeRemoval(w, r)
	}
	fmt.Fprintf(w, "  Drift: %s", x.Drift.State)
	if x.Drift.Why != "" {
		fmt.Fprintf(w, " (%s)", x.Drift.Why)
	}
	fmt.Fprintln(w)
	for _, b := range x.Drift.Blockers {
		fmt.Fprintf(w, "    - [%s] %s: %s\n", b.Kind, b.Object, b.Message)
	}
}

func nodePrice(c *disruption.NodeExplanation) string {
	if !c.PriceKnown {
		return "price unknown"
	}
	return fmt.Sprintf("%.4f USD/h", c.PricePerHour)
}

func writeOrigin(w io.Writer, o *NodeOrigin) {
	fmt.Fprintf(w, "  Why it exists: %s\n", o.Message)
}

func writeRemoval(w io.Writer, r *disruption.Removal) {
	fmt.Fprintf(w, "  Removing it: %d pod(s) move", len(r.Moves))
	if len(r.Replacements) > 0 {
		fmt.Fprintf(w, ", %d new NodeClaim(s) at %.4f USD/h", len(r.Replacements), r.PriceAfter)
	}
	fmt.Fprintf(w, "; %.4f USD/h before, %.4f USD/h after (saves %.4f USD/h)\n", r.PriceBefore, r.PriceAfter, r.Savings)
	for i, o := range r.Replacements {
		fmt.Fprintf(w, "    new NodeClaim #%d: NodePool %s, %s %s in %s, %.4f USD/h\n", i, o.NodePool, o.InstanceType, o.CapacityType, o.Zone, o.PricePerHour)
	}
	for _, m := range r.Moves {
		to := m.Node
		if m.Replacement >= 0 {
			to = fmt.Sprintf("new NodeClaim #%d", m.Replacement)
		}
		fmt.Fprintf(w, "    %s → %s\n", m.Pod, to)
	}
	for _, s := range r.Stranded {
		fmt.Fprintf(w, "    %s → no place: %s\n", s.Pod, s.Reason)
	}
}
