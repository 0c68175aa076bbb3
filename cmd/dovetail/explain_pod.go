package main

import (
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/provreq"
	"github.com/dovetail-dev/dovetail/shared/quarantine"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// PodExplanation is what `dovetail explain pod -o json` prints: for a pending pod, where the
// provision function would place it (Placement) or every NodePool that refused it and why
// (Refusals, the solver's own); for a bound pod, its node's origin and how the pod fits there.
type PodExplanation struct {
	Pod string `json:"pod"`
	// Status is Pending (no spec.nodeName) or Bound.
	Status string `json:"status"`
	Node   string `json:"node,omitempty"`
	// SchedulerMessage is the kube-scheduler's PodScheduled=False message, when the input
	// carries the pod's status.
	SchedulerMessage string                 `json:"schedulerMessage,omitempty"`
	Placement        *PodPlacement          `json:"placement,omitempty"`
	Refusals         []provisioning.Refusal `json:"refusals,omitempty"`
	// Quarantine is set when the provision function holds the pod back as a replica of a sick
	// controller (shared/quarantine): the controller, the NodePool whose settings applied and
	// the evidence, as its FailedScheduling Event says.
	Quarantine *PodQuarantine `json:"quarantine,omitempty"`
	// ProvisioningRequest is set when the pod carries a consume annotation: the provision
	// function never plans it on its own (provreq.HoldBack); its request, the request's class
	// and conditions, or that the request does not exist, and what that means (Message).
	ProvisioningRequest *PodProvisioningRequest `json:"provisioningRequest,omitempty"`
	Origin              *NodeOrigin             `json:"nodeOrigin,omitempty"`
	Fit                 *PodFit                 `json:"fit,omitempty"`
}

// PodProvisioningRequest is the hold of a consumer pod (provreq.Hold) and its message.
type PodProvisioningRequest struct {
	provreq.Hold
	Message string `json:"message"`
}

// PodQuarantine is the quarantine's verdict on a held pod's controller.
type PodQuarantine struct {
	Controller string `json:"controller"`
	NodePool   string `json:"nodePool,omitempty"`
	Message    string `json:"message"`
}

// PodPlacement is where the provision function's plan puts a pending pod: on an existing node
// (Target ExistingNode), an in-flight NodeClaim (InFlightNodeClaim), or a new NodeClaim of a
// NodePool (NewNodeClaim, with the offering its fleet call tries first, USD per hour).
type PodPlacement struct {
	Target       string  `json:"target"`
	Name         string  `json:"name,omitempty"`
	NodePool     string  `json:"nodePool,omitempty"`
	InstanceType string  `json:"instanceType,omitempty"`
	Zone         string  `json:"zone,omitempty"`
	CapacityType string  `json:"capacityType,omitempty"`
	PricePerHour float64 `json:"pricePerHour,omitempty"`
}

// Placement targets.
const (
	TargetExistingNode      = "ExistingNode"
	TargetInFlightNodeClaim = "InFlightNodeClaim"
	TargetNewNodeClaim      = "NewNodeClaim"
)

// PodFit is a bound pod's requests against its node: the node's allocatable and what all its
// pods request (CPU in millicores, memory in MiB, as scheduling.Resources prints them).
type PodFit struct {
	Requests         string `json:"requests"`
	NodeAllocatable  string `json:"nodeAllocatable"`
	NodePodsRequests string `json:"nodePodsRequests"`
	NodePods         int    `json:"nodePods"`
}

func (w *explainWorld) explainPod(ns, name string) (*PodExplanation, error) {
	p := w.findPod(ns, name)
	if p == nil {
		return nil, usageError{fmt.Errorf("pod %s/%s: not in the input", ns, name)}
	}
	x := &PodExplanation{Pod: ns + "/" + name, Status: "Pending"}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			x.SchedulerMessage = c.Message
		}
	}
	if p.Spec.NodeName != "" {
		x.Status, x.Node = "Bound", p.Spec.NodeName
		n := w.st.Node(p.Spec.NodeName)
		if n == nil {
			return nil, usageError{fmt.Errorf("pod %s/%s: bound to node %s, which the input does not hold", ns, name, p.Spec.NodeName)}
		}
		o := w.origin(p.Spec.NodeName)
		x.Origin = &o
		var sum scheduling.Resources
		for _, q := range n.Pods {
			sum = sum.Add(scheduling.PodRequests(q))
		}
		x.Fit = &PodFit{Requests: scheduling.PodRequests(p).String(), NodeAllocatable: scheduling.FromList(n.Node.Status.Allocatable).String(),
			NodePodsRequests: sum.String(), NodePods: len(n.Pods)}
		return x, nil
	}
	key := x.Pod
	// The provision function's order (functions/provision Decide): consumers of
	// ProvisioningRequests are held back, the quarantine holds sick controllers' replicas back,
	// the solver plans the rest under the scale-up rate policies, and the anomaly hold keeps
	// back what the plan would add to a held NodePool.
	if _, err := provisioning.ReservationCountsFromAnnotations(w.set.NodeClasses); err != nil {
		return nil, usageError{err}
	}
	pending, held := provreq.HoldBack(w.snap)
	for i := range held {
		if podName(held[i].Pod) == key {
			x.ProvisioningRequest = &PodProvisioningRequest{Hold: held[i], Message: held[i].Message()}
			return x, nil
		}
	}
	base := *w.snap
	base.PendingPods = pending
	res := quarantine.Evaluate(&base)
	for i := range res.Verdicts {
		v := &res.Verdicts[i]
		for _, q := range v.Held {
			if podName(q) == key {
				x.Quarantine = &PodQuarantine{Controller: v.Controller.String(), NodePool: v.NodePool, Message: v.Message()}
				return x, nil
			}
		}
	}
	work := base
	work.PendingPods = res.Pending
	in := provisioning.InputFromSnapshot(&work, w.cat, w.cloud.NodeSettings)
	in.Policies = w.pol
	in.ScaleUpGuardrails = true
	plan, err := provisioning.Solve(in)
	if err != nil {
		return nil, usageError{err}
	}
	provisioning.HoldAnomalies(&in, plan)
	for _, u := range plan.Unschedulable {
		if podName(u.Pod) == key {
			x.Refusals = u.Refusals
			return x, nil
		}
	}
	for _, nc := range plan.NodeClaims {
		for _, q := range nc.Pods {
			if podName(q) == key {
				o := nc.Cheapest()
				x.Placement = &PodPlacement{Target: TargetNewNodeClaim, NodePool: nc.NodePool.Name, InstanceType: o.InstanceType.Name,
					Zone: o.Zone, CapacityType: o.CapacityType, PricePerHour: o.PricePerHour}
				return x, nil
			}
		}
	}
	for _, e := range plan.ExistingNodes {
		for _, q := range e.Pods {
			if podName(q) == key {
				t := TargetExistingNode
				if e.InFlight {
					t = TargetInFlightNodeClaim
				}
				x.Placement = &PodPlacement{Target: t, Name: e.Name}
				return x, nil
			}
		}
	}
	return x, nil
}

