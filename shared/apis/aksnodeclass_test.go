package apis

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	"sigs.k8s.io/yaml"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

const aksCRDFile = "../../infra/crds/karpenter.azure.com_aksnodeclasses.yaml"

// aksMinimal is the smallest useful AKSNodeClass: everything else is defaulted or left to the
// provider's options.
const aksMinimal = `apiVersion: karpenter.azure.com/v1beta1
kind: AKSNodeClass
metadata:
  name: default
spec: {}
`

// aksFull sets every field of the spec and status with values AKS accepts: Azure Linux with FIPS,
// a node subnet of the cluster's VNet, tuned kubelet and sysctls, a swap file (so failSwapOn is
// false) and the local DNS overrides of the AKS LocalDNS documentation.
const aksFull = `apiVersion: karpenter.azure.com/v1beta1
kind: AKSNodeClass
metadata:
  name: azurelinux-fips
spec:
  imageFamily: AzureLinux
  fipsMode: FIPS
  osDiskSizeGB: 256
  maxPods: 110
  vnetSubnetID: /subscriptions/12345678-1234-1234-1234-123456789012/resourceGroups/MC_aks-rg_aks-cluster_eastus/providers/Microsoft.Network/virtualNetworks/aks-vnet-12345678/subnets/aks-subnet
  tags:
    team: platform
    cost-center: "9000"
  security:
    encryptionAtHost: true
    trustedLaunch:
      secureBoot: false
      vtpm: false
  artifactStreaming:
    enabled: true
  gpu:
    mode: None
  kubelet:
    cpuManagerPolicy: static
    cpuCFSQuota: true
    cpuCFSQuotaPeriod: 200ms
    imageGCHighThresholdPercent: 85
    imageGCLowThresholdPercent: 80
    topologyManagerPolicy: best-effort
    allowedUnsafeSysctls: ["kernel.msg*", "net.ipv4.route.min_pmtu"]
    containerLogMaxSize: 100Mi
    containerLogMaxFiles: 10
    podPidsLimit: 4096
    failSwapOn: false
  linuxOSConfig:
    swapFileSize: 1500Mi
    transparentHugePageEnabled: madvise
    transparentHugePageDefrag: defer+madvise
    sysctls:
      fsAioMaxNr: 65536
      fsFileMax: 709620
      fsInotifyMaxUserWatches: 1048576
      fsNrOpen: 1048576
      kernelThreadsMax: 100000
      netCoreNetdevMaxBacklog: 1000
      netCoreOptmemMax: 20480
      netCoreRmemDefault: 212992
      netCoreRmemMax: 212992
      netCoreSomaxconn: 16384
      netCoreWmemDefault: 212992
      netCoreWmemMax: 212992
      netIPv4IPLocalPortRange: "32768 60999"
      netIPv4NeighDefaultGcThresh1: 4096
      netIPv4NeighDefaultGcThresh2: 8192
      netIPv4NeighDefaultGcThresh3: 16384
      netIPv4TCPFinTimeout: 60
      netIPv4TCPKeepaliveIntvl: 75
      netIPv4TCPKeepaliveProbes: 9
      netIPv4TCPKeepaliveTime: 7200
      netIPv4TCPMaxSynBacklog: 16384
      netIPv4TCPMaxTwBuckets: 32768
      netIPv4TCPTwReuse: true
      netNetfilterNfConntrackBuckets: 65536
      netNetfilterNfConntrackMax: 131072
      vmMaxMapCount: 65530
      vmSwappiness: 60
      vmVfsCachePressure: 100
  localDNS:
    mode: Required
    vnetDNSOverrides:
    - {zone: ".", queryLogging: Error, protocol: PreferUDP, forwardDestination: VnetDNS, forwardPolicy: Sequential, maxConcurrent: 1000, cacheDuration: 3600s, serveStaleDuration: 3600s, serveStale: Verify}
    - {zone: cluster.local, queryLogging: Error, protocol: ForceTCP, forwardDestination: ClusterCoreDNS, forwardPolicy: Sequential, maxConcurrent: 1000, cacheDuration: 3600s, serveStaleDuration: 3600s, serveStale: Immediate}
    kubeDNSOverrides:
    - {zone: ".", queryLogging: Error, protocol: PreferUDP, forwardDestination: ClusterCoreDNS, forwardPolicy: Sequential, maxConcurrent: 1000, cacheDuration: 3600s, serveStaleDuration: 3600s, serveStale: Verify}
    - {zone: cluster.local, queryLogging: Log, protocol: ForceTCP, forwardDestination: ClusterCoreDNS, forwardPolicy: RoundRobin, maxConcurrent: 1000, cacheDuration: 1h, serveStaleDuration: 1h30m, serveStale: Immediate}
status:
  kubernetesVersion: 1.33.2
  localDNSState: Enabled
  images:
  - id: /CommunityGalleries/AKSAzureLinux-f7c7cda5-1c9a-4bdc-a222-9614c968580b/images/V3gen2fips/versions/202507.21.0
    requirements:
    - {key: kubernetes.io/arch, operator: In, values: [amd64]}
    - {key: karpenter.azure.com/sku-hyperv-generation, operator: In, values: ["2"]}
  conditions:
  - type: Ready
    status: "True"
    observedGeneration: 1
    lastTransitionTime: "2025-07-25T10:00:00Z"
    reason: Ready
    message: ""
`

func decodeAKS(t *testing.T, doc []byte) *v1.AKSNodeClass {
	t.Helper()
	nc := &v1.AKSNodeClass{}
	if err := yaml.UnmarshalStrict(doc, nc); err != nil {
		t.Fatalf("strict decode: %v", err)
	}
	return nc
}

// aksMerge deep-merges patch into base as a JSON merge patch does (objects merge, lists and
// scalars replace, null deletes).
func aksMerge(base, patch map[string]any) map[string]any {
	for k, pv := range patch {
		if pv == nil {
			delete(base, k)
			continue
		}
		bm, bok := base[k].(map[string]any)
		pm, pok := pv.(map[string]any)
		if bok && pok {
			base[k] = aksMerge(bm, pm)
		} else {
			base[k] = pv
		}
	}
	return base
}

