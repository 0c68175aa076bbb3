// Package azureinfra holds the tests of infra/azure: the Terraform (HCL) files are parsed with
// hashicorp/hcl/v2 and checked for least privilege (custom roles with no wildcard, each at its one
// scope, no launch right for lifecycle, every ARM action the provider's SDK calls need granted to
// the functions that make them, a policy that touches only Dovetail-tagged resources),
// dead-lettering on every subscription, the agent's Workload Identity federation, and parity of
// the function apps and their function.json folders with the code's functions and routes.
package azureinfra

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/spf13/pflag"
	"github.com/zclconf/go-cty/cty"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/queue/azureblob"
	"github.com/dovetail-dev/dovetail/shared/queue/eventgrid"
	"github.com/dovetail-dev/dovetail/shared/runtime"
	"github.com/dovetail-dev/dovetail/shared/runtime/cloudflags"
)

// block is one top-level block of the configuration with its source.
type block struct {
	*hclsyntax.Block
	src []byte
}

// config parses every .tf file of this folder.
func config(t *testing.T) []block {
	t.Helper()
	files, err := filepath.Glob("*.tf")
	if err != nil || len(files) == 0 {
		t.Fatalf("no .tf files: %v", err)
	}
	p := hclparse.NewParser()
	var out []block
	for _, f := range files {
		file, diags := p.ParseHCLFile(f)
		if diags.HasErrors() {
			t.Fatalf("%s: %s", f, diags.Error())
		}
		for _, b := range file.Body.(*hclsyntax.Body).Blocks {
			out = append(out, block{b, file.Bytes})
		}
	}
	return out
}

// find returns the block of kind ("resource", "data", "locals", …) and labels.
func find(t *testing.T, cfg []block, kind string, labels ...string) block {
	t.Helper()
	for _, b := range cfg {
		if b.Type == kind && slices.Equal(b.Labels, labels) {
			return b
		}
	}
	t.Fatalf("no %s %v", kind, labels)
	return block{}
}

func all(cfg []block, kind, typ string) []block {
	var out []block
	for _, b := range cfg {
		if b.Type == kind && len(b.Labels) > 0 && b.Labels[0] == typ {
			out = append(out, b)
		}
	}
	return out
}

// expr is the source text of an attribute of b (or of a nested block path "a.b.attr").
func (b block) expr(t *testing.T, path string) string {
	t.Helper()
	body := b.Body
	parts := strings.Split(path, ".")
	for _, nested := range parts[:len(parts)-1] {
		var next *hclsyntax.Body
		for _, nb := range body.Blocks {
			if nb.Type == nested {
				next = nb.Body
			}
		}
		if next == nil {
			t.Fatalf("%s %v: no block %q", b.Type, b.Labels, nested)
		}
		body = next
	}
	a, ok := body.Attributes[parts[len(parts)-1]]
	if !ok {
		t.Fatalf("%s %v: no attribute %q", b.Type, b.Labels, path)
	}
	r := a.Expr.Range()
	return string(b.src[r.Start.Byte:r.End.Byte])
}

// has reports whether b has the nested block path ("a.b").
func (b block) has(path string) bool {
	body := b.Body
	for _, nested := range strings.Split(path, ".") {
		var next *hclsyntax.Body
		for _, nb := range body.Blocks {
			if nb.Type == nested {
				next = nb.Body
			}
		}
		if next == nil {
			return false
		}
		body = next
	}
	return true
}

// locals evaluates the literal value of a local (lists of strings, objects of literals).
func local(t *testing.T, cfg []block, name string) cty.Value {
	t.Helper()
	for _, b := range cfg {
		if b.Type != "locals" {
			continue
		}
		if a, ok := b.Body.Attributes[name]; ok {
			v, diags := a.Expr.Value(&hcl.EvalContext{})
			if diags.HasErrors() {
				t.Fatalf("local.%s is not a literal: %s", name, diags.Error())
			}
			return v
		}
	}
	t.Fatalf("no local %q", name)
	return cty.NilVal
}

func strs(v cty.Value) []string {
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		out = append(out, e.AsString())
	}
	return out
}

// The code's functions: the runtime's names and routes (shared/runtime: "/<name>", and
// "/<name>-events" for the agent's events where the function's own subject is another).
var codeFunctions = []string{"consolidate", "drift", "interruption", "lifecycle", "provision"}

