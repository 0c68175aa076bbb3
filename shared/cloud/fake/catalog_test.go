package fake

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dovetail-dev/dovetail/shared/catalog"
)

// testCatalog is a hand-built slice of the us-east-1 catalog, so these tests do not depend on the
// embedded data. Sources of the numbers:
//   - on-demand prices: shared/data/aws/ec2_instance_types.csv, column on_demand_usd_per_hour_us_east_1
//     (c5.large 0.085, m5.large 0.096, m6g.large 0.077, r5.large 0.126);
//   - m5.large spot prices: the last sample per zone of shared/data/aws/spot_price_history_m5_large_us_east_1.csv
//     (2021-02-08/09: 1a 0.0423, 1b 0.0389, 1c 0.0381, 1d 0.0431, 1f 0.0437); m5.large has no 1e offering;
//   - r5.large spot at 0.13 is deliberately ABOVE every on-demand price here, to show that spot is
//     preferred by capacity type, not merely because it is cheaper;
//   - m5.large capacity and overhead are the EKS rules, by hand (see m5Large).
func testCatalog() *catalog.Catalog {
	od := func(zone string, price float64) catalog.Offering {
		return catalog.Offering{Zone: zone, CapacityType: "on-demand", PricePerHour: price, PriceSource: catalog.PriceSourceEmbedded, Available: true}
	}
	spot := func(zone string, price float64) catalog.Offering {
		return catalog.Offering{Zone: zone, CapacityType: "spot", PricePerHour: price, PriceSource: catalog.PriceSourceSpotModel, Available: true}
	}
	m5 := m5Large()
	m5.Offerings = []catalog.Offering{
		spot("us-east-1a", 0.0423), spot("us-east-1b", 0.0389), spot("us-east-1c", 0.0381),
		spot("us-east-1d", 0.0431), spot("us-east-1f", 0.0437),
		od("us-east-1a", 0.096), od("us-east-1b", 0.096), od("us-east-1c", 0.096),
	}
	small := func(name, arch string, cpu int64, memMiB int64, offerings ...catalog.Offering) *catalog.InstanceType {
		return &catalog.InstanceType{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/arch": arch, "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": name,
			},
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(memMiB<<20, resource.BinarySI),
				corev1.ResourcePods:   *resource.NewQuantity(29, resource.DecimalSI),
			},
			Offerings: offerings,
		}
	}
	return catalog.New("us-east-1", []*catalog.InstanceType{
		m5,
		small("c5.large", "amd64", 2, 4096, od("us-east-1a", 0.085), od("us-east-1b", 0.085)),
		small("m6g.large", "arm64", 2, 8192, od("us-east-1a", 0.077)),
		small("r5.large", "amd64", 2, 16384, od("us-east-1a", 0.126), spot("us-east-1a", 0.13),
			catalog.Offering{Zone: "us-east-1b", CapacityType: "spot", PricePerHour: 0.05, PriceSource: catalog.PriceSourceSpotModel, Available: false}),
	})
}

// m5Large is m5.large as an EKS node reports it (2 vCPU, 8 GiB, 3 ENIs × 10 IPv4 addresses):
//   - capacity memory 8192 − ceil(8192 × 0.075) = 8192 − 615 = 7577 MiB (Karpenter's VM memory
//     overhead of 7.5 %);
//   - pods 3 × (10 − 1) + 2 = 29 (EKS eni-max-pods formula);
//   - kube-reserved cpu 6 % of the first core + 1 % of the second = 60 + 10 = 70 m;
//   - kube-reserved memory 11 × 29 + 255 = 574 MiB; eviction threshold memory.available 100 MiB;
//   - ephemeral storage 20 GiB root volume, kube-reserved 1 GiB, eviction nodefs.available 10 % = 2 GiB.
//
// So allocatable is cpu 2000 − 70 = 1930 m, memory 7577 − 574 − 100 = 6903 MiB, pods 29,
// ephemeral-storage 20 − 1 − 2 = 17 GiB, which is the alloc_* row of m5.large in
// shared/data/aws/ec2_instance_types.csv (Karpenter's published instance-types table).
func m5Large() *catalog.InstanceType {
	return &catalog.InstanceType{
		Name: "m5.large",
		Labels: map[string]string{
			"kubernetes.io/arch":                  "amd64",
			"kubernetes.io/os":                    "linux",
			"node.kubernetes.io/instance-type":    "m5.large",
			"karpenter.k8s.aws/instance-category": "m",
			"karpenter.k8s.aws/instance-family":   "m5",
			"karpenter.k8s.aws/instance-size":     "large",
			"karpenter.k8s.aws/instance-cpu":      "2",
			"karpenter.k8s.aws/instance-memory":   "8192",
		},
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("2"),
			corev1.ResourceMemory:           resource.MustParse("7577Mi"),
			corev1.ResourcePods:             resource.MustParse("29"),
			corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
		},
		Overhead: catalog.Overhead{
			KubeReserved: corev1.ResourceList{
				corev1.ResourceCPU:              resource.MustParse("70m"),
				corev1.ResourceMemory:           resource.MustParse("574Mi"),
				corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
			},
			EvictionThreshold: corev1.ResourceList{
				corev1.ResourceMemory:           resource.MustParse("100Mi"),
				corev1.ResourceEphemeralStorage: resource.MustParse("2Gi"),
			},
		},
	}
}
