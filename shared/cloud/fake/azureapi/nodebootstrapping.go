package azureapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure/customdata"
)

// NodeBootstrapping is a fake of AKS's NodeBootstrapping_Get operation, exactly as strict as its
// wire format (the Azure Karpenter provider's pkg/provisionclients/swagger/nodebootstrapping.json,
// 2024-10-01): GET .../providers/Microsoft.ContainerService/managedclusters/{name}/nodeBootstrapping
// with a bearer token and a JSON ProvisionValues body whose required properties are present
// (ProvisionProfile: name, vmSize, osType, osSku, storageProfile, distro, orchestratorVersion,
// vnetCidrs, vnetSubnetID, mode, architecture, maxPods; ProvisionHelperValues: skuCPU,
// skuMemory). A request that breaks the format gets 400 with a string body (the swagger's default
// response), an unknown cluster 404. The answer is Answer's, with secrets redacted as AKS
// redacts them: the token is the placeholder {{.TokenID}}.{{.TokenSecret}}.
type NodeBootstrapping struct {
	// SubscriptionID, ResourceGroup and Cluster name the one managed cluster served.
	SubscriptionID, ResourceGroup, Cluster string
	// Answer returns customData (base64) and cse for a request body; nil answers a fixed pair.
	Answer func(body map[string]any) (customData, cse string)
	// Requests counts the requests answered 200.
	Requests int

	mu sync.Mutex
}

var nodeBootstrappingPath = regexp.MustCompile(`^/subscriptions/([^/]+)/resourceGroups/([^/]+)/providers/Microsoft\.ContainerService/managedclusters/([^/]+)/nodeBootstrapping$`)

var (
	requiredProfile = []string{"name", "vmSize", "osType", "osSku", "storageProfile", "distro", "orchestratorVersion", "vnetCidrs", "vnetSubnetID", "mode", "architecture", "maxPods"}
	requiredHelper  = []string{"skuCPU", "skuMemory"}
)

func (f *NodeBootstrapping) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fail := func(code int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		b, _ := json.Marshal(msg)
		_, _ = w.Write(b)
	}
	m := nodeBootstrappingPath.FindStringSubmatch(r.URL.Path)
	switch {
	case m == nil:
		fail(http.StatusNotFound, "no such operation: "+r.URL.Path)
		return
	case r.Method != http.MethodGet:
		fail(http.StatusMethodNotAllowed, "NodeBootstrapping_Get is a GET")
		return
	case !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") || len(r.Header.Get("Authorization")) == len("Bearer "):
		fail(http.StatusUnauthorized, "a bearer token is required")
		return
	case !strings.EqualFold(m[1], f.SubscriptionID) || !strings.EqualFold(m[2], f.ResourceGroup) || !strings.EqualFold(m[3], f.Cluster):
		fail(http.StatusNotFound, "managed cluster "+m[3]+" not found")
		return
	case !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json"):
		fail(http.StatusBadRequest, "the body must be application/json")
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var body map[string]any
	if err == nil {
		err = json.Unmarshal(raw, &body)
	}
	if err != nil {
		fail(http.StatusBadRequest, "parameters: not a JSON object")
		return
	}
	if missing := missingProperties(body); len(missing) > 0 {
		fail(http.StatusBadRequest, "MissingRequiredProperty: "+strings.Join(missing, ", "))
		return
	}
	customData, cse := base64.StdEncoding.EncodeToString([]byte("#cloud-config\n")), "/bin/bash -c true"
	if f.Answer != nil {
		customData, cse = f.Answer(body)
	}
	f.mu.Lock()
	f.Requests++
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"customData": customData, "cse": cse, "osImageConfig": map[string]any{}, "sigImageConfig": map[string]any{}})
}

// missingProperties lists the required properties absent (or null) from a ProvisionValues body.
func missingProperties(body map[string]any) []string {
	var missing []string
	for part, names := range map[string][]string{"provisionProfile": requiredProfile, "provisionHelperValues": requiredHelper} {
		obj, ok := body[part].(map[string]any)
		if !ok {
			missing = append(missing, part)
			continue
		}
		for _, n := range names {
			if v, ok := obj[n]; !ok || v == nil {
				missing = append(missing, fmt.Sprintf("%s.%s", part, n))
			}
		}
	}
	sort.Strings(missing)
	return missing
}

// AKSCluster is what the fake AKS knows of its managed cluster beyond a request: the cluster's
// bootstrap (API server, CA, token, tenant, kubelet identity, network policy) and where its
// nodes live. AKSAnswer renders from it.
type AKSCluster struct {
	Bootstrap                                   azure.Bootstrap
	SubscriptionID, NodeResourceGroup, Location string
	// NetworkPlugin is AgentBaker's NETWORK_PLUGIN of the cluster (azure, kubenet or none).
	NetworkPlugin string
}

