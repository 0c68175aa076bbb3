package disruption

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// csGen describes random clusters: nodes of a few m5/c5/r5 types, under-used at random, with
// pods of three apps, PDBs, do-not-disrupt and bare pods mixed in.
type csGen struct {
	nodes, maxPods int
	// blockers: add do-not-disrupt, bare pods, PDBs, tainted nodes and random budgets.
	blockers bool
	types    []string
	// exact: every node gets exactly maxPods pods, filling 20-90% of it (benchmarks).
	exact bool
}

var csTypes = []string{"m5.large", "m5.xlarge", "m5.2xlarge", "c5.xlarge", "c5.2xlarge", "r5.large", "r5.xlarge"}

// csBroad is a pool of c/m/r, generation > 4, spot and on-demand.
func csBroad() []apisv1.NodeSelectorRequirementWithMinValues {
	return []apisv1.NodeSelectorRequirementWithMinValues{
		csReq(apisv1.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c", "m", "r"),
		csReq(apisv1.LabelInstanceGeneration, corev1.NodeSelectorOpGt, "4"),
		csReq(apisv1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot", "on-demand"),
	}
}

func (g csGen) build(t csTB, rng *rand.Rand) *csCluster {
	c := csNewCluster(t, csT0)
	np := c.pool("default", csBroad()...)
	if g.blockers {
		np.Spec.Disruption.Budgets = []apisv1.Budget{{Nodes: []string{"0", "1", "2", "30%", "100%"}[rng.IntN(5)]}}
		c.pdb("web", "web", int32(rng.IntN(3)))
	}
	types := g.types
	if types == nil {
		types = csTypes
	}
	pods := 0
	for i := 0; i < g.nodes; i++ {
		name := fmt.Sprintf("n%04d", i)
		it := types[rng.IntN(len(types))]
		ct := apisv1.CapacityTypeOnDemand
		if rng.IntN(3) == 0 {
			ct = apisv1.CapacityTypeSpot
		}
		n := c.node(name, "default", it, ct)
		if g.blockers {
			switch rng.IntN(20) {
			case 0:
				n.Annotations = map[string]string{apisv1.AnnotationDoNotDisrupt: "true"}
			case 1:
				n.Spec.Taints = []corev1.Taint{{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}}
			}
		}
		alloc := csCat.Get(it).Allocatable()
		cpuLeft, memLeft := alloc.Cpu().MilliValue(), alloc.Memory().Value()>>20
		// Fill to a random share of the node, so some nodes are nearly empty and some full.
		fill := rng.Float64()
		np := rng.IntN(g.maxPods + 1)
		if g.exact {
			fill, np = 0.2+0.7*rng.Float64(), g.maxPods
		}
		for j := 0; j < np; j++ {
			cpu := int64(float64(cpuLeft) * fill / float64(np-j) * (0.5 + rng.Float64()))
			mem := int64(float64(memLeft) * fill / float64(np-j) * (0.5 + rng.Float64()))
			cpu, mem = max(min(cpu, cpuLeft), 10), max(min(mem, memLeft), 16)
			if cpu > cpuLeft || mem > memLeft {
				if !g.exact {
					break
				}
				cpu, mem = 1, 1 // keep the pod count exact on a full node
			}
			cpuLeft, memLeft = cpuLeft-cpu, memLeft-mem
			app := []string{"web", "api", "batch"}[rng.IntN(3)]
			p := c.pod(fmt.Sprintf("p%d", pods), name, fmt.Sprintf("%dm", cpu), fmt.Sprintf("%dMi", mem), "app", app)
			pods++
			if g.blockers {
				switch rng.IntN(25) {
				case 0:
					p.Annotations = map[string]string{apisv1.AnnotationDoNotDisrupt: "true"}
				case 1:
					p.OwnerReferences = nil
				}
			}
		}
	}
	return c
}

// csCheck verifies a decision against the rules with arithmetic of its own (not the solver):
// nothing protected is disrupted, budgets and PDBs hold, $/h cannot rise, and every evicted pod
// has a place with room for it.
func csCheck(t csTB, c *csCluster, s *State, d *Decision) {
	t.Helper()
	if d == nil {
		return
	}
	snap := c.snap
	cand := map[string]bool{}
	evicted := map[string]*corev1.Pod{}
	perPool := map[string]int{}
	var before float64
	for _, cr := range d.Candidates {
		cand[cr.Node] = true
		n := s.Node(cr.Node)
		perPool[cr.NodePool]++
		before += n.Price
		if n.Node.Annotations[apisv1.AnnotationDoNotDisrupt] == "true" || n.Disrupting {
			t.Fatalf("disrupts protected or disrupting node %s", cr.Node)
		}
		for _, p := range n.Movable {
			evicted[podRef(p)] = p
			if p.Annotations[apisv1.AnnotationDoNotDisrupt] == "true" || len(p.OwnerReferences) == 0 {
				t.Fatalf("evicts protected or bare pod %s", podRef(p))
			}
		}
	}
	// PDBs: each PDB's status allows disruptionsAllowed evictions.
	for _, pdb := range snap.PDBs {
		n := 0
		for _, p := range evicted {
			if p.Labels["app"] == pdb.Spec.Selector.MatchLabels["app"] {
				n++
			}
		}
		if n > int(pdb.Status.DisruptionsAllowed) {
			t.Fatalf("evicts %d pods under PDB %s allowing %d", n, pdb.Name, pdb.Status.DisruptionsAllowed)
		}
	}
	// Budgets, worked by hand: count or ceil(percent × initialized nodes), minus disrupting.
	for pool, k := range perPool {
		np := s.Pools[pool]
		var nodes, disrupting int
		for i := range snap.Nodes {
			n := &snap.Nodes[i]
			if n.Labels[apisv1.LabelNodePool] == pool {
				nodes++
				if len(n.Spec.Taints) > 0 {
					disrupting++
				}
			}
		}
		allowed := math.MaxInt32
		for _, b := range np.Spec.Disruption.Budgets {
			v := 0
			if strings.HasSuffix(b.Nodes, "%") {
				pct, _ := strconv.Atoi(strings.TrimSuffix(b.Nodes, "%"))
				v = int(math.Ceil(float64(pct) * float64(nodes) / 100))
			} else {
				v, _ = strconv.Atoi(b.Nodes)
			}
			allowed = min(allowed, v)
		}
		if k > max(allowed-disrupting, 0) {
			t.Fatalf("disrupts %d nodes of pool %s, budget allows %d", k, pool, max(allowed-disrupting, 0))
		}
	}
	// $/h: even the most expensive allowed offerings cost less than the nodes.
	if math.Abs(before-d.PriceBefore) > 1e-9 || d.MaxPriceAfter >= d.PriceBefore || d.Savings <= 0 {
		t.Fatalf("prices: before %.6f (decision %.6f), worst after %.6f, savings %.6f", before, d.PriceBefore, d.MaxPriceAfter, d.Savings)
	}
	// Every evicted pod placed once, on a node that stays or a replacement, with room.
	if len(d.Placements) != len(evicted) {
		t.Fatalf("%d placements for %d evicted pods", len(d.Placements), len(evicted))
	}
	load := map[string][2]int64{}
	repl := make([][2]int64, len(d.Replacements))
	for _, pl := range d.Placements {
		p := evicted[pl.Pod]
		if p == nil {
			t.Fatalf("placement of %s, which is not evicted", pl.Pod)
		}
		delete(evicted, pl.Pod)
		cpu, mem := p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue(), p.Spec.Containers[0].Resources.Requests.Memory().Value()
		if pl.Replacement >= 0 {
			repl[pl.Replacement][0] += cpu
			repl[pl.Replacement][1] += mem
			continue
		}
		if cand[pl.Node] {
			t.Fatalf("pod %s placed on candidate %s", pl.Pod, pl.Node)
		}
		l := load[pl.Node]
		load[pl.Node] = [2]int64{l[0] + cpu, l[1] + mem}
	}
	for name, l := range load {
		n := s.Node(name)
		if n == nil || n.Disrupting {
			t.Fatalf("pods placed on missing or disrupting node %s", name)
		}
		free := n.Allocatable.Sub(n.Requests)
		if l[0] > free.MilliCPU || l[1] > free.Memory {
			t.Fatalf("node %s gets %dm/%dB with %dm/%dB free", name, l[0], l[1], free.MilliCPU, free.Memory)
		}
	}
	for i, r := range d.Replacements {
		for _, o := range r.Offerings {
			a := o.InstanceType.Allocatable()
			if repl[i][0] > a.Cpu().MilliValue() || repl[i][1] > a.Memory().Value() {
				t.Fatalf("replacement %d offering %s cannot hold %dm/%dB", i, o.InstanceType.Name, repl[i][0], repl[i][1])
			}
		}
	}
	_ = resource.Quantity{}
}
