package provisioning

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// daemon is a DaemonSet's pod template compiled for overhead checks.
type daemon struct {
	name        string // namespace/name
	requests    scheduling.Resources
	alts        []scheduling.Requirements
	tolerations []corev1.Toleration
	ports       []scheduling.HostPort
}

// compileDaemons compiles the DaemonSets' pod templates, each with the defaults its
// namespace's LimitRanges give at admission (the API server admits every DaemonSet pod through
// LimitRanger, so its requests are those defaults where the template states none).
func compileDaemons(dss []*appsv1.DaemonSet, lrs []*corev1.LimitRange) []daemon {
	out := make([]daemon, 0, len(dss))
	for _, ds := range dss {
		pod := &corev1.Pod{Spec: scheduling.ApplyLimitRangeDefaults(ds.Spec.Template.Spec, scheduling.LimitRangesIn(lrs, ds.Namespace))}
		if scheduling.HasDRARequirements(pod) {
			continue // its requests are not counted, as Karpenter skips DRA daemon pods
		}
		alts, err := scheduling.PodNodeRequirements(pod)
		if err != nil || len(alts) == 0 {
			continue // a DaemonSet that cannot run anywhere adds no overhead
		}
		out = append(out, daemon{name: ds.Namespace + "/" + ds.Name, requests: scheduling.PodRequests(pod), alts: alts, tolerations: pod.Spec.Tolerations, ports: scheduling.PodHostPorts(pod)})
	}
	return out
}

// runsOn reports whether the DaemonSet would run on a node with these labels and taints, with
// zone and capacity type still open (checked against the pool's requirements).
func (d *daemon) runsOn(labels map[string]string, taints []corev1.Taint, poolReqs scheduling.Requirements) bool {
	if scheduling.UntoleratedTaint(d.tolerations, taints) != nil {
		return false
	}
	for _, alt := range d.alts {
		ok := true
		for _, k := range alt.Keys() {
			r := alt[k]
			if offeringKeys[k] {
				if pr, has := poolReqs[k]; has && pr.Intersect(r).Unsatisfiable() {
					ok = false
					break
				}
				continue
			}
			if err := (scheduling.Requirements{k: r}).MatchLabels(labels); err != nil {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// lifecycleLabels are the labels every node a NodePool launches carries once it has joined,
// whatever the NodePool: the lifecycle function writes karpenter.sh/registered=true when it
// registers the Node against its NodeClaim and karpenter.sh/initialized=true once the node is
// initialized (shared/lifecycle), as Karpenter does. A DaemonSet whose node affinity or
// nodeSelector asks for either runs on every such node, so its pods count in the node's overhead;
// Karpenter adds both as requirements of every NodeClaimTemplate for the same reason
// (kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go,
// NewNodeClaimTemplate; issue #919, fixed by PR #2161).
var lifecycleLabels = map[string]string{apisv1.LabelNodeRegistered: "true", apisv1.LabelNodeInitialized: "true"}

// withLifecycleLabels returns the labels a node with these labels will carry once registered
// and initialized (lifecycleLabels added; the lifecycle function's values win). labels is not
// modified; the result is labels itself when it already carries them, so callers only read it.
func withLifecycleLabels(labels map[string]string) map[string]string {
	// A node that has joined already carries them: the merge would be a copy of its labels,
	// made for every node on every solver run (a tenth of a large cluster's compile).
	for k, v := range lifecycleLabels {
		if w, ok := labels[k]; !ok || w != v {
			return mergeLabels(labels, lifecycleLabels)
		}
	}
	return labels
}

// daemonLabels are the labels DaemonSets are matched against on an existing node or in-flight
// NodeClaim: its own, and lifecycleLabels on a NodePool's node (karpenter.sh/nodepool set), which
// carries them once it has joined even if it does not yet (registered, not yet initialized).
func daemonLabels(labels map[string]string) map[string]string {
	if labels[apisv1.LabelNodePool] == "" {
		return labels
	}
	return withLifecycleLabels(labels)
}