// AKSAnswer answers NodeBootstrapping_Get as AKS does, from the agent pool profile of the request
// and the cluster: the custom data is AgentBaker's node cloud-config (it only prepares the image;
// the kubelet starts when the provisioning command runs) and the CSE is the provisioning command,
// the AKS bootstrap contract rendered from the profile (its customNodeLabels, nodeTaints,
// orchestratorVersion, architecture, maxPods, vnetSubnetID, gpuProfile, and the size's kube-reserved from
// skuCPU / skuMemory) with the token redacted as AKS redacts secrets. A profile the contract
// cannot carry gets a command the node refuses (no kubelet joins), as a real image would fail.
func AKSAnswer(c AKSCluster) func(body map[string]any) (customData, cse string) {
	return func(body map[string]any) (string, string) {
		prof, _ := body["provisionProfile"].(map[string]any)
		help, _ := body["provisionHelperValues"].(map[string]any)
		str := func(k string) string { s, _ := prof[k].(string); return s }
		num := func(m map[string]any, k string) float64 { f, _ := m[k].(float64); return f }
		labels := map[string]string{}
		if m, ok := prof["customNodeLabels"].(map[string]any); ok {
			for k, v := range m {
				labels[k], _ = v.(string)
			}
		}
		var taints []corev1.Taint
		if ts, ok := prof["nodeTaints"].([]any); ok {
			for _, t := range ts {
				s, _ := t.(string)
				kv, effect, _ := strings.Cut(s, ":")
				k, v, _ := strings.Cut(kv, "=")
				taints = append(taints, corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)})
			}
		}
		arch := "amd64"
		if str("architecture") == "Arm64" {
			arch = "arm64"
		}
		u, _ := url.Parse(c.Bootstrap.APIServer)
		host := ""
		if u != nil {
			host = u.Hostname()
		}
		sub := strings.Split(strings.TrimPrefix(str("vnetSubnetID"), "/"), "/")
		var vnetRG, vnet, subnet string
		if len(sub) == 10 {
			vnetRG, vnet, subnet = sub[3], sub[7], sub[9]
		}
		cpu, memMiB := int64(num(help, "skuCPU")), int64(num(help, "skuMemory")*1024)
		// The GPU profile asks the image to install the driver (GPU_NODE, CONFIG_GPU_DRIVER_IF_NEEDED).
		gpuProfile, _ := prof["gpuProfile"].(map[string]any)
		installGPU, _ := gpuProfile["installGPUDriver"].(bool)
		dns := c.Bootstrap.ClusterDNS
		if dns == "" {
			dns = azure.DefaultClusterDNS
		}
		ct := customdata.Contract{
			APIServerFQDN: host, ClusterCA: c.Bootstrap.CA, TLSBootstrapToken: c.Bootstrap.Token, KubernetesVersion: str("orchestratorVersion"),
			Arch: arch, TenantID: c.Bootstrap.TenantID, SubscriptionID: c.SubscriptionID, ResourceGroup: c.NodeResourceGroup, Location: c.Location,
			UserAssignedIdentityID: c.Bootstrap.KubeletIdentityClientID, VNet: vnet, VNetResourceGroup: vnetRG, Subnet: subnet,
			NetworkPlugin: c.NetworkPlugin, NetworkPolicy: c.Bootstrap.NetworkPolicy, Labels: labels, Taints: taints, GPUNode: installGPU,
			// AKS picks the node image: the distro's newest version in the gallery.
			NodeImageVersion: aksImageNames[str("distro")] + "-" + DefaultImageVersions[len(DefaultImageVersions)-1].Name,
			Kubelet: customdata.KubeletConfig{ClusterDNS: dns, MaxPods: int64(num(prof, "maxPods")),
				KubeReserved: map[string]string{"cpu": strconv.FormatInt(catalog.AKSKubeReservedMilliCPU(cpu), 10) + "m",
					"memory": strconv.FormatInt(catalog.AKSKubeReservedMemoryMiB(memMiB), 10) + "Mi"},
				EvictionHard: map[string]string{"memory.available": strconv.Itoa(catalog.AKSEvictionMemoryAvailableMiB) + "Mi"}},
		}
		cloudConfig := base64.StdEncoding.EncodeToString([]byte("#cloud-config\nwrite_files: []\n"))
		rendered, err := customdata.Render(ct)
		if err != nil {
			// The image's provisioning exits before the kubelet starts.
			return cloudConfig, "exit 1 # " + strings.ReplaceAll(err.Error(), "\n", " ")
		}
		raw, _ := base64.StdEncoding.DecodeString(rendered)
		return cloudConfig, strings.ReplaceAll(string(raw), c.Bootstrap.Token, azure.TokenPlaceholder)
	}
}

// Client is an HTTP client whose requests this fake answers in-process (no listener), for the
// real NodeBootstrappingClient in local dev; the request still goes through the wire format.
func (f *NodeBootstrapping) Client() *http.Client {
	return &http.Client{Transport: handlerTransport{f}}
}

type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// aksImageNames are the node-image-version prefixes (<gallery>-<definition>) of AgentBaker's
// distros, as AKS labels the nodes it provisions.
var aksImageNames = map[string]string{
	"aks-ubuntu-containerd-22.04-gen2": "AKSUbuntu-2204gen2containerd", "aks-ubuntu-containerd-22.04": "AKSUbuntu-2204containerd",
	"aks-ubuntu-arm64-containerd-22.04-gen2": "AKSUbuntu-2204gen2arm64containerd",
	"aks-ubuntu-containerd-24.04-gen2":       "AKSUbuntu-2404gen2containerd", "aks-ubuntu-containerd-24.04": "AKSUbuntu-2404containerd",
	"aks-ubuntu-arm64-containerd-24.04-gen2": "AKSUbuntu-2404gen2arm64containerd",
	"aks-azurelinux-v3-gen2":                 "AKSAzureLinux-V3gen2", "aks-azurelinux-v3": "AKSAzureLinux-V3", "aks-azurelinux-v3-arm64-gen2": "AKSAzureLinux-V3gen2arm64",
}
