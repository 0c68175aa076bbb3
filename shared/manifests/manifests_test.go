package manifests

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	apiv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// testdata/all-kinds.yaml holds one document of every kind read (plus a List and skipped kinds);
// the expected counts below are counted by hand from that file.
func TestLoadAllKinds(t *testing.T) {
	s, err := Load("testdata/all-kinds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string][2]int{
		"NodePools":   {len(s.NodePools), 2},
		"NodeClasses": {len(s.NodeClasses), 1},
		"NodeClaims":  {len(s.NodeClaims), 1},
		"Namespaces":  {len(s.Namespaces), 1},
		"Workloads":   {len(s.Workloads), 5},
		"Pods":        {len(s.Pods), 3}, // standalone, bound, and the Pod inside the List
		"DaemonSets":  {len(s.DaemonSets), 1},
		"PDBs":        {len(s.PDBs), 1},
		"Nodes":       {len(s.Nodes), 1},
		"Warnings":    {len(s.Warnings), 1}, // one line for the Service in the List and the ConfigMap
	}
	for what, c := range counts {
		if c[0] != c[1] {
			t.Errorf("%s: got %d, want %d", what, c[0], c[1])
		}
	}
	// Unused kinds are counted in one line, per kind, not one warning per object.
	if want := "skipped 2 objects of kinds Dovetail does not use: ConfigMap 1, Service 1"; len(s.Warnings) != 1 || s.Warnings[0] != want {
		t.Errorf("warnings %q, want [%q]", s.Warnings, want)
	}

	// v1beta1 converted to v1: WhenUnderutilized becomes WhenEmptyOrUnderutilized and
	// disruption.expireAfter moves to template.spec.expireAfter (Karpenter v1 migration guide).
	legacy := s.NodePools[1]
	if legacy.Name != "legacy" || legacy.Spec.Disruption.ConsolidationPolicy != apiv1.ConsolidationPolicyWhenEmptyOrUnderutilized {
		t.Errorf("v1beta1 NodePool not converted: %s %q", legacy.Name, legacy.Spec.Disruption.ConsolidationPolicy)
	}
	if d := legacy.Spec.Template.Spec.ExpireAfter.Duration; d == nil || *d != 168*time.Hour {
		t.Errorf("v1beta1 expireAfter: got %v, want 168h", legacy.Spec.Template.Spec.ExpireAfter)
	}

	want := map[string]struct {
		kind, ns string
		replicas int32
	}{
		"web":     {"Deployment", "shop", 3},
		"db":      {"StatefulSet", "default", 1}, // replicas unset: 1; namespace unset: default
		"rs":      {"ReplicaSet", "default", 2},
		"batch":   {"Job", "default", 2},     // min(parallelism 4, completions 2)
		"nightly": {"CronJob", "default", 1}, // parallelism unset: 1
	}
	for _, w := range s.Workloads {
		e, ok := want[w.Name]
		if !ok {
			t.Errorf("unexpected workload %s", w.Name)
			continue
		}
		if w.Kind != e.kind || w.Namespace != e.ns || w.Replicas != e.replicas {
			t.Errorf("%s: got %s %s replicas %d, want %s %s replicas %d", w.Name, w.Kind, w.Namespace, w.Replicas, e.kind, e.ns, w.Replicas)
		}
	}
	if d, ok := s.Workloads[0].Object.(*appsv1.Deployment); !ok || d.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 250 {
		t.Errorf("Deployment object or its 250m cpu request lost: %#v", s.Workloads[0].Object)
	}
	if s.DaemonSets[0].Namespace != "kube-system" || s.PDBs[0].Spec.MinAvailable.IntValue() != 2 {
		t.Errorf("DaemonSet/PDB fields lost")
	}
	if q := s.Nodes[0].Status.Allocatable[corev1.ResourceMemory]; q.Value() != 6903*1024*1024 {
		t.Errorf("node allocatable memory: got %s, want 6903Mi", q.String())
	}
}

