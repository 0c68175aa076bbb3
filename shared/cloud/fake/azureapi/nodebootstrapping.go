package azureapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
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
	f.Requests++
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
