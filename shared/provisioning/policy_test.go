package provisioning

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// minValuesPool allows m5.large, m5.xlarge and m5.2xlarge on-demand with minValues 3 on the
// instance type.
func minValuesPool() *apisv1.NodePool {
	three := 3
	reqs := onDemand("m5.large", "m5.xlarge", "m5.2xlarge")
	reqs[0].MinValues = &three
	return nodePool("default", reqs...)
}

func TestParsePolicies(t *testing.T) {
	for _, c := range []struct {
		mv, pp string
		want   Policies
		err    string
	}{
		{"", "", Policies{MinValuesStrict, PreferencesRespect}, ""},
		{"Strict", "Respect", Policies{MinValuesStrict, PreferencesRespect}, ""},
		{"BestEffort", "Ignore", Policies{MinValuesBestEffort, PreferencesIgnore}, ""},
		{"besteffort", "", Policies{}, `--min-values-policy: min values policy "besteffort": want Strict or BestEffort`},
		{"", "ignore", Policies{}, `--preference-policy: preference policy "ignore": want Respect or Ignore`},
	} {
		got, err := ParsePolicies(c.mv, c.pp)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("ParsePolicies(%q, %q) error = %v, want %q", c.mv, c.pp, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParsePolicies(%q, %q) = %+v, %v; want %+v", c.mv, c.pp, got, err, c.want)
		}
	}
}

// A 3-CPU pod fits m5.xlarge (3920m allocatable) and m5.2xlarge (7910m), not m5.large (1930m):
// two instance types are left where the NodePool asks for three.
func TestMinValuesPolicy(t *testing.T) {
	big := []*corev1.Pod{pod("big", "3", "1Gi")}

	t.Run("Strict leaves the pod pending", func(t *testing.T) {
		p := solve(t, Input{Pods: big, NodePools: []*apisv1.NodePool{minValuesPool()}})
		if len(p.NodeClaims) != 0 || len(p.Unschedulable) != 1 {
			t.Fatalf("claims %d, unschedulable %d; want 0 and 1", len(p.NodeClaims), len(p.Unschedulable))
		}
		if r := p.Unschedulable[0].Reason; !strings.Contains(r, "minValues") {
			t.Fatalf("reason %q does not name minValues", r)
		}
	})

	t.Run("BestEffort launches with the two types and minValues 2", func(t *testing.T) {
		np := minValuesPool()
		p := solve(t, Input{Pods: big, NodePools: []*apisv1.NodePool{np}, Policies: Policies{MinValues: MinValuesBestEffort}})
		wantClaims(t, p, "m5.xlarge")
		c := p.NodeClaims[0]
		if got := c.InstanceTypeOptions(); !reflect.DeepEqual(got, []string{"m5.xlarge", "m5.2xlarge"}) {
			t.Fatalf("options = %v, want [m5.xlarge m5.2xlarge]", got)
		}
		if !c.MinValuesRelaxed {
			t.Fatal("MinValuesRelaxed = false, want true (2 types < minValues 3)")
		}
		if mv := c.Requirements[corev1.LabelInstanceTypeStable].MinValues; mv == nil || *mv != 2 {
			t.Fatalf("instance-type minValues = %v, want 2 (the distinct types left)", mv)
		}
		if mv := np.Spec.Template.Spec.Requirements[0].MinValues; *mv != 3 {
			t.Fatalf("the NodePool's minValues became %d; the relaxation must not write through", *mv)
		}
	})

	// A 1-CPU pod fits all three types: minValues holds, nothing is relaxed under either policy.
	for _, pol := range []MinValuesPolicy{MinValuesStrict, MinValuesBestEffort} {
		t.Run(string(pol)+" keeps minValues when it holds", func(t *testing.T) {
			p := solve(t, Input{Pods: []*corev1.Pod{pod("small", "1", "1Gi")}, NodePools: []*apisv1.NodePool{minValuesPool()},
				Policies: Policies{MinValues: pol}})
			wantClaims(t, p, "m5.large")
			c := p.NodeClaims[0]
			if c.MinValuesRelaxed {
				t.Fatal("MinValuesRelaxed = true with three types left")
			}
			if mv := c.Requirements[corev1.LabelInstanceTypeStable].MinValues; mv == nil || *mv != 3 {
				t.Fatalf("instance-type minValues = %v, want 3", mv)
			}
		})
	}
}

func TestPreferencePolicyNodeAffinity(t *testing.T) {
	// The pod prefers us-east-1b. Respect holds the preference as a requirement (it can be met):
	// the m5.large's one on-demand offering there. Ignore never reads it: the 5 zones m5.large
	// is offered in (Nitro types skip us-east-1e).
	pr := pod("a", "1", "1Gi")
	pr.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
		Weight: 1, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1b"}}}}}}}}
	for _, c := range []struct {
		pol   PreferencePolicy
		zones int
	}{{PreferencesRespect, 1}, {PreferencesIgnore, 5}} {
		p := solve(t, Input{Pods: []*corev1.Pod{pr}, NodePools: []*apisv1.NodePool{nodePool("default", onDemand("m5.large")...)},
			Policies: Policies{Preferences: c.pol}})
		wantClaims(t, p, "m5.large")
		if n := len(p.NodeClaims[0].Offerings); n != c.zones {
			t.Errorf("%s: %d offerings, want %d", c.pol, n, c.zones)
		}
	}
}

func TestPreferencePolicyTopology(t *testing.T) {
	// Three 1-CPU pods of one app. Respect: a ScheduleAnyway hostname spread (maxSkew 1) or a
	// preferred hostname anti-affinity puts each on its own node, 3 × m5.large (1930m each) =
	// 3 × 0.096 = 0.288 USD/h, cheaper per pod than any way of keeping the preference on fewer
	// nodes. Ignore: the preference is never read, so the three pack onto one m5.xlarge
	// (3000m ≤ 3920m) at 0.192 USD/h, which beats three m5.large.
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	spread := func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname,
			WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: sel}}
	}
	anti := func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: sel}}}}}
	}
	for name, shape := range map[string]func(*corev1.Pod){"ScheduleAnyway spread": spread, "preferred anti-affinity": anti} {
		for _, c := range []struct {
			pol  PreferencePolicy
			want []string
		}{{PreferencesRespect, []string{"m5.large", "m5.large", "m5.large"}}, {PreferencesIgnore, []string{"m5.xlarge"}}} {
			t.Run(name+"/"+string(c.pol), func(t *testing.T) {
				ps := pods(3, "1", "1Gi")
				for _, p := range ps {
					p.Labels = map[string]string{"app": "web"}
					shape(p)
				}
				p := solve(t, Input{Pods: ps, NodePools: []*apisv1.NodePool{nodePool("default", onDemand("m5.large", "m5.xlarge")...)},
					Policies: Policies{Preferences: c.pol}})
				wantClaims(t, p, c.want...)
			})
		}
	}
}

// A required spread is a requirement under either policy: Ignore drops preferences only.
func TestPreferenceIgnoreKeepsRequiredSpread(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	ps := pods(3, "1", "1Gi")
	for _, p := range ps {
		p.Labels = map[string]string{"app": "web"}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}}
	}
	p := solve(t, Input{Pods: ps, NodePools: []*apisv1.NodePool{nodePool("default", onDemand("m5.large", "m5.xlarge")...)},
		Policies: Policies{Preferences: PreferencesIgnore}})
	wantClaims(t, p, "m5.large", "m5.large", "m5.large")
}
