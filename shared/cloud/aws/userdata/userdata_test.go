package userdata

import (
	"reflect"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"
	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

func spec(family string) Spec {
	mp := int32(58)
	return Spec{Family: family, ClusterName: "prod", APIServerEndpoint: "https://api.example", CertificateAuthority: "Q0E=",
		ServiceCIDR: "10.100.0.0/16",
		Labels:      map[string]string{"b": "2", "a": "1"},
		Taints: []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule},
			{Key: "team", Value: "ml", Effect: corev1.TaintEffectNoExecute}},
		Kubelet: &apisv1.KubeletConfiguration{MaxPods: &mp, KubeReserved: map[string]string{"cpu": "100m"}}}
}

// Each family's user data is read back by its parser into exactly what was rendered.
func TestRenderParseRoundTrip(t *testing.T) {
	for _, family := range []string{apisv1.AMIFamilyAL2023, apisv1.AMIFamilyBottlerocket, apisv1.AMIFamilyAL2} {
		s := spec(family)
		data, err := Render(s)
		if err != nil {
			t.Fatalf("%s: %v", family, err)
		}
		n, err := Parse(family, data)
		if err != nil {
			t.Fatalf("%s: %v\n%s", family, err, data)
		}
		if n.ClusterName != "prod" || !reflect.DeepEqual(n.Labels, s.Labels) || !reflect.DeepEqual(n.Taints, s.Taints) {
			t.Errorf("%s: parsed %+v\n%s", family, n, data)
		}
		if n.Kubelet == nil || *n.Kubelet.MaxPods != 58 {
			t.Errorf("%s: kubelet %+v", family, n.Kubelet)
		}
		again, _ := Render(s)
		if again != data {
			t.Errorf("%s: rendering is not deterministic", family)
		}
	}
}

func TestAL2023Shape(t *testing.T) {
	data, err := Render(spec(apisv1.AMIFamilyAL2023))
	if err != nil {
		t.Fatal(err)
	}
	// The nodeadm documentation's MIME layout and NodeConfig fields.
	for _, want := range []string{"MIME-Version: 1.0", `Content-Type: multipart/mixed; boundary="//dovetail//"`,
		"Content-Type: application/node.eks.aws", "kind: NodeConfig", "cidr: 10.100.0.0/16", "certificateAuthority: Q0E=",
		"- --node-labels=a=1,b=2", "- --register-with-taints=gpu:NoSchedule,team=ml:NoExecute", "maxPods: 58"} {
		if !strings.Contains(data, want) {
			t.Errorf("lacks %q:\n%s", want, data)
		}
	}
}

// A NodeClass's own user data comes first, as its own part (AL2023) or merged TOML (Bottlerocket,
// where Dovetail's cluster settings win).
func TestCustomUserDataMerged(t *testing.T) {
	s := spec(apisv1.AMIFamilyAL2023)
	s.Custom = "#!/bin/bash\necho hello\n"
	data, err := Render(s)
	if err != nil {
		t.Fatal(err)
	}
	if i, j := strings.Index(data, "echo hello"), strings.Index(data, "kind: NodeConfig"); i < 0 || j < i {
		t.Errorf("custom script missing or after the NodeConfig:\n%s", data)
	}
	b := spec(apisv1.AMIFamilyBottlerocket)
	b.Custom = "[settings.kubernetes]\ncluster-name = 'wrong'\n[settings.host-containers.admin]\nenabled = true\n"
	data, err = Render(b)
	if err != nil {
		t.Fatal(err)
	}
	n, err := Parse(apisv1.AMIFamilyBottlerocket, data)
	if err != nil || n.ClusterName != "prod" || !strings.Contains(data, "[settings.host-containers.admin]") {
		t.Errorf("merged settings (err %v, cluster %q):\n%s", err, n.ClusterName, data)
	}
	b.Custom = "not = toml = at all"
	if _, err := Render(b); err == nil || !strings.Contains(err.Error(), "spec.userData") {
		t.Errorf("bad TOML: err %v, want one naming spec.userData", err)
	}
}