func TestFunctionParityWithTheCode(t *testing.T) {
	cfg := config(t)
	fns := local(t, cfg, "functions")
	var names []string
	var folders []string
	for it := fns.ElementIterator(); it.Next(); {
		k, v := it.Element()
		names = append(names, k.AsString())
		folders = append(folders, strs(v.GetAttr("folders"))...)
		if launches := v.GetAttr("launches").True(); launches == (k.AsString() == "lifecycle") {
			t.Errorf("function %s: launches = %v; every function but lifecycle launches (replacements, re-plans)", k.AsString(), launches)
		}
	}
	sort.Strings(names)
	if !slices.Equal(names, codeFunctions) {
		t.Fatalf("function apps %v, want the code's %v", names, codeFunctions)
	}
	// Every folder is a route of its function, and app/ holds exactly these folders, each an
	// eventGridTrigger bound to runtime.DefaultTriggerBinding.
	entries, err := os.ReadDir("app")
	if err != nil {
		t.Fatal(err)
	}
	var onDisk []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		onDisk = append(onDisk, e.Name())
		b, err := os.ReadFile(filepath.Join("app", e.Name(), "function.json"))
		if err != nil {
			t.Fatal(err)
		}
		var fj struct {
			Bindings []struct{ Type, Direction, Name string }
		}
		if err := json.Unmarshal(b, &fj); err != nil {
			t.Fatal(err)
		}
		if len(fj.Bindings) != 1 || fj.Bindings[0].Type != "eventGridTrigger" || fj.Bindings[0].Direction != "in" || fj.Bindings[0].Name != runtime.DefaultTriggerBinding {
			t.Errorf("app/%s/function.json bindings %+v, want one eventGridTrigger named %q", e.Name(), fj.Bindings, runtime.DefaultTriggerBinding)
		}
		name, _ := strings.CutSuffix(e.Name(), runtime.EventsRouteSuffix)
		if !slices.Contains(codeFunctions, name) {
			t.Errorf("app/%s is no route of a function", e.Name())
		}
	}
	sort.Strings(folders)
	if !slices.Equal(onDisk, folders) {
		t.Fatalf("app/ folders %v, want local.functions' %v", onDisk, folders)
	}
	var host struct {
		CustomHandler struct {
			Description struct{ DefaultExecutablePath string }
		}
	}
	b, _ := os.ReadFile("app/host.json")
	if err := json.Unmarshal(b, &host); err != nil || host.CustomHandler.Description.DefaultExecutablePath != "handler" {
		t.Fatalf("app/host.json: %v %+v, want a custom handler running ./handler", err, host)
	}
}

