package validate

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// The hostile value of issue 23: closes the AL2 bootstrap script's single quotes.
const pwned = "x' ; touch /pwned ; '"

// fields returns "type field" for each error, so a test asserts which rule fired where.
func fields(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Field)
	}
	return out
}

func TestLabels(t *testing.T) {
	root := field.NewPath("labels")
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   []string
	}{
		{"valid key with prefix and empty value", map[string]string{"example.com/team": "", "tier": "web-1.a_b"}, nil},
		{"shell breaker in a value", map[string]string{"team": pwned}, []string{"FieldValueInvalid labels[team]"}},
		{"newline in a value", map[string]string{"team": "a\nb"}, []string{"FieldValueInvalid labels[team]"}},
		// 63 characters is the limit of a value (IsValidLabelValue: LabelValueMaxLength).
		{"64-character value", map[string]string{"team": strings.Repeat("a", 64)}, []string{"FieldValueInvalid labels[team]"}},
		{"63-character value", map[string]string{"team": strings.Repeat("a", 63)}, nil},
		{"key with a space", map[string]string{"bad key": "v"}, []string{"FieldValueInvalid labels[bad key]"}},
		{"key with an empty prefix", map[string]string{"/team": "v"}, []string{"FieldValueInvalid labels[/team]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fields(Labels(tc.labels, root))
			if strings.Join(got, ";") != strings.Join(tc.want, ";") {
				t.Errorf("Labels(%q) = %q, want %q", tc.labels, got, tc.want)
			}
		})
	}
}

