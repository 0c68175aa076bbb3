package azure

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/dovetail-dev/dovetail/shared/cloud/azure/customdata"
)

// NodeBootstrappingAPI asks AKS for a node's bootstrapping data instead of rendering the contract
// locally: the Azure Karpenter provider's "bootstrappingclient" provision mode, over AKS's
// NodeBootstrapping_Get operation (provider pkg/provisionclients/swagger/nodebootstrapping.json,
// version 2024-10-01). Get returns the custom data and the CSE command with the TLS bootstrap
// token already put in (Hydrate).
type NodeBootstrappingAPI interface {
	Get(ctx context.Context, v ProvisionValues) (NodeBootstrapping, error)
}

// ProvisionValues is the request body: the agent pool profile of one node and the size's
// resources (swagger ProvisionValues; the required fields are those the swagger marks required).
type ProvisionValues struct {
	ProvisionProfile      ProvisionProfile      `json:"provisionProfile"`
	ProvisionHelperValues ProvisionHelperValues `json:"provisionHelperValues"`
}

// ProvisionProfile is the swagger's ProvisionProfile subset Dovetail sends. Enum values are the
// provider's (provisionclients/models/enums.go): OSType 2 Linux; OSSKU 1 Ubuntu, 7 AzureLinux;
// Mode 1 System, 2 User.
type ProvisionProfile struct {
	Name                string            `json:"name"`
	VMSize              string            `json:"vmSize"`
	OSType              int32             `json:"osType"`
	OSSKU               int32             `json:"osSku"`
	StorageProfile      string            `json:"storageProfile"` // "ManagedDisks"
	Distro              string            `json:"distro"`         // aks-ubuntu-containerd-22.04-gen2
	CustomNodeLabels    map[string]string `json:"customNodeLabels,omitempty"`
	OrchestratorVersion string            `json:"orchestratorVersion"` // 1.33.2
	VnetCidrs           []string          `json:"vnetCidrs"`
	VnetSubnetID        string            `json:"vnetSubnetID"`
	Mode                int32             `json:"mode"`
	Architecture        string            `json:"architecture"` // x64 or Arm64
	MaxPods             int32             `json:"maxPods"`
	NodeTaints          []string          `json:"nodeTaints,omitempty"` // key=value:Effect
	// GPUProfile is sent for a size with NVIDIA GPUs, as the provider sends it: the driver to
	// install (DriverType 2 GRID for the converged-driver sizes, 3 CUDA otherwise).
	GPUProfile *GPUProfile `json:"gpuProfile,omitempty"`
}

// GPUProfile is the swagger's GPUProfile (provider provisionclients/models/g_p_u_profile.go).
type GPUProfile struct {
	DriverType       int32 `json:"driverType"`
	InstallGPUDriver bool  `json:"installGPUDriver"`
}

// ProvisionHelperValues are the size's vCPUs and memory in GiB (skuCPU, skuMemory).
type ProvisionHelperValues struct {
	SKUCPU    float64 `json:"skuCPU"`
	SKUMemory float64 `json:"skuMemory"`
}

// NodeBootstrapping is what a VM boots with in this mode: CustomData (base64, osProfile.customData)
// and CSE (the command the CustomScript VM extension runs).
type NodeBootstrapping struct {
	CustomData, CSE string
}

// TokenPlaceholder is where AKS's response leaves the TLS bootstrap token out (secrets are
// redacted; the provider's hydrateBootstrapTokenIfNeeded replaces it).
const TokenPlaceholder = "{{.TokenID}}.{{.TokenSecret}}"

// Hydrate puts the bootstrap token into the custom data (decoded, replaced, re-encoded) and the
// CSE, as the provider's hydrateBootstrapTokenIfNeeded does: a text replacement into a script
// whose quoting AKS chose. That is safe only because the token is checked first to be a bootstrap
// token (customdata.IsBootstrapToken: [a-z0-9] and one '.'), which no quoting context can read
// as anything but literal text. Errors: a token of another shape (not shown), custom data that
// is not base64.
func (b NodeBootstrapping) Hydrate(token string) (NodeBootstrapping, error) {
	if !customdata.IsBootstrapToken(token) {
		return NodeBootstrapping{}, errors.New("node bootstrapping: the TLS bootstrap token (not shown) is not <6 of [a-z0-9]>.<16 of [a-z0-9]>; it is not put into the provisioning command")
	}
	raw, err := base64.StdEncoding.DecodeString(b.CustomData)
	if err != nil {
		return NodeBootstrapping{}, fmt.Errorf("node bootstrapping: customData is not base64: %w", err)
	}
	return NodeBootstrapping{
		CustomData: base64.StdEncoding.EncodeToString([]byte(strings.ReplaceAll(string(raw), TokenPlaceholder, token))),
		CSE:        strings.ReplaceAll(b.CSE, TokenPlaceholder, token),
	}, nil
}

