package provisioning

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// TestNewLimits checks the compiled value: each limit less what the pool's nodes use, keys
// sorted, the price cap in micro-USD, and nil for a pool with neither.
func TestNewLimits(t *testing.T) {
	if l := newLimits(nil, scheduling.Resources{}, 0, false); l != nil {
		t.Fatalf("no limits, no cap: got %+v, want nil", l)
	}
	spec := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), ResourceNodes: resource.MustParse("2")}
	used := scheduling.Resources{MilliCPU: 1500, Scalar: map[corev1.ResourceName]int64{ResourceNodes: 1}}
	l := newLimits(spec, used, 1.25, true)
	if want := []corev1.ResourceName{corev1.ResourceCPU, ResourcePricePerHour, ResourceNodes}; !reflect.DeepEqual(l.keys, want) {
		t.Errorf("keys = %v, want %v", l.keys, want)
	}
	// 4000m − 1500m; 2 − 1 nodes; 1.25 USD/h = 1,250,000 micro-USD (nothing used).
	if got := [3]int64{l.remaining.MilliCPU, l.remaining.Scalar[ResourceNodes], l.remaining.Scalar[ResourcePricePerHour]}; got != [3]int64{2500, 1, 1250000} {
		t.Errorf("remaining cpu, nodes, price = %v, want [2500 1 1250000]", got)
	}
	if !l.fits(scheduling.Resources{MilliCPU: 2500, Memory: 1 << 40}, l.remaining) {
		t.Error("2500m (and any memory, which is not limited) must fit 2500m left")
	}
	if l.fits(scheduling.Resources{MilliCPU: 2501}, l.remaining) {
		t.Error("2501m must not fit 2500m left")
	}
}

// TestLimitsExceededNamesTheLimit checks the typed result beside the reason: the limit that
// turned the pod away, worked out by hand from the catalog's types (m5.large: 2 vCPU, 8 GiB,
// 0.096 USD/h on demand; c5.xlarge: 4 vCPU, 8 GiB; r5.large: 2 vCPU, 16 GiB).
func TestLimitsExceededNamesTheLimit(t *testing.T) {
	refused := func(t *testing.T, np *apisv1.NodePool, n int, cpu string) []LimitHit {
		t.Helper()
		p := solve(t, Input{Pods: pods(n, cpu, "1Gi"), NodePools: []*apisv1.NodePool{np}})
		if len(p.Unschedulable) != 1 {
			t.Fatalf("want one pod refused, got %d (%d claims)", len(p.Unschedulable), len(p.NodeClaims))
		}
		return p.Unschedulable[0].LimitsExceeded
	}
	t.Run("cpu spent", func(t *testing.T) {
		// cpu 2: the first m5.large counts 2000m, 0m are left; nodes 5: 4 are left.
		np := nodePool("default", onDemand("m5.large")...)
		np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), ResourceNodes: resource.MustParse("5")}
		got := refused(t, np, 2, "1500m")
		if want := []LimitHit{{"default", corev1.ResourceCPU}}; !reflect.DeepEqual(got, want) {
			t.Errorf("LimitsExceeded = %v, want %v", got, want)
		}
	})
	t.Run("price cap not yet zero", func(t *testing.T) {
		// 0.10 USD/h: the first m5.large counts 0.096, 0.004 is left, less than another's 0.096;
		// cpu 100 leaves 98000m, more than 2000m, so only the price turned the pod away.
		np := nodePool("default", onDemand("m5.large")...)
		np.Annotations = map[string]string{apisv1.AnnotationMaxPricePerHour: "0.10"}
		np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")}
		got := refused(t, np, 2, "1500m")
		if want := []LimitHit{{"default", ResourcePricePerHour}}; !reflect.DeepEqual(got, want) {
			t.Errorf("LimitsExceeded = %v, want %v", got, want)
		}
	})
	t.Run("each type a different limit", func(t *testing.T) {
		// cpu 3 turns away c5.xlarge (4000m), memory 12Gi turns away r5.large (16Gi): neither
		// alone refuses every type, so both are named.
		np := nodePool("default", onDemand("c5.xlarge", "r5.large")...)
		np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("12Gi")}
		got := refused(t, np, 1, "1500m")
		if want := []LimitHit{{"default", corev1.ResourceCPU}, {"default", corev1.ResourceMemory}}; !reflect.DeepEqual(got, want) {
			t.Errorf("LimitsExceeded = %v, want %v", got, want)
		}
	})
	t.Run("not the limits", func(t *testing.T) {
		// A 3-vCPU pod fits no m5.large: the reason is its size, and no limit is named.
		np := nodePool("default", onDemand("m5.large")...)
		np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")}
		if got := refused(t, np, 1, "3"); len(got) != 0 {
			t.Errorf("LimitsExceeded = %v, want none", got)
		}
	})
}

// TestUnreachableLimitsAreDropped: with only m5.large (2 vCPU, 2000m of capacity counted per
// claim) and 10 pending pods, a plan opens at most 10 claims, 20000m: a cpu limit of 20 (20000m)
// can refuse nothing and is dropped for the solve, so the later stages may re-pack the pool; a
// limit of 19 (19000m) might be reached and stays, as does any price cap.
func TestUnreachableLimitsAreDropped(t *testing.T) {
	compiled := func(limits corev1.ResourceList, ann map[string]string) *limits {
		t.Helper()
		np := nodePool("default", onDemand("m5.large")...)
		np.Spec.Limits, np.Annotations = limits, ann
		s, _ := compile(&Input{Pods: pods(10, "500m", "1Gi"), NodePools: []*apisv1.NodePool{np}, Catalog: cat(t)})
		if len(s.pools) != 1 || s.pools[0].err != nil {
			t.Fatalf("pools %+v, want one usable", s.pools)
		}
		return s.pools[0].limits
	}
	if l := compiled(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20")}, nil); l != nil {
		t.Errorf("cpu 20 for at most 10 × 2000m: limits %+v, want dropped", l)
	}
	if l := compiled(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("19")}, nil); l == nil {
		t.Error("cpu 19 for up to 10 × 2000m: limits dropped, want kept")
	}
	if l := compiled(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200000")}, map[string]string{apisv1.AnnotationMaxPricePerHour: "1000"}); l == nil {
		t.Error("a price cap: limits dropped, want kept")
	}
}
