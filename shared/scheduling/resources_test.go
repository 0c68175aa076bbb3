package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func ctr(cpu, mem string) corev1.Container {
	return corev1.Container{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}
}

func sidecar(cpu, mem string) corev1.Container {
	c := ctr(cpu, mem)
	always := corev1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

const mi = int64(1) << 20

func TestPodRequests(t *testing.T) {
	tests := []struct {
		name    string
		spec    corev1.PodSpec
		cpu     int64 // millicores
		memMiB  int64
		comment string
	}{
		{
			name: "sum of containers",
			spec: corev1.PodSpec{Containers: []corev1.Container{ctr("100m", "64Mi"), ctr("200m", "180Mi")}},
			cpu:  300, memMiB: 244, // 100+200, 64+180
		},
		{
			name: "init container bigger than the main containers",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{ctr("2", "128Mi")},
				Containers:     []corev1.Container{ctr("500m", "1Gi")},
			},
			cpu: 2000, memMiB: 1024, // max(2000, 500) per resource; max(128, 1024)
		},
		{
			name: "native sidecar adds to the main containers and later init containers",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{sidecar("100m", "128Mi"), ctr("1", "64Mi")},
				Containers:     []corev1.Container{ctr("500m", "256Mi")},
			},
			// init phase: 1000+100 = 1100m, 64+128 = 192Mi; run phase: 500+100 = 600m, 256+128 = 384Mi
			cpu: 1100, memMiB: 384,
		},
		{
			name: "pod overhead is added",
			spec: corev1.PodSpec{
				Containers: []corev1.Container{ctr("250m", "100Mi")},
				Overhead:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("120Mi")},
			},
			cpu: 500, memMiB: 220, // 250+250, 100+120 (Kata-style RuntimeClass overhead)
		},
		{
			name: "limits without requests default the requests",
			spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m"), corev1.ResourceMemory: resource.MustParse("500Mi")}}}}},
			cpu: 300, memMiB: 500, // API defaulting: request = limit
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := PodRequests(&corev1.Pod{Spec: tc.spec})
			if got.MilliCPU != tc.cpu || got.Memory != tc.memMiB*mi || got.Pods != 1 {
				t.Fatalf("got %s, want cpu=%dm memory=%dMi pods=1", got, tc.cpu, tc.memMiB)
			}
		})
	}
}

func TestResourcesFitsExtended(t *testing.T) {
	req := Resources{MilliCPU: 100, Scalar: map[corev1.ResourceName]int64{"nvidia.com/gpu": 1}}
	if req.Fits(Resources{MilliCPU: 1000, Memory: 1, Pods: 10}) {
		t.Fatal("a GPU request must not fit a node without GPUs")
	}
	if !req.Fits(Resources{MilliCPU: 1000, Pods: 10, Scalar: map[corev1.ResourceName]int64{"nvidia.com/gpu": 1}}) {
		t.Fatal("a GPU request must fit a node with one GPU")
	}
}

// TestPodLevelRequests: pod-level resources (KEP-2837) as kube-scheduler counts them
// (component-helpers resource.PodRequests after the API server's defaultPodRequests), worked by
// hand. Two containers asking 100m / 128Mi each total 200m / 256Mi.
func TestPodLevelRequests(t *testing.T) {
	ctr := func(name string) corev1.Container {
		return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}}
	}
	pod := func(rr *corev1.ResourceRequirements, ctrs ...corev1.Container) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: ctrs, Resources: rr,
			Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}}
	}
	for _, c := range []struct {
		name          string
		pod           *corev1.Pod
		milli, memory int64
		hugepages     int64
	}{
		// Pod-level requests replace the containers' 200m / 256Mi; overhead 50m is still added.
		{"pod requests", pod(&corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")}}, ctr("a"), ctr("b")),
			4050, 8 << 30, 0},
		// Only a pod-level CPU request: memory stays the containers' 256Mi.
		{"cpu only", pod(&corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}, ctr("a"), ctr("b")),
			2050, 256 << 20, 0},
		// Pod-level limits only, containers asking: the request defaults to the containers' total
		// (cpu and memory are overcommittable), so nothing changes.
		{"limits with container requests", pod(&corev1.ResourceRequirements{Limits: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("1Gi")}}, ctr("a"), ctr("b")),
			250, 256 << 20, 0},
		// Pod-level limits only, containers asking nothing: the request defaults to the limit.
		{"limits without container requests", pod(&corev1.ResourceRequirements{Limits: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("1Gi")}}, corev1.Container{Name: "a"}),
			3050, 1 << 30, 0},
		// hugepages-2Mi at pod level counts; ephemeral-storage at pod level is not supported and
		// is ignored (the API server refuses it at validation; kube-scheduler would not read it).
		{"hugepages and unsupported", pod(&corev1.ResourceRequirements{Requests: corev1.ResourceList{
			"hugepages-2Mi": resource.MustParse("64Mi"), corev1.ResourceEphemeralStorage: resource.MustParse("10Gi")}}, ctr("a")),
			150, 128 << 20, 64 << 20},
	} {
		got := PodRequests(c.pod)
		if got.MilliCPU != c.milli || got.Memory != c.memory || got.Scalar["hugepages-2Mi"] != c.hugepages || got.EphemeralStorage != 0 {
			t.Errorf("%s: got %d m, %d B, hugepages %d B, ephemeral %d; want %d m, %d B, hugepages %d B", c.name,
				got.MilliCPU, got.Memory, got.Scalar["hugepages-2Mi"], got.EphemeralStorage, c.milli, c.memory, c.hugepages)
		}
	}
}
