package disruption

import (
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// TestCsProperties: over random clusters (3-10 nodes, up to 6 pods each, random budgets, PDBs,
// do-not-disrupt and bare pods), no decision of any mode breaks a PDB, a do-not-disrupt
// annotation or a budget, raises $/h, or evicts a pod without a place; and a decision validates
// on the snapshot it was made on.
func TestCsProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		g := csGen{nodes: rapid.IntRange(3, 10).Draw(rt, "nodes"), maxPods: rapid.IntRange(0, 6).Draw(rt, "maxPods"), blockers: true}
		seed := rapid.Uint64().Draw(rt, "seed")
		mode := Mode(rapid.IntRange(0, 2).Draw(rt, "mode"))
		c := g.build(rt, rand.New(rand.NewPCG(seed, 1)))
		s := c.state()
		d, _ := Consolidate(s, Options{Mode: mode})
		csCheck(rt, c, s, d)
		if d != nil {
			if _, err := Validate(d, s); err != nil {
				rt.Fatalf("decision %s does not validate on its own snapshot: %v", d, err)
			}
		}
	})
}