func writePodText(w io.Writer, x *PodExplanation) {
	fmt.Fprintf(w, "Pod %s: %s", x.Pod, x.Status)
	if x.Node != "" {
		fmt.Fprintf(w, " on node %s", x.Node)
	}
	fmt.Fprintln(w)
	if x.SchedulerMessage != "" {
		fmt.Fprintf(w, "  kube-scheduler: %s\n", x.SchedulerMessage)
	}
	switch p := x.Placement; {
	case p == nil:
	case p.Target == TargetNewNodeClaim:
		fmt.Fprintf(w, "  The provision function would launch a NodeClaim of NodePool %s for it: %s %s in %s, %.4f USD/h\n",
			p.NodePool, p.InstanceType, p.CapacityType, p.Zone, p.PricePerHour)
	case p.Target == TargetInFlightNodeClaim:
		fmt.Fprintf(w, "  It fits on NodeClaim %s, which is launching: it waits for that node\n", p.Name)
	default:
		fmt.Fprintf(w, "  It fits on existing node %s: the kube-scheduler can bind it there\n", p.Name)
	}
	if q := x.Quarantine; q != nil {
		fmt.Fprintf(w, "  Held back by the quarantine of %s (the provision function plans none of its pending replicas beyond the allowance): %s\n", q.Controller, q.Message)
	}
	if r := x.ProvisioningRequest; r != nil {
		fmt.Fprintf(w, "  Held back from ordinary provisioning, it %s\n", r.Message)
		for _, c := range r.Conditions {
			fmt.Fprintf(w, "    %s=%s %s: %s (since %s)\n", c.Type, c.Status, c.Reason, c.Message, c.LastTransitionTime.UTC().Format(time.RFC3339))
		}
	}
	if len(x.Refusals) > 0 {
		fmt.Fprintln(w, "  No NodePool can take it:")
		for _, r := range x.Refusals {
			fmt.Fprintf(w, "    - [%s] %s\n", r.Kind, r.Message)
		}
	}
	if x.Status == "Pending" && x.Placement == nil && len(x.Refusals) == 0 && x.Quarantine == nil && x.ProvisioningRequest == nil {
		fmt.Fprintln(w, "  The plan neither places nor refuses it")
	}
	if x.Origin != nil {
		writeOrigin(w, x.Origin)
	}
	if f := x.Fit; f != nil {
		fmt.Fprintf(w, "  Fit: the pod requests %s; the node's %d pod(s) request %s of its allocatable %s\n",
			f.Requests, f.NodePods, f.NodePodsRequests, f.NodeAllocatable)
	}
}