// The function apps run the custom handler with the settings the runtime reads, under their own
// identity, one instance each.
func TestFunctionApps(t *testing.T) {
	cfg := config(t)
	app := find(t, cfg, "resource", "azurerm_linux_function_app", "fn")
	for attr, want := range map[string]string{
		"for_each":                    "local.functions",
		"site_config.app_scale_limit": "1",
		"site_config.application_stack.use_custom_runtime": "true",
		"identity.type":                 `"UserAssigned"`,
		"identity.identity_ids":         "[azurerm_user_assigned_identity.fn[each.key].id]",
		"storage_uses_managed_identity": "true",
		"https_only":                    "true",
	} {
		if got := app.expr(t, attr); got != want {
			t.Errorf("function app %s = %s, want %s", attr, got, want)
		}
	}
	settings := app.expr(t, "app_settings")
	for _, flag := range []string{"cluster", "cloud", "eventgrid-namespace-endpoint", "commands-topic", "storage-account-url", "blob-container", "dead-letter-container"} {
		if !strings.Contains(settings, runtime.EnvName(flag)+" ") {
			t.Errorf("app_settings lack %s (--%s)", runtime.EnvName(flag), flag)
		}
	}
	for _, s := range []string{`FUNCTIONS_WORKER_RUNTIME              = "custom"`, "AZURE_CLIENT_ID"} {
		if !strings.Contains(settings, s) {
			t.Errorf("app_settings lack %s", s)
		}
	}
	for _, secret := range []string{eventgrid.EnvTopicKey, eventgrid.EnvNamespaceKey, azureblob.EnvConnectionString, "AccountKey"} {
		if strings.Contains(settings, secret) {
			t.Errorf("app_settings carry %s; identities only", secret)
		}
	}
	// The lifecycle function's --node-repair is set from a bool variable on by default, as
	// the flag is.
	if !regexp.MustCompile(runtime.EnvName("node-repair") + ` += tostring\(var\.node_repair\)`).MatchString(settings) {
		t.Errorf("app_settings lack %s = tostring(var.node_repair)", runtime.EnvName("node-repair"))
	}
	if v := find(t, cfg, "variable", "node_repair"); v.expr(t, "type") != "bool" || v.expr(t, "default") != "true" {
		t.Errorf("variable node_repair: type %s default %s, want bool true", v.expr(t, "type"), v.expr(t, "default"))
	}
	// Every Azure provider flag of the functions (shared/runtime/cloudflags) is set, the
	// bootstrap token only as a Key Vault reference.
	fs := pflag.NewFlagSet("fn", pflag.ContinueOnError)
	(&cloudflags.Options{}).Register(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		if strings.HasPrefix(f.Name, "azure-") || strings.HasPrefix(f.Name, "aks-") {
			if !strings.Contains(settings, runtime.EnvName(f.Name)+" ") {
				t.Errorf("app_settings lack %s (--%s)", runtime.EnvName(f.Name), f.Name)
			}
		}
	})
	if !strings.Contains(settings, `DOVETAIL_AKS_BOOTSTRAP_TOKEN = "@Microsoft.KeyVault(SecretUri=${var.aks_bootstrap_token_secret_uri})"`) {
		t.Error("the bootstrap token must be a Key Vault reference")
	}
	if got := find(t, cfg, "resource", "azurerm_role_assignment", "bootstrap_token").expr(t, "scope"); got != "var.aks_bootstrap_token_secret_id" {
		t.Errorf("Key Vault Secrets User at %s: only on the token's secret", got)
	}
	// Azure Monitor's OTLP ingestion takes a token only from an identity holding Monitoring
	// Metrics Publisher on the Data Collection Rule: granted per function, on that rule alone,
	// and only when a rule is configured.
	pub := find(t, cfg, "resource", "azurerm_role_assignment", "metrics_publisher")
	if got := pub.expr(t, "role_definition_name"); got != `"Monitoring Metrics Publisher"` {
		t.Errorf("metrics_publisher role %s", got)
	}
	if got := pub.expr(t, "scope"); got != "var.otlp_metrics_dcr_id" {
		t.Errorf("Monitoring Metrics Publisher at %s: only on the Data Collection Rule", got)
	}
	if got := pub.expr(t, "for_each"); got != `var.otlp_metrics_dcr_id == "" ? {} : local.functions` {
		t.Errorf("metrics_publisher for_each %s: one per function, none without a rule", got)
	}
	if got := pub.expr(t, "principal_id"); got != "azurerm_user_assigned_identity.fn[each.key].principal_id" {
		t.Errorf("metrics_publisher principal %s: each function's own identity", got)
	}
}