// aksPatched returns aksFull with a YAML merge patch applied.
func aksPatched(t *testing.T, patch string) []byte {
	t.Helper()
	var base, p map[string]any
	if err := yaml.Unmarshal([]byte(aksFull), &base); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(patch), &p); err != nil {
		t.Fatalf("patch %q: %v", patch, err)
	}
	out, err := yaml.Marshal(aksMerge(base, p))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAKSNodeClassMinimalGetsCRDDefaults(t *testing.T) {
	nc := decodeAKS(t, []byte(aksMinimal))
	if nc.APIVersion != v1.AzureGroupVersion || nc.Kind != v1.KindAKSNodeClass {
		t.Fatalf("apiVersion/kind = %s %s", nc.APIVersion, nc.Kind)
	}
	if got := nc.ImageFamily(); got != v1.ImageFamilyUbuntu {
		t.Errorf("ImageFamily() before defaulting = %q, want Ubuntu", got)
	}
	SetAKSNodeClassDefaults(nc)
	if nc.Spec.ImageFamily == nil || *nc.Spec.ImageFamily != "Ubuntu" {
		t.Errorf("imageFamily = %v, want Ubuntu", nc.Spec.ImageFamily)
	}
	if nc.Spec.OSDiskSizeGB == nil || *nc.Spec.OSDiskSizeGB != 128 {
		t.Errorf("osDiskSizeGB = %v, want 128", nc.Spec.OSDiskSizeGB)
	}
	// Nested defaults apply only inside objects that are present, as in the API server; maxPods
	// has no default in the object (it depends on the network plugin).
	if nc.Spec.Kubelet != nil || nc.Spec.GPU != nil || nc.Spec.MaxPods != nil || nc.Spec.VNETSubnetID != nil {
		t.Errorf("defaults invented fields: %+v", nc.Spec)
	}
	if errs := ValidateAKSNodeClass(nc); len(errs) > 0 {
		t.Errorf("minimal manifest: %v", errs)
	}
	again := nc.DeepCopy()
	SetAKSNodeClassDefaults(again)
	if !reflect.DeepEqual(again, nc) {
		t.Error("SetAKSNodeClassDefaults is not idempotent")
	}
	SetAKSNodeClassDefaults(nil)
	if errs := ValidateAKSNodeClass(nil); len(errs) != 1 || errs[0].Field != "spec" {
		t.Errorf("nil: %v", errs)
	}
}

func TestAKSNodeClassNestedDefaults(t *testing.T) {
	nc := decodeAKS(t, []byte(`apiVersion: karpenter.azure.com/v1beta1
kind: AKSNodeClass
metadata: {name: gpu}
spec:
  imageFamily: Ubuntu2204
  osDiskSizeGB: 64
  kubelet: {cpuManagerPolicy: static, imageGCHighThresholdPercent: 85}
  gpu: {}
`))
	SetAKSNodeClassDefaults(nc)
	k := nc.Spec.Kubelet
	want := v1.AKSKubeletConfiguration{
		CPUManagerPolicy:            ptrTo("static"), // set values stay
		ImageGCHighThresholdPercent: ptrTo(int32(85)),
		CPUCFSQuota:                 ptrTo(true),
		CPUCFSQuotaPeriod:           ptrTo(metav1.Duration{Duration: 100 * time.Millisecond}),
		TopologyManagerPolicy:       ptrTo("none"),
		ContainerLogMaxSize:         ptrTo("50Mi"),
		ContainerLogMaxFiles:        ptrTo(int32(5)),
	}
	if !reflect.DeepEqual(*k, want) {
		t.Errorf("kubelet defaults:\n got %+v\nwant %+v", *k, want)
	}
	if g := nc.Spec.GPU; g.Mode == nil || *g.Mode != "Driver" {
		t.Errorf("gpu.mode = %v, want Driver", g.Mode)
	}
	if *nc.Spec.ImageFamily != "Ubuntu2204" || *nc.Spec.OSDiskSizeGB != 64 || nc.ImageFamily() != "Ubuntu2204" {
		t.Errorf("set values changed: %v %v", *nc.Spec.ImageFamily, *nc.Spec.OSDiskSizeGB)
	}
	if errs := ValidateAKSNodeClass(nc); len(errs) > 0 {
		t.Error(errs)
	}
}

func TestAKSNodeClassFullManifestValid(t *testing.T) {
	nc := decodeAKS(t, []byte(aksFull))
	before := nc.DeepCopy()
	SetAKSNodeClassDefaults(nc)
	if !reflect.DeepEqual(before, nc) {
		t.Error("defaults changed a manifest that sets every defaulted field")
	}
	if errs := ValidateAKSNodeClass(nc); len(errs) > 0 {
		t.Errorf("full manifest: %v", errs)
	}
	// The fixture sets every field, so the deep-copy and CRD tests below cover them all.
	aksAllSet(t, reflect.ValueOf(nc.Spec), "spec")
	aksAllSet(t, reflect.ValueOf(nc.Status), "status")
	if q := nc.Spec.Kubelet.CPUCFSQuotaPeriod.Duration; q != 200*time.Millisecond {
		t.Errorf("cpuCFSQuotaPeriod = %v", q)
	}
}

// aksAllSet fails for a nil pointer, an empty slice, map or string anywhere below v.
func aksAllSet(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			t.Errorf("%s is unset in the fixture", path)
			return
		}
		aksAllSet(t, v.Elem(), path)
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 {
			t.Errorf("%s is empty in the fixture", path)
		}
		if v.Kind() == reflect.Slice {
			for i := 0; i < v.Len(); i++ {
				aksAllSet(t, v.Index(i), fmt.Sprintf("%s[%d]", path, i))
			}
		}
	case reflect.String:
		if v.Len() == 0 {
			t.Errorf("%s is empty in the fixture", path)
		}
	case reflect.Struct:
		if v.Type().PkgPath() != reflect.TypeFor[v1.AKSNodeClass]().PkgPath() {
			return // metav1 and corev1 types
		}
		for i := 0; i < v.NumField(); i++ {
			aksAllSet(t, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	}
}

type aksBad struct {
	name, patch string
	path        string
	typ         field.ErrorType
	// schema: the CRD's OpenAPI schema rejects the manifest too. False for CEL rules, list-map
	// keys, metadata.name and the kubelet's own cpuCFSQuotaPeriod bounds, which it does not check.
	schema bool
}

