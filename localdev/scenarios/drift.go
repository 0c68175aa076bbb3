package scenarios

import (
	"context"
	"io"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/drift"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/disruption"
)

// Drift scenario AMIs: what al2023@latest resolves to before and after the new release.
const (
	OldAMI = "ami-0aaaaaaaaaaaaaaa1"
	NewAMI = "ami-0bbbbbbbbbbbbbbb2"
)

// DriftResult is what the drift scenario observed.
type DriftResult struct {
	NodesBefore      int
	Budget           int // the pool's budget for Drifted (nodes at once)
	MaxDisrupting    int // most nodes tainted by drift at the same time
	Rolled           int // old nodes deleted
	OldImagesLeft    int // NodeClaims still on the old AMI at the end
	Lost             int
	Bound, Total     int
	Elapsed          time.Duration
	DecisionsPrinted int
}

// Drift runs the AMI roll-out scenario: 8 web pods (800m, 1 GiB) on "large" nodes (two pods
// each, so four nodes), launched with al2023@latest = OldAMI. A new AMI is then published behind
// the alias (the NodeClass status resolves to NewAMI): every node drifts (AMIDrifted). The drift
// function rolls them within the NodePool's budget (nodes: "1"): replacement first, drain once
// it has registered, delete once empty, oldest first. The drift function runs on every
// snapshot (every 10 s here); it prints each decision.
func Drift(ctx context.Context, out io.Writer) (*DriftResult, error) {
	const bootDelay = 30 * time.Second
	w := NewWorld(Start, bootDelay, out)
	pool := spotPool()
	pool.Spec.Template.Spec.Requirements = append(pool.Spec.Template.Spec.Requirements,
		apisv1.NodeSelectorRequirementWithMinValues{NodeSelectorRequirement: corev1.NodeSelectorRequirement{
			Key: apisv1.LabelInstanceSize, Operator: corev1.NodeSelectorOpIn, Values: []string{"large"}}})
	defer w.Close()
	if err := w.AddPools([]apisv1.NodePool{pool}, []apisv1.NodeClass{{EC2: ptr(defaultClass(OldAMI))}}); err != nil {
		return nil, err
	}
	if err := w.AddPods(webPods(8, "800m", "1Gi", 30)...); err != nil {
		return nil, err
	}
	if _, err := w.Provision(ctx); err != nil {
		return nil, err
	}
	if err := w.Step(ctx, bootDelay); err != nil {
		return nil, err
	}
	res := &DriftResult{Budget: 1}
	old := map[string]bool{}
	for _, n := range w.Snapshot().Nodes {
		old[n.Name] = true
	}
	res.NodesBefore = len(old)
	w.printf("%d nodes on %s; publishing %s behind al2023@latest", len(old), OldAMI, NewAMI)
	if err := w.SetNodeClassAMIs("default", defaultClass(NewAMI).Status.AMIs); err != nil {
		return nil, err
	}

	h := &drift.Handler{Cluster: Cluster, Catalog: w.Catalog, NodeSettings: w.NodeSettings, Provider: w.Provider, Publisher: w,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: w.Clock.Now,
		OnDecision: func(d drift.Decision) {
			res.DecisionsPrinted++
			for _, l := range d.Lines() {
				w.printChanged("drift "+l.Node, l.State, "drift: %s", l.Text)
			}
		}}
	start := w.Clock.Now()
	for i := 0; i < 180; i++ { // at most 30 simulated minutes
		d, err := h.Decide(ctx, w.Snapshot())
		if err != nil {
			return res, err
		}
		if len(d.Steps) > 0 {
			h.OnDecision(d)
		}
		if err := w.Step(ctx, 10*time.Second); err != nil {
			return res, err
		}
		remaining, disrupting := driftProgress(w.Snapshot(), old)
		res.MaxDisrupting = max(res.MaxDisrupting, disrupting)
		if remaining == 0 {
			break
		}
	}
	res.Elapsed = w.Clock.Now().Sub(start)
	snap := w.Snapshot()
	left := map[string]bool{}
	for _, n := range snap.Nodes {
		left[n.Name] = true
	}
	for name := range old {
		if !left[name] {
			res.Rolled++
		}
	}
	for _, nc := range snap.NodeClaims {
		if nc.Status.ImageID != NewAMI {
			res.OldImagesLeft++
		}
	}
	res.Lost = len(w.Lost)
	res.Bound, res.Total = w.PodsBound()
	w.printf("result: %d of %d nodes rolled to %s in %s, at most %d disrupting at once (budget %d); %d pods lost; %d/%d bound",
		res.Rolled, res.NodesBefore, NewAMI, res.Elapsed, res.MaxDisrupting, res.Budget, res.Lost, res.Bound, res.Total)
	return res, nil
}

// driftProgress counts, in snap, the nodes of old still there and the nodes tainted as
// disrupted for drift: how far a roll has come, and how many it disrupts at once.
func driftProgress(snap *events.Snapshot, old map[string]bool) (remaining, disrupting int) {
	for _, n := range snap.Nodes {
		if old[n.Name] {
			remaining++
		}
		for _, t := range n.Spec.Taints {
			if t.Key == apisv1.TaintKeyDisrupted && t.Value == disruption.TaintValueDrifted {
				disrupting++
			}
		}
	}
	return remaining, disrupting
}
