package azure_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/azureapi"
)

// hostileShell ends a single- or double-quoted word, starts a command, expands, comments the rest
// out and starts a new line: whatever quoting AKS renders a value into, one of these breaks it.
const hostileShell = "x'\"; $(reboot) `id` #\nrm -rf /"

// Every value Dovetail sends AKS, which AKS renders into the provisioning command the VM runs as
// root, is checked as its own API checks it before the request leaves: a hostile value in any
// field is refused naming that field, and AKS is never asked.
func TestNodeBootstrappingRequestRefusesHostileValues(t *testing.T) {
	aks := &azureapi.NodeBootstrapping{SubscriptionID: sub, ResourceGroup: "rg-cluster", Cluster: "aks-1"}
	c := &azure.NodeBootstrappingClient{Endpoint: "http://nodebootstrapping.local", SubscriptionID: sub, ResourceGroup: "rg-cluster", Cluster: "aks-1",
		Credential: &azfake.TokenCredential{}, Token: azureapi.LocalBootstrapToken, HTTP: aks.Client()}
	for field, set := range map[string]func(*azure.ProvisionValues){
		"provisionProfile.name":   func(v *azure.ProvisionValues) { v.ProvisionProfile.Name = hostileShell },
		"provisionProfile.vmSize": func(v *azure.ProvisionValues) { v.ProvisionProfile.VMSize = "Standard_D2s_v5" + hostileShell },
		"provisionProfile.distro": func(v *azure.ProvisionValues) { v.ProvisionProfile.Distro = hostileShell },
		"provisionProfile.customNodeLabels[team]": func(v *azure.ProvisionValues) {
			v.ProvisionProfile.CustomNodeLabels = map[string]string{"team": hostileShell}
		},
		"provisionProfile.customNodeLabels": func(v *azure.ProvisionValues) {
			v.ProvisionProfile.CustomNodeLabels = map[string]string{hostileShell: "a"}
		},
		"provisionProfile.orchestratorVersion": func(v *azure.ProvisionValues) { v.ProvisionProfile.OrchestratorVersion = "1.33.2" + hostileShell },
		"provisionProfile.vnetSubnetID":        func(v *azure.ProvisionValues) { v.ProvisionProfile.VnetSubnetID = subnet + hostileShell },
		"provisionProfile.vnetCidrs[0]":        func(v *azure.ProvisionValues) { v.ProvisionProfile.VnetCidrs = []string{hostileShell} },
		"provisionProfile.architecture":        func(v *azure.ProvisionValues) { v.ProvisionProfile.Architecture = hostileShell },
		"provisionProfile.nodeTaints[0]": func(v *azure.ProvisionValues) {
			v.ProvisionProfile.NodeTaints = []string{"k=" + hostileShell + ":NoSchedule"}
		},
		"provisionProfile.storageProfile": func(v *azure.ProvisionValues) { v.ProvisionProfile.StorageProfile = hostileShell },
	} {
		v := provisionValues()
		set(&v)
		_, err := c.Get(context.Background(), v)
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s hostile: %v, want an error naming %s", field, err, field)
		}
	}
	// A subnet whose names ARM refuses, each alone: a newline in the VNet name, a quote in the
	// subnet's, a subscription that is not a GUID.
	for _, id := range []string{
		"/subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v\nx/subnets/s",
		"/subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet/subnets/s'",
		"/subscriptions/$(id)/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet/subnets/s",
	} {
		v := provisionValues()
		v.ProvisionProfile.VnetSubnetID = id
		if _, err := c.Get(context.Background(), v); err == nil || !strings.Contains(err.Error(), "provisionProfile.vnetSubnetID") {
			t.Errorf("subnet %q: %v", id, err)
		}
	}
	if aks.Requests != 0 {
		t.Fatalf("AKS was asked %d times with a refused request", aks.Requests)
	}
	// The same request with ordinary values is sent and answered.
	if _, err := c.Get(context.Background(), provisionValues()); err != nil || aks.Requests != 1 {
		t.Fatalf("valid request: %v after %d requests", err, aks.Requests)
	}
}