func TestExpandPods(t *testing.T) {
	s, err := Load("testdata/all-kinds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pods := s.ExpandPods()
	// Document order: web (3), db, rs (2), batch (2), nightly, then the standalone Pods.
	wantNames := []string{
		"shop/web-0", "shop/web-1", "shop/web-2", "default/db-0", "default/rs-0", "default/rs-1",
		"default/batch-0", "default/batch-1", "default/nightly-0",
		"default/standalone", "kube-system/bound", "shop/listed",
	}
	var got []string
	for _, p := range pods {
		got = append(got, p.Namespace+"/"+p.Name)
	}
	if strings.Join(got, " ") != strings.Join(wantNames, " ") {
		t.Fatalf("pods:\n got %v\nwant %v", got, wantNames)
	}

	web1 := pods[1]
	if web1.Labels["app"] != "web" || web1.Annotations["karpenter.sh/do-not-disrupt"] != "true" {
		t.Errorf("template labels/annotations not copied: %v %v", web1.Labels, web1.Annotations)
	}
	if web1.Spec.NodeName != "" || web1.Status.Phase != corev1.PodPending {
		t.Errorf("controller pod should be pending and unbound: %q %q", web1.Spec.NodeName, web1.Status.Phase)
	}
	if len(web1.OwnerReferences) != 1 || web1.OwnerReferences[0].Kind != "Deployment" || web1.OwnerReferences[0].Name != "web" ||
		web1.OwnerReferences[0].APIVersion != "apps/v1" || !*web1.OwnerReferences[0].Controller {
		t.Errorf("owner reference: %+v", web1.OwnerReferences)
	}
	if pods[8].OwnerReferences[0].Kind != "CronJob" || pods[8].Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		t.Errorf("CronJob pod: %+v", pods[8].OwnerReferences)
	}
	if pods[9].Status.Phase != corev1.PodPending || pods[10].Status.Phase != corev1.PodRunning || pods[10].Spec.NodeName != "node-a" {
		t.Errorf("standalone phases: %q, bound %q on %q", pods[9].Status.Phase, pods[10].Status.Phase, pods[10].Spec.NodeName)
	}

	// The pods are copies: changing one changes neither the Set nor the next expansion.
	web1.Labels["app"] = "changed"
	web1.Spec.Containers[0].Name = "changed"
	again := s.ExpandPods()
	if again[1].Labels["app"] != "web" || again[1].Spec.Containers[0].Name != "web" || s.Workloads[0].Template.Labels["app"] != "web" {
		t.Errorf("ExpandPods shares memory with the Set")
	}
}

func TestLoadDirectoryWalk(t *testing.T) {
	s, err := Load("testdata/dir")
	if err != nil {
		t.Fatal(err)
	}
	// Lexical path order: dir/a.json, dir/b.yaml, dir/sub/c.yml; notes.txt is not read.
	var got []string
	for _, p := range s.ExpandPods() {
		got = append(got, p.Name)
	}
	if want := "from-a-json from-b from-sub-c"; strings.Join(got, " ") != want {
		t.Errorf("got %v, want %s", got, want)
	}

	// Paths keep the order given; a named file is read whatever its extension.
	s, err = Load("testdata/dir/sub/c.yml", "testdata/dir/a.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 2 || s.Pods[0].Name != "from-sub-c" || s.Pods[1].Name != "from-a-json" {
		t.Errorf("explicit paths out of order: %v", s.Pods)
	}

	if _, err := Load("testdata/missing"); err == nil {
		t.Error("a missing path must be an error")
	}
}

