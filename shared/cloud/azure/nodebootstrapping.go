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
// CSE. Error: custom data that is not base64.
func (b NodeBootstrapping) Hydrate(token string) (NodeBootstrapping, error) {
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
type NodeBootstrappingClient struct {
	// Endpoint is the ARM endpoint (https://management.azure.com); SubscriptionID,
	// ResourceGroup and Cluster name the managed cluster (not the node resource group).
	Endpoint, SubscriptionID, ResourceGroup, Cluster string
	// Credential gets the bearer token (scope <endpoint>/.default).
	Credential azcore.TokenCredential
	// Token is the TLS bootstrap token the response's placeholder is replaced with.
	Token string
	// HTTP is the client (nil: a client with a 30 s timeout, the provider's).
	HTTP *http.Client
}

// maxResponseBytes bounds the response read: custom data is at most 87,380 base64 characters and
// the CSE command of the same order.
const maxResponseBytes = 1 << 20

// Get sends the request (GET with a JSON body, as the swagger's operation is declared) and
// returns the hydrated bootstrapping data. Errors: a token the credential cannot get, a non-200
// answer (its status and body, truncated), a body over 1 MiB, or a response without customData
// or cse (the provider refuses those too: "no CSE in response", "no CustomData in response").
func (c *NodeBootstrappingClient) Get(ctx context.Context, v ProvisionValues) (NodeBootstrapping, error) {
	tok, err := c.Credential.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{strings.TrimRight(c.Endpoint, "/") + "/.default"}})
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
