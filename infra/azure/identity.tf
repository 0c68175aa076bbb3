# Who may do what. Custom roles with named actions only:
#   launch      (node resource group; functions that launch): create node VMs, their NICs and OS
#               disks; read the cluster's load balancers and agent pool NSG and join NICs to
#               them (shared/cloud/azure network: backend pools, the NSG of a BYO subnet).
#   terminate   (node resource group; every function): delete node VMs, NICs and OS disks.
#   extension   (node resource group; functions that launch, only with aks_provision_mode =
#               bootstrappingclient): create a node VM's CustomScript extension
#               cse-agent-karpenter and read it (the create's long-running operation ends with a
#               GET of the extension). A VM's delete removes its extensions with it. The
#               NodeBootstrapping call of that mode is not an ARM operation (the provider's
#               NODEBOOTSTRAPPING_SERVER_URL; no Microsoft.ContainerService action exists for it),
#               so no role grants it.
#   subnet-join (each node subnet; functions that launch): put a NIC in the subnet.
#   subnet-read (each node subnet; lifecycle): read the subnets AKSNodeClasses resolve to.
#   regional    (the subscription; every function): read the Resource SKUs (the catalog), the
#               Compute usages (quotas, read before a launch) and the AKS node image versions of
#               the community galleries (image resolution). These APIs live at the subscription
#               (…/providers/Microsoft.Compute/locations/{location}/…), so no narrower scope
#               exists; the role only reads.
# Assigning the kubelet identity to node VMs is the built-in Managed Identity Operator on that
# one identity, not userAssignedIdentities/assign/action over every identity of the group.
# infra_test.go reads the SDK calls of shared/cloud/azure and fails if one's action is missing.
#
# Azure RBAC cannot condition Microsoft.Compute or Microsoft.Network actions on tags (ABAC
# role-assignment conditions exist only for some data actions), and Azure Policy cannot see the
# caller: a policy that denies untagged VMs or their deletion denies AKS, the user and every
# other tool in the node resource group too, and an exemption by tag (aks-managed-poolName) is one
# the launch identity can grant itself by writing that tag. So the policy below touches only
# resources that carry Dovetail's cluster tag: they must be this cluster's, name their NodeClaim,
# and may not pose as AKS-managed. What keeps Dovetail off other VMs is the provider's own tag
# check before every delete (shared/cloud/azure Provider.Delete and DeleteLeftover:
# cloud.ErrNotOwned) and the roles' scope (the node resource group).

locals {
  launch_actions = [
    "Microsoft.Compute/virtualMachines/read",
    "Microsoft.Compute/virtualMachines/write",
    "Microsoft.Compute/disks/read",
    "Microsoft.Compute/disks/write",
    "Microsoft.Network/networkInterfaces/read",
    "Microsoft.Network/networkInterfaces/write",
    "Microsoft.Network/networkInterfaces/join/action",
    "Microsoft.Network/loadBalancers/read",
    "Microsoft.Network/loadBalancers/backendAddressPools/join/action",
    "Microsoft.Network/networkSecurityGroups/read",
    "Microsoft.Network/networkSecurityGroups/join/action",
  ]
  terminate_actions = [
    "Microsoft.Compute/virtualMachines/read",
    "Microsoft.Compute/virtualMachines/delete",
    "Microsoft.Compute/disks/delete",
    "Microsoft.Network/networkInterfaces/read",
    "Microsoft.Network/networkInterfaces/delete",
  ]
  extension_actions = [
    "Microsoft.Compute/virtualMachines/extensions/read",
    "Microsoft.Compute/virtualMachines/extensions/write",
  ]
  subnet_join_actions = ["Microsoft.Network/virtualNetworks/subnets/join/action"]
  subnet_read_actions = ["Microsoft.Network/virtualNetworks/subnets/read"]
  regional_actions = [
    "Microsoft.Compute/skus/read",
    "Microsoft.Compute/locations/usages/read",
    "Microsoft.Compute/locations/communityGalleries/images/versions/read",
  ]
  # The subnets node NICs may join: the default one and those AKSNodeClasses name. A custom role
  # is assignable at resource groups at the narrowest, so the subnet roles list the subnets'
  # resource groups and are assigned on each subnet.
  node_subnet_ids  = distinct(concat([var.node_subnet_id], var.extra_node_subnet_ids))
  subnet_rg_ids    = distinct([for s in local.node_subnet_ids : regex("(?i)^(/subscriptions/[^/]+/resourceGroups/[^/]+)/", s)[0]])
  subscription_id  = "/subscriptions/${var.subscription_id}"
  launching        = { for f, spec in local.functions : f => spec if spec.launches }
  subnet_launchers = { for pair in setproduct(keys(local.launching), local.node_subnet_ids) : "${pair[0]}|${pair[1]}" => { fn = pair[0], subnet = pair[1] } }
}