// NodeBootstrappingClient calls NodeBootstrapping_Get on a managed cluster.
//
// The operation is not served through ARM's public endpoint: the Azure Karpenter provider sends
// it to the server its --nodebootstrapping-server-url names (NODEBOOTSTRAPPING_SERVER_URL, an
// option it marks unsupported, used where AKS runs Karpenter for the cluster), with a bearer token
// for ARM's audience, and Azure's list of Microsoft.ContainerService operations has no
// nodeBootstrapping action a role could grant. That server decides who may ask.
type NodeBootstrappingClient struct {
	// Endpoint is that server's URL (http or https, the provider's NodeBootstrappingServerURL);
	// the request goes to Endpoint + the operation's path. SubscriptionID, ResourceGroup and
	// Cluster name the managed cluster (its resource group, not the node resource group).
	Endpoint, SubscriptionID, ResourceGroup, Cluster string
	// Scope is the bearer token's scope; empty: DefaultNodeBootstrappingScope.
	Scope string
	// Credential gets the bearer token.
	Credential azcore.TokenCredential
	// Token is the TLS bootstrap token the response's placeholder is replaced with.
	Token string
	// HTTP is the client (nil: a client with a 30 s timeout, the provider's).
	HTTP *http.Client
}

// DefaultNodeBootstrappingScope is ARM's audience in the public cloud, the scope the provider
// asks its token for (pkg/auth TokenScope: the cloud's ResourceManager audience + "/.default").
const DefaultNodeBootstrappingScope = "https://management.azure.com/.default"

// maxResponseBytes bounds the response read: custom data is at most 87,380 base64 characters and
// the CSE command of the same order.
const maxResponseBytes = 1 << 20

// Get sends the request (GET with a JSON body, as the swagger's operation is declared) and
// returns the hydrated bootstrapping data. Errors: a TLS bootstrap token that is not one or a
// request Validate refuses (both before any request), a token the credential cannot get, a non-200
// answer (its status and body, truncated), a body over 1 MiB, or a response without customData
// or cse (the provider refuses those too: "no CSE in response", "no CustomData in response").
func (c *NodeBootstrappingClient) Get(ctx context.Context, v ProvisionValues) (NodeBootstrapping, error) {
	if !customdata.IsBootstrapToken(c.Token) {
		// Refused before asking: the answer could not be hydrated (Hydrate).
		return NodeBootstrapping{}, errors.New("node bootstrapping: Token (not shown) is not a bootstrap token, <6 of [a-z0-9]>.<16 of [a-z0-9]>")
	}
	if err := v.Validate(); err != nil {
		return NodeBootstrapping{}, err
	}
	scope := c.Scope
	if scope == "" {
		scope = DefaultNodeBootstrappingScope
	}
	tok, err := c.Credential.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{scope}})
	if err != nil {
		return NodeBootstrapping{}, fmt.Errorf("node bootstrapping: token: %w", err)
	}
	body, err := json.Marshal(v)
	if err != nil {
		return NodeBootstrapping{}, fmt.Errorf("node bootstrapping: %w", err)
	}
	u := strings.TrimRight(c.Endpoint, "/") + "/subscriptions/" + url.PathEscape(c.SubscriptionID) + "/resourceGroups/" + url.PathEscape(c.ResourceGroup) +
		"/providers/Microsoft.ContainerService/managedclusters/" + url.PathEscape(c.Cluster) + "/nodeBootstrapping"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, bytes.NewReader(body))
	if err != nil {
		return NodeBootstrapping{}, fmt.Errorf("node bootstrapping: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return NodeBootstrapping{}, fmt.Errorf("node bootstrapping: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return NodeBootstrapping{}, fmt.Errorf("node bootstrapping: reading the response: %w", err)
	}
	if len(data) > maxResponseBytes {
		return NodeBootstrapping{}, fmt.Errorf("node bootstrapping: response over %d bytes", maxResponseBytes)
	}
	if resp.StatusCode != http.StatusOK {
		msg := string(data)
		if len(msg) > 512 {
			msg = msg[:512] + "…"
		}
		return NodeBootstrapping{}, fmt.Errorf("node bootstrapping: HTTP %d: %s", resp.StatusCode, msg)
	}
	var out struct {
		CustomData *string `json:"customData"`
		CSE        *string `json:"cse"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return NodeBootstrapping{}, fmt.Errorf("node bootstrapping: response: %w", err)
	}
	switch {
	case out.CSE == nil || *out.CSE == "":
		return NodeBootstrapping{}, errors.New("node bootstrapping: no cse in the response")
	case out.CustomData == nil || *out.CustomData == "":
		return NodeBootstrapping{}, errors.New("node bootstrapping: no customData in the response")
	}
	return NodeBootstrapping{CustomData: *out.CustomData, CSE: *out.CSE}.Hydrate(c.Token)
}