func TestLoadFS(t *testing.T) {
	fsys := fstest.MapFS{
		"m/one.yaml":  {Data: []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: one}\nspec: {containers: [{name: c, image: x}]}\n")},
		"m/skip.md":   {Data: []byte("# not read")},
		"m/z/two.yml": {Data: []byte("apiVersion: v1\nkind: Node\nmetadata: {name: two}\n")},
	}
	s, err := LoadFS(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 1 || len(s.Nodes) != 1 {
		t.Errorf("got %d pods %d nodes, want 1 and 1", len(s.Pods), len(s.Nodes))
	}
}

// Malformed documents: the error names the file, the document index (0-based; documents holding
// only comments count) and the field path.
func TestErrors(t *testing.T) {
	const dep = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
	const pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
	const np = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: np}\n"
	okPod := func(name string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec: {containers: [{name: c, image: x}]}\n"
	}
	ok := okPod("good")
	cases := []struct {
		name, doc string
		want      []string
	}{
		{"unknown field", dep + "spec: {replicass: 3, selector: {}, template: {spec: {containers: [{name: c}]}}}\n",
			[]string{"bad.yaml doc 2", "Deployment web", `unknown field "spec.replicass"`}},
		{"wrong type", dep + "spec: {replicas: three, template: {spec: {containers: [{name: c}]}}}\n",
			[]string{"bad.yaml doc 2", "spec.replicas"}},
		{"bad quantity", dep + "spec: {template: {spec: {containers: [{name: c, resources: {limits: {cpu: 1}, requests: {cpu: lots}}}]}}}\n",
			[]string{"bad.yaml doc 2", `spec.template.spec.containers[0].resources.requests.cpu: "lots" is not a quantity`}},
		{"negative replicas", dep + "spec: {replicas: -1, template: {spec: {containers: [{name: c}]}}}\n",
			[]string{"bad.yaml doc 2", "spec.replicas: must be >= 0, got -1"}},
		{"no containers", pod + "spec: {containers: []}\n",
			[]string{"bad.yaml doc 2", "Pod p: spec.containers: at least one container"}},
		{"container without name", dep + "spec: {template: {spec: {containers: [{image: x}]}}}\n",
			[]string{"spec.template.spec.containers[0].name: required"}},
		{"missing name", "apiVersion: v1\nkind: Node\nmetadata: {}\n",
			[]string{"bad.yaml doc 2", "metadata.name: required"}},
		{"missing kind", "apiVersion: v1\nmetadata: {name: x}\n",
			[]string{"bad.yaml doc 2", "kind: required"}},
		{"old apiVersion", "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: web}\n",
			[]string{"bad.yaml doc 2", "apiVersion: extensions/v1beta1 is not supported for Deployment; use apps/v1"}},
		{"job parallelism", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {parallelism: -2, template: {spec: {containers: [{name: c}]}}}\n",
			[]string{"spec.parallelism: must be >= 0"}},
		{"NodePool unknown field", np + "spec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}, requirement: []}}}\n",
			[]string{"bad.yaml doc 2", "NodePool np", "spec.template.spec.requirement"}},
		{"NodePool invalid operator", np + "spec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}, requirements: [{key: kubernetes.io/arch, operator: Maybe, values: [amd64]}]}}}\n",
			[]string{"bad.yaml doc 2", "spec.template.spec.requirements[0].operator"}},
		{"NodePool label value breaks out of shell quotes", np + "spec: {template: {metadata: {labels: {team: \"x' ; touch /pwned ; '\"}}, spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}}}}\n",
			[]string{"bad.yaml doc 2", "NodePool np", "spec.template.metadata.labels[team]", "x' ; touch /pwned ; '"}},
		{"Node taint value", "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nspec: {taints: [{key: k, value: \"`reboot`\", effect: NoSchedule}]}\n",
			[]string{"bad.yaml doc 2", "Node n1", "spec.taints[0].value"}},
		{"Pod nodeSelector value", pod + "spec: {nodeSelector: {team: \"a;b\"}, containers: [{name: c}]}\n",
			[]string{"bad.yaml doc 2", "Pod p", "spec.nodeSelector[team]"}},
		{"Deployment template label", dep + "spec: {template: {metadata: {labels: {app: \"a b\"}}, spec: {containers: [{name: c}]}}}\n",
			[]string{"bad.yaml doc 2", "Deployment web", "spec.template.metadata.labels[app]"}},
		{"Node label key", "apiVersion: v1\nkind: Node\nmetadata: {name: n2, labels: {\"bad key\": v}}\n",
			[]string{"bad.yaml doc 2", "Node n2", "metadata.labels[bad key]"}},
		// A kubectl dump (kubectl get nodes,pods -A -o yaml) is a List; its items get the same checks.
		{"dump Node label value", "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(okPod("in-dump"), "\n", "\n  ") +
			"\n- apiVersion: v1\n  kind: Node\n  metadata: {name: n3, labels: {team: \"x' ; touch /pwned ; '\"}}\n",
			[]string{"bad.yaml doc 2 items[1]", "Node n3", "metadata.labels[team]"}},
		{"Provisioner", "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: old}\n",
			[]string{"bad.yaml doc 2", "karpenter.sh/v1alpha5 Provisioner is not supported"}},
		{"List item", "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(okPod("first"), "\n", "\n  ") + "\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: q}\n  spec: {containers: []}\n",
			[]string{"bad.yaml doc 2 items[1]", "Pod q", "spec.containers"}},
		{"duplicate", ok,
			[]string{"bad.yaml doc 2", "Pod good: metadata.name: duplicate: Pod default/good is already defined at bad.yaml doc 0"}},
		{"invalid YAML", "apiVersion: v1\nkind: Pod\nmetadata: {name: [unclosed\n",
			[]string{"bad.yaml doc 2", "not valid YAML or JSON"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// doc 0 is fine, doc 1 holds only a comment, doc 2 is the bad one.
			stream := ok + "---\n# only a comment\n---\n" + c.doc
			_, err := LoadReader("bad.yaml", strings.NewReader(stream))
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			var e *Error
			if !errors.As(err, &e) || e.Source.File != "bad.yaml" || e.Source.Doc != 2 {
				t.Errorf("want *Error at bad.yaml doc 2, got %#v", err)
			}
		})
	}
}