// zo is one localDNS zone override in YAML flow style: the valid values of aksFull, with fields
// replaced by kv pairs ("key: value"; "key: null" drops it).
func zo(zone, dest string, kv ...string) string {
	f := map[string]string{"zone": fmt.Sprintf("%q", zone), "queryLogging": "Error", "protocol": "PreferUDP",
		"forwardDestination": dest, "forwardPolicy": "Sequential", "maxConcurrent": "1000",
		"cacheDuration": "3600s", "serveStaleDuration": "3600s", "serveStale": "Verify"}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, ": ")
		if v == "null" {
			delete(f, k)
		} else {
			f[k] = v
		}
	}
	var parts []string
	for _, k := range sortedKeys(f) {
		parts = append(parts, k+": "+f[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func vnetDNS(items ...string) string {
	return "spec: {localDNS: {vnetDNSOverrides: [" + strings.Join(items, ", ") + "]}}"
}

func kubeDNS(items ...string) string {
	return "spec: {localDNS: {kubeDNSOverrides: [" + strings.Join(items, ", ") + "]}}"
}

func aksBadCases() []aksBad {
	root, local := zo(".", "VnetDNS"), zo("cluster.local", "ClusterCoreDNS", "serveStale: Immediate")
	kroot := zo(".", "ClusterCoreDNS")
	many := []string{root, local}
	for i := 0; len(many) <= aksMaxDNSOverrides; i++ {
		many = append(many, zo(fmt.Sprintf("zone%d.contoso.com", i), "VnetDNS"))
	}
	sys := func(body string) string { return "spec: {linuxOSConfig: {sysctls: {" + body + "}}}" }
	const sysp = "spec.linuxOSConfig.sysctls."
	long := strings.Repeat("k", 513)
	return []aksBad{
		{"name", `metadata: {name: "AKS_Default"}`, "metadata.name", field.ErrorTypeInvalid, false},
		{"image family", `spec: {imageFamily: Ubuntu2004}`, "spec.imageFamily", field.ErrorTypeNotSupported, true},
		{"image family lower case", `spec: {imageFamily: azurelinux}`, "spec.imageFamily", field.ErrorTypeNotSupported, true},
		{"fips mode", `spec: {fipsMode: Enabled}`, "spec.fipsMode", field.ErrorTypeNotSupported, true},
		{"FIPS on Ubuntu2204", `spec: {imageFamily: Ubuntu2204}`, "spec.fipsMode", field.ErrorTypeForbidden, false},
		{"FIPS on Ubuntu2404", `spec: {imageFamily: Ubuntu2404}`, "spec.fipsMode", field.ErrorTypeForbidden, false},
		{"trusted launch with FIPS on AzureLinux", `spec: {security: {trustedLaunch: {vtpm: true}}}`, "spec.security.trustedLaunch", field.ErrorTypeForbidden, false},
		{"Windows (not in the CRD at the provider's main)", `spec: {imageFamily: Windows2022, linuxOSConfig: null}`, "spec.imageFamily", field.ErrorTypeNotSupported, true},
		{"os disk too small", `spec: {osDiskSizeGB: 29}`, "spec.osDiskSizeGB", field.ErrorTypeInvalid, true},
		{"os disk too large", `spec: {osDiskSizeGB: 2049}`, "spec.osDiskSizeGB", field.ErrorTypeInvalid, true},
		{"maxPods below 10", `spec: {maxPods: 9}`, "spec.maxPods", field.ErrorTypeInvalid, true},
		{"maxPods above 250", `spec: {maxPods: 251}`, "spec.maxPods", field.ErrorTypeInvalid, true},
		{"subnet id is a vnet", `spec: {vnetSubnetID: /subscriptions/12345678-1234-1234-1234-123456789012/resourceGroups/aks-rg/providers/Microsoft.Network/virtualNetworks/aks-vnet}`, "spec.vnetSubnetID", field.ErrorTypeInvalid, true},
		{"subnet id is a name", `spec: {vnetSubnetID: aks-subnet}`, "spec.vnetSubnetID", field.ErrorTypeInvalid, true},
		{"subnet id with a slash in the group", `spec: {vnetSubnetID: /subscriptions/s/resourceGroups/a/b/providers/Microsoft.Network/virtualNetworks/v/subnets/n}`, "spec.vnetSubnetID", field.ErrorTypeInvalid, true},
		{"tag key with ?", `spec: {tags: {"owner?": me}}`, "spec.tags[owner?]", field.ErrorTypeInvalid, false},
		{"tag key with %", `spec: {tags: {"100%": x}}`, "spec.tags[100%]", field.ErrorTypeInvalid, false},
		{"tag key with backslash", `spec: {tags: {'dom\user': x}}`, `spec.tags[dom\user]`, field.ErrorTypeInvalid, false},
		{"tag key too long", `spec: {tags: {` + long + `: x}}`, "spec.tags[" + long + "]", field.ErrorTypeInvalid, false},
		{"tag value too long", `spec: {tags: {team: ` + strings.Repeat("v", 257) + `}}`, "spec.tags[team]", field.ErrorTypeInvalid, false},
		{"cpu manager policy", `spec: {kubelet: {cpuManagerPolicy: dynamic}}`, "spec.kubelet.cpuManagerPolicy", field.ErrorTypeNotSupported, true},
		{"topology manager policy", `spec: {kubelet: {topologyManagerPolicy: strict}}`, "spec.kubelet.topologyManagerPolicy", field.ErrorTypeNotSupported, true},
		{"cfs quota period above 1s", `spec: {kubelet: {cpuCFSQuotaPeriod: 2s}}`, "spec.kubelet.cpuCFSQuotaPeriod", field.ErrorTypeInvalid, false},
		{"cfs quota period below 1ms", `spec: {kubelet: {cpuCFSQuotaPeriod: 500us}}`, "spec.kubelet.cpuCFSQuotaPeriod", field.ErrorTypeInvalid, false},
		{"image GC high above 100", `spec: {kubelet: {imageGCHighThresholdPercent: 101}}`, "spec.kubelet.imageGCHighThresholdPercent", field.ErrorTypeInvalid, true},
		{"image GC low negative", `spec: {kubelet: {imageGCLowThresholdPercent: -1}}`, "spec.kubelet.imageGCLowThresholdPercent", field.ErrorTypeInvalid, true},
		{"image GC high not above low", `spec: {kubelet: {imageGCHighThresholdPercent: 80}}`, "spec.kubelet.imageGCHighThresholdPercent", field.ErrorTypeInvalid, false},
		{"container log size unit", `spec: {kubelet: {containerLogMaxSize: 50MB}}`, "spec.kubelet.containerLogMaxSize", field.ErrorTypeInvalid, true},
		{"container log files below 2", `spec: {kubelet: {containerLogMaxFiles: 1}}`, "spec.kubelet.containerLogMaxFiles", field.ErrorTypeInvalid, true},
		{"gpu mode", `spec: {gpu: {mode: Auto}}`, "spec.gpu.mode", field.ErrorTypeNotSupported, true},
		{"swap file size unit", `spec: {linuxOSConfig: {swapFileSize: 2GB}}`, "spec.linuxOSConfig.swapFileSize", field.ErrorTypeInvalid, true},
		{"swap file with failSwapOn true", `spec: {kubelet: {failSwapOn: true}}`, "spec.kubelet.failSwapOn", field.ErrorTypeInvalid, false},
		{"swap file without failSwapOn", `spec: {kubelet: {failSwapOn: null}}`, "spec.kubelet.failSwapOn", field.ErrorTypeRequired, false},
		{"swap file without kubelet", `spec: {kubelet: null}`, "spec.kubelet.failSwapOn", field.ErrorTypeRequired, false},
		{"THP enabled", `spec: {linuxOSConfig: {transparentHugePageEnabled: sometimes}}`, "spec.linuxOSConfig.transparentHugePageEnabled", field.ErrorTypeNotSupported, true},
		{"THP defrag", `spec: {linuxOSConfig: {transparentHugePageDefrag: "madvise+defer"}}`, "spec.linuxOSConfig.transparentHugePageDefrag", field.ErrorTypeNotSupported, true},
		{"vm.swappiness above 100", sys(`vmSwappiness: 101`), sysp + "vmSwappiness", field.ErrorTypeInvalid, true},
		{"fs.file-max below 8192", sys(`fsFileMax: 8191`), sysp + "fsFileMax", field.ErrorTypeInvalid, true},
		{"tcp keepalive probes 0", sys(`netIPv4TCPKeepaliveProbes: 0`), sysp + "netIPv4TCPKeepaliveProbes", field.ErrorTypeInvalid, true},
		{"rmem default above max", sys(`netCoreRmemDefault: 300000`), sysp + "netCoreRmemDefault", field.ErrorTypeInvalid, false},
		{"wmem default above max", sys(`netCoreWmemDefault: 300000`), sysp + "netCoreWmemDefault", field.ErrorTypeInvalid, false},
		{"gc_thresh1 above gc_thresh2", sys(`netIPv4NeighDefaultGcThresh1: 10000`), sysp + "netIPv4NeighDefaultGcThresh1", field.ErrorTypeInvalid, false},
		{"gc_thresh2 above gc_thresh3", sys(`netIPv4NeighDefaultGcThresh2: 20000`), sysp + "netIPv4NeighDefaultGcThresh2", field.ErrorTypeInvalid, false},
		{"port range with a dash", sys(`netIPv4IPLocalPortRange: "32768-60999"`), sysp + "netIPv4IPLocalPortRange", field.ErrorTypeInvalid, true},
		{"port range first below 1024", sys(`netIPv4IPLocalPortRange: "1000 60999"`), sysp + "netIPv4IPLocalPortRange", field.ErrorTypeInvalid, false},
		{"port range last above 65535", sys(`netIPv4IPLocalPortRange: "32768 65536"`), sysp + "netIPv4IPLocalPortRange", field.ErrorTypeInvalid, false},
		{"port range reversed", sys(`netIPv4IPLocalPortRange: "40000 32768"`), sysp + "netIPv4IPLocalPortRange", field.ErrorTypeInvalid, false},
		{"local DNS mode", `spec: {localDNS: {mode: Always}}`, "spec.localDNS.mode", field.ErrorTypeNotSupported, true},
		{"local DNS mode required", `spec: {localDNS: {mode: null}}`, "spec.localDNS.mode", field.ErrorTypeRequired, true},
		{"kube DNS overrides required", `spec: {localDNS: {kubeDNSOverrides: null}}`, "spec.localDNS.kubeDNSOverrides", field.ErrorTypeRequired, true},
		{"kube DNS overrides need cluster.local", kubeDNS(kroot), "spec.localDNS.kubeDNSOverrides", field.ErrorTypeRequired, false},
		{"vnet DNS overrides need the root zone", vnetDNS(local), "spec.localDNS.vnetDNSOverrides", field.ErrorTypeRequired, false},
		{"vnet DNS root to CoreDNS", vnetDNS(zo(".", "ClusterCoreDNS"), local), "spec.localDNS.vnetDNSOverrides[0].forwardDestination", field.ErrorTypeForbidden, false},
		{"vnet DNS external zone to CoreDNS", vnetDNS(root, local, zo("contoso.com", "ClusterCoreDNS")), "spec.localDNS.vnetDNSOverrides[2].forwardDestination", field.ErrorTypeForbidden, false},
		{"cluster.local to VnetDNS", kubeDNS(kroot, zo("cluster.local", "VnetDNS")), "spec.localDNS.kubeDNSOverrides[1].forwardDestination", field.ErrorTypeForbidden, false},
		{"serveStale Verify with ForceTCP", kubeDNS(zo(".", "ClusterCoreDNS", "protocol: ForceTCP"), zo("cluster.local", "ClusterCoreDNS")), "spec.localDNS.kubeDNSOverrides[0].serveStale", field.ErrorTypeForbidden, false},
		{"duplicate zone", kubeDNS(kroot, zo("cluster.local", "ClusterCoreDNS"), zo("cluster.local", "ClusterCoreDNS")), "spec.localDNS.kubeDNSOverrides[2].zone", field.ErrorTypeDuplicate, false},
		{"more than 100 overrides", vnetDNS(many...), "spec.localDNS.vnetDNSOverrides", field.ErrorTypeTooMany, true},
		{"zone not a DNS name", kubeDNS(kroot, zo("cluster.local", "ClusterCoreDNS"), zo("bad zone!", "VnetDNS")), "spec.localDNS.kubeDNSOverrides[2].zone", field.ErrorTypeInvalid, true},
		{"zone too long", kubeDNS(kroot, zo("cluster.local", "ClusterCoreDNS"), zo(strings.Repeat("a.", 127)+"a", "VnetDNS")), "spec.localDNS.kubeDNSOverrides[2].zone", field.ErrorTypeTooLong, true},
		{"cache duration in days", kubeDNS(zo(".", "ClusterCoreDNS", "cacheDuration: 1d"), zo("cluster.local", "ClusterCoreDNS")), "spec.localDNS.kubeDNSOverrides[0].cacheDuration", field.ErrorTypeInvalid, true},
		{"serve stale duration required", kubeDNS(zo(".", "ClusterCoreDNS", "serveStaleDuration: null"), zo("cluster.local", "ClusterCoreDNS")), "spec.localDNS.kubeDNSOverrides[0].serveStaleDuration", field.ErrorTypeRequired, true},
		{"max concurrent negative", kubeDNS(kroot, zo("cluster.local", "ClusterCoreDNS", "maxConcurrent: -1")), "spec.localDNS.kubeDNSOverrides[1].maxConcurrent", field.ErrorTypeInvalid, true},
		{"max concurrent required", kubeDNS(kroot, zo("cluster.local", "ClusterCoreDNS", "maxConcurrent: null")), "spec.localDNS.kubeDNSOverrides[1].maxConcurrent", field.ErrorTypeRequired, true},
		{"query logging", kubeDNS(zo(".", "ClusterCoreDNS", "queryLogging: Debug"), zo("cluster.local", "ClusterCoreDNS")), "spec.localDNS.kubeDNSOverrides[0].queryLogging", field.ErrorTypeNotSupported, true},
		{"forward policy", kubeDNS(zo(".", "ClusterCoreDNS", "forwardPolicy: Fastest"), zo("cluster.local", "ClusterCoreDNS")), "spec.localDNS.kubeDNSOverrides[0].forwardPolicy", field.ErrorTypeNotSupported, true},
		{"protocol required", kubeDNS(zo(".", "ClusterCoreDNS", "protocol: null"), zo("cluster.local", "ClusterCoreDNS")), "spec.localDNS.kubeDNSOverrides[0].protocol", field.ErrorTypeRequired, true},
	}
}

// Each manifest differs from the valid aksFull in one field and gets errors at that field only,
// of the expected type; the CRD's own schema agrees wherever the rule is a schema rule.
func TestValidateAKSNodeClassRejects(t *testing.T) {
	schema := aksSchemaValidator(t)
	for _, c := range aksBadCases() {
		t.Run(c.name, func(t *testing.T) {
			doc := aksPatched(t, c.patch)
			nc := decodeAKS(t, doc)
			SetAKSNodeClassDefaults(nc)
			errs := ValidateAKSNodeClass(nc)
			found := false
			for _, e := range errs {
				if e.Field != c.path {
					t.Errorf("unexpected error %v (want only %s)", e, c.path)
				}
				if e.Field == c.path && e.Type == c.typ {
					found = true
					if e.Detail == "" && e.Type != field.ErrorTypeNotSupported && e.Type != field.ErrorTypeDuplicate && e.Type != field.ErrorTypeTooLong && e.Type != field.ErrorTypeTooMany {
						t.Errorf("%v gives no reason", e)
					}
				}
			}
			if !found {
				t.Errorf("want %s at %s, got %v", c.typ, c.path, errs)
			}
			var obj map[string]any
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				t.Fatal(err)
			}
			res := schema.Validate(obj)
			if c.schema && res.IsValid() {
				t.Errorf("the CRD schema accepts it; is the rule really a schema rule?")
			}
			if !c.schema && !res.IsValid() {
				t.Errorf("the CRD schema rejects it too (%v); mark it schema", res.Errors)
			}
		})
	}
}

// Corner cases the CRD accepts.
func TestValidateAKSNodeClassAllows(t *testing.T) {
	schema := aksSchemaValidator(t)
	for _, patch := range []string{
		`spec: {vnetSubnetID: /SUBSCRIPTIONS/12345678-1234-1234-1234-123456789012/resourcegroups/my.rg_(1)/providers/microsoft.network/virtualnetworks/vnet/subnets/nodes}`,
		`spec: {imageFamily: Ubuntu}`, // FIPS with the generic Ubuntu family is allowed
		`spec: {imageFamily: Ubuntu2204, security: {trustedLaunch: {secureBoot: true}}}`, // FIPS on Ubuntu2204 under trusted launch
		`spec: {imageFamily: Ubuntu, security: {trustedLaunch: {vtpm: true}}}`,
		`spec: {fipsMode: null, imageFamily: Ubuntu2404}`,
		`spec: {tags: {"dovetail.dev/cluster": prod, "": empty}}`,
		`spec: {kubelet: {cpuCFSQuotaPeriod: 1s, imageGCLowThresholdPercent: 0, imageGCHighThresholdPercent: 100, podPidsLimit: -1}}`,
		`spec: {linuxOSConfig: {sysctls: {vmSwappiness: 0, netIPv4IPLocalPortRange: "32768 32768"}}}`,
		`spec: {linuxOSConfig: {swapFileSize: null}, kubelet: {failSwapOn: null}}`,
		vnetDNS(zo(".", "VnetDNS"), zo("cluster.local", "ClusterCoreDNS"), zo("svc.cluster.local", "ClusterCoreDNS"), zo("contoso.com.", "VnetDNS", "maxConcurrent: 0")),
		`spec: {localDNS: {mode: Preferred}}`,
	} {
		doc := aksPatched(t, patch)
		nc := decodeAKS(t, doc)
		SetAKSNodeClassDefaults(nc)
		if errs := ValidateAKSNodeClass(nc); len(errs) > 0 {
			t.Errorf("%s: %v", patch, errs)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		if res := schema.Validate(obj); !res.IsValid() {
			t.Errorf("%s: CRD schema: %v", patch, res.Errors)
		}
	}
}

// Every problem is reported at once.
func TestValidateAKSNodeClassCollectsAll(t *testing.T) {
	nc := decodeAKS(t, aksPatched(t, `spec: {osDiskSizeGB: 10, maxPods: 300, gpu: {mode: Auto}, tags: {"a<b": x}}`))
	errs := ValidateAKSNodeClass(nc)
	var paths []string
	for _, e := range errs {
		paths = append(paths, e.Field)
	}
	want := []string{"spec.osDiskSizeGB", "spec.maxPods", "spec.tags[a<b]", "spec.gpu.mode"}
	if !reflect.DeepEqual(paths, want) {
		t.Errorf("paths = %v, want %v", paths, want)
	}
	if got := errs.ToAggregate().Error(); !strings.Contains(got, "spec.osDiskSizeGB: Invalid value: 10: must be between 30 and 2048") {
		t.Errorf("message = %s", got)
	}
}

// Strict decoding refuses fields the CRD does not have, duplicate keys and values of the wrong
// type.
func TestAKSNodeClassStrictDecoding(t *testing.T) {
	for _, spec := range []string{
		"{imageVersion: 202507.21.0}", // not a field at this CRD commit
		"{osDiskSize: 128}",           // misspelt
		"{maxPods: many}",
		"{kubelet: {cpuCFSQuotaPeriod: fast}}",
		"{linuxOSConfig: {swapFileSizeMB: 1500}}", // a later provider spelling, not this CRD's
		"{osDiskSizeGB: 128, osDiskSizeGB: 64}",
	} {
		doc := strings.Replace(aksMinimal, "spec: {}", "spec: "+spec, 1)
		if err := yaml.UnmarshalStrict([]byte(doc), &v1.AKSNodeClass{}); err == nil {
			t.Errorf("accepted spec %s", spec)
		}
	}
}

// A deep copy shares no memory with its original: changing every field of the copy leaves the
// original as decoded.
func TestAKSNodeClassDeepCopy(t *testing.T) {
	orig := decodeAKS(t, []byte(aksFull))
	pristine := decodeAKS(t, []byte(aksFull))
	cp := orig.DeepCopy()
	if !reflect.DeepEqual(cp, orig) {
		t.Fatal("copy differs")
	}
	aksNoAliasing(t, reflect.ValueOf(orig).Elem(), reflect.ValueOf(cp).Elem(), "AKSNodeClass")
	aksScribble(reflect.ValueOf(cp).Elem())
	cp.Labels = map[string]string{"x": "y"}
	if !reflect.DeepEqual(orig, pristine) {
		t.Error("changing the copy changed the original")
	}

	var into v1.AKSNodeClass
	orig.DeepCopyInto(&into)
	if !reflect.DeepEqual(&into, orig) {
		t.Error("DeepCopyInto differs")
	}
	obj := orig.DeepCopyObject()
	if nc, ok := obj.(*v1.AKSNodeClass); !ok || !reflect.DeepEqual(nc, orig) || nc == orig {
		t.Errorf("DeepCopyObject = %T", obj)
	}
	if (*v1.AKSNodeClass)(nil).DeepCopy() != nil {
		t.Error("nil DeepCopy")
	}
	list := &v1.AKSNodeClassList{Items: []v1.AKSNodeClass{*orig}}
	lc := list.DeepCopyObject().(*v1.AKSNodeClassList)
	aksNoAliasing(t, reflect.ValueOf(list).Elem(), reflect.ValueOf(lc).Elem(), "AKSNodeClassList")
}

// aksNoAliasing fails where a and b share a pointer target, map or slice backing array.
func aksNoAliasing(t *testing.T, a, b reflect.Value, path string) {
	t.Helper()
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return
		}
		if a.Pointer() == b.Pointer() {
			t.Errorf("%s: copy shares the pointer", path)
		}
		aksNoAliasing(t, a.Elem(), b.Elem(), path)
	case reflect.Map:
		if a.Len() > 0 && a.Pointer() == b.Pointer() {
			t.Errorf("%s: copy shares the map", path)
		}
	case reflect.Slice:
		if a.Len() == 0 {
			return
		}
		if a.Pointer() == b.Pointer() {
			t.Errorf("%s: copy shares the slice", path)
		}
		for i := 0; i < a.Len() && i < b.Len(); i++ {
			aksNoAliasing(t, a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if a.Type().Field(i).IsExported() {
				aksNoAliasing(t, a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name)
			}
		}
	}
}

// aksScribble overwrites every settable scalar, map entry and slice element below v.
func aksScribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			aksScribble(v.Elem())
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			aksScribble(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			if v.Type().Elem().Kind() == reflect.String {
				v.SetMapIndex(k, reflect.ValueOf("scribbled").Convert(v.Type().Elem()))
			}
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				aksScribble(v.Field(i))
			}
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString("scribbled")
		}
	case reflect.Int32, reflect.Int64:
		if v.CanSet() {
			v.SetInt(v.Int() + 1)
		}
	case reflect.Bool:
		if v.CanSet() {
			v.SetBool(!v.Bool())
		}
	}
}

