package provisioning

// withinLimits drops candidate types whose capacity would take the pool past its limits,
// counting every other open NodeClaim of the pool at its cheapest type's capacity.
func (s *solver) withinLimits(pl *pool, c *claim, kept []int) []int {
	if pl.remaining == nil {
		return kept
	}
	others := *pl.committed
	if len(c.types) > 0 && len(c.pods) > 0 {
		others = others.Sub(pl.types[c.types[0]].capacity)
	}
	budget := pl.remaining.Sub(others)
	out := kept[:0:0]
	for _, ti := range kept {
		if pl.fitsLimits(pl.types[ti].capacity, budget) {
			out = append(out, ti)
		}
	}
	return out
}
