package lifecycle

import (
	"github.com/dovetail-dev/dovetail/shared/quarantine"
)

// quarantined is the quarantine of sick workloads on the decider's snapshot (shared/quarantine:
// the rule the provision function holds pending replicas by), evaluated once per decision for
// every NodePool's WorkloadsQuarantined condition.
func (d *decider) quarantined() quarantine.Result {
	if d.quarantine == nil {
		res := quarantine.Evaluate(d.snap)
		d.quarantine = &res
	}
	return *d.quarantine
}