// aksCRD reads the published CRD and returns its versions by name.
func aksCRD(t *testing.T) map[string]map[string]any {
	t.Helper()
	b, err := os.ReadFile(aksCRDFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	s := doc["spec"].(map[string]any)
	if s["group"] != v1.AzureGroup || s["names"].(map[string]any)["kind"] != v1.KindAKSNodeClass || s["scope"] != "Cluster" {
		t.Fatalf("CRD group/kind/scope: %v %v %v", s["group"], s["names"], s["scope"])
	}
	out := map[string]map[string]any{}
	for _, v := range s["versions"].([]any) {
		m := v.(map[string]any)
		out[m["name"].(string)] = m
	}
	return out
}

func aksSchemaRoot(t *testing.T, version string) map[string]any {
	t.Helper()
	v, ok := aksCRD(t)[version]
	if !ok {
		t.Fatalf("CRD has no version %s", version)
	}
	return v["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
}

func aksSchemaValidator(t *testing.T) *validate.SchemaValidator {
	t.Helper()
	j, err := json.Marshal(aksSchemaRoot(t, v1.AzureVersion))
	if err != nil {
		t.Fatal(err)
	}
	s := &spec.Schema{}
	if err := json.Unmarshal(j, s); err != nil {
		t.Fatal(err)
	}
	return validate.NewSchemaValidator(s, nil, "", strfmt.Default)
}

// aksSchemaAt walks "a.b.c" through properties (and array items) of a schema node.
func aksSchemaAt(t *testing.T, node map[string]any, path string) map[string]any {
	t.Helper()
	for _, name := range strings.Split(path, ".") {
		if it, ok := node["items"].(map[string]any); ok {
			node = it
		}
		props, _ := node["properties"].(map[string]any)
		next, ok := props[name].(map[string]any)
		if !ok {
			t.Fatalf("CRD has no %s", path)
		}
		node = next
	}
	return node
}

// The served version is v1beta1, the storage version; v1alpha2 is served, deprecated, and has the
// same fields.
func TestAKSCRDVersions(t *testing.T) {
	vs := aksCRD(t)
	beta, alpha := vs["v1beta1"], vs["v1alpha2"]
	if len(vs) != 2 || beta == nil || alpha == nil {
		t.Fatalf("versions: %v", sortedKeys(vs))
	}
	if beta["served"] != true || beta["storage"] != true || beta["deprecated"] != nil {
		t.Errorf("v1beta1: served %v storage %v deprecated %v", beta["served"], beta["storage"], beta["deprecated"])
	}
	if alpha["served"] != true || alpha["storage"] != false || alpha["deprecated"] != true {
		t.Errorf("v1alpha2: served %v storage %v deprecated %v", alpha["served"], alpha["storage"], alpha["deprecated"])
	}
	if v1.AzureGroupVersion != "karpenter.azure.com/v1beta1" || v1.AzureV1alpha2GroupVersion != "karpenter.azure.com/v1alpha2" {
		t.Error(v1.AzureGroupVersion, v1.AzureV1alpha2GroupVersion)
	}
	a, b := aksFieldPaths(aksSchemaRoot(t, "v1alpha2"), ""), aksFieldPaths(aksSchemaRoot(t, "v1beta1"), "")
	if !reflect.DeepEqual(a, b) {
		t.Errorf("v1alpha2 and v1beta1 fields differ:\n%v\n%v", a, b)
	}
}

// aksFieldPaths lists every property path below a schema node.
func aksFieldPaths(node map[string]any, prefix string) []string {
	var out []string
	if it, ok := node["items"].(map[string]any); ok {
		node = it
	}
	props, _ := node["properties"].(map[string]any)
	for name, sub := range props {
		p := prefix + name
		out = append(out, p)
		out = append(out, aksFieldPaths(sub.(map[string]any), p+".")...)
	}
	sort.Strings(out)
	return out
}

// aksGoPaths lists every JSON field path of a Go type, treating metav1.Time and metav1.Duration
// as scalars.
func aksGoPaths(ty reflect.Type, prefix string) []string {
	for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice {
		ty = ty.Elem()
	}
	if ty.Kind() != reflect.Struct || ty.Name() == "Time" || ty.Name() == "Duration" {
		return nil
	}
	var out []string
	for i := 0; i < ty.NumField(); i++ {
		f := ty.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out = append(out, prefix+name)
		out = append(out, aksGoPaths(f.Type, prefix+name+".")...)
	}
	sort.Strings(out)
	return out
}

// The Go types have exactly the CRD's fields, and the defaults, enums, ranges and patterns the
// Go code enforces are the CRD's.
func TestAKSNodeClassMatchesCRD(t *testing.T) {
	root := aksSchemaRoot(t, v1.AzureVersion)
	for _, part := range []struct {
		name string
		ty   reflect.Type
	}{{"spec", reflect.TypeFor[v1.AKSNodeClassSpec]()}, {"status", reflect.TypeFor[v1.AKSNodeClassStatus]()}} {
		got := aksGoPaths(part.ty, "")
		want := aksFieldPaths(aksSchemaAt(t, root, part.name), "")
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s fields:\n  Go  %v\n  CRD %v", part.name, got, want)
		}
	}

	defaults := map[string]any{
		"spec.imageFamily":                   DefaultAKSImageFamily,
		"spec.osDiskSizeGB":                  float64(DefaultAKSOSDiskSizeGB),
		"spec.gpu.mode":                      DefaultAKSGPUMode,
		"spec.kubelet.cpuManagerPolicy":      DefaultAKSCPUManagerPolicy,
		"spec.kubelet.cpuCFSQuota":           DefaultAKSCPUCFSQuota,
		"spec.kubelet.cpuCFSQuotaPeriod":     DefaultAKSCPUCFSQuotaPeriod.String(),
		"spec.kubelet.topologyManagerPolicy": DefaultAKSTopologyManagerPolicy,
		"spec.kubelet.containerLogMaxSize":   DefaultAKSContainerLogMaxSize,
		"spec.kubelet.containerLogMaxFiles":  float64(DefaultAKSContainerLogMaxFiles),
	}
	for _, p := range aksFieldPaths(root, "") {
		d, has := aksSchemaAt(t, root, p)["default"]
		want, known := defaults[p]
		switch {
		case has && !known:
			t.Errorf("%s: CRD default %v not applied by SetAKSNodeClassDefaults", p, d)
		case known && !reflect.DeepEqual(d, want):
			t.Errorf("%s: CRD default %v, Go %v", p, d, want)
		}
	}

	const ovr = "spec.localDNS.kubeDNSOverrides."
	enums := map[string][]string{
		"spec.imageFamily":                              v1.AKSImageFamilies,
		"spec.fipsMode":                                 aksFIPSModes,
		"spec.gpu.mode":                                 aksGPUModes,
		"spec.kubelet.cpuManagerPolicy":                 aksCPUManagerPolicy,
		"spec.kubelet.topologyManagerPolicy":            aksTopologyPolicies,
		"spec.linuxOSConfig.transparentHugePageDefrag":  aksTHPDefrag,
		"spec.linuxOSConfig.transparentHugePageEnabled": aksTHPEnabled,
		"spec.localDNS.mode":                            aksLocalDNSModes,
		ovr + "queryLogging":                            aksQueryLogging,
		ovr + "protocol":                                aksDNSProtocols,
		ovr + "forwardDestination":                      aksForwardDests,
		ovr + "forwardPolicy":                           aksForwardPolicies,
		ovr + "serveStale":                              aksServeStale,
		"status.localDNSState":                          {v1.LocalDNSStateEnabled, v1.LocalDNSStateDisabled},
	}
	for _, p := range aksFieldPaths(root, "") {
		if strings.HasPrefix(p, "status.conditions.") {
			continue // metav1.Condition's own schema
		}
		raw, has := aksSchemaAt(t, root, p)["enum"].([]any)
		want, known := enums[strings.Replace(p, "vnetDNSOverrides", "kubeDNSOverrides", 1)]
		if has != known {
			t.Errorf("%s: CRD enum %v, Go %v", p, raw, want)
			continue
		}
		var got []string
		for _, e := range raw {
			got = append(got, e.(string))
		}
		if known && !reflect.DeepEqual(got, want) {
			t.Errorf("%s: CRD enum %v, Go %v", p, got, want)
		}
	}

	ranges := map[string][2]float64{
		"spec.osDiskSizeGB": {aksMinOSDiskSizeGB, aksMaxOSDiskSizeGB},
		"spec.maxPods":      {aksMinMaxPods, aksMaxMaxPods},
		"spec.kubelet.imageGCHighThresholdPercent":     {0, 100},
		"spec.kubelet.imageGCLowThresholdPercent":      {0, 100},
		"spec.kubelet.containerLogMaxFiles":            {aksMinContainerLogMaxFiles, -1},
		"spec.localDNS.kubeDNSOverrides.maxConcurrent": {0, -1},
	}
	for _, r := range aksSysctlRanges {
		ranges["spec.linuxOSConfig.sysctls."+r.name] = [2]float64{float64(r.min), float64(r.max)}
	}
	for _, p := range aksFieldPaths(root, "") {
		if strings.HasPrefix(p, "status.") {
			continue
		}
		n := aksSchemaAt(t, root, p)
		lo, hasLo := n["minimum"].(float64)
		hi, hasHi := n["maximum"].(float64)
		want, known := ranges[strings.Replace(p, "vnetDNSOverrides", "kubeDNSOverrides", 1)]
		if !hasHi {
			hi = -1
		}
		if (hasLo || hasHi) != known || (known && [2]float64{lo, hi} != want) {
			t.Errorf("%s: CRD range [%v, %v], Go %v", p, n["minimum"], n["maximum"], want)
		}
	}
	for _, p := range []string{"spec.localDNS.kubeDNSOverrides", "spec.localDNS.vnetDNSOverrides"} {
		if n := aksSchemaAt(t, root, p); n["maxItems"] != float64(aksMaxDNSOverrides) || n["x-kubernetes-list-type"] != "map" {
			t.Errorf("%s: maxItems %v list-type %v", p, n["maxItems"], n["x-kubernetes-list-type"])
		}
	}
	if n := aksSchemaAt(t, root, ovr+"zone"); n["maxLength"] != float64(aksMaxZoneLength) || n["minLength"] != float64(1) {
		t.Errorf("zone length: %v %v", n["minLength"], n["maxLength"])
	}

	patterns := map[string]string{
		"spec.vnetSubnetID":                                  aksSubnetIDRe.String(),
		"spec.kubelet.containerLogMaxSize":                   aksSizeRe.String(),
		"spec.linuxOSConfig.swapFileSize":                    aksSizeRe.String(),
		"spec.linuxOSConfig.sysctls.netIPv4IPLocalPortRange": aksPortPairRe.String(),
		ovr + "zone":               aksZoneRe.String(),
		ovr + "cacheDuration":      aksDNSTTLRe.String(),
		ovr + "serveStaleDuration": aksDNSTTLRe.String(),
	}
	for _, p := range aksFieldPaths(root, "") {
		if strings.HasPrefix(p, "status.") {
			continue
		}
		got, has := aksSchemaAt(t, root, p)["pattern"].(string)
		want, known := patterns[strings.Replace(p, "vnetDNSOverrides", "kubeDNSOverrides", 1)]
		if has != known || got != want {
			t.Errorf("%s: CRD pattern %q, Go %q", p, got, want)
		}
	}

	// Every CEL rule of the CRD is one ValidateAKSNodeClass implements (counted by message).
	var rules []string
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		for _, r := range aksList(n["x-kubernetes-validations"]) {
			rules = append(rules, r.(map[string]any)["message"].(string))
		}
		if it, ok := n["items"].(map[string]any); ok {
			walk(it)
		}
		for _, sub := range aksMap(n["properties"]) {
			walk(sub.(map[string]any))
		}
	}
	walk(root)
	sort.Strings(rules)
	if len(rules) != 24 {
		t.Errorf("CRD has %d CEL rules, Go implements 24 (tags 4, kubelet 1, sysctls 7, zone overrides 2x2, override lists 1+3, spec 4): %v", len(rules), rules)
	}

	// Both valid manifests pass the CRD schema as written.
	v := aksSchemaValidator(t)
	for _, doc := range []string{aksMinimal, aksFull} {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		if res := v.Validate(obj); !res.IsValid() {
			t.Errorf("CRD schema rejects a valid manifest: %v", res.Errors)
		}
	}
}

