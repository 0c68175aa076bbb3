# Who may do what. Two custom roles, assignable only in the cluster's node resource group:
# launch (create VMs, their NICs and OS disks) and terminate (delete them). Azure RBAC cannot
# condition Microsoft.Compute or Microsoft.Network actions on tags: ABAC role-assignment
# conditions exist only for some data actions (Storage blobs and queues among them), not for
# ARM control-plane writes or deletes. So the tag rules are Azure Policy, assigned to the same
# resource group: a VM or NIC created without this cluster's tag is denied (deny), and deleting a
# VM not tagged for this cluster is denied (denyAction on delete) — for every principal. The
# provider checks the tag itself before every delete (shared/cloud/azure Provider.Delete:
# cloud.ErrNotOwned), so the policy is the second line, not the only one. AKS's own VMs (VM node
# pools, tagged aks-managed-poolName) are outside both rules; VMSS instances are another type.

locals {
  launch_actions = [
    "Microsoft.Compute/virtualMachines/read",
    "Microsoft.Compute/virtualMachines/write",
    "Microsoft.Compute/disks/read",
    "Microsoft.Compute/disks/write",
    "Microsoft.Network/networkInterfaces/read",
    "Microsoft.Network/networkInterfaces/write",
    "Microsoft.Network/networkInterfaces/join/action",
    "Microsoft.Network/virtualNetworks/subnets/join/action",
    "Microsoft.ManagedIdentity/userAssignedIdentities/assign/action",
  ]
  terminate_actions = [
    "Microsoft.Compute/virtualMachines/read",
    "Microsoft.Compute/virtualMachines/delete",
    "Microsoft.Compute/disks/delete",
    "Microsoft.Network/networkInterfaces/read",
    "Microsoft.Network/networkInterfaces/delete",
  ]
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

resource "azurerm_role_assignment" "launch" {
  for_each           = { for f, spec in local.functions : f => spec if spec.launches }
  scope              = data.azurerm_resource_group.nodes.id
  role_definition_id = azurerm_role_definition.launch.role_definition_resource_id
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

# Azure Policy: the tag rules RBAC cannot express.
resource "azurerm_policy_definition" "tag_on_create" {
  name         = "${local.name}-tag-on-create"
  policy_type  = "Custom"
  mode         = "Indexed"
  display_name = "Dovetail ${var.cluster_name}: node VMs and NICs carry the cluster tag"
  policy_rule = jsonencode({
    if = {
      allOf = [
        { field = "type", in = ["Microsoft.Compute/virtualMachines", "Microsoft.Network/networkInterfaces"] },
        { field = "tags['aks-managed-poolName']", exists = false },
        { field = "tags['${local.cluster_tag}']", notEquals = var.cluster_name },
      ]
    }
    then = { effect = "deny" }
  })
}

resource "azurerm_policy_definition" "delete_only_tagged" {
  name         = "${local.name}-delete-only-tagged"
  policy_type  = "Custom"
  mode         = "Indexed"
  display_name = "Dovetail ${var.cluster_name}: only VMs tagged for the cluster are deleted"
  policy_rule = jsonencode({
    if = {
      allOf = [
        { field = "type", equals = "Microsoft.Compute/virtualMachines" },
        { field = "tags['aks-managed-poolName']", exists = false },
        { field = "tags['${local.cluster_tag}']", notEquals = var.cluster_name },
      ]
    }
    then = {
      effect  = "denyAction"
      details = { actionNames = ["delete"], cascadeBehaviors = { resourceGroup = "deny" } }
    }
  })
}

resource "azurerm_resource_group_policy_assignment" "tag_on_create" {
  name                 = "${local.name}-tag-on-create"
  resource_group_id    = data.azurerm_resource_group.nodes.id
  policy_definition_id = azurerm_policy_definition.tag_on_create.id
}

resource "azurerm_resource_group_policy_assignment" "delete_only_tagged" {
  name                 = "${local.name}-delete-only-tagged"
  resource_group_id    = data.azurerm_resource_group.nodes.id
  policy_definition_id = azurerm_policy_definition.delete_only_tagged.id
}
