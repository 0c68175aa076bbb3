package userdata

import (
	"bytes"
	"mime"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"
	corev1 "k8s.io/api/core/v1"
	"pgregory.net/rapid"
	"sigs.k8s.io/yaml"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// breakers are the pieces that end or escape a value in one of the user-data formats: shell
// quotes, substitutions and separators; YAML indicators and document markers; TOML table and
// multi-line string delimiters; the MIME boundary; control and non-ASCII characters.
var breakers = []string{
	"'", `"`, "\\", "\n", "\r\n", "\t", " ", "$(touch pwned)", "`touch pwned`", "${IFS}", "$HOME", ";", "&&", "|", ">", "<",
	"*", "?", "~", "{a,b}", "!", "#", "x' ; touch pwned ; '", "]]", "[[", "[", "]", `"""`, "'''", "=", ",", ":", "- ", "---",
	"...", "&anchor", "*alias", "!!binary", "%YAML", "@", "{", "}", "--" + Boundary, "é", "日本", "\u2028", "\u0085", "\x7f", "\x01", "\x1b[0m",
}

// hostile generates strings made of breakers and arbitrary (valid UTF-8) text.
func hostile() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		pieces := rapid.SliceOfN(rapid.OneOf(rapid.SampledFrom(breakers), rapid.String()), 0, 6).Draw(t, "pieces")
		return strings.Join(pieces, "")
	})
}

func hostileSpec(t *rapid.T, family string) Spec {
	effects := []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}
	s := Spec{Family: family, ClusterName: hostile().Draw(t, "cluster"), APIServerEndpoint: hostile().Draw(t, "endpoint"),
		CertificateAuthority: hostile().Draw(t, "ca"), ServiceCIDR: hostile().Draw(t, "cidr"),
		Labels: rapid.MapOfN(hostile(), hostile(), 0, 4).Draw(t, "labels")}
	for i := range rapid.IntRange(0, 3).Draw(t, "taints") {
		_ = i
		s.Taints = append(s.Taints, corev1.Taint{Key: hostile().Draw(t, "taintKey"), Value: hostile().Draw(t, "taintValue"),
			Effect: rapid.SampledFrom(effects).Draw(t, "effect")})
	}
	if rapid.Bool().Draw(t, "maxPods") {
		mp := rapid.Int32().Draw(t, "maxPodsValue")
		s.Kubelet = &apisv1.KubeletConfiguration{MaxPods: &mp}
	}
	s.InstanceStorePolicy = rapid.SampledFrom([]string{"", apisv1.InstanceStorePolicyRAID0}).Draw(t, "instanceStorePolicy")
	return s
}

// kubeletArgs is what Dovetail means the kubelet to get for s, in one string per flag.
func kubeletArgs(s Spec) []string {
	var args []string
	if len(s.Labels) > 0 {
		args = append(args, "--node-labels="+LabelsFlag(s.Labels))
	}
	if len(s.Taints) > 0 {
		args = append(args, "--register-with-taints="+TaintsFlag(s.Taints))
	}
	return args
}

