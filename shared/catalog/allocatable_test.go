package catalog

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// readCSV reads a testdata CSV into header-keyed rows.
func readCSV(t testing.TB, path string) []map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]string
	for _, rec := range recs[1:] {
		row := map[string]string{}
		for i, h := range recs[0] {
			row[h] = rec[i]
		}
		rows = append(rows, row)
	}
	return rows
}

func atoi(t testing.TB, s string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return v
}

// TestAllocatableMatchesKarpenterForEveryType checks computed allocatable cpu, memory and pods
// against the alloc_* columns of testdata/ec2_instance_types.csv (Karpenter's published table,
// reference/instance-types.md, AL2023) for every type that has them, and reports every mismatch.
func TestAllocatableMatchesKarpenterForEveryType(t *testing.T) {
	c := MustAWS()
	rows := readCSV(t, "testdata/ec2_instance_types.csv")
	if len(rows) != 1377 || len(c.Types()) != 1377 {
		t.Fatalf("want 1377 types in CSV and catalog, got %d and %d", len(rows), len(c.Types()))
	}
	var mismatches []string
	checked := 0
	for _, row := range rows {
		it := c.Get(row["name"])
		if it == nil {
			mismatches = append(mismatches, row["name"]+": missing from catalog")
			continue
		}
		if row["alloc_cpu_millicores"] == "" {
			continue // 14 types (mac*, f1, p3, dl1) are absent from Karpenter's table
		}
		checked++
		a := it.AllocatableFast()
		want := Resources{
			MilliCPU:    atoi(t, row["alloc_cpu_millicores"]),
			MemoryBytes: atoi(t, row["alloc_memory_mib"]) * bytesPerMiB,
			Pods:        atoi(t, row["alloc_pods"]),
		}
		if a.MilliCPU != want.MilliCPU || a.MemoryBytes != want.MemoryBytes || a.Pods != want.Pods {
			mismatches = append(mismatches, fmt.Sprintf("%s (%s): cpu %dm/%dm memory %dMi/%dMi pods %d/%d (got/want)",
				it.Name, row["architecture"], a.MilliCPU, want.MilliCPU, a.MemoryBytes/bytesPerMiB, want.MemoryBytes/bytesPerMiB, a.Pods, want.Pods))
		}
		// The ResourceList view must agree with the numeric one.
		l := it.Allocatable()
		if l.Cpu().MilliValue() != want.MilliCPU || l.Memory().Value() != want.MemoryBytes || l.Pods().Value() != want.Pods {
			mismatches = append(mismatches, it.Name+": Allocatable() disagrees with AllocatableFast()")
		}
	}
	if checked != 1363 {
		t.Errorf("checked %d types, want the 1363 of Karpenter's table", checked)
	}
	if len(mismatches) > 0 {
		t.Errorf("%d mismatches:\n%s", len(mismatches), strings.Join(mismatches, "\n"))
	}
}

// TestExtendedResourcesMatchKarpenter checks ephemeral-storage and the extended resources against
// the karpenter_allocatable objects of the embedded JSON, for every type that has them.
func TestExtendedResourcesMatchKarpenter(t *testing.T) {
	c := MustAWS()
	var f awsFile
	if err := json.Unmarshal(mustAWSJSON(t), &f); err != nil {
		t.Fatal(err)
	}
	var mismatches []string
	for _, r := range f.InstanceTypes {
		ka := r.KarpenterAllocatable
		if ka == nil {
			continue
		}
		a := c.Get(r.Name).AllocatableFast()
		eph := resource.MustParse(ka.Ephemeral)
		check := func(what string, got int64, want *int64) {
			if want == nil {
				return // pod_eni is missing for 56 types in the docs table (older than vpclimits); nothing to compare
			}
			if got != *want {
				mismatches = append(mismatches, fmt.Sprintf("%s %s: got %d want %d", r.Name, what, got, *want))
			}
		}
		check("ephemeral-storage", a.EphemeralBytes, ptr(eph.Value()))
		zeroIfNil := func(p *int64) *int64 { return ptr(deref(p)) }
		check("nvidia.com/gpu", a.NVIDIAGPU, zeroIfNil(ka.NVIDIAGPU))
		check("amd.com/gpu", a.AMDGPU, zeroIfNil(ka.AMDGPU))
		check("aws.amazon.com/neuron", a.Neuron, zeroIfNil(ka.Neuron))
		check("aws.amazon.com/neuroncore", a.NeuronCore, zeroIfNil(ka.NeuronCore))
		check("vpc.amazonaws.com/efa", a.EFA, zeroIfNil(ka.EFA))
		check("vpc.amazonaws.com/pod-eni", a.PodENI, ka.PodENI)
	}
	if len(mismatches) > 0 {
		t.Errorf("%d mismatches:\n%s", len(mismatches), strings.Join(mismatches, "\n"))
	}
}