func TestTaints(t *testing.T) {
	root := field.NewPath("taints")
	for _, tc := range []struct {
		name   string
		taints []corev1.Taint
		want   []string
	}{
		{"valid", []corev1.Taint{{Key: "example.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}, {Key: "dedicated", Effect: corev1.TaintEffectNoExecute}}, nil},
		{"hostile value", []corev1.Taint{{Key: "k", Value: pwned, Effect: corev1.TaintEffectNoSchedule}}, []string{"FieldValueInvalid taints[0].value"}},
		{"hostile key", []corev1.Taint{{Key: "k$(id)", Effect: corev1.TaintEffectNoSchedule}}, []string{"FieldValueInvalid taints[0].key"}},
		{"no key", []corev1.Taint{{Effect: corev1.TaintEffectNoSchedule}}, []string{"FieldValueRequired taints[0].key"}},
		{"no effect", []corev1.Taint{{Key: "k"}}, []string{"FieldValueRequired taints[0].effect"}},
		// NoExecuteSoon and friends are not taint effects (validateTaintEffect).
		{"unknown effect", []corev1.Taint{{Key: "k", Effect: "NoExecuteSoon"}}, []string{"FieldValueNotSupported taints[0].effect"}},
		{"same key and effect twice", []corev1.Taint{{Key: "k", Value: "a", Effect: corev1.TaintEffectNoSchedule}, {Key: "k", Value: "b", Effect: corev1.TaintEffectNoSchedule}}, []string{"FieldValueDuplicate taints[1]"}},
		{"same key, other effect", []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}, {Key: "k", Effect: corev1.TaintEffectNoExecute}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fields(Taints(tc.taints, root, nil))
			if strings.Join(got, ";") != strings.Join(tc.want, ";") {
				t.Errorf("Taints = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTolerations(t *testing.T) {
	secs := int64(30)
	root := field.NewPath("tolerations")
	for _, tc := range []struct {
		name string
		tol  corev1.Toleration
		want []string
	}{
		{"equal", corev1.Toleration{Key: "k", Operator: corev1.TolerationOpEqual, Value: "v", Effect: corev1.TaintEffectNoSchedule}, nil},
		{"exists everything", corev1.Toleration{Operator: corev1.TolerationOpExists}, nil},
		{"empty key needs Exists", corev1.Toleration{Value: "v"}, []string{"FieldValueInvalid tolerations[0].operator"}},
		{"Exists with a value", corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"}, []string{"FieldValueInvalid tolerations[0].value"}},
		{"hostile value", corev1.Toleration{Key: "k", Value: "`id`"}, []string{"FieldValueInvalid tolerations[0].value"}},
		{"seconds without NoExecute", corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: &secs}, []string{"FieldValueInvalid tolerations[0].effect"}},
		{"unknown operator", corev1.Toleration{Key: "k", Operator: "In"}, []string{"FieldValueNotSupported tolerations[0].operator"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fields(Tolerations([]corev1.Toleration{tc.tol}, root))
			if strings.Join(got, ";") != strings.Join(tc.want, ";") {
				t.Errorf("Tolerations = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAnnotationsTotalSize(t *testing.T) {
	// The API server's limit is 256 KiB over keys and values together (TotalAnnotationSizeLimitB).
	p := field.NewPath("annotations")
	if errs := Annotations(map[string]string{"a": strings.Repeat("x", 256*1024-1)}, p); len(errs) != 0 {
		t.Errorf("1 + 262143 bytes: %v, want none", errs)
	}
	if errs := Annotations(map[string]string{"a": strings.Repeat("x", 256*1024)}, p); len(errs) != 1 || errs[0].Type != field.ErrorTypeTooLong {
		t.Errorf("1 + 262144 bytes: %v, want one TooLong", errs)
	}
	if errs := Annotations(map[string]string{"bad key!": "v"}, p); len(errs) != 1 {
		t.Errorf("bad key: %v, want one error", errs)
	}
}

func TestNames(t *testing.T) {
	p := field.NewPath("name")
	for name, ok := range map[string]bool{
		"ip-10-0-1-2.ec2.internal": true, "default": true, strings.Repeat("a", 253): true,
		"": false, "Upper": false, "a_b": false, strings.Repeat("a", 254): false, pwned: false,
	} {
		if got := len(Name(name, p)) == 0; got != ok {
			t.Errorf("Name(%q) valid = %v, want %v", name, got, ok)
		}
	}
	// A namespace is a DNS-1123 label: no dots.
	if errs := Namespace("a.b", p); len(errs) != 1 {
		t.Errorf("Namespace(a.b) = %v, want one error", errs)
	}
}

func TestNodePoolPaths(t *testing.T) {
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Template.ObjectMeta.Labels = map[string]string{"team": pwned}
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a\nb"}}}}
	np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "k", Value: "$(reboot)", Effect: corev1.TaintEffectNoSchedule}}
	np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
	np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1")}
	got := fields(NodePool(np, field.NewPath("nodePools").Index(0)))
	want := []string{
		"FieldValueInvalid nodePools[0].spec.template.metadata.labels[team]",
		"FieldValueInvalid nodePools[0].spec.template.spec.requirements[0].values[0]",
		"FieldValueInvalid nodePools[0].spec.template.spec.taints[0].value",
		"FieldValueDuplicate nodePools[0].spec.template.spec.startupTaints[0]",
		"FieldValueInvalid nodePools[0].spec.limits[cpu]",
	}
	if strings.Join(got, ";") != strings.Join(want, ";") {
		t.Errorf("NodePool errors:\n got %q\nwant %q", got, want)
	}
}

func TestNodeAndPod(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "default", Labels: map[string]string{"k": "a b"}}}
	n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: "Sometimes"}}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("-1Gi")}
	got := fields(Node(n, field.NewPath("node")))
	want := []string{"FieldValueForbidden node.metadata.namespace", "FieldValueInvalid node.metadata.labels[k]",
		"FieldValueNotSupported node.spec.taints[0].effect", "FieldValueInvalid node.status.allocatable[memory]"}
	if strings.Join(got, ";") != strings.Join(want, ";") {
		t.Errorf("Node errors:\n got %q\nwant %q", got, want)
	}

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	pod.Spec.NodeSelector = map[string]string{"k": "'"}
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "k", Operator: corev1.NodeSelectorOpIn, Values: []string{"ok", "no;"}},
			// The API server takes any integer for Gt and Lt, negative ones too.
			{Key: "k", Operator: corev1.NodeSelectorOpGt, Values: []string{"-1"}}}}}}}}
	pod.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-100m")}}}}
	got = fields(Pod(pod, field.NewPath("pod")))
	want = []string{"FieldValueRequired pod.metadata.namespace", "FieldValueInvalid pod.spec.nodeSelector[k]",
		"FieldValueInvalid pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values[1]",
		"FieldValueInvalid pod.spec.containers[0].resources.requests[cpu]"}
	if strings.Join(got, ";") != strings.Join(want, ";") {
		t.Errorf("Pod errors:\n got %q\nwant %q", got, want)
	}
}