// AL2: whatever the values, bash parses the script into exactly one bootstrap.sh call whose
// words are exactly the values given (mvdan.cc/sh's bash parser stands in for bash; the bash
// test below checks the quoting against bash itself).
func TestPropertyAL2WordsAreTheValues(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := hostileSpec(t, apisv1.AMIFamilyAL2)
		out, err := renderAL2(s)
		if hasNUL(s) {
			if err == nil {
				t.Fatalf("a NUL byte was rendered:\n%q", out)
			}
			return
		}
		if err != nil {
			t.Fatalf("render: %v", err)
		}
		want := []string{s.ClusterName, "--apiserver-endpoint", s.APIServerEndpoint, "--b64-cluster-ca", s.CertificateAuthority}
		extra := kubeletArgs(s)
		if s.Kubelet != nil {
			extra = append(extra, "--max-pods="+itoa(*s.Kubelet.MaxPods))
		}
		if len(extra) > 0 {
			want = append(want, "--kubelet-extra-args", strings.Join(extra, " "))
		}
		if s.InstanceStorePolicy == apisv1.InstanceStorePolicyRAID0 {
			want = append(want, "--local-disks", "raid0") // Karpenter's eksbootstrap.go
		}
		got, err := commandArgs(out, al2Bootstrap)
		if err != nil {
			t.Fatalf("parse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("bootstrap.sh words\n got %q\nwant %q\nscript:\n%s", got, want, out)
		}
		// Exactly one command besides the shebang line: nothing a value holds became a command.
		if n := strings.Count(out, al2Bootstrap); n < 1 {
			t.Fatalf("no bootstrap call:\n%s", out)
		}
	})
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// hasNUL says whether a value of s holds a character outside YAML's printable set (NUL among
// them), which every renderer must refuse.
func hasNUL(s Spec) bool {
	all := []string{s.ClusterName, s.APIServerEndpoint, s.CertificateAuthority, s.ServiceCIDR}
	for k, v := range s.Labels {
		all = append(all, k, v)
	}
	for _, t := range s.Taints {
		all = append(all, t.Key, t.Value)
	}
	for _, r := range strings.Join(all, "") {
		if !yamlPrintable(r) {
			return true
		}
	}
	return false
}

// The one quoting function against bash itself: a script of script.command("printf", ...) with
// hostile words prints exactly those words, and runs nothing else (no file appears in its
// working directory).
func TestPropertyShellQuotingAgainstBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash on this machine")
	}
	dir := t.TempDir()
	rapid.Check(t, func(t *rapid.T) {
		words := rapid.SliceOfN(hostile().Filter(func(w string) bool { return !strings.Contains(w, "\x00") }), 1, 5).Draw(t, "words")
		var b script
		if err := b.command(append([]string{"printf", `%s\0`}, words...)...); err != nil {
			t.Fatalf("quote: %v", err)
		}
		cmd := exec.Command(bash, "--norc", "--noprofile", "-c", b.String())
		cmd.Dir = dir
		// LANG=C: the words must not depend on the locale bash runs in.
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "LANG=C"}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, b.String())
		}
		got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		if !reflect.DeepEqual(got, words) {
			t.Fatalf("bash printed %q, want %q\nscript: %s", got, words, b.String())
		}
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			t.Fatalf("the script ran a command: %s exists\nscript: %s", filepath.Join(dir, entries[0].Name()), b.String())
		}
	})
}

// AL2023: the NodeConfig part reads back (YAML) as exactly the values given, and the MIME
// document has exactly its parts.
func TestPropertyAL2023NodeConfigIsTheValues(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := hostileSpec(t, apisv1.AMIFamilyAL2023)
		s.Custom = rapid.SampledFrom([]string{"", "#!/bin/bash\necho hi\n", "#!/bin/bash\necho '\r\n--" + Boundary + "--\r\n'\n"}).Draw(t, "custom")
		out, err := renderAL2023(s)
		if strings.Contains(s.Custom, "--"+Boundary) || hasNUL(s) {
			if err == nil {
				t.Fatalf("a custom part holding the boundary was rendered:\n%s", out)
			}
			return
		}
		if err != nil {
			t.Fatalf("render: %v", err)
		}
		parts, err := readParts(out)
		if err != nil {
			t.Fatalf("MIME: %v\n%s", err, out)
		}
		wantParts := 1
		if s.Custom != "" {
			wantParts = 2
		}
		if len(parts) != wantParts {
			t.Fatalf("%d MIME parts, want %d\n%s", len(parts), wantParts, out)
		}
		last := parts[len(parts)-1]
		if mt, _, _ := mime.ParseMediaType(last.contentType); mt != NodeConfigContentType {
			t.Fatalf("last part is %q", last.contentType)
		}
		var nc nodeConfig
		if err := yaml.UnmarshalStrict(bytes.TrimPrefix(last.body, []byte("---\n")), &nc); err != nil {
			t.Fatalf("NodeConfig YAML: %v\n%s", err, last.body)
		}
		c := nc.Spec.Cluster
		if c == nil || c.Name != s.ClusterName || c.APIServerEndpoint != s.APIServerEndpoint || c.CertificateAuthority != s.CertificateAuthority || c.CIDR != s.ServiceCIDR {
			t.Fatalf("cluster = %+v, want %q %q %q %q", c, s.ClusterName, s.APIServerEndpoint, s.CertificateAuthority, s.ServiceCIDR)
		}
		var flags []string
		if nc.Spec.Kubelet != nil {
			flags = nc.Spec.Kubelet.Flags
		}
		if want := kubeletArgs(s); !reflect.DeepEqual(flags, want) {
			t.Fatalf("flags %q, want %q", flags, want)
		}
		var strategy string
		if nc.Spec.Instance != nil {
			strategy = nc.Spec.Instance.LocalStorage.Strategy
		}
		if strategy != s.InstanceStorePolicy {
			t.Fatalf("spec.instance.localStorage.strategy %q, want %q", strategy, s.InstanceStorePolicy)
		}
	})
}