func ptr[T any](v T) *T { return &v }

// TestHandComputedAllocatable checks named types against hand arithmetic from the published rules
// (overhead.go); the expected values also equal Karpenter's table (data/README.md).
func TestHandComputedAllocatable(t *testing.T) {
	c := MustAWS()
	for _, tc := range []struct {
		name                  string
		cpuM, memMiB, pods    int64
		capMemMiB, nvidia, fa int64
	}{
		// m5.large, amd64, 2 vCPU, 8192 MiB, 3 ENIs × 10 IPv4:
		// cpu 2000 − (60 + 10) = 1930 m; capacity memory 8192 − ceil(614.4) = 7577 MiB;
		// pods 3 × (10 − 1) + 2 = 29; memory 7577 − (11 × 29 + 255) − 100 = 7577 − 574 − 100 = 6903 MiB.
		{"m5.large", 1930, 6903, 29, 7577, 0, 0},
		// a1.2xlarge, arm64, 8 vCPU, 16384 MiB, 4 ENIs × 15 IPv4:
		// cpu 8000 − (60 + 10 + 10 + 4000 × 0.0025 = 10) = 7910 m;
		// capacity memory (16384 − 64 Graviton CMA) = 16320 − ceil(1224.0) = 15096 MiB;
		// pods 4 × 14 + 2 = 58; memory 15096 − (11 × 58 + 255 = 893) − 100 = 14103 MiB.
		{"a1.2xlarge", 7910, 14103, 58, 15096, 0, 0},
		// p5.48xlarge, 192 vCPU, 2097152 MiB, default card 2 ENIs × 50 IPv4, 8 × H100, 32 EFA:
		// cpu 192000 − (60 + 10 + 10 + 188000 × 0.0025 = 470) = 191450 m;
		// capacity memory 2097152 − ceil(157286.4) = 1939865 MiB; pods 2 × 49 + 2 = 100;
		// memory 1939865 − (11 × 100 + 255 = 1355) − 100 = 1938410 MiB.
		{"p5.48xlarge", 191450, 1938410, 100, 1939865, 8, 32},
		// hpc6id.32xlarge has no vpclimits entry: pods = the EKS AMI eni-max-pods.txt value 51;
		// cpu 64000 − (80 + 60000 × 0.0025 = 150) = 63770 m;
		// capacity memory 1048576 − ceil(78643.2) = 969932 MiB; memory 969932 − (11 × 51 + 255 = 816) − 100 = 969016 MiB.
		{"hpc6id.32xlarge", 63770, 969016, 51, 969932, 0, 2},
	} {
		it := c.Get(tc.name)
		if it == nil {
			t.Fatalf("%s missing", tc.name)
		}
		a := it.AllocatableFast()
		if a.MilliCPU != tc.cpuM || a.MemoryBytes != tc.memMiB*bytesPerMiB || a.Pods != tc.pods || a.NVIDIAGPU != tc.nvidia || a.EFA != tc.fa {
			t.Errorf("%s: allocatable %+v, want cpu %dm memory %dMi pods %d gpu %d efa %d", tc.name, a, tc.cpuM, tc.memMiB, tc.pods, tc.nvidia, tc.fa)
		}
		// Ephemeral storage: 20Gi − 1Gi kube-reserved − 10% (2Gi) eviction = 17Gi.
		if a.EphemeralBytes != 17*bytesPerGiB {
			t.Errorf("%s: ephemeral %d, want 17Gi", tc.name, a.EphemeralBytes)
		}
		capMem := it.Capacity[corev1.ResourceMemory]
		if capMem.Value() != tc.capMemMiB*bytesPerMiB {
			t.Errorf("%s: capacity memory %s, want %dMi", tc.name, capMem.String(), tc.capMemMiB)
		}
	}
}

