package apis

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// merge deep-merges patch into base as a JSON merge patch does (RFC 7386): objects merge, lists
// and scalars replace, null deletes.
func merge(base, patch map[string]any) map[string]any {
	for k, pv := range patch {
		if pv == nil {
			delete(base, k)
			continue
		}
		bm, bok := base[k].(map[string]any)
		pm, pok := pv.(map[string]any)
		if bok && pok {
			base[k] = merge(bm, pm)
		} else {
			base[k] = pv
		}
	}
	return base
}

// patched returns testdata/<file> with a YAML merge patch applied: a manifest that differs from
// a valid documented one in exactly the field under test.
func patched(t *testing.T, file, patch string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var base, p map[string]any
	if err := yaml.Unmarshal(b, &base); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(patch), &p); err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(merge(base, p))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type badCase struct {
	name, patch string
	path        string
	typ         field.ErrorType
}

func runBad(t *testing.T, file string, cases []badCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			obj, err := Decode(patched(t, file, c.patch))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			errs := DefaultAndValidate(obj)
			for _, e := range errs {
				if e.Field == c.path && e.Type == c.typ {
					return
				}
			}
			t.Errorf("want %s at %s, got %v", c.typ, c.path, errs)
		})
	}
}

func TestValidManifestsHaveNoErrors(t *testing.T) {
	for _, f := range []string{"nodepool_v1.yaml", "nodepool_v1beta1.yaml", "nodepool_v1beta1_whenempty.yaml", "ec2nodeclass_al2023.yaml",
		"ec2nodeclass_bottlerocket.yaml", "ec2nodeclass_v1beta1_bottlerocket.yaml", "ec2nodeclass_v1beta1_custom_ami.yaml", "nodeclaim_v1.yaml"} {
		load(t, f)
	}
}

const reqs = "spec.template.spec.requirements[0]"

func req(body string) string {
	return "spec: {template: {spec: {requirements: [" + body + "]}}}"
}