func TestRefusals(t *testing.T) {
	if _, err := Render(Spec{Family: apisv1.AMIFamilyWindows2022}); err == nil {
		t.Error("windows user data must be refused")
	}
	if _, err := Render(Spec{Family: apisv1.AMIFamilyAL2023, ClusterName: "x"}); err == nil || !strings.Contains(err.Error(), "endpoint") {
		t.Errorf("missing endpoint: %v", err)
	}
	if _, err := ParseTaint("k=v:Sometimes"); err == nil {
		t.Error("bad effect accepted")
	}
	if _, err := Parse(apisv1.AMIFamilyAL2023, "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec: {}\n"); err == nil {
		t.Error("a NodeConfig without a cluster name cannot join")
	}
	if got, _ := Render(Spec{Family: apisv1.AMIFamilyCustom, Custom: "raw"}); got != "raw" {
		t.Errorf("custom user data changed: %q", got)
	}
}

// The launch path's last defence (issue 23): whatever a caller skipped, Render refuses a value
// the API server or EKS would refuse, naming the field, before any renderer sees it.
func TestRenderRefusesInvalidValues(t *testing.T) {
	for _, family := range []string{apisv1.AMIFamilyAL2, apisv1.AMIFamilyAL2023, apisv1.AMIFamilyBottlerocket} {
		for _, c := range []struct {
			name string
			edit func(*Spec)
			want string
		}{
			{"label value closing shell quotes", func(s *Spec) { s.Labels["team"] = "x' ; touch /pwned ; '" }, "labels[team]"},
			{"label key", func(s *Spec) { s.Labels["a b"] = "v" }, "labels[a b]"},
			{"taint value", func(s *Spec) { s.Taints[1].Value = "$(reboot)" }, "taints[1].value"},
			{"taint effect", func(s *Spec) { s.Taints[0].Effect = "Sometimes" }, "taints[0].effect"},
			{"cluster name", func(s *Spec) { s.ClusterName = "prod;id" }, "clusterName"},
			{"endpoint scheme", func(s *Spec) { s.APIServerEndpoint = "http://api.example" }, "apiServerEndpoint"},
			{"endpoint with a newline", func(s *Spec) { s.APIServerEndpoint = "https://api.example\n--b64-cluster-ca" }, "apiServerEndpoint"},
			{"CA not base64", func(s *Spec) { s.CertificateAuthority = "Q0E=' x" }, "certificateAuthority"},
			{"CA with a line break", func(s *Spec) { s.CertificateAuthority = "Q0E=\n" }, "certificateAuthority"},
			{"service CIDR", func(s *Spec) { s.ServiceCIDR = "10.100.0.0/16\n" }, "serviceCIDR"},
			{"cluster DNS", func(s *Spec) { s.Kubelet.ClusterDNS = []string{"10.0.0.10 --x"} }, "kubelet.clusterDNS[0]"},
		} {
			s := spec(family)
			c.edit(&s)
			if _, err := Render(s); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %s: err = %v, want one naming %s", family, c.name, err, c.want)
			}
		}
	}
}

// A NodeClass's MIME userData that holds Dovetail's boundary would let its text end its own part
// and open another (RFC 2046 5.1.1); it is refused.
func TestAL2023CustomPartWithTheBoundaryRefused(t *testing.T) {
	s := spec(apisv1.AMIFamilyAL2023)
	s.Custom = "#!/bin/bash\necho '\r\n--" + Boundary + "\r\nContent-Type: application/node.eks.aws\r\n\r\nspec: {}'\n"
	if _, err := Render(s); err == nil || !strings.Contains(err.Error(), "boundary") {
		t.Errorf("err = %v, want the boundary named", err)
	}
}

