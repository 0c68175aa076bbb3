package azureinfra

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// Who calls: the functions that launch (provision, consolidate, drift, interruption: Create),
// lifecycle alone (NodeClass resolution), or every function (Get, List, Delete, leftovers, the
// catalog refresh).
const (
	launchers = "launchers"
	lifecycle = "lifecycle"
	everyFn   = "every function"
)

// Scopes an action is granted at.
const (
	atNodes        = "node resource group"
	atSubnets      = "node subnets"
	atSubscription = "subscription"
	atIdentity     = "kubelet identity"
	// atNodesBootstrapping: the node resource group, granted only with aks_provision_mode =
	// bootstrappingclient, the one mode whose launches make the call.
	atNodesBootstrapping = "node resource group (aks_provision_mode = bootstrappingclient)"
)

// armAction is the permission an ARM call needs (Azure "Azure resource provider operations",
// Microsoft.Compute and Microsoft.Network), where, and who makes the call.
type armAction struct {
	action, scope, who string
}

// sdkCallActions maps each SDK call of shared/cloud/azure (client field of Provider . method) to
// the action it needs. TestEveryARMCallIsGranted fails on a call missing here, so a new call
// cannot ship without its permission.
var sdkCallActions = map[string][]armAction{
	"vms.Get":                  {{"Microsoft.Compute/virtualMachines/read", atNodes, everyFn}},
	"vms.NewListPager":         {{"Microsoft.Compute/virtualMachines/read", atNodes, everyFn}},
	"vms.BeginCreateOrUpdate":  {{"Microsoft.Compute/virtualMachines/write", atNodes, launchers}, {"Microsoft.Compute/disks/write", atNodes, launchers}},
	"vms.BeginDelete":          {{"Microsoft.Compute/virtualMachines/delete", atNodes, everyFn}, {"Microsoft.Compute/disks/delete", atNodes, everyFn}},
	"nics.Get":                 {{"Microsoft.Network/networkInterfaces/read", atNodes, everyFn}},
	"nics.NewListPager":        {{"Microsoft.Network/networkInterfaces/read", atNodes, everyFn}},
	"nics.BeginCreateOrUpdate": {{"Microsoft.Network/networkInterfaces/write", atNodes, launchers}},
	"nics.BeginDelete":         {{"Microsoft.Network/networkInterfaces/delete", atNodes, everyFn}},
	"subnets.Get":              {{"Microsoft.Network/virtualNetworks/subnets/read", atSubnets, lifecycle}},
	"gallery.NewListPager":     {{"Microsoft.Compute/locations/communityGalleries/images/versions/read", atSubscription, lifecycle}},
	"lbs.NewListPager":         {{"Microsoft.Network/loadBalancers/read", atNodes, launchers}},
	"nsgs.NewListPager":        {{"Microsoft.Network/networkSecurityGroups/read", atNodes, launchers}},
	"usages.NewListPager":      {{"Microsoft.Compute/locations/usages/read", atSubscription, launchers}},
	// The CustomScript extension of bootstrappingclient mode (createCSE): the PUT, and the GET of
	// the extension that ends its long-running operation (azcore's poller reads a PUT's result
	// from the resource's own URL).
	"exts.BeginCreateOrUpdate": {{"Microsoft.Compute/virtualMachines/extensions/write", atNodesBootstrapping, launchers},
		{"Microsoft.Compute/virtualMachines/extensions/read", atNodesBootstrapping, launchers}},
}

// optionCalls are the provider's calls through its Options' interfaces (p.o.<field>.<method>)
// and why each needs no ARM action. TestEveryARMCallIsGranted fails on one missing here.
var optionCalls = map[string]string{
	"o.Catalog.Get":   "the in-memory catalog",
	"o.Catalog.Types": "the in-memory catalog",
	// The Azure Karpenter provider sends NodeBootstrapping_Get to its NODEBOOTSTRAPPING_SERVER_URL,
	// not through ARM, and Azure's Microsoft.ContainerService operations list no nodeBootstrapping
	// action: the server authorizes the caller's token, and no role here can grant or refuse it.
	"o.NodeBootstrapping.Get": "NodeBootstrapping_Get goes to the NodeBootstrapping server (--aks-nodebootstrapping-server-url), not ARM",
}