func TestValidateNodePool(t *testing.T) {
	runBad(t, "nodepool_v1.yaml", []badCase{
		{"unsupported operator", req(`{key: kubernetes.io/arch, operator: Like, values: [amd64]}`), reqs + ".operator", field.ErrorTypeNotSupported},
		{"In needs a value", req(`{key: kubernetes.io/arch, operator: In, values: []}`), reqs + ".values", field.ErrorTypeRequired},
		{"Gt needs exactly one value", req(`{key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ["2", "4"]}`), reqs + ".values", field.ErrorTypeInvalid},
		{"Lt needs an integer", req(`{key: karpenter.k8s.aws/instance-cpu, operator: Lt, values: ["four"]}`), reqs + ".values[0]", field.ErrorTypeInvalid},
		{"Gte needs a non-negative integer", req(`{key: karpenter.k8s.aws/instance-cpu, operator: Gte, values: ["-1"]}`), reqs + ".values[0]", field.ErrorTypeInvalid},
		{"Exists takes no values", req(`{key: karpenter.k8s.aws/instance-gpu-count, operator: Exists, values: ["1"]}`), reqs + ".values", field.ErrorTypeForbidden},
		{"DoesNotExist takes no values", req(`{key: karpenter.k8s.aws/instance-gpu-count, operator: DoesNotExist, values: ["1"]}`), reqs + ".values", field.ErrorTypeForbidden},
		{"minValues above the In values", req(`{key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m], minValues: 3}`), reqs + ".minValues", field.ErrorTypeInvalid},
		{"minValues above 50", req(`{key: karpenter.k8s.aws/instance-family, operator: Exists, minValues: 51}`), reqs + ".minValues", field.ErrorTypeInvalid},
		{"minValues below 1", req(`{key: karpenter.k8s.aws/instance-family, operator: Exists, minValues: 0}`), reqs + ".minValues", field.ErrorTypeInvalid},
		{"hostname is restricted", req(`{key: kubernetes.io/hostname, operator: In, values: [a]}`), reqs + ".key", field.ErrorTypeForbidden},
		{"karpenter.sh/nodepool is restricted", req(`{key: karpenter.sh/nodepool, operator: In, values: [a]}`), reqs + ".key", field.ErrorTypeForbidden},
		{"kubernetes.io domain is restricted", req(`{key: example.kubernetes.io/team, operator: In, values: [a]}`), reqs + ".key", field.ErrorTypeForbidden},
		{"karpenter.k8s.aws domain is restricted", req(`{key: karpenter.k8s.aws/made-up, operator: In, values: [a]}`), reqs + ".key", field.ErrorTypeForbidden},
		{"key must be a qualified name", req(`{key: "bad key!", operator: Exists}`), reqs + ".key", field.ErrorTypeInvalid},
		{"value must be a label value", req(`{key: team, operator: In, values: ["a b"]}`), reqs + ".values[0]", field.ErrorTypeInvalid},
		{"template label value", `spec: {template: {metadata: {labels: {team: "web team"}}}}`, "spec.template.metadata.labels[team]", field.ErrorTypeInvalid},
		{"template label key", `spec: {template: {metadata: {labels: {"-team": web}}}}`, "spec.template.metadata.labels[-team]", field.ErrorTypeInvalid},
		// Issue 23: this value closes the AL2 bootstrap script's quotes; the API server refuses it.
		{"template label value breaks out of shell quotes", `spec: {template: {metadata: {labels: {team: "x' ; touch /pwned ; '"}}}}`, "spec.template.metadata.labels[team]", field.ErrorTypeInvalid},
		{"taint value with a command substitution", `spec: {template: {spec: {taints: [{key: a, value: "$(id)", effect: NoSchedule}]}}}`, "spec.template.spec.taints[0].value", field.ErrorTypeInvalid},
		{"template annotation key", `spec: {template: {metadata: {annotations: {"bad key": x}}}}`, "spec.template.metadata.annotations", field.ErrorTypeInvalid},
		{"template label restricted", `spec: {template: {metadata: {labels: {karpenter.sh/nodepool: x}}}}`, "spec.template.metadata.labels[karpenter.sh/nodepool]", field.ErrorTypeForbidden},
		{"taint effect", `spec: {template: {spec: {taints: [{key: a, effect: Sometimes}]}}}`, "spec.template.spec.taints[0].effect", field.ErrorTypeNotSupported},
		{"taint effect required", `spec: {template: {spec: {taints: [{key: a}]}}}`, "spec.template.spec.taints[0].effect", field.ErrorTypeRequired},
		{"taint key required", `spec: {template: {spec: {taints: [{effect: NoSchedule}]}}}`, "spec.template.spec.taints[0].key", field.ErrorTypeRequired},
		{"duplicate taint across startupTaints", `spec: {template: {spec: {startupTaints: [{key: example.com/special-taint, effect: NoSchedule}]}}}`, "spec.template.spec.startupTaints[0]", field.ErrorTypeDuplicate},
		{"nodeClassRef required", `spec: {template: {spec: {nodeClassRef: null}}}`, "spec.template.spec.nodeClassRef", field.ErrorTypeRequired},
		{"nodeClassRef name required", `spec: {template: {spec: {nodeClassRef: {name: ""}}}}`, "spec.template.spec.nodeClassRef.name", field.ErrorTypeRequired},
		{"nodeClassRef group has no version", `spec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws/v1}}}}`, "spec.template.spec.nodeClassRef.group", field.ErrorTypeInvalid},
		{"template resources", `spec: {template: {spec: {resources: {requests: {cpu: "1"}}}}}`, "spec.template.spec.resources", field.ErrorTypeForbidden},
		{"budget nodes over 100%", `spec: {disruption: {budgets: [{nodes: "110%"}]}}`, "spec.disruption.budgets[0].nodes", field.ErrorTypeInvalid},
		{"budget nodes not a number", `spec: {disruption: {budgets: [{nodes: "ten"}]}}`, "spec.disruption.budgets[0].nodes", field.ErrorTypeInvalid},
		{"budget schedule not cron", `spec: {disruption: {budgets: [{nodes: "1", schedule: "every day", duration: 1h}]}}`, "spec.disruption.budgets[0].schedule", field.ErrorTypeInvalid},
		{"budget schedule with time zone", `spec: {disruption: {budgets: [{nodes: "1", schedule: "TZ=UTC 0 9 * * *", duration: 1h}]}}`, "spec.disruption.budgets[0].schedule", field.ErrorTypeInvalid},
		{"budget schedule without duration", `spec: {disruption: {budgets: [{nodes: "1", schedule: "@daily"}]}}`, "spec.disruption.budgets[0].duration", field.ErrorTypeRequired},
		{"budget duration without schedule", `spec: {disruption: {budgets: [{nodes: "1", duration: 1h}]}}`, "spec.disruption.budgets[0].schedule", field.ErrorTypeRequired},
		{"budget duration in seconds", `spec: {disruption: {budgets: [{nodes: "1", schedule: "@daily", duration: 90s}]}}`, "spec.disruption.budgets[0].duration", field.ErrorTypeInvalid},
		{"budget reason", `spec: {disruption: {budgets: [{nodes: "1", reasons: [Expired]}]}}`, "spec.disruption.budgets[0].reasons[0]", field.ErrorTypeNotSupported},
		{"v1beta1 policy name in v1", `spec: {disruption: {consolidationPolicy: WhenUnderutilized}}`, "spec.disruption.consolidationPolicy", field.ErrorTypeInvalid},
		{"unknown policy", `spec: {disruption: {consolidationPolicy: Sometimes}}`, "spec.disruption.consolidationPolicy", field.ErrorTypeNotSupported},
		{"decisionRatioThreshold needs consolidateWhen", `spec: {disruption: {decisionRatioThreshold: 1.5}}`, "spec.disruption.decisionRatioThreshold", field.ErrorTypeForbidden},
		{"weight 0", `spec: {weight: 0}`, "spec.weight", field.ErrorTypeInvalid},
		{"weight 101", `spec: {weight: 101}`, "spec.weight", field.ErrorTypeInvalid},
		{"negative limit", `spec: {limits: {cpu: "-1"}}`, "spec.limits[cpu]", field.ErrorTypeInvalid},
		{"replicas with weight", `spec: {replicas: 3}`, "spec.weight", field.ErrorTypeForbidden},
		{"name", `metadata: {name: "Not_DNS"}`, "metadata.name", field.ErrorTypeInvalid},
	})
}

