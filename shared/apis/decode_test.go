package apis

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

func load(t *testing.T, name string) runtime.Object {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := Load(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return obj
}

func qty(s string) resource.Quantity { return resource.MustParse(s) }

func eqQty(t *testing.T, what string, got resource.Quantity, want string) {
	t.Helper()
	if got.Cmp(qty(want)) != 0 {
		t.Errorf("%s = %s, want %s", what, got.String(), want)
	}
}

func dur(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

// Expected values are the ones written in testdata/nodepool_v1.yaml (Karpenter docs shape).
func TestDecodeV1NodePool(t *testing.T) {
	np, ok := load(t, "nodepool_v1.yaml").(*v1.NodePool)
	if !ok {
		t.Fatal("not a NodePool")
	}
	s := np.Spec
	if np.Name != "default" || *s.Weight != 10 {
		t.Errorf("name %q weight %d", np.Name, *s.Weight)
	}
	if got := s.Template.ObjectMeta.Labels["billing-team"]; got != "my-team" {
		t.Errorf("template label = %q", got)
	}
	ref := s.Template.Spec.NodeClassRef
	if *ref != (v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}) {
		t.Errorf("nodeClassRef = %+v", *ref)
	}
	reqs := s.Template.Spec.Requirements
	if len(reqs) != 8 {
		t.Fatalf("%d requirements, want 8", len(reqs))
	}
	if reqs[0].Key != v1.LabelInstanceCategory || reqs[0].Operator != corev1.NodeSelectorOpIn ||
		!reflect.DeepEqual(reqs[0].Values, []string{"c", "m", "r"}) || *reqs[0].MinValues != 2 {
		t.Errorf("requirement 0 = %+v", reqs[0])
	}
	if reqs[4].Operator != corev1.NodeSelectorOpGt || reqs[4].Values[0] != "2" {
		t.Errorf("requirement 4 = %+v", reqs[4])
	}
	if *s.Template.Spec.ExpireAfter.Duration != 720*time.Hour || s.Template.Spec.TerminationGracePeriod.Duration != 48*time.Hour {
		t.Errorf("expireAfter %v terminationGracePeriod %v", s.Template.Spec.ExpireAfter, s.Template.Spec.TerminationGracePeriod)
	}
	if s.Template.Spec.Taints[0].Key != "example.com/special-taint" || s.Template.Spec.StartupTaints[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("taints %+v startupTaints %+v", s.Template.Spec.Taints, s.Template.Spec.StartupTaints)
	}
	d := s.Disruption
	if d.ConsolidationPolicy != v1.ConsolidationPolicyWhenEmptyOrUnderutilized || *d.ConsolidateAfter.Duration != time.Minute {
		t.Errorf("disruption %+v", d)
	}
	if len(d.Budgets) != 2 || d.Budgets[0].Nodes != "10%" || *d.Budgets[1].Schedule != "0 9 * * mon-fri" ||
		d.Budgets[1].Duration.Duration != 8*time.Hour || !reflect.DeepEqual(d.Budgets[1].Reasons, []string{"Drifted", "Underutilized"}) {
		t.Errorf("budgets %+v", d.Budgets)
	}
	eqQty(t, "limits.cpu", s.Limits[corev1.ResourceCPU], "1000")
	eqQty(t, "limits.memory", s.Limits[corev1.ResourceMemory], "1000Gi")
}

// v1beta1 → v1 by Karpenter's rule (kubernetes-sigs/karpenter pkg/apis/v1/nodepool_conversion.go):
// WhenUnderutilized → WhenEmptyOrUnderutilized with consolidateAfter 0s; disruption.expireAfter
// → template.spec.expireAfter; nodeClassRef.apiVersion karpenter.k8s.aws/v1beta1 → group
// karpenter.k8s.aws; kubelet → compatibility annotation; budgets default [{nodes: 10%}].
func TestDecodeV1beta1NodePoolConverts(t *testing.T) {
	np := load(t, "nodepool_v1beta1.yaml").(*v1.NodePool)
	if np.APIVersion != "karpenter.sh/v1" || np.Kind != "NodePool" {
		t.Errorf("TypeMeta %+v", np.TypeMeta)
	}
	d := np.Spec.Disruption
	if d.ConsolidationPolicy != "WhenEmptyOrUnderutilized" {
		t.Errorf("consolidationPolicy = %q", d.ConsolidationPolicy)
	}
	if d.ConsolidateAfter == nil || d.ConsolidateAfter.Duration == nil || *d.ConsolidateAfter.Duration != 0 {
		t.Errorf("consolidateAfter = %+v, want 0s", d.ConsolidateAfter)
	}
	if got := *np.Spec.Template.Spec.ExpireAfter.Duration; got != 168*time.Hour {
		t.Errorf("template.spec.expireAfter = %v, want 168h", got)
	}
	if len(d.Budgets) != 1 || d.Budgets[0].Nodes != "10%" {
		t.Errorf("budgets = %+v", d.Budgets)
	}
	if *np.Spec.Template.Spec.NodeClassRef != (v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}) {
		t.Errorf("nodeClassRef = %+v", *np.Spec.Template.Spec.NodeClassRef)
	}
	if np.Annotations["kubernetes.io/description"] == "" {
		t.Error("original annotation lost")
	}
	var k v1.KubeletConfiguration
	if err := json.Unmarshal([]byte(np.Annotations[v1.AnnotationKubeletCompatibility]), &k); err != nil {
		t.Fatalf("kubelet annotation: %v", err)
	}
	if *k.MaxPods != 110 || k.SystemReserved["cpu"] != "100m" || k.SystemReserved["memory"] != "100Mi" {
		t.Errorf("kubelet annotation = %+v", k)
	}
	// The annotation wins over the EC2NodeClass's kubelet (Karpenter v1 migration guide).
	nc := load(t, "ec2nodeclass_al2023.yaml").(*v1.EC2NodeClass)
	eff, err := Kubelet(np, nc)
	if err != nil || *eff.MaxPods != 110 || eff.EvictionSoft != nil {
		t.Errorf("Kubelet() = %+v, %v; want the annotation's", eff, err)
	}
	eqQty(t, "limits.cpu", np.Spec.Limits[corev1.ResourceCPU], "1000")
	if np.Spec.Template.ObjectMeta.Labels["team"] != "web" || len(np.Spec.Template.Spec.Requirements) != 4 {
		t.Errorf("template %+v", np.Spec.Template)
	}
}