func TestRuleFunctions(t *testing.T) {
	// Bands: 1 vCPU → 60; 2 → 70; 4 → 60+10+10 = 80; 96 → 80 + 92000 × 0.0025 = 310.
	for vcpu, want := range map[int64]int64{1: 60, 2: 70, 3: 75, 4: 80, 8: 90, 96: 310} {
		if got := KubeReservedMilliCPU(vcpu); got != want {
			t.Errorf("KubeReservedMilliCPU(%d) = %d, want %d", vcpu, got, want)
		}
	}
	// eni-max-pods.txt: t3.nano 2 × (2 − 1) + 2 = 4, m5.large 29, m5.24xlarge 15 × 49 + 2 = 737.
	for _, tc := range [][3]int64{{2, 2, 4}, {3, 10, 29}, {15, 50, 737}, {0, 10, 0}} {
		if got := ENILimitedPods(tc[0], tc[1]); got != tc[2] {
			t.Errorf("ENILimitedPods(%d, %d) = %d, want %d", tc[0], tc[1], got, tc[2])
		}
	}
	// 2048 MiB arm64: 1984 − ceil(148.8) = 1984 − 149 = 1835.
	if got := CapacityMemoryMiB(2048, "arm64"); got != 1835 {
		t.Errorf("CapacityMemoryMiB(2048, arm64) = %d, want 1835", got)
	}
}

func TestAllocatableWithKubelet(t *testing.T) {
	m5 := MustAWS().Get("m5.large") // defaults: cpu 1930m, memory 6903Mi, pods 29 (see above)
	mi := func(v int64) int64 { return v * bytesPerMiB }
	for _, tc := range []struct {
		name     string
		family   string
		k        *apisv1.KubeletConfiguration
		cpuM     int64
		memBytes int64
		pods     int64
	}{
		// AL2023 keeps ENI-limited pods (29) in kube-reserved memory even with maxPods (Karpenter
		// UsesENILimitedMemoryOverhead), so only pods change.
		{"maxPods AL2023", "", &apisv1.KubeletConfiguration{MaxPods: ptr(int32(110))}, 1930, mi(6903), 110},
		// Bottlerocket counts maxPods: 7577 − (11 × 110 + 255 = 1465) − 100 = 6012 MiB.
		{"maxPods Bottlerocket", "Bottlerocket", &apisv1.KubeletConfiguration{MaxPods: ptr(int32(110))}, 1930, mi(6012), 110},
		// podsPerCore 4 × 2 vCPU = 8 < 29.
		{"podsPerCore", "", &apisv1.KubeletConfiguration{PodsPerCore: ptr(int32(4))}, 1930, mi(6903), 8},
		// Bottlerocket ignores podsPerCore.
		{"podsPerCore Bottlerocket", "Bottlerocket", &apisv1.KubeletConfiguration{PodsPerCore: ptr(int32(4))}, 1930, mi(6903), 29},
		// kubeReserved replaces per key: cpu 2000 − 200 = 1800; memory 7577 − 1024 − 100 = 6453.
		{"kubeReserved", "", &apisv1.KubeletConfiguration{KubeReserved: map[string]string{"cpu": "200m", "memory": "1Gi"}}, 1800, mi(6453), 29},
		// systemReserved adds: 1930 − 100 = 1830; 6903 − 100 = 6803.
		{"systemReserved", "", &apisv1.KubeletConfiguration{SystemReserved: map[string]string{"cpu": "100m", "memory": "100Mi"}}, 1830, mi(6803), 29},
		// evictionHard absolute: 7577 − 574 − 500 = 6503.
		{"evictionHard abs", "", &apisv1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "500Mi"}}, 1930, mi(6503), 29},
		// evictionHard 5% of capacity: ceil(7577 × 1048576 / 100 × 5) = ceil(397253017.6) = 397253018 bytes;
		// 7945060352 − 574 × 1048576 − 397253018 = 6945924710 bytes.
		{"evictionHard pct", "", &apisv1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "5%"}}, 1930, 6945924710, 29},
		// evictionSoft larger than hard wins on AL2023 (7577 − 574 − 1024 = 5979) ...
		{"evictionSoft", "", &apisv1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "200Mi"}, EvictionSoft: map[string]string{"memory.available": "1Gi"}}, 1930, mi(5979), 29},
		// ... and is ignored on Bottlerocket (7577 − 574 − 200 = 6803).
		{"evictionSoft Bottlerocket", "Bottlerocket", &apisv1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "200Mi"}, EvictionSoft: map[string]string{"memory.available": "1Gi"}}, 1930, mi(6803), 29},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewNodeSettings(tc.family, tc.k, nil, "spec")
			if err != nil {
				t.Fatal(err)
			}
			_, a := m5.ResourcesWith(s)
			if a.MilliCPU != tc.cpuM || a.MemoryBytes != tc.memBytes || a.Pods != tc.pods {
				t.Errorf("got cpu %dm memory %d pods %d, want %dm %d %d", a.MilliCPU, a.MemoryBytes, a.Pods, tc.cpuM, tc.memBytes, tc.pods)
			}
			if tc.family == "" {
				l := m5.AllocatableWith(tc.k)
				if l.Cpu().MilliValue() != tc.cpuM || l.Memory().Value() != tc.memBytes || l.Pods().Value() != tc.pods {
					t.Errorf("AllocatableWith = %v", l)
				}
			}
		})
	}
	// A 100Gi root volume: ephemeral 100Gi − 1Gi − 10Gi = 89Gi.
	s, err := NewNodeSettings("AL2023", nil, ptr(resource.MustParse("100Gi")), "spec")
	if err != nil {
		t.Fatal(err)
	}
	if _, a := m5.ResourcesWith(s); a.EphemeralBytes != 89*bytesPerGiB {
		t.Errorf("ephemeral with 100Gi root = %d, want 89Gi", a.EphemeralBytes)
	}
	// nil kubelet is the default.
	if got := m5.AllocatableWith(nil); got.Memory().Value() != mi(6903) {
		t.Errorf("AllocatableWith(nil) memory = %v", got.Memory())
	}
}