func TestCustomRolesLeastPrivilege(t *testing.T) {
	cfg := config(t)
	launch, terminate := strs(local(t, cfg, "launch_actions")), strs(local(t, cfg, "terminate_actions"))
	for _, role := range []string{"launch", "terminate", "extension", "subnet_join", "subnet_read", "regional"} {
		for _, a := range strs(local(t, cfg, role+"_actions")) {
			if strings.Contains(a, "*") {
				t.Errorf("role %s: action %s: no wildcard", role, a)
			}
			if !strings.HasPrefix(a, "Microsoft.Compute/") && !strings.HasPrefix(a, "Microsoft.Network/") {
				t.Errorf("role %s: action %s: outside compute and network", role, a)
			}
		}
	}
	for _, a := range launch {
		if strings.HasSuffix(a, "/delete") {
			t.Errorf("launch role: %s deletes", a)
		}
	}
	for _, a := range terminate {
		if !strings.HasSuffix(a, "/delete") && !strings.HasSuffix(a, "/read") {
			t.Errorf("terminate role: %s is neither a delete nor a read", a)
		}
	}
	for _, role := range []string{"subnet_read", "regional"} {
		for _, a := range strs(local(t, cfg, role+"_actions")) {
			if !strings.HasSuffix(a, "/read") {
				t.Errorf("role %s only reads: %s", role, a)
			}
		}
	}
	if !slices.Contains(terminate, "Microsoft.Compute/virtualMachines/delete") || !slices.Contains(launch, "Microsoft.Compute/virtualMachines/write") {
		t.Error("the roles must create and delete VMs")
	}
	// The extension role: the CustomScript extension's create and read, nothing else (no
	// delete: a VM's delete removes its extensions), and in no other role.
	if got := strs(local(t, cfg, "extension_actions")); !slices.Equal(got, []string{"Microsoft.Compute/virtualMachines/extensions/read", "Microsoft.Compute/virtualMachines/extensions/write"}) {
		t.Errorf("extension role actions %v", got)
	}
	for _, a := range append(launch, terminate...) {
		if strings.Contains(a, "/extensions/") {
			t.Errorf("%s outside the extension role: every mode would get it", a)
		}
	}
	// Each custom role: defined and assignable at its one scope, assigned only there, to whom it is for.
	for name, want := range map[string]struct{ scope, assignable, assignedAt, forEach string }{
		"launch":    {"data.azurerm_resource_group.nodes.id", "[data.azurerm_resource_group.nodes.id]", "data.azurerm_resource_group.nodes.id", "local.launching"},
		"terminate": {"data.azurerm_resource_group.nodes.id", "[data.azurerm_resource_group.nodes.id]", "data.azurerm_resource_group.nodes.id", "local.functions"},
		"extension": {"data.azurerm_resource_group.nodes.id", "[data.azurerm_resource_group.nodes.id]", "data.azurerm_resource_group.nodes.id",
			`var.aks_provision_mode == "bootstrappingclient" ? local.launching : {}`},
		"subnet_join": {"local.subscription_id", "local.subnet_rg_ids", "each.value.subnet", "local.subnet_launchers"},
		"subnet_read": {"local.subscription_id", "local.subnet_rg_ids", "each.value", "toset(local.node_subnet_ids)"},
		"regional":    {"local.subscription_id", "[local.subscription_id]", "local.subscription_id", "local.functions"},
	} {
		r := find(t, cfg, "resource", "azurerm_role_definition", name)
		if r.expr(t, "scope") != want.scope || r.expr(t, "assignable_scopes") != want.assignable {
			t.Errorf("role %s: scope %s, assignable %s: want %s, %s", name, r.expr(t, "scope"), r.expr(t, "assignable_scopes"), want.scope, want.assignable)
		}
		if r.expr(t, "permissions.actions") != "local."+name+"_actions" || r.expr(t, "permissions.not_actions") != "[]" {
			t.Errorf("role %s: permissions are not local.%s_actions", name, name)
		}
		if _, ok := r.Body.Blocks[0].Body.Attributes["data_actions"]; ok {
			t.Errorf("role %s: data actions", name)
		}
		a := find(t, cfg, "resource", "azurerm_role_assignment", name)
		if a.expr(t, "scope") != want.assignedAt || a.expr(t, "for_each") != want.forEach ||
			a.expr(t, "role_definition_id") != "azurerm_role_definition."+name+".role_definition_resource_id" {
			t.Errorf("assignment %s: at %s for %s, want at %s for %s", name, a.expr(t, "scope"), a.expr(t, "for_each"), want.assignedAt, want.forEach)
		}
	}
	if got := find(t, cfg, "resource", "azurerm_role_assignment", "subnet_read").expr(t, "principal_id"); got != `azurerm_user_assigned_identity.fn["lifecycle"].principal_id` {
		t.Errorf("subnet_read is for lifecycle, which resolves subnets: %s", got)
	}
	// The locals the assignments range over: the launching functions are those with launches = true.
	for _, b := range cfg {
		if b.Type == "locals" && b.Body.Attributes["launching"] != nil {
			if got := b.expr(t, "launching"); got != "{ for f, spec in local.functions : f => spec if spec.launches }" {
				t.Errorf("local.launching = %s: only the functions that launch", got)
			}
		}
	}
	for _, a := range all(cfg, "resource", "azurerm_role_assignment") {
		if _, custom := a.Body.Attributes["role_definition_id"]; custom && !slices.Contains([]string{"launch", "terminate", "extension", "subnet_join", "subnet_read", "regional"}, a.Labels[1]) {
			t.Errorf("assignment %s: a custom role this test does not know", a.Labels[1])
		}
	}
	// Built-in roles: only the data-plane ones named here, and Managed Identity Operator on the
	// kubelet identity alone.
	allowed := []string{`"EventGrid Data Sender"`, `"EventGrid Data Receiver"`, `"Storage Blob Data Contributor"`, `"Storage Blob Data Owner"`, `"Key Vault Secrets User"`, `"Monitoring Metrics Publisher"`, `"Managed Identity Operator"`}
	for _, a := range all(cfg, "resource", "azurerm_role_assignment") {
		if _, ok := a.Body.Attributes["role_definition_name"]; ok && !slices.Contains(allowed, a.expr(t, "role_definition_name")) {
			t.Errorf("assignment %s: built-in role %s", a.Labels[1], a.expr(t, "role_definition_name"))
		}
		if _, ok := a.Body.Attributes["role_definition_name"]; ok && a.expr(t, "role_definition_name") == `"Managed Identity Operator"` &&
			(a.expr(t, "scope") != "var.aks_kubelet_identity_id" || a.expr(t, "for_each") != `var.aks_kubelet_identity_id == "" ? {} : local.launching`) {
			t.Errorf("Managed Identity Operator at %s for %s: the kubelet identity only, for the functions that launch", a.expr(t, "scope"), a.expr(t, "for_each"))
		}
	}
	if got := find(t, cfg, "resource", "azurerm_role_assignment", "host_storage").expr(t, "scope"); got != "azurerm_storage_account.host.id" {
		t.Errorf("Storage Blob Data Owner at %s: only on the host's own account", got)
	}
}