func aksList(v any) []any         { l, _ := v.([]any); return l }
func aksMap(v any) map[string]any { m, _ := v.(map[string]any); return m }

func TestAKSImageFamilyHelpers(t *testing.T) {
	for fam, sku := range map[string]string{"": "Ubuntu", "Ubuntu": "Ubuntu", "Ubuntu2204": "Ubuntu", "Ubuntu2404": "Ubuntu",
		"AzureLinux": "AzureLinux", "Windows2022": "Windows2022", "Windows2025": "Windows2025"} {
		if got := v1.OSSKUForImageFamily(fam); got != sku {
			t.Errorf("OSSKUForImageFamily(%q) = %q, want %q", fam, got, sku)
		}
	}
	if !v1.IsWindowsImageFamily("Windows2025") || v1.IsWindowsImageFamily("AzureLinux") {
		t.Error("IsWindowsImageFamily")
	}
	if got := (*v1.AKSNodeClass)(nil).ImageFamily(); got != "Ubuntu" {
		t.Errorf("nil ImageFamily() = %q", got)
	}
	if v1.LabelSKUName != "karpenter.azure.com/sku-name" || v1.LabelSKUGPUManufacturer != "karpenter.azure.com/sku-gpu-manufacturer" ||
		v1.LabelSKUStoragePremiumCapable != "karpenter.azure.com/sku-storage-premium-capable" || v1.AKSLabelOSSKU != "kubernetes.azure.com/os-sku" {
		t.Error("label keys")
	}
}

func TestLoadReadsAKSNodeClassOfBothServedVersions(t *testing.T) {
	for _, gv := range []string{v1.AzureGroupVersion, v1.AzureV1alpha2GroupVersion} {
		obj, err := Load([]byte("apiVersion: " + gv + "\nkind: AKSNodeClass\nmetadata:\n  name: default\nspec:\n  osDiskSizeGB: 64\n"))
		if err != nil {
			t.Fatalf("%s: %v", gv, err)
		}
		nc, ok := obj.(*v1.AKSNodeClass)
		if !ok || nc.ImageFamily() != v1.ImageFamilyUbuntu || *nc.Spec.OSDiskSizeGB != 64 {
			t.Fatalf("%s: %T %+v; want an AKSNodeClass defaulted to imageFamily Ubuntu", gv, obj, obj)
		}
	}
	if _, err := Load([]byte("apiVersion: karpenter.azure.com/v1beta1\nkind: AKSNodeClass\nmetadata:\n  name: default\nspec:\n  osDiskSizeGB: 10\n  imageVersion: x\n")); err == nil ||
		!strings.Contains(err.Error(), "spec.imageVersion") {
		t.Fatalf("unknown field: err %v, want it named", err)
	}
}