// Bottlerocket: the TOML reads back as exactly the values given, merged over the user's own
// settings (parsed, not concatenated: the user's keys that Dovetail does not set survive).
func TestPropertyBottlerocketTOMLIsTheValues(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := hostileSpec(t, apisv1.AMIFamilyBottlerocket)
		motd := hostile().Draw(t, "motd")
		// The user's own bootstrap command survives beside Dovetail's.
		custom, err := toml.Marshal(map[string]any{"settings": map[string]any{"motd": motd, "kubernetes": map[string]any{"cluster-name": "theirs"},
			"bootstrap-commands": map[string]any{"010-theirs": map[string]any{"commands": [][]string{{"echo", motd}}, "mode": "once"}}}})
		if err != nil {
			t.Fatal(err)
		}
		s.Custom = string(custom)
		out, err := renderBottlerocket(s)
		if hasNUL(s) {
			if err == nil {
				t.Fatalf("a NUL byte was rendered:\n%q", out)
			}
			return
		}
		if err != nil {
			t.Fatalf("render: %v", err)
		}
		var doc struct {
			Settings struct {
				Motd       string `toml:"motd"`
				Kubernetes struct {
					ClusterName string              `toml:"cluster-name"`
					APIServer   string              `toml:"api-server"`
					CA          string              `toml:"cluster-certificate"`
					NodeLabels  map[string]string   `toml:"node-labels"`
					NodeTaints  map[string][]string `toml:"node-taints"`
				} `toml:"kubernetes"`
				BootstrapCommands map[string]struct {
					Commands  [][]string `toml:"commands"`
					Essential bool       `toml:"essential"`
					Mode      string     `toml:"mode"`
				} `toml:"bootstrap-commands"`
			} `toml:"settings"`
		}
		if err := toml.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("TOML: %v\n%s", err, out)
		}
		k := doc.Settings.Kubernetes
		if doc.Settings.Motd != motd || k.ClusterName != s.ClusterName || k.APIServer != s.APIServerEndpoint || k.CA != s.CertificateAuthority {
			t.Fatalf("settings %+v, want motd %q cluster %q", doc.Settings, motd, s.ClusterName)
		}
		if len(s.Labels) > 0 && !reflect.DeepEqual(k.NodeLabels, s.Labels) {
			t.Fatalf("node-labels %q, want %q", k.NodeLabels, s.Labels)
		}
		want := map[string][]string{}
		for _, tt := range s.Taints {
			want[tt.Key] = append(want[tt.Key], tt.Value+":"+string(tt.Effect))
		}
		if len(s.Taints) > 0 && !reflect.DeepEqual(k.NodeTaints, want) {
			t.Fatalf("node-taints %q, want %q", k.NodeTaints, want)
		}
		cmds := doc.Settings.BootstrapCommands
		if theirs := cmds["010-theirs"]; !reflect.DeepEqual(theirs.Commands, [][]string{{"echo", motd}}) || theirs.Mode != "once" {
			t.Fatalf("the user's bootstrap command became %+v", theirs)
		}
		mount, ok := cmds["000-mount-instance-storage"]
		if ok != (s.InstanceStorePolicy == apisv1.InstanceStorePolicyRAID0) || len(cmds) != map[bool]int{true: 2, false: 1}[ok] {
			t.Fatalf("bootstrap-commands %+v for instanceStorePolicy %q", cmds, s.InstanceStorePolicy)
		}
		if ok && (len(mount.Commands) != 2 || !mount.Essential || mount.Mode != "always") {
			t.Fatalf("000-mount-instance-storage %+v", mount)
		}
	})
}