// The one Azure Policy evaluates only VMs and NICs carrying Dovetail's cluster tag (the one the
// provider writes: dovetail.dev/cluster with "/" as "_"): a resource without it (AKS's, the
// user's, a private endpoint's NIC) is never denied, and no tag exempts a resource, since a
// condition "tag exists = false" outside the deny reasons would be an exemption the launch
// identity could grant itself by writing that tag.
func TestPolicyTouchesOnlyDovetailResources(t *testing.T) {
	cfg := config(t)
	if got, want := local(t, cfg, "cluster_tag").AsString(), strings.ReplaceAll(apisv1.TagCluster, "/", "_"); got != want {
		t.Fatalf("local.cluster_tag %q, want %q", got, want)
	}
	if got, want := local(t, cfg, "nodeclaim_tag").AsString(), strings.ReplaceAll(apisv1.TagNodeClaim, "/", "_"); got != want {
		t.Fatalf("local.nodeclaim_tag %q, want %q", got, want)
	}
	defs := all(cfg, "resource", "azurerm_policy_definition")
	if len(defs) != 1 || defs[0].Labels[1] != "dovetail_tags" {
		t.Fatalf("%d policy definitions, want dovetail_tags only", len(defs))
	}
	rule := defs[0].expr(t, "policy_rule")
	scoped := `{ field = "tags['${local.cluster_tag}']", exists = true },`
	if !strings.Contains(rule, scoped) {
		t.Errorf("rule is not scoped to Dovetail-tagged resources (%s)", scoped)
	}
	deny := rule[strings.Index(rule, "anyOf"):]
	for _, want := range []string{`{ field = "tags['${local.cluster_tag}']", notEquals = var.cluster_name }`, `{ field = "tags['${local.nodeclaim_tag}']", exists = false }`,
		`{ field = "tags['aks-managed-poolName']", exists = true }`, `then = { effect = "deny" }`} {
		if !strings.Contains(deny, want) {
			t.Errorf("deny reasons lack %s", want)
		}
	}
	if head := rule[:strings.Index(rule, "anyOf")]; strings.Contains(head, "exists = false") || strings.Contains(head, "notEquals") {
		t.Errorf("the rule's scope holds a condition a tag could satisfy: %s", head)
	}
	if strings.Contains(rule, "denyAction") {
		t.Error("a denyAction denies every principal's deletes, others' included")
	}
	a := find(t, cfg, "resource", "azurerm_resource_group_policy_assignment", "dovetail_tags")
	if a.expr(t, "resource_group_id") != "data.azurerm_resource_group.nodes.id" || a.expr(t, "policy_definition_id") != "azurerm_policy_definition.dovetail_tags.id" {
		t.Error("policy dovetail_tags: not assigned to the node resource group")
	}
}