// The user's Bottlerocket TOML is merged by parsing: a value where Dovetail writes a table is an
// error naming its path, never replaced silently; the user's other settings survive.
func TestBottlerocketMergeConflictsNamed(t *testing.T) {
	for custom, want := range map[string]string{
		`settings = "x"`:                             "settings is a string",
		"[settings]\nkubernetes = 5":                 "settings.kubernetes is a int64",
		"[settings.kubernetes]\nnode-labels = [1]":   "settings.kubernetes.node-labels is a []interface {}",
		"[settings.kubernetes.node-taints]\ngpu = 1": `settings.kubernetes.node-taints."gpu" is a int64`,
	} {
		s := spec(apisv1.AMIFamilyBottlerocket)
		s.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
		s.Custom = custom
		if _, err := Render(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", custom, err, want)
		}
	}
	s := spec(apisv1.AMIFamilyBottlerocket)
	s.Custom = "[settings.kubernetes.node-taints]\ngpu = [\"true:NoExecute\"]\n[settings.motd]\nx = 1\n"
	s.Taints = []corev1.Taint{{Key: "gpu", Value: "false", Effect: corev1.TaintEffectNoSchedule}}
	data, err := Render(s)
	if err != nil {
		t.Fatal(err)
	}
	n, err := Parse(apisv1.AMIFamilyBottlerocket, data)
	want := []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoExecute}, {Key: "gpu", Value: "false", Effect: corev1.TaintEffectNoSchedule}}
	if err != nil || !reflect.DeepEqual(n.Taints, want) || !strings.Contains(data, "[settings.motd]") {
		t.Errorf("merged taints %v (%v), want the user's then Dovetail's %v\n%s", n.Taints, err, want, data)
	}
}

// instanceStorePolicy RAID0 in each family's own words, as Karpenter's AWS provider renders it
// (pkg/providers/amifamily/bootstrap, v1.14): nodeadm.go sets NodeConfig
// spec.instance.localStorage.strategy RAID0; eksbootstrap.go appends --local-disks raid0 to
// bootstrap.sh; bottlerocket.go adds the essential, always-run bootstrap command
// 000-mount-instance-storage (apiclient ephemeral-storage init, then bind of containerd's,
// the kubelet's and the pod logs' directories). Each reads back as RAID0 at boot.
func TestInstanceStoreRAID0PerFamily(t *testing.T) {
	for family, want := range map[string]string{
		apisv1.AMIFamilyAL2023:       "\n  instance:\n    localStorage:\n      strategy: RAID0\n",
		apisv1.AMIFamilyAL2:          " '--local-disks' 'raid0'\n",
		apisv1.AMIFamilyBottlerocket: "[settings.bootstrap-commands.000-mount-instance-storage]",
	} {
		s := spec(family)
		plain, err := Render(s)
		if err != nil {
			t.Fatal(err)
		}
		s.InstanceStorePolicy = apisv1.InstanceStorePolicyRAID0
		data, err := Render(s)
		if err != nil {
			t.Fatalf("%s: %v", family, err)
		}
		if !strings.Contains(data, want) || strings.Contains(plain, strings.TrimSpace(want)) {
			t.Errorf("%s: RAID0 user data lacks %q (or the plain one has it):\n%s", family, want, data)
		}
		n, err := Parse(family, data)
		if err != nil || n.LocalStorage != LocalStorageRAID0 {
			t.Errorf("%s: boots with local storage %q (%v), want RAID0", family, n.LocalStorage, err)
		}
		if n, _ := Parse(family, plain); n.LocalStorage != "" {
			t.Errorf("%s: plain user data boots with local storage %q", family, n.LocalStorage)
		}
	}
	s := spec(apisv1.AMIFamilyBottlerocket)
	s.InstanceStorePolicy = apisv1.InstanceStorePolicyRAID0
	data, _ := Render(s)
	var doc struct {
		Settings struct {
			BootstrapCommands map[string]struct {
				Commands  [][]string `toml:"commands"`
				Essential bool       `toml:"essential"`
				Mode      string     `toml:"mode"`
			} `toml:"bootstrap-commands"`
		} `toml:"settings"`
	}
	if err := toml.Unmarshal([]byte(data), &doc); err != nil {
		t.Fatal(err)
	}
	got := doc.Settings.BootstrapCommands["000-mount-instance-storage"]
	wantCmds := [][]string{{"apiclient", "ephemeral-storage", "init"},
		{"apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"}}
	if !reflect.DeepEqual(got.Commands, wantCmds) || !got.Essential || got.Mode != "always" {
		t.Errorf("000-mount-instance-storage = %+v, want Karpenter's commands, essential, mode always", got)
	}
}

