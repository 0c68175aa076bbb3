package customdata

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"pgregory.net/rapid"
)

// breakers end or escape a value in the custom data's layers: bash (quotes, backslash, '$',
// backticks, newlines, ';', '#'), systemd's EnvironmentFile and the kubelet's list syntax
// (',', '=', ':'), plus non-ASCII text.
var breakers = []string{"'", `"`, "\\", "\n", "\t", " ", "$(reboot)", "${X}", "`id`", ";", "#", ",", "=", ":", "- ",
	"&", "|", "{", "}", "[", "]", "<", ">", "%", "@", "é", "\u2028", "\u0085", "KUBELET_FLAGS=--x", "'\\''"}

func hostile() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		return strings.Join(rapid.SliceOfN(rapid.OneOf(rapid.SampledFrom(breakers), rapid.String()), 0, 5).Draw(t, "pieces"), "")
	})
}

// Hostile strings in every free-form field of the contract: Render either refuses them naming
// where, or the script reads back, as bash would assign them, to exactly the contract's
// variables; nothing a value holds changes another variable or adds one.
func TestPropertyHostileValuesRefusedOrExact(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := ubuntu2204(t)
		c.TenantID, c.ResourceGroup, c.Location = hostile().Draw(t, "tenant"), hostile().Draw(t, "rg"), hostile().Draw(t, "location")
		c.VNet, c.Subnet, c.NSG, c.UserAssignedIdentityID = hostile().Draw(t, "vnet"), hostile().Draw(t, "subnet"), hostile().Draw(t, "nsg"), hostile().Draw(t, "identity")
		c.Labels = rapid.MapOfN(hostile(), hostile(), 0, 3).Draw(t, "labels")
		c.Kubelet.EvictionHard = map[string]string{"memory.available": hostile().Draw(t, "eviction")}
		vars, err := c.Variables()
		if err != nil {
			if !strings.HasPrefix(err.Error(), "custom data: ") {
				t.Fatalf("error %q does not say where", err)
			}
			return
		}
		data, err := renderVariables(vars)
		if err != nil {
			if !strings.Contains(err.Error(), "NUL or carriage return") {
				t.Fatalf("render: %v", err)
			}
			return
		}
		got, err := ReadVariables(data)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if !reflect.DeepEqual(got, vars) {
			t.Fatalf("read back %q\nwant %q", got, vars)
		}
	})
}

// Labels and taints of label-like strings (what validation admits, one in twenty hostile):
// rendered and booted, the kubelet registers exactly them, or Render refuses what the kubelet
// would refuse.
func TestPropertyRenderThenBootIsExactOrRefused(t *testing.T) {
	labelish := rapid.Custom(func(t *rapid.T) string {
		switch rapid.IntRange(0, 19).Draw(t, "kind") {
		case 0:
			return hostile().Draw(t, "hostile")
		case 1, 2, 3:
			return rapid.StringMatching(`[a-z]{1,5}\.(io|kubernetes\.io)/[a-z0-9]{1,6}`).Draw(t, "prefixed")
		}
		return rapid.StringMatching(`[a-z0-9]([a-z0-9._-]{0,10}[a-z0-9])?`).Draw(t, "plain")
	})
	rapid.Check(t, func(t *rapid.T) {
		c := ubuntu2204(t)
		c.Labels = rapid.MapOfN(labelish, labelish, 1, 4).Draw(t, "labels")
		c.Taints = []corev1.Taint{{Key: labelish.Draw(t, "taintKey"), Value: labelish.Draw(t, "taintValue"), Effect: corev1.TaintEffectNoExecute}}
		data, err := Render(c)
		if err != nil {
			return
		}
		n, err := Read(data)
		if err != nil {
			t.Fatalf("rendered what the node refuses: %v", err)
		}
		want := map[string]string{LabelNodeImageVersion: c.NodeImageVersion}
		for k, v := range c.Labels {
			want[k] = v
		}
		if !reflect.DeepEqual(n.Labels, want) || !reflect.DeepEqual(n.Taints, c.Taints) {
			t.Fatalf("kubelet registers %v %v, want %v %v", n.Labels, n.Taints, want, c.Taints)
		}
	})
}
