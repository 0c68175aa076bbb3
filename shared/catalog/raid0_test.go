package catalog

import "testing"

// instanceStorePolicy: RAID0 puts ephemeral storage on the instance store, so its capacity is the
// type's TotalSizeInGB in decimal bytes (karpenter-provider-aws instancetype ephemeralStorage);
// allocatable then takes Karpenter's default 1Gi kube-reserved and the 10% nodefs.available
// eviction threshold of that capacity. Figures derived by hand from the catalog's
// local_nvme_gb (i4i.xlarge: 937, one 937 GB NVMe volume; m5.large: none).
func TestInstanceStoreRAID0EphemeralStorage(t *testing.T) {
	cat := MustAWS()
	i4i, m5 := cat.Get("i4i.xlarge"), cat.Get("m5.large")
	if i4i == nil || m5 == nil {
		t.Fatal("i4i.xlarge or m5.large missing from the embedded catalog")
	}
	if got := i4i.Labels[LabelInstanceLocalNVME]; got != "937" {
		t.Fatalf("i4i.xlarge %s = %q, the hand figures below assume 937", LabelInstanceLocalNVME, got)
	}
	const (
		gi         = int64(1) << 30
		rootVolume = 20 * gi // Karpenter's default block device mapping
		store      = int64(937_000_000_000)
	)
	cases := []struct {
		name          string
		it            *InstanceType
		settings      NodeSettings
		capacity, all int64
	}{
		// 20Gi − 1Gi − ceil(20Gi × 10%) = 21474836480 − 1073741824 − 2147483648.
		{"i4i root volume", i4i, NodeSettings{}, rootVolume, 18_253_611_008},
		// 937e9 − 1Gi − 93.7e9 = 842,226,258,176.
		{"i4i RAID0", i4i, NodeSettings{InstanceStoreRAID0: true}, store, 842_226_258_176},
		// RAID0 wins over the root volume's size, as in Karpenter (checked first).
		{"i4i RAID0 with 100Gi root", i4i, NodeSettings{InstanceStoreRAID0: true, EphemeralStorageBytes: 100 * gi}, store, 842_226_258_176},
		// No instance store: RAID0 leaves the root volume (100Gi − 1Gi − 10Gi).
		{"m5 RAID0 with 100Gi root", m5, NodeSettings{InstanceStoreRAID0: true, EphemeralStorageBytes: 100 * gi}, 100 * gi, 89 * gi},
		{"m5 RAID0", m5, NodeSettings{InstanceStoreRAID0: true}, rootVolume, 18_253_611_008},
	}
	for _, c := range cases {
		capacity, alloc := c.it.ResourcesWith(c.settings)
		if capacity.EphemeralBytes != c.capacity || alloc.EphemeralBytes != c.all {
			t.Errorf("%s: ephemeral capacity %d allocatable %d, want %d and %d", c.name,
				capacity.EphemeralBytes, alloc.EphemeralBytes, c.capacity, c.all)
		}
		// Only ephemeral storage moves: cpu, memory and pods stay the defaults'.
		if d, _ := c.it.ResourcesWith(NodeSettings{}); capacity.MilliCPU != d.MilliCPU || capacity.MemoryBytes != d.MemoryBytes || capacity.Pods != d.Pods {
			t.Errorf("%s: RAID0 changed more than ephemeral storage: %+v vs %+v", c.name, capacity, d)
		}
	}
}
