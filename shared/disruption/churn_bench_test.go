package disruption

import (
	"fmt"
	"math/rand/v2"
	"testing"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// BenchmarkConsolidateChurn measures what each consolidation policy trades: on the cluster of
// BenchmarkConsolidate (100 nodes of 30 pods, m5/c5/r5 sizes filled to 20-90 %, seed 42, default
// 10 % budget), consolidation decides and its decision is applied (candidates removed, each
// moved pod bound where the decision placed it, each replacement a new node of its cheapest
// offering), round after round, until no decision is left or 50 rounds passed. Reported:
// saved-$/h (the cluster's price before less after), pods-disrupted (evictions, a pod moved
// twice counted twice), nodes-disrupted, pods-per-$/h (churn: evictions per USD per hour saved)
// and rounds.
func BenchmarkConsolidateChurn(b *testing.B) {
	for _, policy := range []string{apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized, apisv1.ConsolidationPolicyBalanced} {
		for _, n := range []int{100} {
			b.Run(fmt.Sprintf("%s/%d", policy, n), func(b *testing.B) {
				var ch churn
				for b.Loop() {
					ch = consolidateUntilDone(b, n, policy, 50)
				}
				b.ReportMetric(ch.saved, "saved-$/h")
				b.ReportMetric(float64(ch.pods), "pods-disrupted")
				b.ReportMetric(float64(ch.nodes), "nodes-disrupted")
				if ch.saved > 0 {
					b.ReportMetric(float64(ch.pods)/ch.saved, "pods-per-$/h")
				}
				b.ReportMetric(float64(ch.rounds), "rounds")
			})
		}
	}
}

type churn struct {
	saved        float64
	pods, nodes  int
	rounds       int
	priceAtStart float64
}

// consolidateUntilDone builds the benchmark cluster with every pool on policy and applies
// consolidation decisions until none is left (or maxRounds).
func consolidateUntilDone(b *testing.B, nodes int, policy string, maxRounds int) churn {
	c := csGen{nodes: nodes, maxPods: 30, types: []string{"m5.2xlarge", "m5.4xlarge", "c5.4xlarge", "r5.2xlarge"}, exact: true}.build(b, rand.New(rand.NewPCG(42, 42)))
	for i := range c.snap.NodePools {
		c.snap.NodePools[i].Spec.Disruption.Budgets = nil // Karpenter's default budget: 10%
		c.snap.NodePools[i].Spec.Disruption.ConsolidationPolicy = policy
	}
	var ch churn
	ch.priceAtStart = clusterPrice(b, c)
	for ch.rounds < maxRounds {
		s, err := NewState(c.snap, csCat, cloud.NodeSettingsFor)
		if err != nil {
			b.Fatal(err)
		}
		d, _ := Consolidate(s, Options{})
		if d == nil {
			break
		}
		ch.rounds++
		ch.nodes += len(d.Candidates)
		for _, cr := range d.Candidates {
			ch.pods += len(cr.Pods)
		}
		applyDecision(b, c, d, ch.rounds)
	}
	ch.saved = ch.priceAtStart - clusterPrice(b, c)
	return ch
}

// applyDecision carries d out on the fixture's snapshot, as the agent and the cluster would once
// the drain is done: replacements join as nodes of their cheapest offering, moved pods are bound
// where d placed them, and the candidates and their NodeClaims are gone.
func applyDecision(b *testing.B, c *csCluster, d *Decision, round int) {
	repl := make([]string, len(d.Replacements))
	for i, r := range d.Replacements {
		o := r.Cheapest()
		repl[i] = fmt.Sprintf("r%d-%d", round, i)
		c.nodeIn(repl[i], r.NodePool.Name, o.InstanceType.Name, o.CapacityType, o.Zone)
	}
	to := map[string]string{}
	for _, p := range d.Placements {
		if p.Replacement >= 0 {
			to[p.Pod] = repl[p.Replacement]
		} else {
			to[p.Pod] = p.Node
		}
	}
	gone := map[string]bool{}
	for _, cr := range d.Candidates {
		gone[cr.Node] = true
	}
	pods := c.snap.Pods[:0]
	for _, p := range c.snap.Pods {
		if dst, ok := to[p.Namespace+"/"+p.Name]; ok {
			p.Spec.NodeName = dst
		} else if gone[p.Spec.NodeName] {
			continue // a DaemonSet or mirror pod of a removed node
		}
		pods = append(pods, p)
	}
	c.snap.Pods = pods
	nodes := c.snap.Nodes[:0]
	for _, n := range c.snap.Nodes {
		if !gone[n.Name] {
			nodes = append(nodes, n)
		}
	}
	c.snap.Nodes = nodes
	claims := c.snap.NodeClaims[:0]
	for _, nc := range c.snap.NodeClaims {
		if !gone[nc.Status.NodeName] {
			claims = append(claims, nc)
		}
	}
	c.snap.NodeClaims = claims
}

// clusterPrice is the sum of the nodes' offering prices (USD per hour).
func clusterPrice(b *testing.B, c *csCluster) float64 {
	s, err := NewState(c.snap, csCat, cloud.NodeSettingsFor)
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, n := range s.Nodes {
		sum += n.Price
	}
	return sum
}