func TestNotAnObjectIsSkipped(t *testing.T) {
	s, err := LoadReader("values.yaml", strings.NewReader("replicaCount: 3\nimage: {tag: v1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "values.yaml doc 0: no apiVersion and kind") {
		t.Errorf("warnings: %q", s.Warnings)
	}
}

// A NodeOverlay (Karpenter v1.14's karpenter.sh/v1alpha1 price and capacity overlays) is read
// into the set; one the API server would refuse (price and priceAdjustment both set) is refused
// naming the field.
func TestNodeOverlayRead(t *testing.T) {
	s, err := LoadReader("overlay.yaml", strings.NewReader(`apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: discount}
spec:
  priceAdjustment: "-10%"
  requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec: {containers: [{name: c, image: x}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Warnings) != 0 || len(s.NodeOverlays) != 1 || s.NodeOverlays[0].Name != "discount" || *s.NodeOverlays[0].Spec.PriceAdjustment != "-10%" {
		t.Errorf("warnings %q, overlays %v; want the overlay read and no warning", s.Warnings, s.NodeOverlays)
	}
	if len(s.ExpandPods()) != 1 {
		t.Errorf("%d pods, want the one after the overlay", len(s.ExpandPods()))
	}
	_, err = LoadReader("bad.yaml", strings.NewReader(`apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: both}
spec:
  price: "0.1"
  priceAdjustment: "-10%"
  requirements: []
`))
	if err == nil || !strings.Contains(err.Error(), "cannot set both 'price' and 'priceAdjustment'") {
		t.Errorf("error %v, want the exclusivity refusal", err)
	}
}

// Resources the API server would refuse are refused at load, naming the manifest's field.
func TestManifestResourcesValidated(t *testing.T) {
	for body, want := range map[string]string{
		`{name: c, image: x, resources: {requests: {cpu: "-1"}}}`:                    "spec.template.spec.containers[0].resources.requests.cpu",
		`{name: c, image: x, resources: {requests: {cpu: "2"}, limits: {cpu: "1"}}}`: "must be less than or equal to the cpu limit 1",
		`{name: c, image: x, resources: {requests: {memory: "1e30"}}}`:               "requests.memory: 1e30 is too large",
	} {
		_, err := LoadReader("d.yaml", strings.NewReader(`apiVersion: apps/v1
kind: Deployment
metadata: {name: d, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: d}}
  template:
    metadata: {labels: {app: d}}
    spec:
      containers: [`+body+`]
`))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

// Two Deployments without the "---" between them are one document with every key twice: refused
// (YAML parsers keep the last, silently dropping the first Deployment). JSON streams still read.
func TestDuplicateKeysRefused(t *testing.T) {
	two := `apiVersion: apps/v1
kind: Deployment
metadata: {name: a, namespace: default}
spec: {replicas: 1, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a}}, spec: {containers: [{name: c, image: x}]}}}
apiVersion: apps/v1
kind: Deployment
metadata: {name: b, namespace: default}
spec: {replicas: 1, selector: {matchLabels: {app: b}}, template: {metadata: {labels: {app: b}}, spec: {containers: [{name: c, image: x}]}}}
`
	_, err := LoadReader("two.yaml", strings.NewReader(two))
	if err == nil || !strings.Contains(err.Error(), `a key is given twice (a missing "---" between two objects?)`) || !strings.Contains(err.Error(), `key "apiVersion" already set in map`) {
		t.Errorf("err %v, want the duplicate key refused", err)
	}
	s, err := LoadReader("pods.json", strings.NewReader(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default"},"spec":{"containers":[{"name":"c","image":"x"}]}}
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"q","namespace":"default"},"spec":{"containers":[{"name":"c","image":"x"}]}}`))
	if err != nil || len(s.ExpandPods()) != 2 {
		t.Errorf("JSON stream: %v, %d pods; want 2", err, len(s.ExpandPods()))
	}
}

