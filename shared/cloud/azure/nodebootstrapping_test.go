package azure_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"

	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure/customdata"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/azureapi"
)

func provisionValues() azure.ProvisionValues {
	return azure.ProvisionValues{
		ProvisionProfile: azure.ProvisionProfile{Name: "default", VMSize: "Standard_D2s_v5", OSType: 2, OSSKU: 1, StorageProfile: "ManagedDisks",
			Distro: "aks-ubuntu-containerd-22.04-gen2", OrchestratorVersion: "1.33.2", VnetCidrs: []string{"10.224.0.0/12"},
			VnetSubnetID: subnet, Mode: 2, Architecture: "x64", MaxPods: 250},
		ProvisionHelperValues: azure.ProvisionHelperValues{SKUCPU: 2, SKUMemory: 8},
	}
}

// Against the strict fake of NodeBootstrapping_Get: the client sends the documented request and
// puts the bootstrap token in where AKS redacted it, in the CSE and in the decoded custom data; a
// request without a required property is AKS's 400, an unknown cluster its 404.
func TestNodeBootstrappingClientAgainstTheWireFormat(t *testing.T) {
	const placeholder = azure.TokenPlaceholder
	// The CSE AKS would answer: the contract's variables with the token redacted.
	b := azureapi.LocalBootstrap("https://x.hcp.eastus.azmk8s.io:443")
	fake := &azureapi.NodeBootstrapping{SubscriptionID: sub, ResourceGroup: "rg-cluster", Cluster: "aks-1",
		Answer: func(body map[string]any) (string, string) {
			return base64.StdEncoding.EncodeToString([]byte("#cloud-config\ntoken: " + placeholder + "\n")),
				"TLS_BOOTSTRAP_TOKEN='" + placeholder + "' /bin/bash /opt/azure/containers/provision_start.sh"
		}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	c := &azure.NodeBootstrappingClient{Endpoint: srv.URL, SubscriptionID: sub, ResourceGroup: "rg-cluster", Cluster: "aks-1",
		Credential: &azfake.TokenCredential{}, Token: b.Token}
	got, err := c.Get(context.Background(), provisionValues())
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(got.CustomData)
	if string(raw) != "#cloud-config\ntoken: "+azureapi.LocalBootstrapToken+"\n" ||
		got.CSE != "TLS_BOOTSTRAP_TOKEN='"+azureapi.LocalBootstrapToken+"' /bin/bash /opt/azure/containers/provision_start.sh" || fake.Requests != 1 {
		t.Fatalf("hydrated %q / %q after %d requests", raw, got.CSE, fake.Requests)
	}

	// The fake refuses what AKS refuses: a body without the required properties, a call without a
	// bearer token (the client always sends both: its structs carry every required field).
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/subscriptions/"+sub+"/resourceGroups/rg-cluster/providers/Microsoft.ContainerService/managedclusters/aks-1/nodeBootstrapping",
		strings.NewReader(`{"provisionProfile":{"name":"default"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), "provisionHelperValues") || !strings.Contains(string(msg), "provisionProfile.vmSize") {
		t.Errorf("incomplete body: %d %s", resp.StatusCode, msg)
	}
	req.Header.Del("Authorization")
	req.Body = io.NopCloser(strings.NewReader("{}"))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	other := *c
	other.Cluster = "aks-2"
	if _, err := other.Get(context.Background(), provisionValues()); err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Errorf("unknown cluster: %v", err)
	}
	empty := &azureapi.NodeBootstrapping{SubscriptionID: sub, ResourceGroup: "rg-cluster", Cluster: "aks-1",
		Answer: func(map[string]any) (string, string) { return "", "x" }}
	srv2 := httptest.NewServer(empty)
	defer srv2.Close()
	c.Endpoint = srv2.URL
	if _, err := c.Get(context.Background(), provisionValues()); err == nil || !strings.Contains(err.Error(), "no customData") {
		t.Errorf("empty customData: %v", err)
	}
}

// A CSE whose variables are the rendered contract reads back, hydrated, as the node reads it.
func TestHydratedContractReadsBack(t *testing.T) {
	data, err := customdata.Render(customdata.Contract{APIServerFQDN: "x.hcp.eastus.azmk8s.io", ClusterCA: azureapi.LocalBootstrap("").CA,
		TLSBootstrapToken: "abcdef.0123456789abcdef", KubernetesVersion: "1.33.2", Arch: "amd64", TenantID: "t", SubscriptionID: sub,
		ResourceGroup: rg, Location: "eastus", NetworkPlugin: "none", NodeImageVersion: "AKSUbuntu-2204gen2containerd-202611.18.0",
		Labels: map[string]string{"kubernetes.azure.com/mode": "user"}, Kubelet: customdata.KubeletConfig{ClusterDNS: "10.0.0.10", MaxPods: 250}})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(data)
	redacted := strings.Replace(string(raw), "abcdef.0123456789abcdef", azure.TokenPlaceholder, 1)
	h, err := azure.NodeBootstrapping{CustomData: base64.StdEncoding.EncodeToString([]byte(redacted)), CSE: redacted}.Hydrate("zyxwvu.fedcba9876543210")
	if err != nil {
		t.Fatal(err)
	}
	n, err := customdata.Read(h.CustomData)
	if err != nil || n.Variables["TLS_BOOTSTRAP_TOKEN"] != "zyxwvu.fedcba9876543210" {
		t.Fatalf("%v %v", n, err)
	}
}
