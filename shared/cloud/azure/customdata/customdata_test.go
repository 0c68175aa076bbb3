package customdata

import (
	"encoding/base64"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// testCA is a self-signed P-256 certificate (testdata/ca.pem, made with openssl req -x509).
func testCA(t tb) string {
	t.Helper()
	pemBytes, err := os.ReadFile("testdata/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(pemBytes)
}

// ubuntu2204 is an on-demand Standard_D2s_v5 node of the Ubuntu2204 family (Gen2, amd64).
func ubuntu2204(t tb) Contract {
	return Contract{
		APIServerFQDN: "dovetail-abc123.hcp.eastus.azmk8s.io", ClusterCA: testCA(t), TLSBootstrapToken: "abcdef.0123456789abcdef",
		KubernetesVersion: "1.33.2", Arch: "amd64",
		TenantID: "11111111-1111-1111-1111-111111111111", SubscriptionID: "00000000-0000-0000-0000-000000000000",
		ResourceGroup: "MC_rg_dovetail_eastus", Location: "eastus", UserAssignedIdentityID: "22222222-2222-2222-2222-222222222222",
		VNet: "aks-vnet-12345678", VNetResourceGroup: "MC_rg_dovetail_eastus", Subnet: "aks-subnet", NSG: "aks-agentpool-12345678-nsg",
		NetworkPlugin: "azure", NetworkPolicy: "",
		NodeImageVersion: "AKSUbuntu-2204gen2containerd-202611.18.0",
		Labels:           map[string]string{"karpenter.sh/nodepool": "default", "kubernetes.azure.com/mode": "user", "kubernetes.azure.com/role": "agent"},
		Taints:           []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}},
		Kubelet: KubeletConfig{ClusterDNS: "10.0.0.10", MaxPods: 250,
			KubeReserved: map[string]string{"cpu": "100m", "memory": "1843Mi"}, EvictionHard: map[string]string{"memory.available": "100Mi"}},
	}
}

// azureLinuxArm64 is a spot Standard_D4ps_v5 node of the AzureLinux family (Gen2, arm64) with
// a kubelet configuration and a sysctl from its AKSNodeClass.
func azureLinuxArm64(t tb) Contract {
	c := ubuntu2204(t)
	c.Arch = "arm64"
	c.NodeImageVersion = "AKSAzureLinux-V3gen2arm64-202611.18.0"
	c.NetworkPolicy = "cilium"
	c.Labels = map[string]string{"karpenter.sh/nodepool": "spot", "kubernetes.azure.com/mode": "user", "kubernetes.azure.com/role": "agent",
		"kubernetes.azure.com/scalesetpriority": "spot", "kubernetes.azure.com/os-sku": "AzureLinux"}
	c.Taints = nil
	c.Kubelet = KubeletConfig{ClusterDNS: "10.0.0.10", MaxPods: 30, CPUManagerPolicy: "static", ImageGCHigh: 90, ImageGCLow: 70,
		ContainerLogMaxSize: "50Mi", ContainerLogMaxFiles: 5, AllowedUnsafeSysctls: []string{"net.core.somaxconn", "kernel.msg*"}}
	c.Sysctls = map[string]string{"net.core.somaxconn": "16384", "vm.max_map_count": "262144"}
	return c
}