// WhenEmpty keeps consolidateAfter; no expireAfter takes the v1beta1 default 720h; an empty
// nodeClassRef apiVersion/kind take the provider's EC2NodeClass group/kind; no kubelet, no annotation.
func TestDecodeV1beta1WhenEmpty(t *testing.T) {
	np := load(t, "nodepool_v1beta1_whenempty.yaml").(*v1.NodePool)
	d := np.Spec.Disruption
	if d.ConsolidationPolicy != "WhenEmpty" || *d.ConsolidateAfter.Duration != 30*time.Second {
		t.Errorf("disruption = %+v", d)
	}
	if *np.Spec.Template.Spec.ExpireAfter.Duration != 720*time.Hour {
		t.Errorf("expireAfter = %v", np.Spec.Template.Spec.ExpireAfter)
	}
	if *np.Spec.Template.Spec.NodeClassRef != (v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}) {
		t.Errorf("nodeClassRef = %+v", *np.Spec.Template.Spec.NodeClassRef)
	}
	if _, ok := np.Annotations[v1.AnnotationKubeletCompatibility]; ok {
		t.Error("kubelet annotation without kubelet")
	}
}

// v1 defaults (Karpenter v1 CRD): metadataOptions enabled/disabled/1/required; AL2023 gets one
// 20Gi gp3 encrypted /dev/xvda volume (Karpenter docs, nodeclasses, blockDeviceMappings).
func TestDecodeEC2NodeClassAL2023(t *testing.T) {
	nc := load(t, "ec2nodeclass_al2023.yaml").(*v1.EC2NodeClass)
	if nc.AMIFamily() != v1.AMIFamilyAL2023 || nc.Alias().Version != "latest" {
		t.Errorf("family %q alias %+v", nc.AMIFamily(), nc.Alias())
	}
	if nc.Spec.Role != "KarpenterNodeRole-my-cluster" || nc.Spec.SubnetSelectorTerms[0].Tags["karpenter.sh/discovery"] != "my-cluster" {
		t.Errorf("spec %+v", nc.Spec)
	}
	m := nc.Spec.MetadataOptions
	if *m.HTTPEndpoint != "enabled" || *m.HTTPProtocolIPv6 != "disabled" || *m.HTTPPutResponseHopLimit != 1 || *m.HTTPTokens != "required" {
		t.Errorf("metadataOptions = %+v", *m)
	}
	b := nc.Spec.BlockDeviceMappings
	if len(b) != 1 || *b[0].DeviceName != "/dev/xvda" || *b[0].EBS.VolumeType != "gp3" || !*b[0].EBS.Encrypted {
		t.Fatalf("blockDeviceMappings = %+v", b)
	}
	eqQty(t, "volumeSize", *b[0].EBS.VolumeSize, "20Gi")
	if *nc.Spec.Kubelet.MaxPods != 110 || nc.Spec.Kubelet.EvictionSoftGracePeriod["memory.available"].Duration != time.Minute {
		t.Errorf("kubelet = %+v", nc.Spec.Kubelet)
	}
}

