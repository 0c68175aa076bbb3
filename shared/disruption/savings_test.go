package disruption

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// csApply carries a decision out on the test cluster as the function and agent would: the
// replacements come up on their cheapest offering, the evicted pods land where the decision
// placed them, the candidates disappear.
func csApply(c *csCluster, d *Decision, round int) {
	gone := map[string]bool{}
	for _, cr := range d.Candidates {
		gone[cr.Node] = true
	}
	nodes := c.snap.Nodes[:0:0]
	for _, n := range c.snap.Nodes {
		if !gone[n.Name] {
			nodes = append(nodes, n)
		}
	}
	claims := c.snap.NodeClaims[:0:0]
	for _, nc := range c.snap.NodeClaims {
		if !gone[nc.Status.NodeName] {
			claims = append(claims, nc)
		}
	}
	c.snap.Nodes, c.snap.NodeClaims = nodes, claims
	replName := make([]string, len(d.Replacements))
	for i, r := range d.Replacements {
		o := r.Cheapest()
		replName[i] = fmt.Sprintf("r%02d-%d", round, i)
		c.nodeIn(replName[i], r.NodePool.Name, o.InstanceType.Name, o.CapacityType, o.Zone)
	}
	target := map[string]string{}
	for _, pl := range d.Placements {
		if pl.Replacement >= 0 {
			target[pl.Pod] = replName[pl.Replacement]
		} else {
			target[pl.Pod] = pl.Node
		}
	}
	for i := range c.snap.Pods {
		p := &c.snap.Pods[i]
		if t, ok := target[podRef(p)]; ok {
			p.Spec.NodeName = t
		}
	}
	c.snap.Revision++
}

func csClusterPrice(s *State) float64 {
	var t float64
	for _, n := range s.Nodes {
		t += n.Price
	}
	return t
}

// csRun consolidates until nothing more is decided (at most 40 decisions) and returns the
// final $/h and the decisions made.
func csRun(t *testing.T, g csGen, seed uint64, mode Mode) (start, end float64, decisions, moved int) {
	c := g.build(t, rand.New(rand.NewPCG(seed, 7)))
	s := c.state()
	start = csClusterPrice(s)
	for round := 0; round < 40; round++ {
		d, _ := Consolidate(s, Options{Mode: mode})
		if d == nil {
			break
		}
		csCheck(t, c, s, d)
		decisions++
		moved += len(d.Placements)
		csApply(c, d, round)
		s = c.state()
	}
	return start, csClusterPrice(s), decisions, moved
}

// TestCsSavingsVsPrefix measures, on the same random clusters, the $/h left after consolidating
// to a fixed point with Karpenter's rules only (multi-node prefix, then single-node) and with
// Dovetail's search (best of those and the greedy search, per decision). The search must never
// end above the prefix rule by more than rounding on any cluster in aggregate, and the figures
// are logged for the note (go test -run TestCsSavingsVsPrefix -v).
func TestCsSavingsVsPrefix(t *testing.T) {
	// CI runs a small sample; DOVETAIL_MEASURE=1 runs the figures reported in the issue note.
	g, clusters := csGen{nodes: 12, maxPods: 8}, uint64(4)
	if os.Getenv("DOVETAIL_MEASURE") != "" {
		g, clusters = csGen{nodes: 30, maxPods: 8}, 12
	}
	var start, prefixEnd, searchEnd, onlyEnd float64
	var prefixDec, searchDec, prefixMoved, searchMoved int
	for seed := uint64(1); seed <= clusters; seed++ {
		s0, pe, pd, pm := csRun(t, g, seed, ModePrefix)
		_, se, sd, sm := csRun(t, g, seed, ModeSearch)
		_, oe, _, _ := csRun(t, g, seed, ModeSearchOnly)
		start += s0
		prefixEnd, searchEnd, onlyEnd = prefixEnd+pe, searchEnd+se, onlyEnd+oe
		prefixDec, searchDec, prefixMoved, searchMoved = prefixDec+pd, searchDec+sd, prefixMoved+pm, searchMoved+sm
	}
	t.Logf("%d random clusters of %d nodes (≤%d pods each): start %.4f $/h", clusters, g.nodes, g.maxPods, start)
	t.Logf("prefix rule (Karpenter):  end %.4f $/h, saved %.4f $/h (%.1f%%) in %d decisions, %d pods moved", prefixEnd, start-prefixEnd, 100*(start-prefixEnd)/start, prefixDec, prefixMoved)
	t.Logf("search (best of all):     end %.4f $/h, saved %.4f $/h (%.1f%%) in %d decisions, %d pods moved", searchEnd, start-searchEnd, 100*(start-searchEnd)/start, searchDec, searchMoved)
	t.Logf("greedy search alone:      end %.4f $/h, saved %.4f $/h (%.1f%%)", onlyEnd, start-onlyEnd, 100*(start-onlyEnd)/start)
	if searchEnd > prefixEnd*1.01 {
		t.Errorf("search ends at %.4f $/h, above the prefix rule's %.4f", searchEnd, prefixEnd)
	}
	_ = corev1.Pod{}
}