// The Ubuntu2204 node, checked by hand: the kubelet binary URL from version and arch, the
// labels as one sorted list with the image version, every flag the kubelet is given.
func TestUbuntu2204HandChecked(t *testing.T) {
	c := ubuntu2204(t)
	data, err := Render(c)
	if err != nil {
		t.Fatal(err)
	}
	n, err := Read(data)
	if err != nil {
		t.Fatal(err)
	}
	v := n.Variables
	for name, want := range map[string]string{
		"KUBE_BINARY_URL":           "https://acs-mirror.azureedge.net/kubernetes/v1.33.2/binaries/kubernetes-node-linux-amd64.tar.gz",
		"CNI_PLUGINS_URL":           "https://acs-mirror.azureedge.net/cni-plugins/v1.1.1/binaries/cni-plugins-linux-amd64-v1.1.1.tgz",
		"API_SERVER_NAME":           "dovetail-abc123.hcp.eastus.azmk8s.io",
		"TLS_BOOTSTRAP_TOKEN":       "abcdef.0123456789abcdef",
		"KUBE_CA_CRT":               c.ClusterCA,
		"NETWORK_PLUGIN":            "azure",
		"NETWORK_POLICY":            "",
		"RESOURCE_GROUP":            "MC_rg_dovetail_eastus",
		"CONTAINER_RUNTIME":         "containerd",
		"USER_ASSIGNED_IDENTITY_ID": "22222222-2222-2222-2222-222222222222",
		"GPU_NODE":                  "false",
		"SYSCTL_CONTENT":            "",
		"KUBELET_NODE_LABELS": "karpenter.sh/nodepool=default,kubernetes.azure.com/mode=user," +
			"kubernetes.azure.com/node-image-version=AKSUbuntu-2204gen2containerd-202611.18.0,kubernetes.azure.com/role=agent",
	} {
		if v[name] != want {
			t.Errorf("%s = %q, want %q", name, v[name], want)
		}
	}
	for flag, want := range map[string]string{
		"--max-pods": "250", "--cluster-dns": "10.0.0.10", "--kube-reserved": "cpu=100m,memory=1843Mi",
		"--eviction-hard": "memory.available<100Mi", "--register-with-taints": "karpenter.sh/unregistered:NoExecute",
		"--cloud-provider": "external", "--cloud-config": "/etc/kubernetes/azure.json", "--client-ca-file": "/etc/kubernetes/certs/ca.crt",
		"--image-gc-high-threshold": "85", "--image-gc-low-threshold": "80", "--pod-max-pids": "-1",
		"--image-credential-provider-config": "/var/lib/kubelet/credential-provider-config.yaml",
	} {
		if n.Flags[flag] != want {
			t.Errorf("%s = %q, want %q", flag, n.Flags[flag], want)
		}
	}
	if _, ok := n.Flags["--cpu-manager-policy"]; ok || len(n.Flags) != 31 {
		t.Errorf("flags %v: want the 28 base flags, kube-reserved, eviction-hard and the taints, no CPU manager policy", n.Flags)
	}
	if n.MaxPods != 250 || len(n.Taints) != 1 || n.Taints[0].Key != "karpenter.sh/unregistered" || len(n.Labels) != 4 {
		t.Errorf("node %+v", n)
	}
}

// The AzureLinux arm64 spot node, checked by hand: arm64 binaries, the spot label, the AKSNodeClass
// kubelet settings as flags, the sysctls as a base64 sysctl.d file.
func TestAzureLinuxArm64HandChecked(t *testing.T) {
	data, err := Render(azureLinuxArm64(t))
	if err != nil {
		t.Fatal(err)
	}
	n, err := Read(data)
	if err != nil {
		t.Fatal(err)
	}
	v := n.Variables
	for name, want := range map[string]string{
		"KUBE_BINARY_URL":      "https://acs-mirror.azureedge.net/kubernetes/v1.33.2/binaries/kubernetes-node-linux-arm64.tar.gz",
		"VNET_CNI_PLUGINS_URL": "https://acs-mirror.azureedge.net/azure-cni/v1.4.32/binaries/azure-vnet-cni-linux-arm64-v1.4.32.tgz",
		"NETWORK_POLICY":       "cilium",
		// base64("net.core.somaxconn=16384\nvm.max_map_count=262144\n")
		"SYSCTL_CONTENT": "bmV0LmNvcmUuc29tYXhjb25uPTE2Mzg0CnZtLm1heF9tYXBfY291bnQ9MjYyMTQ0Cg==",
		"KUBELET_NODE_LABELS": "karpenter.sh/nodepool=spot,kubernetes.azure.com/mode=user," +
			"kubernetes.azure.com/node-image-version=AKSAzureLinux-V3gen2arm64-202611.18.0,kubernetes.azure.com/os-sku=AzureLinux," +
			"kubernetes.azure.com/role=agent,kubernetes.azure.com/scalesetpriority=spot",
	} {
		if v[name] != want {
			t.Errorf("%s = %q, want %q", name, v[name], want)
		}
	}
	for flag, want := range map[string]string{"--max-pods": "30", "--cpu-manager-policy": "static", "--image-gc-high-threshold": "90",
		"--image-gc-low-threshold": "70", "--container-log-max-size": "50Mi", "--container-log-max-files": "5",
		"--allowed-unsafe-sysctls": "net.core.somaxconn,kernel.msg*"} {
		if n.Flags[flag] != want {
			t.Errorf("%s = %q, want %q", flag, n.Flags[flag], want)
		}
	}
	if _, ok := n.Flags["--register-with-taints"]; ok || len(n.Taints) != 0 {
		t.Errorf("no taints given, kubelet has %v", n.Taints)
	}
}

