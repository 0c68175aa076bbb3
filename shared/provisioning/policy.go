package provisioning

import "fmt"

// Policies are the operator's scheduling policies, Karpenter's --min-values-policy and
// --preference-policy (kubernetes-sigs/karpenter v1.14 pkg/operator/options/options.go). The
// zero value is Karpenter's default: Strict and Respect.
type Policies struct {
	MinValues   MinValuesPolicy
	Preferences PreferencePolicy
}

// MinValuesPolicy says what a NodeClaim does when its candidate instance types cannot keep a
// requirement's minValues.
type MinValuesPolicy string

const (
	// MinValuesStrict: no NodeClaim is made (the pod stays pending with the reason), Karpenter's
	// default.
	MinValuesStrict MinValuesPolicy = "Strict"
	// MinValuesBestEffort: the NodeClaim is made with the types that remain; each requirement
	// whose minValues they cannot keep carries, as its minValues, the number of distinct values
	// they have, and the NodeClaim is annotated karpenter.sh/nodeclaim-min-values-relaxed "true"
	// (Karpenter's scheduler: filterInstanceTypesByRequirements with relaxMinValues, and the
	// annotation set in Scheduler.add).
	MinValuesBestEffort MinValuesPolicy = "BestEffort"
)

// PreferencePolicy says whether preferences shape a plan.
type PreferencePolicy string

const (
	// PreferencesRespect: preferences are held as requirements first and dropped one at a time
	// while the pod cannot be placed, Karpenter's default.
	PreferencesRespect PreferencePolicy = "Respect"
	// PreferencesIgnore: preferred node affinity, preferred pod affinity and anti-affinity and
	// ScheduleAnyway topology spreads are not read at all, as Karpenter's scheduler reads only a
	// pod's strict requirements and required terms under Ignore (NewStrictPodRequirements,
	// Topology.newForTopologies and newForAffinities). PreferNoSchedule taints are still
	// tolerated only when nothing else takes the pod, as in Karpenter, whose relaxation keeps
	// that step under either policy.
	PreferencesIgnore PreferencePolicy = "Ignore"
)

// ParseMinValuesPolicy reads a --min-values-policy value: "Strict" or "BestEffort" (case as
// Karpenter spells them; "" is Strict). Error: any other value, naming both.
func ParseMinValuesPolicy(s string) (MinValuesPolicy, error) {
	switch MinValuesPolicy(s) {
	case "", MinValuesStrict:
		return MinValuesStrict, nil
	case MinValuesBestEffort:
		return MinValuesBestEffort, nil
	}
	return "", fmt.Errorf("min values policy %q: want %s or %s", s, MinValuesStrict, MinValuesBestEffort)
}

// ParsePreferencePolicy reads a --preference-policy value: "Respect" or "Ignore" ("" is
// Respect). Error: any other value, naming both.
func ParsePreferencePolicy(s string) (PreferencePolicy, error) {
	switch PreferencePolicy(s) {
	case "", PreferencesRespect:
		return PreferencesRespect, nil
	case PreferencesIgnore:
		return PreferencesIgnore, nil
	}
	return "", fmt.Errorf("preference policy %q: want %s or %s", s, PreferencesRespect, PreferencesIgnore)
}

// ParsePolicies reads both flags' values; errors name the flag.
func ParsePolicies(minValues, preferences string) (Policies, error) {
	mv, err := ParseMinValuesPolicy(minValues)
	if err != nil {
		return Policies{}, fmt.Errorf("--min-values-policy: %w", err)
	}
	pp, err := ParsePreferencePolicy(preferences)
	if err != nil {
		return Policies{}, fmt.Errorf("--preference-policy: %w", err)
	}
	return Policies{MinValues: mv, Preferences: pp}, nil
}

func (p Policies) bestEffort() bool { return p.MinValues == MinValuesBestEffort }

func (p Policies) ignorePreferences() bool { return p.Preferences == PreferencesIgnore }
