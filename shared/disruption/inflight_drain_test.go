package disruption

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// csCarryOut applies a consolidation's first step to the cluster as the functions and the agent
// do: each replacement launched (as the offering pick chooses among its allowed ones),
// registered and initialized as a node of its pool, its NodeClaim annotated with the decision,
// and the candidates tainted with the decision's taint value. It returns the replacement nodes.
func csCarryOut(c *csCluster, d *Decision, pick func(*provisioning.NodeClaimPlan) provisioning.Offering) []string {
	var names []string
	for i, r := range d.Replacements {
		o := pick(r)
		name := fmt.Sprintf("repl%02d", i)
		c.nodeIn(name, r.NodePool.Name, o.InstanceType.Name, o.CapacityType, o.Zone)
		nc := &c.snap.NodeClaims[len(c.snap.NodeClaims)-1]
		nc.Annotations = map[string]string{AnnotationDecision: d.ID, AnnotationReplaces: strings.Join(d.NodeNames(), ",")}
		names = append(names, name)
	}
	cand := map[string]bool{}
	for _, cr := range d.Candidates {
		cand[cr.Node] = true
	}
	now := metav1.NewTime(c.snap.Time.Time)
	for i := range c.snap.Nodes {
		if n := &c.snap.Nodes[i]; cand[n.Name] {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: apisv1.TaintKeyDisrupted, Value: d.TaintValue(), Effect: corev1.TaintEffectNoSchedule, TimeAdded: &now})
		}
	}
	return names
}

func cheapest(r *provisioning.NodeClaimPlan) provisioning.Offering { return r.Cheapest() }
func dearest(r *provisioning.NodeClaimPlan) provisioning.Offering {
	return r.Offerings[len(r.Offerings)-1]
}

// csDrainsAtOnce checks the rule: once its replacements are initialized, a consolidation's
// candidates are drained, all those with pods, with nothing waiting (nothing changed since the
// decision, so every pod has the place the decision gave it).
func csDrainsAtOnce(t *testing.T, c *csCluster, d *Decision) {
	t.Helper()
	ps := InFlight(c.state())
	if len(ps) != 1 {
		t.Fatalf("%d consolidations in flight, want 1", len(ps))
	}
	p := ps[0]
	busy := 0
	for _, cr := range d.Candidates {
		if len(cr.Pods) > 0 {
			busy++
		}
	}
	if p.Waiting != "" || p.Rollback != "" || len(p.Drain) != busy {
		t.Fatalf("decision %s (%s, %d replacements): drain %d of %d candidates with pods, waiting %q, rollback %q",
			csNames(d), d.Strategy, len(d.Replacements), len(p.Drain), busy, p.Waiting, p.Rollback)
	}
}

// The make scale bug (docs/scale.md, N = 200): a multi-node consolidation launched its
// replacements, and once they were initialized its drain "waits: the pods need N more
// NodeClaim(s) than exist" until it was rolled back, though nothing had changed. The drain's
// fresh simulation packed the candidates' pods onto the replacements as onto any existing node
// and could not find the packing the decision sized them for. Seed 24 of this generator is
// such a decision: 11 nodes replaced by an m5a.2xlarge and an m5a.4xlarge (spot, us-east-1a)
// holding 35 and 11 pods, 7789m and 14644m of their 7910m and 15890m allocatable CPU; the fresh
// packing left 19 pods for a new NodeClaim.
func TestInFlightDrainsOntoReplacementsSizedForIt(t *testing.T) {
	for _, pick := range []struct {
		name string
		fn   func(*provisioning.NodeClaimPlan) provisioning.Offering
	}{{"cheapest", cheapest}, {"dearest", dearest}} {
		t.Run(pick.name, func(t *testing.T) {
			c := csGen{nodes: 12, maxPods: 8}.build(t, rand.New(rand.NewPCG(24, 1)))
			d, _ := Consolidate(c.state(), Options{})
			if d == nil || d.Strategy != StrategySearch || len(d.Candidates) != 11 || len(d.Replacements) != 2 {
				t.Fatalf("the generator's seed 24 no longer gives the case: %v", d)
			}
			csCarryOut(c, d, pick.fn)
			csDrainsAtOnce(t, c, d)
		})
	}
}