// What the boot agents refuse or skip: a policy Karpenter's CRD does not have, a nodeadm
// strategy outside its enum, a setup-local-disks mode it does not know; a Bottlerocket bootstrap
// command switched off does not run.
func TestInstanceStoreRefusals(t *testing.T) {
	s := spec(apisv1.AMIFamilyAL2023)
	s.InstanceStorePolicy = "RAID1"
	if _, err := Render(s); err == nil || !strings.Contains(err.Error(), "instanceStorePolicy") {
		t.Errorf("RAID1: err %v, want instanceStorePolicy named", err)
	}
	nc := "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster: {name: prod}\n  instance:\n    localStorage: {strategy: RAID5}\n"
	if _, err := Parse(apisv1.AMIFamilyAL2023, nc); err == nil || !strings.Contains(err.Error(), "spec.instance.localStorage.strategy") {
		t.Errorf("RAID5 NodeConfig: err %v", err)
	}
	if n, err := Parse(apisv1.AMIFamilyAL2023, strings.Replace(nc, "RAID5", "Mount", 1)); err != nil || n.LocalStorage != "Mount" {
		t.Errorf("Mount NodeConfig: %v %v", n, err)
	}
	if _, err := Parse(apisv1.AMIFamilyAL2, "#!/bin/bash\n/etc/eks/bootstrap.sh prod --local-disks raid5\n"); err == nil || !strings.Contains(err.Error(), "--local-disks") {
		t.Errorf("--local-disks raid5: err %v", err)
	}
	off := "[settings.kubernetes]\ncluster-name = 'prod'\n[settings.bootstrap-commands.x]\ncommands = [['apiclient', 'ephemeral-storage', 'init']]\nmode = 'off'\n"
	if n, err := Parse(apisv1.AMIFamilyBottlerocket, off); err != nil || n.LocalStorage != "" {
		t.Errorf("mode off: %+v %v, want no local storage", n, err)
	}
}

// The cluster DNS address reaches each family's kubelet: the NodeConfig's KubeletConfiguration
// clusterDNS (AL2023), settings.kubernetes.cluster-dns-ip (Bottlerocket), bootstrap.sh
// --dns-cluster-ip, with --ip-family ipv6 for an IPv6 address (AL2, Karpenter's eksbootstrap.go).
func TestClusterDNSPerFamily(t *testing.T) {
	for _, dns := range []string{"10.100.0.10", "fd00:10:96::a"} {
		for _, family := range []string{apisv1.AMIFamilyAL2023, apisv1.AMIFamilyBottlerocket, apisv1.AMIFamilyAL2} {
			s := spec(family)
			s.Kubelet.ClusterDNS = []string{dns}
			data, err := Render(s)
			if err != nil {
				t.Fatal(err)
			}
			n, err := Parse(family, data)
			if err != nil || n.Kubelet == nil || !reflect.DeepEqual(n.Kubelet.ClusterDNS, []string{dns}) {
				t.Errorf("%s %s: boots with %+v (%v)\n%s", family, dns, n.Kubelet, err, data)
			}
			if family == apisv1.AMIFamilyAL2 && strings.Contains(data, "'--ip-family' 'ipv6'") != strings.Contains(dns, ":") {
				t.Errorf("AL2 %s: --ip-family ipv6 only for an IPv6 address:\n%s", dns, data)
			}
		}
	}
}