resource "azurerm_role_definition" "launch" {
  name        = "${local.name}-launch"
  scope       = data.azurerm_resource_group.nodes.id
  description = "Dovetail ${var.cluster_name}: create node VMs, their NICs and OS disks in the node resource group (Azure Policy requires the dovetail.dev_cluster tag)."
  permissions {
    actions     = local.launch_actions
    not_actions = []
  }
  assignable_scopes = [data.azurerm_resource_group.nodes.id]
}

resource "azurerm_role_definition" "terminate" {
  name        = "${local.name}-terminate"
  scope       = data.azurerm_resource_group.nodes.id
  description = "Dovetail ${var.cluster_name}: delete node VMs, NICs and OS disks in the node resource group (Azure Policy denies deleting a VM without the dovetail.dev_cluster tag)."
  permissions {
    actions     = local.terminate_actions
    not_actions = []
  }
  assignable_scopes = [data.azurerm_resource_group.nodes.id]
}

resource "azurerm_role_definition" "extension" {
  name        = "${local.name}-extension"
  scope       = data.azurerm_resource_group.nodes.id
  description = "Dovetail ${var.cluster_name}: create and read node VMs' CustomScript extension (aks_provision_mode = bootstrappingclient) in the node resource group."
  permissions {
    actions     = local.extension_actions
    not_actions = []
  }
  assignable_scopes = [data.azurerm_resource_group.nodes.id]
}

resource "azurerm_role_definition" "subnet_join" {
  name              = "${local.name}-subnet-join"
  scope             = local.subscription_id
  description       = "Dovetail ${var.cluster_name}: put node NICs in the node subnets."
  assignable_scopes = local.subnet_rg_ids
  permissions {
    actions     = local.subnet_join_actions
    not_actions = []
  }
}

resource "azurerm_role_definition" "subnet_read" {
  name              = "${local.name}-subnet-read"
  scope             = local.subscription_id
  description       = "Dovetail ${var.cluster_name}: read the node subnets AKSNodeClasses resolve to."
  assignable_scopes = local.subnet_rg_ids
  permissions {
    actions     = local.subnet_read_actions
    not_actions = []
  }
}

resource "azurerm_role_definition" "regional" {
  name              = "${local.name}-regional-read"
  scope             = local.subscription_id
  description       = "Dovetail ${var.cluster_name}: read Resource SKUs, Compute usages (quotas) and AKS node image versions."
  assignable_scopes = [local.subscription_id]
  permissions {
    actions     = local.regional_actions
    not_actions = []
  }
}

resource "azurerm_role_assignment" "subnet_join" {
  for_each           = local.subnet_launchers
  scope              = each.value.subnet
  role_definition_id = azurerm_role_definition.subnet_join.role_definition_resource_id
  principal_id       = azurerm_user_assigned_identity.fn[each.value.fn].principal_id
}

resource "azurerm_role_assignment" "subnet_read" {
  for_each           = toset(local.node_subnet_ids)
  scope              = each.value
  role_definition_id = azurerm_role_definition.subnet_read.role_definition_resource_id
  principal_id       = azurerm_user_assigned_identity.fn["lifecycle"].principal_id
}

resource "azurerm_role_assignment" "regional" {
  for_each           = local.functions
  scope              = local.subscription_id
  role_definition_id = azurerm_role_definition.regional.role_definition_resource_id
  principal_id       = azurerm_user_assigned_identity.fn[each.key].principal_id
}

# The kubelet identity node VMs carry: assignable by the functions that launch, that identity only.
resource "azurerm_role_assignment" "kubelet_identity" {
  for_each             = var.aks_kubelet_identity_id == "" ? {} : local.launching
  scope                = var.aks_kubelet_identity_id
  role_definition_name = "Managed Identity Operator"
  principal_id         = azurerm_user_assigned_identity.fn[each.key].principal_id
}

resource "azurerm_role_assignment" "launch" {
  for_each           = local.launching
  scope              = data.azurerm_resource_group.nodes.id
  role_definition_id = azurerm_role_definition.launch.role_definition_resource_id
  principal_id       = azurerm_user_assigned_identity.fn[each.key].principal_id
}

# Only bootstrappingclient mode creates extensions: no grant in the default mode.
resource "azurerm_role_assignment" "extension" {
  for_each           = var.aks_provision_mode == "bootstrappingclient" ? local.launching : {}
  scope              = data.azurerm_resource_group.nodes.id
  role_definition_id = azurerm_role_definition.extension.role_definition_resource_id
  principal_id       = azurerm_user_assigned_identity.fn[each.key].principal_id
}

resource "azurerm_role_assignment" "terminate" {
  for_each           = local.functions
  scope              = data.azurerm_resource_group.nodes.id
  role_definition_id = azurerm_role_definition.terminate.role_definition_resource_id
  principal_id       = azurerm_user_assigned_identity.fn[each.key].principal_id
}

# Every function sends commands and reads and writes claim checks and dead letters.
resource "azurerm_role_assignment" "fn_commands" {
  for_each             = local.functions
  scope                = azapi_resource.commands_topic.id
  role_definition_name = "EventGrid Data Sender"
  principal_id         = azurerm_user_assigned_identity.fn[each.key].principal_id
}