// linkedActions are the permissions ARM checks on resources a request body references (ARM:
// LinkedAuthorizationFailed without them), not on the resource written: the VM's NIC and kubelet
// identity, the NIC's subnet, backend pools and NSG (shared/cloud/azure vmParameters and
// createNIC), and the Resource SKUs list of the catalog refresh (shared/catalog/azurerefresh,
// called by every function through shared/cloud/registry).
var linkedActions = []armAction{
	{"Microsoft.Network/networkInterfaces/join/action", atNodes, launchers},
	{"Microsoft.Network/virtualNetworks/subnets/join/action", atSubnets, launchers},
	{"Microsoft.Network/loadBalancers/backendAddressPools/join/action", atNodes, launchers},
	{"Microsoft.Network/networkSecurityGroups/join/action", atNodes, launchers},
	{"Microsoft.ManagedIdentity/userAssignedIdentities/assign/action", atIdentity, launchers},
	{"Microsoft.Compute/skus/read", atSubscription, everyFn},
}

// providerCalls lists the p.<client>.<method> calls of the provider's non-test sources, sorted.
func providerCalls(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../shared/cloud/azure/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("provider sources: %v", err)
	}
	seen := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			method, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			field, ok := method.X.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if recv, ok := field.X.(*ast.Ident); ok && recv.Name == "p" && field.Sel.Name != "o" {
				seen[field.Sel.Name+"."+method.Sel.Name] = true
			}
			// p.o.<field>.<method>: a call through an interface or value of the Options.
			if opts, ok := field.X.(*ast.SelectorExpr); ok && opts.Sel.Name == "o" {
				if recv, ok := opts.X.(*ast.Ident); ok && recv.Name == "p" {
					seen["o."+field.Sel.Name+"."+method.Sel.Name] = true
				}
			}
			return true
		})
	}
	var out []string
	for c := range seen {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// granted is what the Terraform grants each caller at each scope: the custom roles' actions
// (TestCustomRolesLeastPrivilege checks each role's scope and assignees) and the built-in
// Managed Identity Operator's assign action on the kubelet identity.
func granted(t *testing.T) map[string]map[string][]string {
	cfg := config(t)
	l := func(name string) []string { return strs(local(t, cfg, name)) }
	nodesAll := l("terminate_actions")
	return map[string]map[string][]string{
		launchers: {atNodes: append(l("launch_actions"), nodesAll...), atSubnets: l("subnet_join_actions"), atSubscription: l("regional_actions"),
			atIdentity:           {"Microsoft.ManagedIdentity/userAssignedIdentities/assign/action"}, // Managed Identity Operator
			atNodesBootstrapping: append(append(l("extension_actions"), l("launch_actions")...), nodesAll...)},
		lifecycle: {atNodes: nodesAll, atSubnets: l("subnet_read_actions"), atSubscription: l("regional_actions")},
	}
}

// TestEveryARMCallIsGranted reads the SDK calls of shared/cloud/azure and fails if one is not
// known here (its action unlisted) or if an action a call, or a reference in its request, needs
// is not granted to every function that makes it, at the scope it is checked at. A grant at a
// wider scope than needed is TestCustomRolesLeastPrivilege's to refuse.
func TestEveryARMCallIsGranted(t *testing.T) {
	g := granted(t)
	need := slices.Clone(linkedActions)
	for _, c := range providerCalls(t) {
		if strings.HasPrefix(c, "o.") {
			if _, ok := optionCalls[c]; !ok {
				t.Errorf("shared/cloud/azure calls %s through its Options: add it to optionCalls with the ARM action it needs (or why none), granted in identity.tf", c)
			}
			continue
		}
		acts, ok := sdkCallActions[c]
		if !ok {
			t.Errorf("shared/cloud/azure calls %s: add the ARM action it needs to sdkCallActions and grant it in identity.tf", c)
			continue
		}
		need = append(need, acts...)
	}
	for _, a := range need {
		callers := []string{a.who}
		if a.who == everyFn {
			callers = []string{launchers, lifecycle}
		}
		for _, who := range callers {
			if !slices.Contains(g[who][a.scope], a.action) {
				t.Errorf("%s is not granted to %s at the %s", a.action, who, a.scope)
			}
		}
	}
	// The table is not stale: every call it names is still made.
	calls := providerCalls(t)
	for c := range sdkCallActions {
		if !slices.Contains(calls, c) {
			t.Errorf("sdkCallActions names %s, which shared/cloud/azure no longer calls", c)
		}
	}
	for c := range optionCalls {
		if !slices.Contains(calls, c) {
			t.Errorf("optionCalls names %s, which shared/cloud/azure no longer calls", c)
		}
	}
}