// Bottlerocket defaults: 4Gi /dev/xvda + 20Gi /dev/xvdb, gp3, encrypted (Karpenter docs).
func TestDecodeEC2NodeClassBottlerocket(t *testing.T) {
	nc := load(t, "ec2nodeclass_bottlerocket.yaml").(*v1.EC2NodeClass)
	if nc.AMIFamily() != v1.AMIFamilyBottlerocket || *nc.Spec.InstanceProfile != "KarpenterNodeInstanceProfile-my-cluster" {
		t.Errorf("family %q", nc.AMIFamily())
	}
	b := nc.Spec.BlockDeviceMappings
	if len(b) != 2 || *b[0].DeviceName != "/dev/xvda" || *b[1].DeviceName != "/dev/xvdb" {
		t.Fatalf("blockDeviceMappings = %+v", b)
	}
	eqQty(t, "xvda", *b[0].EBS.VolumeSize, "4Gi")
	eqQty(t, "xvdb", *b[1].EBS.VolumeSize, "20Gi")
}

// v1beta1 → v1 by Karpenter's rule (aws/karpenter-provider-aws pkg/apis/v1/ec2nodeclass_conversion.go):
// amiFamily Bottlerocket with no amiSelectorTerms → alias bottlerocket@latest, amiFamily cleared;
// the v1beta1 metadataOptions default hop limit 2 is kept.
func TestDecodeV1beta1EC2NodeClass(t *testing.T) {
	nc := load(t, "ec2nodeclass_v1beta1_bottlerocket.yaml").(*v1.EC2NodeClass)
	if nc.APIVersion != "karpenter.k8s.aws/v1" || nc.Spec.AMIFamily != nil {
		t.Errorf("apiVersion %q amiFamily %v", nc.APIVersion, nc.Spec.AMIFamily)
	}
	if len(nc.Spec.AMISelectorTerms) != 1 || nc.Spec.AMISelectorTerms[0].Alias != "bottlerocket@latest" {
		t.Errorf("amiSelectorTerms = %+v", nc.Spec.AMISelectorTerms)
	}
	if *nc.Spec.MetadataOptions.HTTPPutResponseHopLimit != 2 {
		t.Errorf("hop limit = %d, want 2", *nc.Spec.MetadataOptions.HTTPPutResponseHopLimit)
	}

	pinned := load(t, "ec2nodeclass_v1beta1_custom_ami.yaml").(*v1.EC2NodeClass)
	if *pinned.Spec.AMIFamily != "AL2023" || pinned.Spec.AMISelectorTerms[0].Owner != "amazon" || pinned.Spec.AMISelectorTerms[0].Alias != "" {
		t.Errorf("pinned = %+v", pinned.Spec)
	}
	if *pinned.Spec.MetadataOptions.HTTPTokens != "optional" || *pinned.Spec.MetadataOptions.HTTPPutResponseHopLimit != 2 {
		t.Errorf("metadataOptions = %+v", *pinned.Spec.MetadataOptions)
	}
}

func TestDecodeNodeClaim(t *testing.T) {
	nc := load(t, "nodeclaim_v1.yaml").(*v1.NodeClaim)
	if nc.Status.ProviderID != "aws:///us-west-2b/i-053c6b324e29d2275" || nc.Status.Conditions[0].Type != "Ready" {
		t.Errorf("status = %+v", nc.Status)
	}
	eqQty(t, "requests.cpu", nc.Spec.Resources.Requests[corev1.ResourceCPU], "1500m")
	eqQty(t, "allocatable.memory", nc.Status.Allocatable[corev1.ResourceMemory], "6903Mi")
}

