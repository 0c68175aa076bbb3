package customdata

import (
	"encoding/base64"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"pgregory.net/rapid"
	"sigs.k8s.io/yaml"
)

// breakers end or escape a value in the custom data's layers: YAML (the cloud-config and the
// kubeconfig), systemd's EnvironmentFile (quotes, backslash, '$', '#', newline) and the
// kubelet's list syntax (',', '=', ':'), plus shell characters and non-ASCII text.
var breakers = []string{"'", `"`, "\\", "\n", "\r", "\t", " ", "$(reboot)", "${X}", "`id`", ";", "#", ",", "=", ":", "- ", "---",
	"...", "&a", "*a", "!!str", "{", "}", "[", "]", "|", ">", "%", "@", "é", "\u2028", "\u0085", "KUBELET_FLAGS=--x"}

func hostile() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		return strings.Join(rapid.SliceOfN(rapid.OneOf(rapid.SampledFrom(breakers), rapid.String()), 0, 5).Draw(t, "pieces"), "")
	})
}

// safe generates label-like strings (what validation lets through), which must always render.
func safe() *rapid.Generator[string] {
	return rapid.StringMatching(`[a-z0-9]([a-z0-9._-]{0,10}[a-z0-9])?`)
}

func draw(t *rapid.T, str *rapid.Generator[string]) Spec {
	effects := []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}
	s := Spec{APIServer: hostile().Draw(t, "apiServer"), CA: hostile().Draw(t, "ca"), BootstrapToken: hostile().Draw(t, "token"),
		Labels: rapid.MapOfN(str, str, 0, 4).Draw(t, "labels"), MaxPods: rapid.Int64Range(0, 1000).Draw(t, "maxPods")}
	for range rapid.IntRange(0, 3).Draw(t, "taints") {
		s.Taints = append(s.Taints, corev1.Taint{Key: str.Draw(t, "taintKey"), Value: str.Draw(t, "taintValue"), Effect: rapid.SampledFrom(effects).Draw(t, "effect")})
	}
	return s
}

// roundTrip asserts the custom data reads back, as the node's boot agent and kubelet read it, to
// exactly s: labels, taints (in order), max pods, and the bootstrap kubeconfig's server, CA and token.
func roundTrip(t *rapid.T, s Spec, data string) {
	n, err := Parse(data)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	wantLabels := s.Labels
	if wantLabels == nil {
		wantLabels = map[string]string{}
	}
	if !reflect.DeepEqual(n.Labels, wantLabels) || n.MaxPods != s.MaxPods {
		t.Fatalf("labels %q max pods %d, want %q %d", n.Labels, n.MaxPods, wantLabels, s.MaxPods)
	}
	if len(s.Taints) > 0 && !reflect.DeepEqual(n.Taints, s.Taints) || len(s.Taints) == 0 && len(n.Taints) > 0 {
		t.Fatalf("taints %v, want %v", n.Taints, s.Taints)
	}
	raw, _ := base64.StdEncoding.DecodeString(data)
	var cc cloudConfig
	if err := yaml.UnmarshalStrict([]byte(strings.TrimPrefix(string(raw), "#cloud-config\n")), &cc); err != nil {
		t.Fatalf("cloud-config: %v", err)
	}
	if len(cc.WriteFiles) != 2 || cc.WriteFiles[1].Path != BootstrapKubeconfigPath {
		t.Fatalf("write_files %+v", cc.WriteFiles)
	}
	var kc kubeconfig
	if err := yaml.UnmarshalStrict([]byte(cc.WriteFiles[1].Content), &kc); err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	if len(kc.Clusters) != 1 || kc.Clusters[0].Cluster.Server != s.APIServer || kc.Clusters[0].Cluster.CertificateAuthorityData != s.CA ||
		len(kc.Users) != 1 || kc.Users[0].User.Token != s.BootstrapToken {
		t.Fatalf("kubeconfig %+v, want server %q ca %q token %q", kc, s.APIServer, s.CA, s.BootstrapToken)
	}
}