// Every subscription dead-letters to the container the code writes its own dead letters to,
// CloudEvents schema, bounded retries; the agent's queue subscription matches the consumer.
func TestSubscriptionsDeadLetter(t *testing.T) {
	cfg := config(t)
	s := find(t, cfg, "resource", "azurerm_eventgrid_event_subscription", "push")
	for attr, want := range map[string]string{
		"for_each":              "local.push_subscriptions",
		"event_delivery_schema": `"CloudEventSchemaV1_0"`,
		"storage_blob_dead_letter_destination.storage_blob_container_name": "azurerm_storage_container.deadletters.name",
		"retry_policy.max_delivery_attempts":                               "5",
		"azure_function_endpoint.function_id":                              `"${azurerm_linux_function_app.fn[each.value.app].id}/functions/${each.value.folder}"`,
	} {
		if got := s.expr(t, attr); got != want {
			t.Errorf("push subscription %s = %s, want %s", attr, got, want)
		}
	}
	if !s.has("dead_letter_identity") {
		t.Error("push subscriptions dead-letter without an identity")
	}
	for _, topic := range []string{"events", "notices"} {
		tp := find(t, cfg, "resource", "azurerm_eventgrid_topic", topic)
		if tp.expr(t, "input_schema") != `"CloudEventSchemaV1_0"` || tp.expr(t, "local_auth_enabled") != "false" {
			t.Errorf("topic %s: CloudEvents input and no keys", topic)
		}
	}
	if got := find(t, cfg, "resource", "azurerm_storage_container", "deadletters").expr(t, "name"); got != `"deadletters"` {
		t.Errorf("dead-letter container %s", got)
	}
	if got := find(t, cfg, "resource", "azurerm_storage_container", "claims").expr(t, "name"); got != `"claims"` {
		t.Errorf("claims container %s", got)
	}
	if got := find(t, cfg, "resource", "azurerm_storage_management_policy", "claims").expr(t, "rule.filters.prefix_match"); got != `["claims/`+azureblob.DefaultPrefix+`"]` {
		t.Errorf("claim-check expiry prefix %s, want claims/%s", got, azureblob.DefaultPrefix)
	}
	agent := find(t, cfg, "resource", "azapi_resource", "commands_agent").expr(t, "body")
	for _, want := range []string{`deliveryMode = "Queue"`, "receiveLockDurationInSeconds = 60", "maxDeliveryCount             = 10",
		`endpointType = "StorageBlob"`, `blobContainerName = "deadletters"`} {
		if !strings.Contains(agent, want) {
			t.Errorf("agent subscription lacks %s", want)
		}
	}
	if eventgrid.DefaultLockDuration.Seconds() != 60 || eventgrid.DefaultMaxDeliveries >= 10 {
		t.Error("the consumer's lock and delivery defaults no longer match the subscription")
	}
	if find(t, cfg, "resource", "azapi_resource", "commands_topic").expr(t, "name") != `"`+eventgrid.DefaultCommandsTopic+`"` ||
		find(t, cfg, "resource", "azapi_resource", "commands_agent").expr(t, "name") != `"`+eventgrid.DefaultCommandsSubscription+`"` {
		t.Error("commands topic and subscription names differ from the code's defaults")
	}
}

func TestAgentWorkloadIdentity(t *testing.T) {
	cfg := config(t)
	fic := find(t, cfg, "resource", "azurerm_federated_identity_credential", "agent")
	for attr, want := range map[string]string{
		"parent_id": "azurerm_user_assigned_identity.agent.id",
		"issuer":    "var.aks_oidc_issuer_url",
		"subject":   `"system:serviceaccount:${var.agent_namespace}:${var.agent_service_account}"`,
		"audience":  `["api://AzureADTokenExchange"]`,
	} {
		if got := fic.expr(t, attr); got != want {
			t.Errorf("federated credential %s = %s, want %s", attr, got, want)
		}
	}
	// The agent holds no ARM role: only Event Grid data roles and its containers.
	for _, a := range all(cfg, "resource", "azurerm_role_assignment") {
		if strings.Contains(a.expr(t, "principal_id"), "agent") && a.Body.Attributes["role_definition_id"] != nil {
			t.Errorf("assignment %s gives the agent a custom ARM role", a.Labels[1])
		}
	}
	if got := find(t, cfg, "resource", "azurerm_role_assignment", "agent_receive").expr(t, "scope"); got != "azapi_resource.commands_agent.id" {
		t.Errorf("agent receives at %s, want its own subscription", got)
	}
}

