// Package preview answers "what would Dovetail do on this cluster, and what would it save?"
// without touching it: over a cluster snapshot (built from a dump of a live cluster) it runs
// the decisions of the provision, drift (with expiry) and consolidate functions — through the
// same shared/disruption and shared/provisioning entry points the functions call — applies
// their effects to a copy of the cluster, and repeats until nothing changes. It reports every
// decision (what goes, what replaces it, why), what blocks the others (PodDisruptionBudgets,
// karpenter.sh/do-not-disrupt, disruption budgets), today's $/h at catalog prices, the $/h the
// cluster converges to, and a lower bound on it.
//
// Like the core it calls, it reads no clock and does no I/O: the snapshot's time is "now".
package preview

import (
	"fmt"
	"math"
	"time"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// Functions a decision comes from.
const (
	FunctionProvision     = "provision"
	FunctionDrift         = "drift" // drift and expiry
	FunctionConsolidation = "consolidate"
	FunctionLifecycle     = "lifecycle" // termination: a grace period that ran out
	// FunctionMigration is not a function: the node groups of a cluster without NodePools,
	// drained onto the assumed NodePool (what switching means).
	FunctionMigration = "migration"
)

// Actions.
const (
	ActionLaunch   = "launch"   // new NodeClaims for pending pods
	ActionDelete   = "delete"   // nodes go; their pods fit elsewhere
	ActionReplace  = "replace"  // nodes go; new NodeClaims take (some of) their pods
	ActionContinue = "continue" // a disruption already under way in the cluster goes on
)

// Reasons besides the disruption reasons (apisv1.DisruptionReasonEmpty, Underutilized,
// Drifted and disruption.ReasonExpired).
const (
	ReasonPending          = "Pending"
	ReasonNodeGroupDrained = "NodeGroupDrained"
	ReasonGraceExpired     = "TerminationGracePeriodPassed"
	ReasonInProgress       = "InProgress"
)

// DefaultMaxRounds bounds a preview: each round is at most one consolidation decision (the
// consolidate function starts none while one is in flight), so a cluster consolidated one node
// at a time needs about as many rounds as nodes.
const DefaultMaxRounds = 200

// MinRoundInterval is the least simulated time between two rounds.
const MinRoundInterval = time.Minute

// Options configure Run.
type Options struct {
	Catalog *catalog.Catalog
	// NodeSettings is the cloud provider's NodeClass → node settings rule (from the edge).
	NodeSettings provisioning.NodeSettingsFunc
	// Policies are the operator's scheduling policies the functions plan under
	// (--min-values-policy, --preference-policy), so the preview plans as they will.
	Policies provisioning.Policies
	// NodeClassRules are the cloud's NodeClass drift rules (registry.Cloud.NodeClassRules, the
	// drift function's cloud.RulesOf its provider); nil checks only the NodePools' drift.
	NodeClassRules cloud.NodeClassRules
	// Consolidation tunes the consolidation decisions (the function's defaults when zero).
	Consolidation disruption.Options
	// MaxRounds bounds the rounds (DefaultMaxRounds when 0).
	MaxRounds int
	// NodeClassKind picks the assumed NodePool of a cluster without NodePools
	// (apisv1.KindEC2NodeClass when empty).
	NodeClassKind string
	// Owned says the caller hands snap over: Run changes it in place instead of working on a
	// deep copy (a copy of a 100,000-pod snapshot is most of a gigabyte). The caller must not
	// read snap afterwards.
	Owned bool
	// OnRound, when set, is called as each round starts, with its number (1, 2, ...): a
	// preview of a large cluster takes seconds, and the CLI says how far it got.
	OnRound func(n int)
}

// Result is what the preview found.
type Result struct {
	Time time.Time `json:"time"`
	// Assumed is set for a cluster without NodePools: the NodePool the preview migrates its
	// node groups to (its name), and what it is.
	Assumed     *apisv1.NodePool `json:"-"`
	AssumedPool string           `json:"assumedNodePool,omitempty"`
	AssumedWhat string           `json:"assumedNodePoolIs,omitempty"`
	Today       Cost             `json:"today"`
	Rounds      []Round          `json:"rounds"`
	Converged   Cost             `json:"converged"`
	// SavingPerHour is Today − Converged (USD per hour).
	SavingPerHour float64 `json:"savingPerHour"`
	// LowerBoundPerHour (USD per hour) is what no arrangement of the converged cluster's pods can
	// beat while the nodes Dovetail keeps stay (see lowerBound).
	LowerBoundPerHour float64 `json:"lowerBoundPerHour"`
	// KeptPerHour is the part of the bound that is kept nodes: not managed by a NodePool, or
	// held by a pod that may not move.
	KeptPerHour float64 `json:"keptPerHour"`
	// PendingPods counts the pods pending at the start: the converged cluster runs them too, so
	// it may cost more than today's.
	PendingPods int `json:"pendingPods"`
	// Unschedulable are pods that no node and no NodePool can take at the end.
	Unschedulable []PodProblem `json:"unschedulable"`
	// Nominated are pending pods the solver placed on an in-flight NodeClaim (launched, its node
	// not registered yet), with its name: they wait for it, as Karpenter's scheduler counts
	// in-flight NodeClaims as capacity and nominates pods to them (sigs.k8s.io/karpenter
	// pkg/controllers/provisioning/scheduling: existing nodes include the in-flight ones; its
	// Nominated event "Pod should schedule on: nodeclaim/<name>"). They are not unschedulable.
	Nominated []PodMove `json:"nominated"`
	// Stopped says why the rounds ended.
	Stopped string `json:"stopped"`
}

// Round is what the functions decide on one snapshot, and what blocks the rest.
type Round struct {
	N         int        `json:"round"`
	Time      time.Time  `json:"time"`
	Decisions []Decision `json:"decisions"`
	Blocked   []Blocker  `json:"blocked"`
	// Notes are what the consolidation tried (disruption.Report.Tried) and budget errors.
	Notes []string `json:"notes,omitempty"`
}

// Decision is one decision a function would take.
type Decision struct {
	Function string `json:"function"`
	Action   string `json:"action"`
	Reason   string `json:"reason"`
	// Why explains it in one line; DriftedField names the field that drifted.
	Why          string `json:"why"`
	DriftedField string `json:"driftedField,omitempty"`
	// Nodes are the nodes deleted or replaced.
	Nodes []NodeRef `json:"nodes"`
	// Launched are the new NodeClaims (as nodes once registered).
	Launched []Launch `json:"launched"`
	// Moved says where each moved pod goes: an existing node or a launched one.
	Moved []PodMove `json:"moved"`
	// Waits are what the drain waits for (PDBs allowing no disruption, do-not-disrupt pods),
	// and until when.
	Waits []string `json:"waits,omitempty"`
	// Commands are the commands the deciding function publishes for it, in order, one a line
	// ("<kind> <node or NodeClaim> <command ID>"): disruption.Sequence's, the function's own
	// (the launches' CreateNodeClaim commands are the launch step's and not listed).
	Commands []string `json:"commands,omitempty"`
	// PricePerHourBefore sums Nodes, PricePerHourAfter Launched (USD per hour).
	PricePerHourBefore float64 `json:"pricePerHourBefore"`
	PricePerHourAfter  float64 `json:"pricePerHourAfter"`
}

// NodeRef is a node and its offering's price.
type NodeRef struct {
	Name         string  `json:"name"`
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	PricePerHour float64 `json:"pricePerHour"`
	PriceSource  string  `json:"priceSource"`
}

// Launch is a new NodeClaim: the offering the fleet call would get first, the types it may
// fall back to, and the pods planned onto it.
type Launch struct {
	Name                string   `json:"name"`
	NodePool            string   `json:"nodePool"`
	InstanceType        string   `json:"instanceType"`
	Zone                string   `json:"zone"`
	CapacityType        string   `json:"capacityType"`
	PricePerHour        float64  `json:"pricePerHour"`
	PriceSource         string   `json:"priceSource"`
	InstanceTypeOptions []string `json:"instanceTypeOptions"`
	Pods                []string `json:"pods"`
}

// PodMove is where a pod goes.
type PodMove struct {
	Pod string `json:"pod"`
	To  string `json:"to"`
}

// Blocker is a node a function would disrupt (or consider) but may not, with why.
type Blocker struct {
	Node     string `json:"node"`
	Function string `json:"function"`
	// Kind is the rule that refused, as shared/disruption types it (disruption.BlockerPDB,
	// BlockerDoNotDisrupt, BlockerBudget, ...), or BlockerSystemPool.
	Kind   disruption.BlockerKind `json:"kind"`
	Reason string                 `json:"reason"`
}

// BlockerSystemPool is the migration's own kind: an AKS system node pool node is kept (AKS
// needs one), which no disruption rule says.
const BlockerSystemPool disruption.BlockerKind = "SystemPool"

// PodProblem is a pod with a reason.
type PodProblem struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// Run previews the snapshot: round after round (simulated MinRoundInterval, or the NodePools'
// longest consolidateAfter, apart), the decisions of every function on the cluster as the
// earlier rounds left it, until a round decides nothing (or MaxRounds). Errors: an unusable
// input (no catalog), a node settings error.
func Run(snap *events.Snapshot, o Options) (*Result, error) {
	if o.Catalog == nil {
		return nil, fmt.Errorf("catalog: required")
	}
	if o.MaxRounds <= 0 {
		o.MaxRounds = DefaultMaxRounds
	}
	res := &Result{Time: snap.Time.Time, Today: SnapshotCost(snap, o.Catalog), PendingPods: len(snap.PendingPods)}
	if !o.Owned {
		snap = cloneSnapshot(snap)
	}
	r := &runner{o: o, w: newWorld(snap, o.Catalog, o.NodeSettings), reqs: scheduling.NewRequestMemo(),
		bins: provisioning.NewBinCache()}
	r.res = res
	if len(snap.NodePools) == 0 {
		if err := r.assume(); err != nil {
			return nil, err
		}
	}
	if err := r.rounds(); err != nil {
		return nil, err
	}
	res.Converged = SnapshotCost(r.w.snap, o.Catalog)
	for i := range r.w.snap.PendingPods {
		p := &r.w.snap.PendingPods[i]
		if claim, ok := r.nominated[podKey(p)]; ok {
			res.Nominated = append(res.Nominated, PodMove{Pod: podKey(p), To: claim})
			continue
		}
		res.Unschedulable = append(res.Unschedulable, PodProblem{Pod: podKey(p), Reason: r.unplaced[podKey(p)]})
	}
	var err error
	if res.LowerBoundPerHour, res.KeptPerHour, err = r.lowerBound(); err != nil {
		return nil, err
	}
	res.finish()
	return res, nil
}

// finish rounds every price to a tenth of a micro-dollar (float sums print cleanly) and gives
// empty lists instead of nil ones, so the JSON always has the same keys and shapes.
func (res *Result) finish() {
	if res.Assumed != nil {
		res.AssumedPool = res.Assumed.Name
	}
	res.SavingPerHour = Round7(res.Today.PricePerHour - res.Converged.PricePerHour)
	res.LowerBoundPerHour, res.KeptPerHour = Round7(res.LowerBoundPerHour), Round7(res.KeptPerHour)
	res.Today.finish()
	res.Converged.finish()
	if res.Rounds == nil {
		res.Rounds = []Round{}
	}
	if res.Unschedulable == nil {
		res.Unschedulable = []PodProblem{}
	}
	if res.Nominated == nil {
		res.Nominated = []PodMove{}
	}
	for i := range res.Rounds {
		r := &res.Rounds[i]
		if r.Decisions == nil {
			r.Decisions = []Decision{}
		}
		if r.Blocked == nil {
			r.Blocked = []Blocker{}
		}
		for j := range r.Decisions {
			d := &r.Decisions[j]
			d.PricePerHourBefore, d.PricePerHourAfter = Round7(d.PricePerHourBefore), Round7(d.PricePerHourAfter)
			if d.Nodes == nil {
				d.Nodes = []NodeRef{}
			}
			if d.Launched == nil {
				d.Launched = []Launch{}
			}
			if d.Moved == nil {
				d.Moved = []PodMove{}
			}
		}
	}
}

func (c *Cost) finish() {
	c.PricePerHour = Round7(c.PricePerHour)
	for i := range c.Groups {
		c.Groups[i].PricePerHour = Round7(c.Groups[i].PricePerHour)
	}
	if c.Nodes == nil {
		c.Nodes = []NodeCost{}
	}
	if c.Groups == nil {
		c.Groups = []GroupCost{}
	}
}

// Round7 rounds a USD figure to a tenth of a micro-dollar, the precision every plan and
// preview prints (JSON and table).
func Round7(v float64) float64 { return math.Round(v*1e7) / 1e7 }

// runner carries one preview.
type runner struct {
	o   Options
	w   *world
	res *Result
	cur *Round
	// unplaced remembers why the solver could not place a pod.
	unplaced map[string]string
	// nominated remembers the in-flight NodeClaim the solver last placed a pending pod on.
	nominated map[string]string
	// migrating: a cluster without NodePools, whose node groups the first round drains.
	migrating bool
	// reqs memoizes the pods' requests across every solver run of the preview (provisioning.Input
	// and disruption.State Requests): each run compiles the whole cluster's bound pods.
	reqs *scheduling.RequestMemo
	// bins keeps the nodes' bins across those runs (provisioning.BinCache): between two
	// evacuations of a round only a few nodes change.
	bins *provisioning.BinCache
}

// rounds runs rounds until one decides nothing. A drain that waits for a pod only a grace
// period will end jumps the clock to that deadline rather than stopping.
func (r *runner) rounds() error {
	step := r.interval()
	for n := 1; ; n++ {
		if n > r.o.MaxRounds {
			r.res.Stopped = fmt.Sprintf("stopped after %d rounds, still changing", r.o.MaxRounds)
			return nil
		}
		r.cur = &Round{N: n, Time: r.w.now()}
		if r.o.OnRound != nil {
			r.o.OnRound(n)
		}
		if err := r.round(n == 1); err != nil {
			return err
		}
		r.w.endRound()
		sortBlockers(r.cur.Blocked)
		next := r.w.now().Add(step)
		if len(r.cur.Decisions) == 0 {
			d, ok := r.nextDeadline()
			if !ok {
				// The last round is kept: its blockers are what holds the cluster where it is.
				r.res.Rounds = append(r.res.Rounds, *r.cur)
				r.res.Stopped = fmt.Sprintf("fixed point after %d round(s): no function decides anything more", n)
				return nil
			}
			next = d
		}
		if len(r.cur.Decisions) > 0 || n == 1 {
			r.res.Rounds = append(r.res.Rounds, *r.cur)
		}
		r.w.snap.Time.Time = next
		r.w.snap.Revision++
	}
}

// interval is the simulated time between rounds: the NodePools' longest consolidateAfter (so
// nodes that received pods in a round may be consolidated in the next), at least
// MinRoundInterval.
func (r *runner) interval() time.Duration {
	step := MinRoundInterval
	for i := range r.w.snap.NodePools {
		if ca := r.w.snap.NodePools[i].Spec.Disruption.ConsolidateAfter; ca != nil && ca.Duration != nil && *ca.Duration > step {
			step = *ca.Duration
		}
	}
	return step
}

// round runs each function once, in the order their effects reach the cluster: the pending
// pods are placed (provision), disruptions already under way go on (first round only), expired
// nodes are handed to the termination path, drifted nodes are replaced within budget, then
// one consolidation is decided on the cluster as those left it (their taints count against the
// budgets, as the agent's ledger counts them).
func (r *runner) round(first bool) error {
	if first && r.migrating {
		if err := r.migrate(); err != nil {
			return err
		}
	}
	if err := r.provision(); err != nil {
		return err
	}
	if first {
		if err := r.inProgress(); err != nil {
			return err
		}
	}
	if err := r.terminateOverdue(); err != nil {
		return err
	}
	if err := r.drift(); err != nil {
		return err
	}
	return r.consolidate()
}

func (r *runner) add(d Decision) { r.cur.Decisions = append(r.cur.Decisions, d) }

func (r *runner) block(b Blocker) { r.cur.Blocked = append(r.cur.Blocked, b) }
