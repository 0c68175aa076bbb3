package azure_test

import (
	"context"
	"encoding/base64"
	"strings"
	"sync"
	"testing"
	"time"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/azureapi"
)

// nodes records the Nodes the fake's kubelets register.
type nodes struct {
	mu sync.Mutex
	m  map[string]*corev1.Node
}

func (n *nodes) RegisterNode(_ context.Context, node *corev1.Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.m[node.Name] = node
	return nil
}

func (n *nodes) get(name string) *corev1.Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.m[name]
}

// The fake node registers only from a contract its image can use: a VM whose custom data lacks
// TLS_BOOTSTRAP_TOKEN is created (ARM does not read custom data) and runs, but no Node ever
// registers; the same VM with the whole contract registers, its providerID spelled with the
// resource group in lower case as cloud-node-manager writes it.
func TestFakeNodeJoinsOnlyFromTheContract(t *testing.T) {
	cat, err := catalog.AzureRegionCatalog("eastus")
	if err != nil {
		t.Fatal(err)
	}
	const mixedRG = "MC_rg-Fake-Nodes"
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	reg := &nodes{m: map[string]*corev1.Node{}}
	fc := fake.New(fake.Options{Catalog: cat, Cluster: "prod", Clock: clk, BootDelay: 10 * time.Second, Registrar: reg})
	srv := azureapi.New(azureapi.Options{Cloud: fc, SubscriptionID: sub, ResourceGroup: mixedRG, Subnets: []string{subnet}})
	p, err := azure.New(azure.Options{Cluster: "prod", SubscriptionID: sub, ResourceGroup: mixedRG, Location: "eastus", SubnetID: subnet,
		Catalog: cat, Credential: &azfake.TokenCredential{}, ClientOptions: srv.ClientOptions(), SSHPublicKey: "ssh-rsa AAAA fake",
		PollInterval: 10 * time.Millisecond, KubernetesVersion: "1.33.2", Bootstrap: azureapi.LocalBootstrap("https://dev-dns-00000000.hcp.eastus.azmk8s.io:443")})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{p: p, srv: srv, cloud: fc, clock: clk}
	inst, err := p.Create(context.Background(), request("prod", "default-a1b2c3", onDemand1))
	if err != nil {
		t.Fatal(err)
	}
	good, _ := srv.CustomData("aks-default-a1b2c3")
	raw, _ := base64.StdEncoding.DecodeString(good)
	var kept []string
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "TLS_BOOTSTRAP_TOKEN=") {
			kept = append(kept, line)
		}
	}
	createRaw(t, w, "aks-broken", base64.StdEncoding.EncodeToString([]byte(strings.Join(kept, "\n"))))
	clk.Step(time.Minute)
	if err := fc.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := reg.get("aks-default-a1b2c3")
	want := "azure:///subscriptions/" + sub + "/resourceGroups/mc_rg-fake-nodes/providers/Microsoft.Compute/virtualMachines/aks-default-a1b2c3"
	if n == nil || n.Spec.ProviderID != want || inst.ProviderID != want || n.Labels["kubernetes.azure.com/cluster"] != mixedRG {
		t.Fatalf("contract node: %+v, instance providerID %s; want providerID %s", n, inst.ProviderID, want)
	}
	if reg.get("aks-broken") != nil {
		t.Error("a node registered without a bootstrap token")
	}
	if vm, ok := srv.VM("aks-broken"); !ok || *vm.Properties.ProvisioningState != "Succeeded" {
		t.Errorf("the broken VM: %v %+v; ARM creates it", ok, vm.Properties)
	}
}