// The same rule over the generator's clusters: every decision with replacements drains as soon
// as they are initialized, whichever allowed offering the fleet picked.
func TestInFlightDrainsAfterEveryReplacingDecision(t *testing.T) {
	seeds := 30
	if testing.Short() {
		seeds = 8
	}
	for seed := uint64(0); seed < uint64(seeds); seed++ {
		for _, pick := range []func(*provisioning.NodeClaimPlan) provisioning.Offering{cheapest, dearest} {
			c := csGen{nodes: 12, maxPods: 8}.build(t, rand.New(rand.NewPCG(seed, 1)))
			d, _ := Consolidate(c.state(), Options{})
			if d == nil || len(d.Replacements) == 0 {
				continue
			}
			csCarryOut(c, d, pick)
			csDrainsAtOnce(t, c, d)
		}
	}
}

// A pod the kube-scheduler bound to a replacement after the decision takes room the decision
// counted on: the drain then waits for room (ErrDrainWaits), and the replacements are not
// taken as the decision's NodeClaims (their room is no longer what it was).
func TestInFlightDrainWaitsWhenAReplacementTookOtherPods(t *testing.T) {
	c := csGen{nodes: 12, maxPods: 8}.build(t, rand.New(rand.NewPCG(24, 1)))
	d, _ := Consolidate(c.state(), Options{})
	if d == nil || len(d.Replacements) != 2 {
		t.Fatalf("the generator's seed 24 no longer gives the case: %v", d)
	}
	repl := csCarryOut(c, d, cheapest)
	// 7 of the m5a.4xlarge's 15.89 CPU taken: the 11 pods sized for it (14.644 CPU) no longer fit.
	c.pod("late", repl[1], "7", "1Gi")
	ps := InFlight(c.state())
	if len(ps) != 1 || len(ps[0].Drain) != 0 || !strings.Contains(ps[0].Waiting, "more NodeClaim(s) than exist") {
		t.Fatalf("progress %+v, want the drain waiting for room", ps)
	}
	var busy []*Node
	s := c.state()
	for _, n := range ps[0].Candidates {
		if len(n.Movable) > 0 {
			busy = append(busy, s.Node(n.Name()))
		}
	}
	if err := ValidateDrain(s, busy); !errors.Is(err, ErrDrainWaits) {
		t.Fatalf("validateDrain: %v, want ErrDrainWaits", err)
	}
}

// A replacement launched 30 s ago whose candidates carry no taint holds back new decisions while
// its node has not joined (the taints may still be on their way), and not once it has: the
// taints were published before it booted, so the decision was rolled back or refused, and its
// replacements are ordinary capacity. (make scale, N = 1,000: a rolled-back decision's
// replacements held every consolidation for the rest of ReplacementLock.)
func TestARolledBackDecisionsReplacementsHoldNoLock(t *testing.T) {
	c := csGen{nodes: 12, maxPods: 8}.build(t, rand.New(rand.NewPCG(24, 1)))
	d, _ := Consolidate(c.state(), Options{})
	if d == nil || len(d.Replacements) != 2 {
		t.Fatalf("the generator's seed 24 no longer gives the case: %v", d)
	}
	repl := csCarryOut(c, d, cheapest)
	launched := metav1.NewTime(c.snap.Time.Add(-30 * time.Second))
	for i := range c.snap.NodeClaims {
		if c.snap.NodeClaims[i].Annotations[AnnotationDecision] == d.ID {
			c.snap.NodeClaims[i].CreationTimestamp = launched
		}
	}
	for i := range c.snap.Nodes { // rolled back: the candidates untainted
		c.snap.Nodes[i].Spec.Taints = nil
	}
	if ps := InFlight(c.state()); len(ps) != 0 {
		t.Fatalf("replacements joined, candidates untainted: in flight %+v, want nothing", ps[0])
	}
	// The same before the replacements' nodes joined: the lock holds.
	joined := map[string]bool{repl[0]: true, repl[1]: true}
	nodes := c.snap.Nodes[:0]
	for _, n := range c.snap.Nodes {
		if !joined[n.Name] {
			nodes = append(nodes, n)
		}
	}
	c.snap.Nodes = nodes
	for i := range c.snap.NodeClaims {
		if c.snap.NodeClaims[i].Annotations[AnnotationDecision] == d.ID {
			c.snap.NodeClaims[i].Status.NodeName, c.snap.NodeClaims[i].Status.ProviderID = "", ""
		}
	}
	ps := InFlight(c.state())
	if len(ps) != 1 || ps[0].ID != d.ID || !strings.Contains(ps[0].Waiting, "waiting for its candidates' taints") {
		t.Fatalf("replacements not joined: in flight %+v, want the launch lock", ps)
	}
}
