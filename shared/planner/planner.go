// Package planner turns a set of Kubernetes manifests into the solver's input, the one path
// `dovetail plan` and the scenario suite (testdata/scenarios) share: manifests → Input → Solve.
package planner

import (
	"fmt"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/manifests"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// Input builds the solver's input from manifests (LimitRanges give every pod, and the solver
// every DaemonSet pod, the defaults admission would), planning allocatable with the cloud
// provider's node settings rule (settings, from the edge): the pods of controllers and the Pods without
// spec.nodeName are pending; Pods with spec.nodeName run on that Node (which must be in the
// manifests); NodePools, EC2NodeClasses, NodeClaims, Nodes and DaemonSets are passed as read;
// claims come from Set.ExpandPVCs (documents, StatefulSet volumeClaimTemplates, ephemeral
// volumes, default StorageClass), PersistentVolumes and StorageClasses as read.
//
// Error: a bound Pod whose node is not in the manifests ("pod ns/name: spec.nodeName: ...").
func Input(set *manifests.Set, cat *catalog.Catalog, settings provisioning.NodeSettingsFunc) (provisioning.Input, error) {
	in := provisioning.Input{Catalog: cat, NodeSettings: settings, Nodes: set.Nodes, DaemonSets: set.DaemonSets, LimitRanges: set.LimitRanges,
		NodePools: set.NodePools, NodeClasses: set.NodeClasses, NodeClaims: set.NodeClaims,
		PVCs: set.ExpandPVCs(), PVs: set.PVs, StorageClasses: set.StorageClasses}
	nodes := map[string]bool{}
	for _, n := range set.Nodes {
		nodes[n.Name] = true
	}
	for _, p := range set.ExpandPods() {
		// Manifests are not admitted yet: the namespace's LimitRanges give their defaults, as
		// the API server's LimitRanger would before any scheduler sees the pod.
		p.Spec = scheduling.ApplyLimitRangeDefaults(p.Spec, scheduling.LimitRangesIn(set.LimitRanges, p.Namespace))
		if p.Spec.NodeName == "" {
			in.Pods = append(in.Pods, p)
			continue
		}
		if !nodes[p.Spec.NodeName] {
			return provisioning.Input{}, fmt.Errorf("pod %s/%s: spec.nodeName: node %q is not in the manifests", p.Namespace, p.Name, p.Spec.NodeName)
		}
		in.BoundPods = append(in.BoundPods, p)
	}
	return in, nil
}

// Plan is Input followed by provisioning.Solve; it also returns the input it solved.
func Plan(set *manifests.Set, cat *catalog.Catalog, settings provisioning.NodeSettingsFunc) (*provisioning.Plan, provisioning.Input, error) {
	in, err := Input(set, cat, settings)
	if err != nil {
		return nil, in, err
	}
	plan, err := provisioning.Solve(in)
	return plan, in, err
}
