package provisioning

import (
	"cmp"
	"slices"
	"strings"
)

// compile is the first stage: it builds the solver over the input (pools in weight order,
// each with its limits; bins for existing nodes and in-flight NodeClaims; capacity
// reservations' free instances) and compiles the pending pods into the order first-fit takes
// them (sortPods), with every topology group they belong to made and seeded with the running
// pods. Pods whose spec cannot be scheduled at all keep their error (podInfo.err) for place.
func compile(in *Input) (*solver, []*podInfo) {
	s := &solver{in: in, topo: newTopology(), eligible: map[eligibleKey][]string{}, offerCache: map[string][]Offering{},
		topoRefineLeft: topoRefineBudget(len(in.Pods))}
	daemons := compileDaemons(in.DaemonSets, in.LimitRanges)
	s.bins = buildBins(in, daemons)
	s.left = reservationsLeft(in)
	in.ledger = existingCommitments(in)
	if in.ledger != nil && s.left == nil {
		s.left = map[string]int{} // compileCommitted counts the reservations' instances here
	}
	s.pools = compilePools(in, daemons, usedByPool(in), s.left)
	s.compat = make([]map[string]*podPool, len(s.pools))
	for i := range s.compat {
		s.compat[i] = map[string]*podPool{}
	}
	vols := newVolumeIndex(in)
	pods := make([]*podInfo, 0, len(in.Pods))
	infos := make([]podInfo, len(in.Pods)) // one allocation for all of them
	for i, pod := range in.Pods {
		pods = append(pods, compilePod(&infos[i], pod, in.Requests, s.topo, vols, in.Policies.ignorePreferences()))
	}
	sortPods(pods)
	s.seedTopology()
	// Every topology group exists now. Find the groups counting each pod in input order, the
	// order the pods (and their labels) usually sit in memory: placement order would jump
	// between them and miss the cache on nearly every pod's labels.
	for i := range infos {
		s.groupsOf(&infos[i])
	}
	return s, pods
}

// sortPods orders pods for first-fit-decreasing: CPU, then memory, descending; then name.
func sortPods(out []*podInfo) {
	order := func(x, y *podInfo) int {
		a, b := x.requests, y.requests
		if c := cmp.Compare(b.MilliCPU, a.MilliCPU); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Memory, a.Memory); c != 0 {
			return c
		}
		return strings.Compare(x.key, y.key)
	}
	// The unstable sort is several times faster, and its order is the stable one unless two pods
	// compare equal (the same pod key twice): then the stable sort decides, from the input order.
	in := slices.Clone(out)
	slices.SortFunc(out, order)
	for i := 1; i < len(out); i++ {
		if order(out[i-1], out[i]) == 0 {
			copy(out, in)
			slices.SortStableFunc(out, order)
			return
		}
	}
}
