package userdata

import (
	"reflect"
	"strings"
	"testing"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// The Windows families' user data is Karpenter's PowerShell script (bootstrap/windows.go):
// the tags, the bootstrap variable, single-quoted values and the kubelet flags in one
// -KubeletExtraArgs string; the fake kubelet reads back what was rendered.
func TestWindowsRenderParse(t *testing.T) {
	for _, family := range []string{apisv1.AMIFamilyWindows2019, apisv1.AMIFamilyWindows2022, apisv1.AMIFamilyWindows2025} {
		s := spec(family)
		s.Kubelet.ClusterDNS = []string{"10.100.0.10"}
		s.Custom = "New-Item -Path 'C:\\temp\\' -ItemType Directory"
		data, err := Render(s)
		if err != nil {
			t.Fatalf("%s: %v", family, err)
		}
		want := "<powershell>\n" +
			"New-Item -Path 'C:\\temp\\' -ItemType Directory\n" +
			`[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"` + "\n" +
			`& $EKSBootstrapScriptFile -EKSClusterName 'prod' -APIServerEndpoint 'https://api.example' -Base64ClusterCA 'Q0E='` +
			` -KubeletExtraArgs '--node-labels="a=1,b=2" --register-with-taints="gpu:NoSchedule,team=ml:NoExecute" --max-pods=58 --kube-reserved="cpu=100m"'` +
			` -DNSClusterIP '10.100.0.10' -ServiceCIDR '10.100.0.0/16'` + "\n</powershell>"
		if data != want {
			t.Fatalf("%s: user data\n%s\nwant\n%s", family, data, want)
		}
		n, err := Parse(family, data)
		if err != nil {
			t.Fatalf("%s: %v", family, err)
		}
		if n.ClusterName != "prod" || n.APIServerEndpoint != "https://api.example" || !reflect.DeepEqual(n.Labels, s.Labels) || !reflect.DeepEqual(n.Taints, s.Taints) {
			t.Errorf("%s: parsed %+v", family, n)
		}
		if k := n.Kubelet; k == nil || *k.MaxPods != 58 || k.KubeReserved["cpu"] != "100m" || !reflect.DeepEqual(k.ClusterDNS, []string{"10.100.0.10"}) {
			t.Errorf("%s: kubelet %+v", family, n.Kubelet)
		}
	}
}

// A quote in a value is doubled inside the single-quoted string (about_Quoting_Rules), the
// typographic single quotes too, and the parser reads the value back unchanged.
func TestWindowsQuoting(t *testing.T) {
	for _, v := range []string{"it's", "a\u2019b", "''", "$env:x", "`n"} {
		q := psQuote(v)
		words, err := psWords("& $EKSBootstrapScriptFile -EKSClusterName " + q)
		if err != nil || len(words) != 4 || words[3].text != v {
			t.Errorf("%q quoted %s: words %+v, %v", v, q, words, err)
		}
	}
}

// Malformed Windows user data boots no node, each refusal naming what is wrong.
func TestWindowsParseRefuses(t *testing.T) {
	good := `[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"` + "\n"
	for name, tc := range map[string]struct{ data, want string }{
		"no tags":         {good + "& $EKSBootstrapScriptFile -EKSClusterName 'c'", "no <powershell>"},
		"not closed":      {"<powershell>\n" + good + "& $EKSBootstrapScriptFile -EKSClusterName 'c'", "never closed"},
		"no call":         {"<powershell>\n" + good + "</powershell>", "no call"},
		"no variable":     {"<powershell>\n& $EKSBootstrapScriptFile -EKSClusterName 'c'\n</powershell>", "before it names"},
		"unknown param":   {"<powershell>\n" + good + "& $EKSBootstrapScriptFile -EKSClusterName 'c' -Bogus 'x'\n</powershell>", "no parameter -Bogus"},
		"no cluster":      {"<powershell>\n" + good + "& $EKSBootstrapScriptFile -APIServerEndpoint 'https://x'\n</powershell>", "EKSClusterName is missing"},
		"expanding value": {"<powershell>\n" + good + "& $EKSBootstrapScriptFile -EKSClusterName \"$x\"\n</powershell>", "double-quoted"},
		"open quote":      {"<powershell>\n" + good + "& $EKSBootstrapScriptFile -EKSClusterName 'c\n</powershell>", "not closed"},
		"twice":           {"<powershell>\n" + good + "& $EKSBootstrapScriptFile -EKSClusterName 'c'\n& $EKSBootstrapScriptFile -EKSClusterName 'd'\n</powershell>", "twice"},
		"bad label":       {"<powershell>\n" + good + "& $EKSBootstrapScriptFile -EKSClusterName 'c' -KubeletExtraArgs '--node-labels=\"a\"'\n</powershell>", "not key=value"},
		"after close":     {"<powershell>\n</powershell>\n" + good + "& $EKSBootstrapScriptFile -EKSClusterName 'c'", "no call"},
	} {
		_, err := Parse(apisv1.AMIFamilyWindows2022, tc.data)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
}

// A NodeClass's userData holding the script tags is refused: EC2Launch would stop at its
// </powershell> and never run the bootstrap.
func TestWindowsRenderRefusesTags(t *testing.T) {
	s := spec(apisv1.AMIFamilyWindows2022)
	s.Custom = "Write-Host hi\n</PowerShell>\n<powershell>"
	if _, err := Render(s); err == nil || !strings.Contains(err.Error(), "spec.userData") {
		t.Fatalf("error %v, want one naming spec.userData", err)
	}
}