// Custom: the NodeClass's userData is the whole user data, byte for byte (Karpenter's Custom
// family: "the user data is passed through as is"); Dovetail adds nothing a value could break.
func TestPropertyCustomIsPassedThrough(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := hostileSpec(t, apisv1.AMIFamilyCustom)
		s.Custom = hostile().Draw(t, "custom")
		s.Labels, s.Taints = nil, nil
		out, err := Render(s)
		if err != nil || out != s.Custom {
			t.Fatalf("Render = %q, %v, want %q", out, err, s.Custom)
		}
	})
}

// Values no format carries faithfully are refused by every renderer, naming the field.
func TestNULAndInvalidUTF8Refused(t *testing.T) {
	for _, f := range []func(Spec) (string, error){renderAL2, renderAL2023, renderBottlerocket} {
		for _, bad := range []string{"a\x00b", "a\xffb"} {
			s := spec(apisv1.AMIFamilyAL2)
			s.Labels = map[string]string{"team": bad}
			if _, err := f(s); err == nil || !strings.Contains(err.Error(), "labels[team]") {
				t.Errorf("label %q: err = %v, want one naming labels[team]", bad, err)
			}
		}
	}
}

// Through Render and back through Parse, as the fake's kubelet boots: for labels and taints of
// any strings, either Render refuses them or they are valid by the API server's rules and the node
// registers with exactly them.
func TestPropertyRenderThenBootIsExactOrRefused(t *testing.T) {
	// One string in twenty is hostile, so about half the specs are valid and boot.
	labelish := rapid.Custom(func(t *rapid.T) string {
		switch rapid.IntRange(0, 19).Draw(t, "kind") {
		case 0:
			return hostile().Draw(t, "hostile")
		case 1, 2, 3:
			return rapid.StringMatching(`[a-z]{1,5}\.io/[a-z0-9]{1,6}`).Draw(t, "prefixed")
		}
		return rapid.StringMatching(`[a-z0-9]([a-z0-9._-]{0,8}[a-z0-9])?`).Draw(t, "plain")
	})
	renderedOK := 0
	rapid.Check(t, func(t *rapid.T) {
		family := rapid.SampledFrom([]string{apisv1.AMIFamilyAL2, apisv1.AMIFamilyAL2023, apisv1.AMIFamilyBottlerocket}).Draw(t, "family")
		s := spec(family)
		s.Labels = rapid.MapOfN(labelish, labelish, 1, 4).Draw(t, "labels")
		s.Taints = []corev1.Taint{{Key: labelish.Draw(t, "taintKey"), Value: labelish.Draw(t, "taintValue"), Effect: corev1.TaintEffectNoSchedule}}
		s.InstanceStorePolicy = rapid.SampledFrom([]string{"", apisv1.InstanceStorePolicyRAID0}).Draw(t, "instanceStorePolicy")
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
		renderedOK++
		n, err := Parse(family, data)
		if err != nil {
			t.Fatalf("boot: %v\n%s", err, data)
		}
		if !reflect.DeepEqual(n.Labels, s.Labels) || !reflect.DeepEqual(n.Taints, s.Taints) {
			t.Fatalf("node registers with %q %v, want %q %v\n%s", n.Labels, n.Taints, s.Labels, s.Taints, data)
		}
		if n.LocalStorage != s.InstanceStorePolicy {
			t.Fatalf("the node's local storage %q, want %q\n%s", n.LocalStorage, s.InstanceStorePolicy, data)
		}
	})
	// The property means little if nothing rendered: about half the 100 specs should.
	if renderedOK < 10 {
		t.Errorf("only %d specs rendered and booted", renderedOK)
	}
}
