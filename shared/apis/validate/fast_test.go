package validate

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"pgregory.net/rapid"
)

// The fast paths accept exactly what apimachinery accepts, on strings built from the characters
// the rules turn on (and a few they refuse), at lengths around the limits.
func TestFastPathsAgreeWithApimachinery(t *testing.T) {
	alphabet := []string{"a", "z", "A", "Z", "0", "9", "-", "_", ".", "/", " ", "'", "é", "\n"}
	str := rapid.Custom(func(t *rapid.T) string {
		s := strings.Join(rapid.SliceOfN(rapid.SampledFrom(alphabet), 0, 12).Draw(t, "chars"), "")
		// Stretch a run to cross the 63 and 253 limits now and then.
		if n := rapid.SampledFrom([]int{0, 0, 0, 51, 52, 53, 62, 63, 64, 240, 241, 252, 253, 254}).Draw(t, "pad"); n > 0 {
			s += strings.Repeat("a", n) + rapid.SampledFrom([]string{"", "a", ".b", "/c"}).Draw(t, "tail")
		}
		return s
	})
	rapid.Check(t, func(t *rapid.T) {
		s := str.Draw(t, "s")
		for _, c := range []struct {
			name string
			fast bool
			slow []string
		}{
			{"label key", labelKeyOK(s), content.IsLabelKey(s)},
			{"label value", labelValueOK(s), content.IsLabelValue(s)},
			{"DNS-1123 label", dns1123LabelOK(s), content.IsDNS1123Label(s)},
			{"DNS-1123 subdomain", dns1123SubdomainOK(s), content.IsDNS1123Subdomain(s)},
		} {
			if c.fast != (len(c.slow) == 0) {
				t.Fatalf("%s %q: fast path says %v, apimachinery says %q", c.name, s, c.fast, c.slow)
			}
		}
	})
}

// tolerationOK agrees with Toleration's errors, and podSpecOK with PodSpec's rules, on
// tolerations, node selectors and node affinity built from the values the rules turn on.
func TestTolerationAndPodSpecFastPaths(t *testing.T) {
	str := rapid.SampledFrom([]string{"", "k", "example.com/k", "bad key", "a b", "v", "-x"})
	ops := rapid.SampledFrom([]corev1.TolerationOperator{"", corev1.TolerationOpEqual, corev1.TolerationOpExists, "In"})
	effects := rapid.SampledFrom([]corev1.TaintEffect{"", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute, "Later"})
	nodeOps := rapid.SampledFrom([]corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists, corev1.NodeSelectorOpGt})
	rapid.Check(t, func(t *rapid.T) {
		var spec corev1.PodSpec
		for range rapid.IntRange(0, 2).Draw(t, "tolerations") {
			tol := corev1.Toleration{Key: str.Draw(t, "key"), Operator: ops.Draw(t, "op"), Value: str.Draw(t, "value"), Effect: effects.Draw(t, "effect")}
			if rapid.Bool().Draw(t, "seconds") {
				secs := int64(30)
				tol.TolerationSeconds = &secs
			}
			if slow := slowToleration(tol); tolerationOK(&tol) != (len(slow) == 0) {
				t.Fatalf("toleration %+v: fast %v, errors %v", tol, tolerationOK(&tol), slow)
			}
			spec.Tolerations = append(spec.Tolerations, tol)
		}
		if rapid.Bool().Draw(t, "selector") {
			spec.NodeSelector = map[string]string{str.Draw(t, "selKey"): str.Draw(t, "selValue")}
		}
		if rapid.Bool().Draw(t, "affinity") {
			spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: str.Draw(t, "affKey"), Operator: nodeOps.Draw(t, "affOp"), Values: []string{str.Draw(t, "affValue")}}}}}}}}
		}
		if slow := slowPodSpec(&spec); podSpecOK(&spec) != (len(slow) == 0) {
			t.Fatalf("spec %+v: podSpecOK %v, errors %v", spec, podSpecOK(&spec), slow)
		}
	})
}

// slowToleration is Toleration without its fast path.
func slowToleration(tol corev1.Toleration) field.ErrorList {
	return tolerationRules(tol, field.NewPath("t"))
}

// slowPodSpec runs PodSpec's rules without its fast path.
func slowPodSpec(s *corev1.PodSpec) field.ErrorList {
	p := field.NewPath("spec")
	errs := Labels(s.NodeSelector, p.Child("nodeSelector"))
	for i, tol := range s.Tolerations {
		errs = append(errs, tolerationRules(tol, p.Child("tolerations").Index(i))...)
	}
	if a := s.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for i, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for j, r := range term.MatchExpressions {
				errs = append(errs, nodeAffinityRequirement(r, p.Index(i).Index(j))...)
			}
		}
	}
	return errs
}
