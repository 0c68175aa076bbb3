package validate

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/validate/content"
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