// The interruption function's notice subscriptions (the Scheduled Events topic and the
// subscription-wide HealthResources system topic) deliver only events whose subject begins with
// the node resource group's ID, case-insensitively as ARM IDs compare: a VM of the same name in
// another resource group or subscription never reaches the function. The events topics carry no
// such filter (their subjects are not resource IDs).
func TestNoticeSubscriptionsFilteredToTheNodeResourceGroup(t *testing.T) {
	cfg := config(t)
	s := find(t, cfg, "resource", "azurerm_eventgrid_event_subscription", "push")
	var filter *hclsyntax.Block
	for _, nb := range s.Body.Blocks {
		if nb.Type == "dynamic" && len(nb.Labels) == 1 && nb.Labels[0] == "subject_filter" {
			filter = nb
		}
	}
	if filter == nil {
		t.Fatal("push subscriptions have no dynamic subject_filter")
	}
	fb := block{filter, s.src}
	if got := fb.expr(t, "for_each"); got != `each.value.subject_prefix == null ? [] : [each.value.subject_prefix]` {
		t.Errorf("subject_filter for_each = %s", got)
	}
	if got := fb.expr(t, "content.subject_begins_with"); got != "subject_filter.value" {
		t.Errorf("subject_begins_with = %s", got)
	}
	if got := fb.expr(t, "content.case_sensitive"); got != "false" {
		t.Errorf("case_sensitive = %s, want false (ARM resource IDs are case-insensitive)", got)
	}
	var locals string
	for _, b := range cfg {
		if b.Type == "locals" {
			if _, ok := b.Body.Attributes["push_subscriptions"]; ok {
				locals = string(b.src[b.Range().Start.Byte:b.Range().End.Byte])
				if got := b.expr(t, "node_vm_prefix"); got != `"${data.azurerm_resource_group.nodes.id}/providers/Microsoft.Compute/virtualMachines/"` {
					t.Errorf("node_vm_prefix = %s, want the node resource group's VMs", got)
				}
			}
		}
	}
	for _, want := range []string{
		`"notices-interruption" = { scope = azurerm_eventgrid_topic.notices.id, app = "interruption", folder = "interruption", subject_prefix = local.node_vm_prefix }`,
		`"health-interruption"  = { scope = azurerm_eventgrid_system_topic.health.id, app = "interruption", folder = "interruption", subject_prefix = local.node_vm_prefix }`,
		`subject_prefix = null`,
	} {
		if !strings.Contains(locals, want) {
			t.Errorf("push_subscriptions lacks %s", want)
		}
	}
}

// TestREADMEDeployNamesEveryVariable: the README's apply line is one a new operator can run as
// written: it sets exactly the variables without a default (azurerm 4.x's subscription_id and
// aks_kubernetes_version among them, both once missing), from the module's directory, and the
// README names every optional variable.
func TestREADMEDeployNamesEveryVariable(t *testing.T) {
	var required, optional []string
	for _, b := range config(t) {
		if b.Type != "variable" {
			continue
		}
		if b.Body.Attributes["default"] != nil {
			optional = append(optional, b.Labels[0])
		} else {
			required = append(required, b.Labels[0])
		}
	}
	sort.Strings(required)
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var apply string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(readme), -1) {
		if strings.Contains(m[1], "terraform apply") {
			apply = strings.ReplaceAll(m[1], "\\\n", " ")
		}
	}
	if !strings.Contains(apply, "cd infra/azure\n") || !strings.Contains(apply, "terraform init && terraform apply ") {
		t.Fatalf("README: no ```sh block with `cd infra/azure` then `terraform init && terraform apply -var ...`:\n%s", apply)
	}
	var given []string
	for _, m := range regexp.MustCompile(`-var ([a-z_]+)=`).FindAllStringSubmatch(apply, -1) {
		given = append(given, m[1])
	}
	sort.Strings(given)
	if !slices.Equal(given, required) {
		t.Errorf("README apply line sets %v, want exactly the variables without a default %v", given, required)
	}
	for _, v := range optional {
		if !strings.Contains(string(readme), "`"+v+"`") {
			t.Errorf("README does not name the optional variable `%s`", v)
		}
	}
}