// Allowed corner cases: well-known and excepted labels, NotIn without values, Gte.
func TestValidateNodePoolAllows(t *testing.T) {
	for _, p := range []string{
		req(`{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}`),
		req(`{key: beta.kubernetes.io/arch, operator: In, values: [amd64]}`),
		req(`{key: karpenter.k8s.aws/instance-cpu, operator: Gte, values: ["4"]}`),
		req(`{key: example.com/team, operator: NotIn, values: []}`),
		`spec: {template: {metadata: {labels: {node-restriction.kubernetes.io/team: a, kops.k8s.io/x: b}}}}`,
		// Karpenter v1.14's third policy (the CRD's enum: WhenEmpty, WhenEmptyOrUnderutilized, Balanced).
		`spec: {disruption: {consolidationPolicy: Balanced}}`,
	} {
		obj, err := Decode(patched(t, "nodepool_v1.yaml", p))
		if err != nil {
			t.Fatal(err)
		}
		if errs := DefaultAndValidate(obj); len(errs) > 0 {
			t.Errorf("%s: %v", p, errs)
		}
	}
}

// Every problem is reported, not only the first.
func TestValidateCollectsAll(t *testing.T) {
	obj, err := Decode(patched(t, "nodepool_v1.yaml", `spec: {weight: 0, disruption: {budgets: [{nodes: "x"}]}, template: {spec: {taints: [{key: a, effect: Bad}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	errs := DefaultAndValidate(obj)
	if len(errs) != 3 {
		t.Errorf("%d errors, want 3: %v", len(errs), errs)
	}
	if _, err := Load(patched(t, "nodepool_v1.yaml", `spec: {weight: 0}`)); err == nil || !strings.Contains(err.Error(), "spec.weight: Invalid value: 0: must be between 1 and 100") {
		t.Errorf("Load error = %v", err)
	}
}

func TestValidateEC2NodeClass(t *testing.T) {
	runBad(t, "ec2nodeclass_al2023.yaml", []badCase{
		{"subnet terms required", `spec: {subnetSelectorTerms: null}`, "spec.subnetSelectorTerms", field.ErrorTypeRequired},
		{"subnet term needs id or tags", `spec: {subnetSelectorTerms: [{}]}`, "spec.subnetSelectorTerms[0]", field.ErrorTypeRequired},
		{"subnet id exclusive", `spec: {subnetSelectorTerms: [{id: subnet-0abc, tags: {a: b}}]}`, "spec.subnetSelectorTerms[0].id", field.ErrorTypeForbidden},
		{"subnet id format", `spec: {subnetSelectorTerms: [{id: sub-1}]}`, "spec.subnetSelectorTerms[0].id", field.ErrorTypeInvalid},
		{"empty tag value", `spec: {subnetSelectorTerms: [{tags: {a: ""}}]}`, "spec.subnetSelectorTerms[0].tags[a]", field.ErrorTypeInvalid},
		{"security group terms required", `spec: {securityGroupSelectorTerms: []}`, "spec.securityGroupSelectorTerms", field.ErrorTypeRequired},
		{"security group term needs a field", `spec: {securityGroupSelectorTerms: [{}]}`, "spec.securityGroupSelectorTerms[0]", field.ErrorTypeRequired},
		{"security group id exclusive", `spec: {securityGroupSelectorTerms: [{id: sg-0abc, name: web}]}`, "spec.securityGroupSelectorTerms[0].id", field.ErrorTypeForbidden},
		{"ami terms required", `spec: {amiSelectorTerms: null}`, "spec.amiSelectorTerms", field.ErrorTypeRequired},
		{"alias needs @", `spec: {amiSelectorTerms: [{alias: al2023}]}`, "spec.amiSelectorTerms[0].alias", field.ErrorTypeInvalid},
		{"alias family", `spec: {amiSelectorTerms: [{alias: ubuntu@latest}]}`, "spec.amiSelectorTerms[0].alias", field.ErrorTypeInvalid},
		{"windows alias only latest", `spec: {amiSelectorTerms: [{alias: windows2022@v20240101}]}`, "spec.amiSelectorTerms[0].alias", field.ErrorTypeInvalid},
		{"alias is the only term", `spec: {amiSelectorTerms: [{alias: al2023@latest}, {id: ami-0abc}]}`, "spec.amiSelectorTerms[0].alias", field.ErrorTypeForbidden},
		{"alias exclusive in its term", `spec: {amiSelectorTerms: [{alias: al2023@latest, tags: {a: b}}]}`, "spec.amiSelectorTerms[0].alias", field.ErrorTypeForbidden},
		{"amiFamily must match alias", `spec: {amiFamily: Bottlerocket}`, "spec.amiFamily", field.ErrorTypeInvalid},
		{"amiFamily enum", `spec: {amiFamily: Ubuntu}`, "spec.amiFamily", field.ErrorTypeNotSupported},
		{"amiFamily required without alias", `spec: {amiSelectorTerms: [{id: ami-0abc}]}`, "spec.amiFamily", field.ErrorTypeRequired},
		{"role xor instanceProfile: both", `spec: {instanceProfile: my-profile}`, "spec.instanceProfile", field.ErrorTypeForbidden},
		{"role xor instanceProfile: neither", `spec: {role: null}`, "spec.role", field.ErrorTypeRequired},
		{"restricted tag", `spec: {tags: {kubernetes.io/cluster/my-cluster: owned}}`, "spec.tags[kubernetes.io/cluster/my-cluster]", field.ErrorTypeForbidden},
		{"httpTokens enum", `spec: {metadataOptions: {httpTokens: maybe}}`, "spec.metadataOptions.httpTokens", field.ErrorTypeNotSupported},
		{"httpEndpoint enum", `spec: {metadataOptions: {httpEndpoint: enable}}`, "spec.metadataOptions.httpEndpoint", field.ErrorTypeNotSupported},
		{"hop limit range", `spec: {metadataOptions: {httpPutResponseHopLimit: 65}}`, "spec.metadataOptions.httpPutResponseHopLimit", field.ErrorTypeInvalid},
		{"one root volume", `spec: {blockDeviceMappings: [{deviceName: /dev/xvda, rootVolume: true, ebs: {volumeSize: 20Gi}}, {deviceName: /dev/xvdb, rootVolume: true, ebs: {volumeSize: 20Gi}}]}`, "spec.blockDeviceMappings[1].rootVolume", field.ErrorTypeForbidden},
		{"volume size or snapshot", `spec: {blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeType: gp3}}]}`, "spec.blockDeviceMappings[0].ebs.volumeSize", field.ErrorTypeRequired},
		{"volume type enum", `spec: {blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 20Gi, volumeType: gp9}}]}`, "spec.blockDeviceMappings[0].ebs.volumeType", field.ErrorTypeNotSupported},
		{"kubelet soft eviction needs grace", `spec: {kubelet: {evictionSoftGracePeriod: null}}`, "spec.kubelet.evictionSoftGracePeriod[memory.available]", field.ErrorTypeRequired},
		{"kubelet reserved keys", `spec: {kubelet: {systemReserved: {gpu: "1"}}}`, "spec.kubelet.systemReserved[gpu]", field.ErrorTypeNotSupported},
		{"kubelet image GC thresholds", `spec: {kubelet: {imageGCHighThresholdPercent: 50, imageGCLowThresholdPercent: 60}}`, "spec.kubelet.imageGCHighThresholdPercent", field.ErrorTypeInvalid},
		{"kubelet eviction signal", `spec: {kubelet: {evictionHard: {cpu.available: 5%}}}`, "spec.kubelet.evictionHard[cpu.available]", field.ErrorTypeNotSupported},
		// Karpenter's CRD refuses an eviction threshold that is neither a percentage (at most
		// 100%, two decimals) nor a quantity (karpenter-provider-aws hack/validation/kubelet.sh);
		// it reached the node's kubelet configuration unchecked.
		{"kubelet eviction threshold", `spec: {kubelet: {evictionHard: {memory.available: "5%\"\n[settings.x]"}}}`, "spec.kubelet.evictionHard[memory.available]", field.ErrorTypeInvalid},
		{"kubelet eviction percentage", `spec: {kubelet: {evictionHard: {memory.available: 101%}}}`, "spec.kubelet.evictionHard[memory.available]", field.ErrorTypeInvalid},
		{"kubelet soft eviction threshold", `spec: {kubelet: {evictionSoft: {memory.available: lots}}}`, "spec.kubelet.evictionSoft[memory.available]", field.ErrorTypeInvalid},
		{"instance store policy", `spec: {instanceStorePolicy: RAID5}`, "spec.instanceStorePolicy", field.ErrorTypeNotSupported},
	})
}

// Conversion errors name the v1beta1 field (Karpenter's v1beta1 rules refuse the same input).
func TestV1beta1ConversionErrors(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{"apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: a}\nspec:\n  disruption: {consolidationPolicy: WhenEmpty}\n  template: {spec: {nodeClassRef: {name: d}, requirements: []}}\n",
			"spec.disruption.consolidateAfter: Required value"},
		{"apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: a}\nspec:\n  disruption: {consolidationPolicy: WhenUnderutilized, consolidateAfter: 30s}\n  template: {spec: {nodeClassRef: {name: d}, requirements: []}}\n",
			"spec.disruption.consolidateAfter: Forbidden"},
		{"apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: a}\nspec:\n  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized}\n  template: {spec: {nodeClassRef: {name: d}, requirements: []}}\n",
			"spec.disruption.consolidationPolicy: Unsupported value"},
		{"apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: a}\nspec:\n  template: {spec: {requirements: []}}\n",
			"spec.template.spec.nodeClassRef: Required value"},
		{"apiVersion: karpenter.k8s.aws/v1beta1\nkind: EC2NodeClass\nmetadata: {name: a}\nspec: {amiFamily: Ubuntu, role: r, subnetSelectorTerms: [{id: subnet-1}], securityGroupSelectorTerms: [{id: sg-1}]}\n",
			"spec.amiSelectorTerms: Required value"},
		{"apiVersion: karpenter.k8s.aws/v1beta1\nkind: EC2NodeClass\nmetadata: {name: a}\nspec: {role: r, subnetSelectorTerms: [{id: subnet-1}], securityGroupSelectorTerms: [{id: sg-1}]}\n",
			"spec.amiFamily: Required value"},
		{"apiVersion: karpenter.k8s.aws/v1beta1\nkind: EC2NodeClass\nmetadata: {name: a}\nspec: {amiFamily: AL2023, amiSelectorTerms: [{alias: al2023@latest}], role: r, subnetSelectorTerms: [{id: subnet-1}], securityGroupSelectorTerms: [{id: sg-1}]}\n",
			"spec.amiSelectorTerms[0].alias: Forbidden: unknown field"},
	} {
		_, err := Decode([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want %q", err, c.want)
		}
	}
}

// Ubuntu converts to AL2 with Ubuntu's root volume and the compatibility annotation
// (aws/karpenter-provider-aws pkg/apis/v1/ec2nodeclass_conversion.go).
func TestV1beta1UbuntuConverts(t *testing.T) {
	obj, err := Load([]byte("apiVersion: karpenter.k8s.aws/v1beta1\nkind: EC2NodeClass\nmetadata: {name: ubuntu}\nspec: {amiFamily: Ubuntu, amiSelectorTerms: [{name: ubuntu-eks/*, owner: \"099720109477\"}], role: r, subnetSelectorTerms: [{id: subnet-1}], securityGroupSelectorTerms: [{id: sg-1}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	nc := obj.(*v1.EC2NodeClass)
	if *nc.Spec.AMIFamily != "AL2" || nc.Annotations[v1.AnnotationUbuntuCompatibility] != "amiFamily,blockDeviceMappings" {
		t.Errorf("amiFamily %v annotations %v", *nc.Spec.AMIFamily, nc.Annotations)
	}
	b := nc.Spec.BlockDeviceMappings
	if len(b) != 1 || *b[0].DeviceName != "/dev/sda1" || !b[0].RootVolume || b[0].EBS.VolumeSize.String() != "20Gi" {
		t.Errorf("blockDeviceMappings %+v", b)
	}
}