// One golden script per image family (Ubuntu2204 Gen1 and Gen2, Ubuntu2404, AzureLinux, each
// arm64 where the family has it): the rendered script is stable, carries every required variable,
// and ends with the provisioning command. Regenerate with go test -run Golden -update.
func TestGoldenPerImageFamily(t *testing.T) {
	for _, f := range []struct{ name, arch, image string }{
		{"ubuntu2204-gen1", "amd64", "AKSUbuntu-2204containerd-202611.18.0"},
		{"ubuntu2204-gen2", "amd64", "AKSUbuntu-2204gen2containerd-202611.18.0"},
		{"ubuntu2204-gen2-arm64", "arm64", "AKSUbuntu-2204gen2arm64containerd-202611.18.0"},
		{"ubuntu2404-gen2", "amd64", "AKSUbuntu-2404gen2containerd-202611.18.0"},
		{"ubuntu2404-gen2-arm64", "arm64", "AKSUbuntu-2404gen2arm64containerd-202611.18.0"},
		{"azurelinux-gen2", "amd64", "AKSAzureLinux-V3gen2-202611.18.0"},
		{"azurelinux-gen2-arm64", "arm64", "AKSAzureLinux-V3gen2arm64-202611.18.0"},
	} {
		t.Run(f.name, func(t *testing.T) {
			c := ubuntu2204(t)
			c.Arch, c.NodeImageVersion = f.arch, f.image
			data, err := Render(c)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := base64.StdEncoding.DecodeString(data)
			path := filepath.Join("testdata", f.name+".golden.sh")
			if *update {
				if err := os.WriteFile(path, raw, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(raw) != string(want) {
				t.Errorf("%s differs from the rendered script:\n%s", path, raw)
			}
			n, err := Read(data)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range RequiredVariables {
				if n.Variables[name] == "" {
					t.Errorf("%s unset", name)
				}
			}
			if !strings.HasSuffix(string(raw), ProvisionCommand+"\"\n") || n.Labels[LabelNodeImageVersion] != f.image ||
				!strings.HasSuffix(n.Variables["KUBE_BINARY_URL"], "-"+f.arch+".tar.gz") {
				t.Errorf("script does not end with the provisioning command, or image %q / binary %q wrong", n.Labels[LabelNodeImageVersion], n.Variables["KUBE_BINARY_URL"])
			}
		})
	}
}

// What the node image's provisioning or the kubelet refuses, the fake refuses, naming it.
func TestReadRefusesWhatTheNodeRefuses(t *testing.T) {
	good, err := ubuntu2204(t).Variables()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(map[string]string)
		want string
	}{
		{"missing token", func(v map[string]string) { delete(v, "TLS_BOOTSTRAP_TOKEN") }, "TLS_BOOTSTRAP_TOKEN unset"},
		{"empty API server", func(v map[string]string) { v["API_SERVER_NAME"] = "" }, "API_SERVER_NAME unset"},
		{"missing kubelet binary", func(v map[string]string) { delete(v, "KUBE_BINARY_URL") }, "KUBE_BINARY_URL unset"},
		{"CA not base64", func(v map[string]string) { v["KUBE_CA_CRT"] = "not base64!" }, "KUBE_CA_CRT: not base64"},
		{"CA not PEM", func(v map[string]string) { v["KUBE_CA_CRT"] = base64.StdEncoding.EncodeToString([]byte("hello")) }, "KUBE_CA_CRT: not a PEM"},
		{"CA block not a certificate", func(v map[string]string) {
			v["KUBE_CA_CRT"] = base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
		}, "KUBE_CA_CRT: certificate 1"},
		{"token too short", func(v map[string]string) { v["TLS_BOOTSTRAP_TOKEN"] = "abc.0123456789abcdef" }, "not a bootstrap token"},
		{"token upper case", func(v map[string]string) { v["TLS_BOOTSTRAP_TOKEN"] = "ABCDEF.0123456789abcdef" }, "not a bootstrap token"},
		{"API server with a scheme", func(v map[string]string) { v["API_SERVER_NAME"] = "https://x.hcp.eastus.azmk8s.io" }, "API_SERVER_NAME"},
		{"label the kubelet may not set", func(v map[string]string) { v["KUBELET_NODE_LABELS"] += ",node-role.kubernetes.io/worker=" }, "node-role.kubernetes.io/worker"},
		{"label value invalid", func(v map[string]string) { v["KUBELET_NODE_LABELS"] += ",team=a b" }, "KUBELET_NODE_LABELS[team]"},
		{"label without value", func(v map[string]string) { v["KUBELET_NODE_LABELS"] += ",team" }, "not key=value"},
		{"taint effect", func(v map[string]string) { v["KUBELET_FLAGS"] += " --register-with-taints=a=b:Sometimes" }, "effect"},
		{"max pods", func(v map[string]string) {
			v["KUBELET_FLAGS"] = strings.Replace(v["KUBELET_FLAGS"], "--max-pods=250", "--max-pods=0", 1)
		}, "--max-pods"},
		{"flag word", func(v map[string]string) { v["KUBELET_FLAGS"] += " v=2" }, "not --flag=value"},
	} {
		v := map[string]string{}
		for k, x := range good {
			v[k] = x
		}
		c.edit(v)
		data, err := renderVariables(v)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if _, err := Read(data); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one naming %q", c.name, err, c.want)
		}
	}
}