// A replica count beyond MaxReplicas is an error naming the field, not an out-of-memory.
func TestReplicasCapped(t *testing.T) {
	_, err := LoadReader("big.yaml", strings.NewReader(`apiVersion: apps/v1
kind: Deployment
metadata: {name: big, namespace: default}
spec: {replicas: 10000000, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a}}, spec: {containers: [{name: c, image: x}]}}}
`))
	if err == nil || !strings.Contains(err.Error(), "spec.replicas") || !strings.Contains(err.Error(), "at most 20000") {
		t.Errorf("err %v, want spec.replicas refused at most 20000", err)
	}
}

// A 5 MB bad value is not echoed whole in the error.
func TestHugeBadValueIsCut(t *testing.T) {
	_, err := LoadReader("p.yaml", strings.NewReader(`apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "`+strings.Repeat("9", 5<<20)+`x"}}}]}
`))
	if err == nil || len(err.Error()) > 2048 || !strings.Contains(err.Error(), "requests") {
		t.Errorf("error of %d bytes (%.120q), want a short one naming the field", len(fmt.Sprint(err)), fmt.Sprint(err))
	}
}

// ProvisioningRequests (autoscaling.x-k8s.io/v1) and PodTemplates are read, the request's
// namespace defaulted; a request the CRD's schema refuses, an unknown field or the unserved
// v1beta1 is an error naming the field.
func TestProvisioningRequestRead(t *testing.T) {
	s, err := LoadReader("pr.yaml", strings.NewReader(`apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: train}
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  podSets: [{podTemplateRef: {name: trainer}, count: 2}]
---
apiVersion: v1
kind: PodTemplate
metadata: {name: trainer}
template: {spec: {containers: [{name: c, image: x}]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.ProvisioningRequests) != 1 || s.ProvisioningRequests[0].Namespace != "default" || s.ProvisioningRequests[0].Spec.PodSets[0].Count != 2 ||
		len(s.PodTemplates) != 1 || s.PodTemplates[0].Namespace != "default" || s.Objects() != 2 {
		t.Errorf("requests %+v, templates %d, objects %d", s.ProvisioningRequests, len(s.PodTemplates), s.Objects())
	}
	for doc, want := range map[string]string{
		"apiVersion: autoscaling.x-k8s.io/v1\nkind: ProvisioningRequest\nmetadata: {name: z}\nspec: {provisioningClassName: c, podSets: [{podTemplateRef: {name: t}, count: 0}]}\n":           "spec.podSets[0].count: 0: must be at least 1",
		"apiVersion: autoscaling.x-k8s.io/v1\nkind: ProvisioningRequest\nmetadata: {name: z}\nspec: {provisioningClassName: c, podSets: [{podTemplateRef: {name: t}, count: 1}], extra: 1}\n": `unknown field "spec.extra"`,
		"apiVersion: autoscaling.x-k8s.io/v1beta1\nkind: ProvisioningRequest\nmetadata: {name: z}\nspec: {}\n":                                                                                "autoscaling.x-k8s.io/v1beta1 is not supported for ProvisioningRequest; use autoscaling.x-k8s.io/v1",
	} {
		if _, err := LoadReader("bad.yaml", strings.NewReader(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", doc, err, want)
		}
	}
}
