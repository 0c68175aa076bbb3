package main

import (
	"fmt"
	"math/rand"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/fake"
	"sigs.k8s.io/karpenter/pkg/test"
)

// The input of Karpenter core's scheduling benchmark
// (sigs.k8s.io/karpenter@v1.15.0, pkg/controllers/provisioning/scheduling/scheduling_benchmark_test.go),
// rebuilt here with Karpenter's own test helpers (pkg/test, pkg/cloudprovider/fake):
//
//   - fake.InstanceTypes(400): type i has i+1 vCPU, 2(i+1) GiB, 10(i+1) pods, kube-reserved
//     100m CPU and 10Mi memory, five offerings (spot in test-zone-1/2, on-demand in
//     test-zone-1/2/3) all at fake.PriceFromResources (0.1 USD per vCPU + 0.1 USD per 1e9
//     bytes of memory, per hour);
//   - one NodePool from test.NodePool, with no requirements and no limits;
//   - pods as makeDiversePods makes them: fifths of generic pods, zone topology spread,
//     hostname topology spread, zone self-affinity and hostname anti-affinity, the
//     remainder generic; CPU drawn from {100, 250, 500, 1000, 1500}m and memory from
//     {100, 256, 512, 1024, 2048, 4096}Mi.
//
// One difference: the benchmark draws from one math/rand source seeded 42 shared by every
// benchmark of the run, so its pods for N depend on which sizes ran before; here every pod
// count starts its own source from the seed, so the pods for N are always the same.

// Pod mixes the harness can run.
const (
	mixDiverse = "diverse" // makeDiversePods: the five fifths
	mixGeneric = "generic" // resource requests only (makeGenericPods for every pod)
)

// mixDescription says in words which pods a mix makes.
func mixDescription(mix string) string {
	switch mix {
	case mixDiverse:
		return "diverse (Karpenter's makeDiversePods: 1/5 generic, 1/5 zone topology spread, 1/5 hostname topology spread, 1/5 zone pod affinity, 1/5 hostname pod anti-affinity)"
	case mixGeneric:
		return "generic (CPU and memory requests only, no scheduling constraint)"
	}
	return mix
}

// podGen draws pods the way the benchmark's helpers do, in the same order of random draws.
type podGen struct{ r *rand.Rand }

func newPodGen(seed int64) *podGen {
	return &podGen{r: rand.New(rand.NewSource(seed))} //nolint:gosec // a benchmark input, not a secret
}

// pods makes n pods of the given mix.
func (g *podGen) pods(mix string, n int) ([]*corev1.Pod, error) {
	switch mix {
	case mixGeneric:
		return g.generic(n), nil
	case mixDiverse:
		fifth := n / 5
		var pods []*corev1.Pod
		pods = append(pods, g.generic(fifth)...)
		pods = append(pods, g.spread(fifth, corev1.LabelTopologyZone)...)
		pods = append(pods, g.spread(fifth, corev1.LabelHostname)...)
		pods = append(pods, g.affinity(fifth, corev1.LabelTopologyZone)...)
		pods = append(pods, g.antiAffinity(fifth, corev1.LabelHostname)...)
		return append(pods, g.generic(n-len(pods))...), nil
	}
	return nil, fmt.Errorf("unknown pod mix %q (want %s or %s)", mix, mixDiverse, mixGeneric)
}

func (g *podGen) value() string {
	values := []string{"a", "b", "c", "d", "e", "f", "g"}
	return values[g.r.Intn(len(values))]
}

func (g *podGen) requests() corev1.ResourceRequirements {
	cpus := []int{100, 250, 500, 1000, 1500}
	mems := []int{100, 256, 512, 1024, 2048, 4096}
	cpu := resource.MustParse(fmt.Sprintf("%dm", cpus[g.r.Intn(len(cpus))]))
	mem := resource.MustParse(fmt.Sprintf("%dMi", mems[g.r.Intn(len(mems))]))
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem}}
}

// meta gives a pod its labels and a UID (Karpenter's scheduler caches per-pod data by UID, as
// the benchmark notes).
func meta(labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Labels: labels, UID: uuid.NewUUID()}
}

func (g *podGen) generic(n int) []*corev1.Pod {
	pods := make([]*corev1.Pod, 0, n)
	for range n {
		labels := map[string]string{"my-label": g.value()}
		pods = append(pods, test.Pod(test.PodOptions{ObjectMeta: meta(labels), ResourceRequirements: g.requests()}))
	}
	return pods
}

// spread: a maxSkew-1 DoNotSchedule spread over key; as in the benchmark, the selector's value
// is drawn independently of the pod's own label (both under "my-label", shared with the
// generic pods).
func (g *podGen) spread(n int, key string) []*corev1.Pod {
	pods := make([]*corev1.Pod, 0, n)
	for range n {
		labels := map[string]string{"my-label": g.value()}
		selector := map[string]string{"my-label": g.value()}
		pods = append(pods, test.Pod(test.PodOptions{
			ObjectMeta: meta(labels),
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: selector},
			}},
			ResourceRequirements: g.requests(),
		}))
	}
	return pods
}

// affinity: required pod affinity over key to the pod's own label (self-affinity). The label
// key is spelt "my-affininity", as in the benchmark.
func (g *podGen) affinity(n int, key string) []*corev1.Pod {
	pods := make([]*corev1.Pod, 0, n)
	for range n {
		labels := map[string]string{"my-affininity": g.value()}
		pods = append(pods, test.Pod(test.PodOptions{
			ObjectMeta:           meta(labels),
			PodRequirements:      []corev1.PodAffinityTerm{{LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: key}},
			ResourceRequirements: g.requests(),
		}))
	}
	return pods
}

// antiAffinity: every pod app=nginx, with required anti-affinity to app=nginx over key.
func (g *podGen) antiAffinity(n int, key string) []*corev1.Pod {
	pods := make([]*corev1.Pod, 0, n)
	for range n {
		labels := map[string]string{"app": "nginx"}
		pods = append(pods, test.Pod(test.PodOptions{
			ObjectMeta:           meta(labels),
			PodAntiRequirements:  []corev1.PodAffinityTerm{{LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: key}},
			ResourceRequirements: g.requests(),
		}))
	}
	return pods
}

// karpenterInstanceTypes are the benchmark's 400 fake instance types.
func karpenterInstanceTypes() []*cloudprovider.InstanceType {
	return fake.InstanceTypes(400)
}

// karpenterNodePool is the benchmark's NodePool: no requirements and no limits, Karpenter's
// test defaults otherwise. test.NodePool gives a pool without limits a limit of 2000 CPU, and
// the benchmark overrides it with 10,000,000 CPU and 10,000,000Gi; here the limits are removed
// instead, so neither side has any (nil limits: Karpenter filters no instance type).
func karpenterNodePool() *karpv1.NodePool {
	np := test.NodePool(karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	np.Spec.Limits = nil
	return np
}

// copyPods deep-copies pods, so each solver (and each run) gets identical pods that the
// other cannot have changed.
func copyPods(pods []*corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		out[i] = p.DeepCopy()
	}
	return out
}