// Hostile strings anywhere: the renderer either refuses them or the document reads back to
// exactly them; nothing a value holds changes another field or adds one.
func TestPropertyHostileValuesRefusedOrExact(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := draw(t, hostile())
		data, err := render(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "custom data: ") {
				t.Fatalf("error %q does not say where", err)
			}
			return
		}
		roundTrip(t, s, data)
	})
}

// Label-like values (what validation admits) always render and read back exactly, with hostile
// API server, CA and token strings around them.
func TestPropertyValidLabelsAlwaysRender(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := draw(t, safe())
		if strings.ContainsFunc(s.APIServer+s.CA+s.BootstrapToken, func(r rune) bool { return !yamlPrintable(r) }) {
			t.Skip("YAML carries only its printable characters")
		}
		data, err := render(s)
		if err != nil {
			t.Fatalf("render: %v", err)
		}
		roundTrip(t, s, data)
	})
}

// Render's checks (the launch path's last defence) name the field.
func TestRenderRefusesInvalidValues(t *testing.T) {
	base := func() Spec {
		return Spec{APIServer: "https://x.hcp.eastus.azmk8s.io:443", CA: "Y2E=", MaxPods: 30, Labels: map[string]string{"team": "web"},
			Taints: []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}}
	}
	for _, c := range []struct {
		name string
		edit func(*Spec)
		want string
	}{
		{"label value closing shell quotes", func(s *Spec) { s.Labels["team"] = "x' ; touch /pwned ; '" }, "labels[team]"},
		{"label value adding an environment line", func(s *Spec) { s.Labels["team"] = "a\nKUBELET_FLAGS=--x" }, "labels[team]"},
		{"taint value", func(s *Spec) { s.Taints[0].Value = "a b" }, "taints[0].value"},
		{"API server with a newline", func(s *Spec) { s.APIServer = "https://x\n    token: stolen" }, "apiServer"},
		{"API server over http", func(s *Spec) { s.APIServer = "http://x" }, "apiServer"},
		{"CA not base64", func(s *Spec) { s.CA = "Y2E=\n" }, "ca"},
		{"cluster DNS with a flag", func(s *Spec) { s.ClusterDNS = "10.0.0.10 --anonymous-auth=true" }, "clusterDNS"},
	} {
		s := base()
		c.edit(&s)
		if _, err := Render(s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one naming %s", c.name, err, c.want)
		}
	}
}

// Through Render and back through Parse, as the fake's kubelet boots: labels and taints of any
// strings are either refused or valid by the API server's rules and read back exactly.
func TestPropertyRenderThenBootIsExactOrRefused(t *testing.T) {
	// One string in twenty is hostile, so about half the specs are valid and boot.
	labelish := rapid.Custom(func(t *rapid.T) string {
		switch rapid.IntRange(0, 19).Draw(t, "kind") {
		case 0:
			return hostile().Draw(t, "hostile")
		case 1, 2, 3:
			return rapid.StringMatching(`[a-z]{1,5}\.io/[a-z0-9]{1,6}`).Draw(t, "prefixed")
		}
		return safe().Draw(t, "plain")
	})
	rapid.Check(t, func(t *rapid.T) {
		s := Spec{APIServer: "https://x.hcp.eastus.azmk8s.io:443", CA: "Y2E=", MaxPods: 30,
			Labels: rapid.MapOfN(labelish, labelish, 1, 4).Draw(t, "labels"),
			Taints: []corev1.Taint{{Key: labelish.Draw(t, "taintKey"), Value: labelish.Draw(t, "taintValue"), Effect: corev1.TaintEffectNoExecute}}}
		data, err := Render(s)
		if err != nil {
			if s.check() == nil {
				t.Fatalf("valid values refused: %v", err)
			}
			return
		}
		if err := s.check(); err != nil {
			t.Fatalf("rendered values the API server refuses: %v", err)
		}
		roundTrip(t, s, data)
	})
}
