// Package policyflags holds the two scheduling-policy flags, --min-values-policy and
// --preference-policy, that every entry point that plans registers (the function binaries,
// `dovetail plan`, `dovetail dev`), so their names, defaults and help are written once.
package policyflags

import (
	"github.com/spf13/pflag"

	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// Flag names, Karpenter's (kubernetes-sigs/karpenter pkg/operator/options/options.go).
const (
	MinValuesPolicy  = "min-values-policy"
	PreferencePolicy = "preference-policy"
)

// Flags are the flags' raw values; Policies parses them.
type Flags struct {
	MinValues, Preferences string
}

// Register adds both flags to fs. def gives a flag's default from its name (the functions read
// their environment variables through it, runtime.EnvDefault; nil: Karpenter's defaults,
// Strict and Respect).
func (f *Flags) Register(fs *pflag.FlagSet, def func(flag, value string) string) {
	if def == nil {
		def = func(_, v string) string { return v }
	}
	fs.StringVar(&f.MinValues, MinValuesPolicy, def(MinValuesPolicy, string(provisioning.MinValuesStrict)),
		"Strict: a NodeClaim whose instance types cannot keep a requirement's minValues is not made (the pod stays pending); BestEffort: it is made with the types left, its minValues lowered to what they have and annotated karpenter.sh/nodeclaim-min-values-relaxed")
	fs.StringVar(&f.Preferences, PreferencePolicy, def(PreferencePolicy, string(provisioning.PreferencesRespect)),
		"Respect: preferred affinities and ScheduleAnyway spreads are held while they can be met, then dropped one at a time; Ignore: they are never read")
}

// Policies parses the values; the error names the flag and the values it takes.
func (f *Flags) Policies() (provisioning.Policies, error) {
	return provisioning.ParsePolicies(f.MinValues, f.Preferences)
}