// The TLS bootstrap token is put into AKS's script by text replacement (the provider's
// hydration), so only a token of the bootstrap-token alphabet is: any other is refused before
// AKS is asked, and Hydrate refuses it too; the error never shows it.
func TestHostileTokenIsNeverHydrated(t *testing.T) {
	for _, tok := range []string{"abcdef.0123456789abcdef'; reboot #", "$(rebo.0123456789abcdef", "abcdef.0123456789abcde\n", "abcdef.0123456789abcdeF", ""} {
		aks := &azureapi.NodeBootstrapping{SubscriptionID: sub, ResourceGroup: "rg-cluster", Cluster: "aks-1"}
		c := &azure.NodeBootstrappingClient{Endpoint: "http://nodebootstrapping.local", SubscriptionID: sub, ResourceGroup: "rg-cluster", Cluster: "aks-1",
			Credential: &azfake.TokenCredential{}, Token: tok, HTTP: aks.Client()}
		_, err := c.Get(context.Background(), provisionValues())
		if err == nil || aks.Requests != 0 || (tok != "" && strings.Contains(err.Error(), tok)) {
			t.Errorf("token %q: %v after %d requests", tok, err, aks.Requests)
		}
		b := azure.NodeBootstrapping{CustomData: base64.StdEncoding.EncodeToString([]byte(azure.TokenPlaceholder)), CSE: "T='" + azure.TokenPlaceholder + "'"}
		if h, err := b.Hydrate(tok); err == nil {
			t.Errorf("token %q hydrated into %q", tok, h.CSE)
		}
	}
}

// captureExtensionPUT records the body of every VM extension PUT the SDK sends.
type captureExtensionPUT struct{ bodies [][]byte }

func (c *captureExtensionPUT) Do(req *policy.Request) (*http.Response, error) {
	if r := req.Raw(); r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/extensions/") && req.Body() != nil {
		b, err := io.ReadAll(req.Body())
		if err != nil {
			return nil, err
		}
		if err := req.RewindBody(); err != nil {
			return nil, err
		}
		c.bodies = append(c.bodies, b)
	}
	return req.Next()
}

// Whatever command AKS answers, Dovetail's own layer cannot be broken out of: the command is one
// JSON string in protectedSettings.commandToExecute, built as a Go value the SDK marshals, so
// quotes, newlines, "$(...)" and text shaped like JSON arrive byte for byte as that one string,
// with no other setting (fileUris, script) beside it and nothing in the public settings.
func TestCSECommandReachesARMAsOneString(t *testing.T) {
	capture := &captureExtensionPUT{}
	w, aks, _ := bootstrappingWorld(t, func(o *azure.Options) {
		o.ClientOptions.PerCallPolicies = append(o.ClientOptions.PerCallPolicies, capture)
	})
	hostileCSE := "echo 'a\"b'\n$(reboot) `id`; \"}, \"fileUris\": [\"https://evil\"], \"x\": {\"\u2028 T='" + azure.TokenPlaceholder + "'"
	aks.Answer = func(map[string]any) (string, string) {
		return base64.StdEncoding.EncodeToString([]byte("#cloud-config\nwrite_files: []\n")), hostileCSE
	}
	if _, err := w.p.Create(context.Background(), request("prod", "default-h", onDemand1)); err != nil {
		t.Fatal(err)
	}
	if len(capture.bodies) != 1 {
		t.Fatalf("%d extension PUTs, want 1", len(capture.bodies))
	}
	var body struct {
		Properties struct {
			Settings          map[string]any `json:"settings"`
			ProtectedSettings map[string]any `json:"protectedSettings"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(capture.bodies[0], &body); err != nil {
		t.Fatal(err)
	}
	// By hand: AKS's text with the redacted token replaced by the local bootstrap token.
	want := map[string]any{"commandToExecute": "echo 'a\"b'\n$(reboot) `id`; \"}, \"fileUris\": [\"https://evil\"], \"x\": {\"\u2028 T='" + azureapi.LocalBootstrapToken + "'"}
	if !reflect.DeepEqual(body.Properties.ProtectedSettings, want) || len(body.Properties.Settings) != 0 {
		t.Fatalf("extension settings %v, protected %q; want none and %q", body.Properties.Settings, body.Properties.ProtectedSettings, want)
	}
}