func TestKubeletErrorsNameTheField(t *testing.T) {
	_, err := NewNodeSettings("Ubuntu2", &apisv1.KubeletConfiguration{
		MaxPods:      ptr(int32(-1)),
		KubeReserved: map[string]string{"memory": "12x", "gpu": "1"},
		EvictionHard: map[string]string{"memory.available": "150%", "nodefs.available": "abc"},
	}, nil, "spec")
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{
		`spec.amiFamily: "Ubuntu2" is not one of`,
		`spec.kubelet.maxPods: -1 must not be negative`,
		`spec.kubelet.kubeReserved["memory"]: "12x" is not a quantity`,
		`spec.kubelet.kubeReserved["gpu"]: unknown resource`,
		`spec.kubelet.evictionHard["memory.available"]: "150%" is not a percentage`,
		`spec.kubelet.evictionHard["nodefs.available"]: "abc" is neither a quantity nor a percentage`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	// AllocatableWith skips the invalid entry and honours the valid one (best effort, no panic).
	m5 := MustAWS().Get("m5.large")
	l := m5.AllocatableWith(&apisv1.KubeletConfiguration{KubeReserved: map[string]string{"memory": "12x", "cpu": "200m"}})
	if l.Cpu().MilliValue() != 1800 || l.Memory().Value() != 6903*bytesPerMiB {
		t.Errorf("best-effort AllocatableWith = %v", l)
	}
}

// TestHandBuiltTypeOverrides covers types made with New (no Spec): overrides apply to their
// Capacity and Overhead directly.
func TestHandBuiltTypeOverrides(t *testing.T) {
	it := &InstanceType{
		Name: "test.small",
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"),
			corev1.ResourcePods: resource.MustParse("20"), corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
		},
		Overhead: Overhead{
			KubeReserved:      corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("70m"), corev1.ResourceMemory: resource.MustParse("475Mi")},
			EvictionThreshold: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Mi")},
		},
	}
	c := New("test", []*InstanceType{it})
	// 4096 − 475 − 100 = 3521 MiB; 2000 − 70 = 1930 m.
	if a := c.Get("test.small").AllocatableFast(); a.MemoryBytes != 3521*bytesPerMiB || a.MilliCPU != 1930 || a.Pods != 20 {
		t.Errorf("AllocatableFast = %+v", a)
	}
	// maxPods 10; systemReserved memory 200Mi → 3321 MiB.
	l := it.AllocatableWith(&apisv1.KubeletConfiguration{MaxPods: ptr(int32(10)), SystemReserved: map[string]string{"memory": "200Mi"}})
	if l.Pods().Value() != 10 || l.Memory().Value() != 3321*bytesPerMiB {
		t.Errorf("AllocatableWith = %v", l)
	}
}
