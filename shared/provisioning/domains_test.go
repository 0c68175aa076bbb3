package provisioning

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// offerDomains gives, from the types' (zone, capacity type) bits, exactly the values that
// walking every offering of the marked types gives (the rule it replaces), for each offering key,
// with and without a requirement on the key, over random subsets of the whole AWS catalog's
// types under a pool that allows both capacity types.
func TestOfferDomainsIsTheOfferingWalk(t *testing.T) {
	np := nodePool("default", req(apisv1.LabelCapacityType, corev1.NodeSelectorOpIn, apisv1.CapacityTypeOnDemand, apisv1.CapacityTypeSpot))
	s, _ := compile(&Input{Pods: pods(1, "500m", "1Gi"), NodePools: []*apisv1.NodePool{np}, Catalog: cat(t)})
	if len(s.pools) != 1 || s.pools[0].err != nil {
		t.Fatalf("pools %+v, want one usable", s.pools)
	}
	pl := s.pools[0]
	if len(pl.types) < 100 || len(pl.offerKeys) > 64 {
		t.Fatalf("%d types, %d (zone, capacity type) pairs: the test needs many types and a bit test", len(pl.types), len(pl.offerKeys))
	}
	walk := func(key string, types []bool, r *scheduling.Requirement) map[string]bool {
		set := map[string]bool{}
		for ti, pt := range pl.types {
			if !types[ti] {
				continue
			}
			for _, o := range pt.offerings {
				v := o.Zone
				switch key {
				case apisv1.LabelCapacityType:
					v = o.CapacityType
				case corev1.LabelTopologyRegion:
					v = s.in.Catalog.Region
				}
				if r == nil || r.Has(v) {
					set[v] = true
				}
			}
		}
		return set
	}
	rng := rand.New(rand.NewPCG(28, 9))
	only := func(key, v string) *scheduling.Requirement {
		r, err := scheduling.NewRequirement(key, corev1.NodeSelectorOpIn, v)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, key := range []string{corev1.LabelTopologyZone, apisv1.LabelCapacityType, corev1.LabelTopologyRegion} {
		for round := range 50 {
			types := make([]bool, len(pl.types))
			for i := range types {
				types[i] = rng.IntN(20) == 0 // a few types, as one pod's alternative allows
			}
			if round == 0 {
				types = make([]bool, len(pl.types)) // none
			}
			some := pl.offerKeys[rng.IntN(len(pl.offerKeys))]
			r := only(key, map[string]string{corev1.LabelTopologyZone: some[0], apisv1.LabelCapacityType: some[1], corev1.LabelTopologyRegion: s.in.Catalog.Region}[key])
			for _, r := range []*scheduling.Requirement{nil, r} {
				got := map[string]bool{}
				pl.offerDomains(s, key, types, r, got)
				if want := walk(key, types, r); !maps.Equal(got, want) {
					t.Fatalf("%s, round %d, requirement %v: %v, want %v", key, round, r, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
				}
			}
		}
	}
}