// A script the fake cannot read without running it is refused, not guessed at.
func TestReadVariablesRefusesExpansions(t *testing.T) {
	for _, script := range []string{
		"TLS_BOOTSTRAP_TOKEN=$(cat /tmp/t)\n/bin/bash " + ProvisionCommand + "\n",
		"X=\"${HOME}\"\n/bin/bash " + ProvisionCommand + "\n",
		"X=a | tee\n/bin/bash " + ProvisionCommand + "\n",
		"X=a\n", // never provisions
		"#cloud-config\nwrite_files: []\n",
	} {
		if _, err := ReadVariables(base64.StdEncoding.EncodeToString([]byte(script))); err == nil {
			t.Errorf("read %q", script)
		}
	}
	// Variables set after the provisioning command are not seen by it.
	vars, err := ReadVariables(base64.StdEncoding.EncodeToString([]byte("A='1'\n/bin/bash " + ProvisionCommand + "\nB='2'\n")))
	if err != nil || !reflect.DeepEqual(vars, map[string]string{"A": "1"}) {
		t.Errorf("vars %v, %v", vars, err)
	}
}

// Render's checks (the launch path's last defence) name the field.
func TestRenderRefusesInvalidContracts(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Contract)
		want string
	}{
		{"no token", func(c *Contract) { c.TLSBootstrapToken = "" }, "tlsBootstrapToken"},
		{"token shape", func(c *Contract) { c.TLSBootstrapToken = "abcdef0123456789abcdef" }, "tlsBootstrapToken"},
		{"CA not a certificate", func(c *Contract) { c.ClusterCA = "Y2E=" }, "clusterCA"},
		{"API server URL", func(c *Contract) { c.APIServerFQDN = "https://x" }, "apiServerFQDN"},
		{"label value closing quotes", func(c *Contract) { c.Labels["team"] = "x' ; touch /pwned ; '" }, "labels[team]"},
		{"kubelet-forbidden label", func(c *Contract) { c.Labels["node-role.kubernetes.io/worker"] = "" }, "labels[node-role.kubernetes.io/worker]"},
		{"taint value", func(c *Contract) { c.Taints[0].Value = "a b" }, "taints[0].value"},
		{"cluster DNS with a flag", func(c *Contract) { c.Kubelet.ClusterDNS = "10.0.0.10 --anonymous-auth=true" }, "clusterDNS"},
		{"max pods", func(c *Contract) { c.Kubelet.MaxPods = 0 }, "maxPods"},
		{"arch", func(c *Contract) { c.Arch = "x86_64" }, "arch"},
		{"version", func(c *Contract) { c.KubernetesVersion = "v1.33.2" }, "kubernetesVersion"},
		{"network plugin", func(c *Contract) { c.NetworkPlugin = "flannel" }, "networkPlugin"},
		{"sysctl name", func(c *Contract) { c.Sysctls = map[string]string{"a b": "1"} }, "sysctls"},
		{"eviction threshold with a space", func(c *Contract) { c.Kubelet.EvictionHard["memory.available"] = "1 Gi" }, "KUBELET_FLAGS"},
		{"no image version", func(c *Contract) { c.NodeImageVersion = "" }, "nodeImageVersion"},
	} {
		k := ubuntu2204(t)
		c.edit(&k)
		if _, err := Render(k); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one naming %s", c.name, err, c.want)
		}
	}
}

// tb is what the fixtures need of a *testing.T or a *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
}