func TestDecodeStrictErrors(t *testing.T) {
	cases := []struct {
		name, doc string
		want      []string
	}{
		{"unknown field names its path",
			"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: a}\nspec:\n  template:\n    spec:\n      nodeClasRef: {}\n      requirements: []\n",
			[]string{"spec.template.spec.nodeClasRef: Forbidden: unknown field"}},
		{"v1beta1 field in a v1 NodePool",
			"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: a}\nspec:\n  disruption:\n    expireAfter: 720h\n  template: {spec: {requirements: []}}\n",
			[]string{"spec.disruption.expireAfter: Forbidden: unknown field"}},
		{"all bad values at once",
			"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: a}\nspec:\n  weight: ten\n  limits: {cpu: lots}\n  template: {spec: {expireAfter: 3 days, requirements: []}}\n",
			[]string{"spec.limits[cpu]: Invalid value", "spec.template.spec.expireAfter: Invalid value", "spec.weight: Invalid value: \"ten\": must be an integer"}},
		{"duplicate field",
			"{\"apiVersion\":\"karpenter.k8s.aws/v1\",\"kind\":\"EC2NodeClass\",\"metadata\":{\"name\":\"a\"},\"spec\":{\"role\":\"a\",\"role\":\"b\"}}",
			[]string{`key "role" already set`}},
		{"field names are case-sensitive",
			"apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: a}\nspec:\n  Role: x\n",
			[]string{"spec.Role: Forbidden: unknown field"}},
		{"missing kind", "apiVersion: karpenter.sh/v1\n", []string{"kind: Required value"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode([]byte(c.doc))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	_, err := Decode([]byte("apiVersion: apps/v1\nkind: Deployment\n"))
	if !errors.Is(err, ErrUnknownKind) {
		t.Errorf("Deployment: %v, want ErrUnknownKind", err)
	}
}

func TestDefaultsIdempotentAndDeepCopy(t *testing.T) {
	np := load(t, "nodepool_v1beta1.yaml").(*v1.NodePool)
	cp := np.DeepCopy()
	if !reflect.DeepEqual(np, cp) {
		t.Fatal("DeepCopy differs")
	}
	SetDefaults(cp)
	if !reflect.DeepEqual(np, cp) {
		t.Error("SetDefaults is not idempotent")
	}
	cp.Spec.Template.Spec.Requirements[0].Values[0] = "arm64"
	cp.Spec.Disruption.Budgets[0].Nodes = "1"
	if np.Spec.Template.Spec.Requirements[0].Values[0] != "amd64" || np.Spec.Disruption.Budgets[0].Nodes != "10%" {
		t.Error("DeepCopy shares memory")
	}
	nc := load(t, "ec2nodeclass_bottlerocket.yaml").(*v1.EC2NodeClass)
	ncc := nc.DeepCopyObject().(*v1.EC2NodeClass)
	if !reflect.DeepEqual(nc, ncc) {
		t.Fatal("EC2NodeClass DeepCopy differs")
	}
	*ncc.Spec.BlockDeviceMappings[0].DeviceName = "/dev/sdz"
	if *nc.Spec.BlockDeviceMappings[0].DeviceName != "/dev/xvda" {
		t.Error("EC2NodeClass DeepCopy shares memory")
	}
	claim := load(t, "nodeclaim_v1.yaml").(*v1.NodeClaim)
	if !reflect.DeepEqual(claim, claim.DeepCopy()) {
		t.Error("NodeClaim DeepCopy differs")
	}
}

// An empty NodePool spec gets exactly Karpenter's documented v1 defaults.
func TestSetDefaultsValues(t *testing.T) {
	np := &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Name: "default"}}}}}
	SetDefaults(np)
	d := np.Spec.Disruption
	if d.ConsolidationPolicy != "WhenEmptyOrUnderutilized" || *d.ConsolidateAfter.Duration != 0 ||
		len(d.Budgets) != 1 || d.Budgets[0].Nodes != "10%" || *np.Spec.Template.Spec.ExpireAfter.Duration != dur("720h") ||
		np.Spec.Weight != nil || np.Spec.Template.Spec.NodeClassRef.Group != "karpenter.k8s.aws" || np.Spec.Template.Spec.NodeClassRef.Kind != "EC2NodeClass" {
		t.Errorf("defaults = %+v", np.Spec)
	}
	if got := DefaultBlockDeviceMappings(v1.AMIFamilyWindows2022); len(got) != 1 || *got[0].DeviceName != "/dev/sda1" || got[0].EBS.VolumeSize.String() != "50Gi" {
		t.Errorf("windows default volumes = %+v", got)
	}
	if DefaultBlockDeviceMappings(v1.AMIFamilyCustom) != nil {
		t.Error("Custom has no default volumes")
	}
}
