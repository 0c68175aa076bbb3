package disruption

import (
	"time"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// A round's expired nodes are handed to the termination path together, as Karpenter does: its
// expiration controller deletes each expired NodeClaim with no simulation and no budget
// (sigs.k8s.io/karpenter pkg/controllers/nodeclaim/expiration), and its provisioner then
// schedules the pods of every node being deleted together with the pending pods, over the nodes
// not being deleted (pkg/controllers/provisioning/provisioner.go, Schedule: nodes.Deleting()
// pods appended to the pending pods, nodes.Active() as the existing capacity). Planned one node
// at a time, with the other expired nodes still counted as capacity, a pod evicted from one
// could be placed on another expiring in the same round and be moved twice. The drift function
// and the preview both go through ExpiryInput and ExpiryRound, so the preview's launches and
// hand-offs are the function's.

// ExpiryInput is the solver input that places the evacuable pods of all the round's expired
// nodes (PlanDrift.Expired) at once: every one of them and its NodeClaim left out
// (EvacuationInput over their names), their pods pending. ok is false when none of them has an
// evacuable pod (nothing to place: no launch).
func ExpiryInput(snap *events.Snapshot, cat *catalog.Catalog, settings provisioning.NodeSettingsFunc, cs []DriftCandidate) (in provisioning.Input, ok bool) {
	names := make([]string, 0, len(cs))
	for i := range cs {
		names = append(names, cs[i].Name())
		ok = ok || len(cs[i].Pods) > 0
	}
	if !ok {
		return provisioning.Input{}, false
	}
	in, _ = EvacuationInput(snap, cat, settings, names, nil)
	return in, true
}

// ExpiryRound is the round's expired nodes' disruptions, in the order given: each node's is
// Expiry's (forced, no budget, handed off at once; its commands and IDs as for a node expiring
// alone), and the NodeClaims of plan (ExpiryInput solved; nil when no pod moves) are the first
// one's replacements, so they are launched, and not waited for, before any node is handed off.
// Nil when cs is empty.
func ExpiryRound(cs []DriftCandidate, plan *provisioning.Plan, rev int64, at time.Time) []Disruption {
	out := make([]Disruption, 0, len(cs))
	for i, c := range cs {
		var p *provisioning.Plan
		if i == 0 {
			p = plan
		}
		out = append(out, Expiry(c, p, rev, at))
	}
	return out
}