locals {
  # (principal, container) pairs with Storage Blob Data Contributor on that container only.
  blob_writers = merge(
    { for f, _ in local.functions : "${f}-claims" => { principal = azurerm_user_assigned_identity.fn[f].principal_id, container = azurerm_storage_container.claims.id } },
    { for f, _ in local.functions : "${f}-deadletters" => { principal = azurerm_user_assigned_identity.fn[f].principal_id, container = azurerm_storage_container.deadletters.id } },
    {
      "agent-claims"        = { principal = azurerm_user_assigned_identity.agent.principal_id, container = azurerm_storage_container.claims.id }
      "agent-deadletters"   = { principal = azurerm_user_assigned_identity.agent.principal_id, container = azurerm_storage_container.deadletters.id }
      "events-deadletters"  = { principal = azurerm_eventgrid_topic.events.identity[0].principal_id, container = azurerm_storage_container.deadletters.id }
      "notices-deadletters" = { principal = azurerm_eventgrid_topic.notices.identity[0].principal_id, container = azurerm_storage_container.deadletters.id }
      "health-deadletters"  = { principal = azurerm_eventgrid_system_topic.health.identity[0].principal_id, container = azurerm_storage_container.deadletters.id }
      "ns-deadletters"      = { principal = azurerm_eventgrid_namespace.dovetail.identity[0].principal_id, container = azurerm_storage_container.deadletters.id }
    },
  )
}

resource "azurerm_role_assignment" "blob" {
  for_each             = local.blob_writers
  scope                = each.value.container
  role_definition_name = "Storage Blob Data Contributor"
  principal_id         = each.value.principal
}

# The Functions host's own storage (AzureWebJobsStorage: keys, leases) is a separate account, so
# the Blob Data Owner it needs there reaches none of Dovetail's data.
resource "azurerm_role_assignment" "host_storage" {
  for_each             = local.functions
  scope                = azurerm_storage_account.host.id
  role_definition_name = "Storage Blob Data Owner"
  principal_id         = azurerm_user_assigned_identity.fn[each.key].principal_id
}

# The agent: Workload Identity (its service account's token, federated below), publishes events
# and notices, pulls commands, reads and writes claim checks and dead letters. No ARM role.
resource "azurerm_user_assigned_identity" "agent" {
  name                = "${local.name}-agent"
  resource_group_name = azurerm_resource_group.dovetail.name
  location            = var.location
  tags                = local.tags
}

resource "azurerm_federated_identity_credential" "agent" {
  name                = "${local.name}-agent"
  resource_group_name = azurerm_resource_group.dovetail.name
  parent_id           = azurerm_user_assigned_identity.agent.id
  issuer              = var.aks_oidc_issuer_url
  subject             = "system:serviceaccount:${var.agent_namespace}:${var.agent_service_account}"
  audience            = ["api://AzureADTokenExchange"]
}

resource "azurerm_role_assignment" "agent_send" {
  for_each             = { events = azurerm_eventgrid_topic.events.id, notices = azurerm_eventgrid_topic.notices.id }
  scope                = each.value
  role_definition_name = "EventGrid Data Sender"
  principal_id         = azurerm_user_assigned_identity.agent.principal_id
}

resource "azurerm_role_assignment" "agent_receive" {
  scope                = azapi_resource.commands_agent.id
  role_definition_name = "EventGrid Data Receiver"
  principal_id         = azurerm_user_assigned_identity.agent.principal_id
}

# Azure Policy, on Dovetail's resources only (see the top of this file): a VM or NIC that carries
# the cluster tag key must carry this cluster's name, the NodeClaim tag, and no AKS-managed pool
# tag. A resource without the tag is never evaluated, so nothing of AKS's, the user's or another
# tool's is denied, and adding a tag only subjects a resource to the rule.
resource "azurerm_policy_definition" "dovetail_tags" {
  name         = "${local.name}-dovetail-tags"
  policy_type  = "Custom"
  mode         = "Indexed"
  display_name = "Dovetail ${var.cluster_name}: Dovetail-tagged VMs and NICs are this cluster's node VMs"
  policy_rule = jsonencode({
    if = {
      allOf = [
        { field = "type", in = ["Microsoft.Compute/virtualMachines", "Microsoft.Network/networkInterfaces"] },
        { field = "tags['${local.cluster_tag}']", exists = true },
        {
          anyOf = [
            { field = "tags['${local.cluster_tag}']", notEquals = var.cluster_name },
            { field = "tags['${local.nodeclaim_tag}']", exists = false },
            { field = "tags['aks-managed-poolName']", exists = true },
          ]
        },
      ]
    }
    then = { effect = "deny" }
  })
}

resource "azurerm_resource_group_policy_assignment" "dovetail_tags" {
  name                 = "${local.name}-dovetail-tags"
  resource_group_id    = data.azurerm_resource_group.nodes.id
  policy_definition_id = azurerm_policy_definition.dovetail_tags.id
}
