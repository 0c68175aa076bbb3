# One Linux Function App per function on a Consumption plan, each a custom handler (the Go
# binary serves the Functions host on FUNCTIONS_CUSTOMHANDLER_PORT; shared/runtime) running under
# its own user-assigned identity. app_scale_limit 1: one instance per function, so one decision
# at a time per cluster (Event Grid keeps no order; the handler serializes its invocations).

resource "azurerm_service_plan" "functions" {
  name                = "${local.name}-plan"
  resource_group_name = azurerm_resource_group.dovetail.name
  location            = var.location
  os_type             = "Linux"
  sku_name            = "Y1"
  tags                = local.tags
}

resource "azurerm_user_assigned_identity" "fn" {
  for_each            = local.functions
  name                = "${local.name}-${each.key}"
  resource_group_name = azurerm_resource_group.dovetail.name
  location            = var.location
  tags                = local.tags
}

resource "azurerm_linux_function_app" "fn" {
  for_each                      = local.functions
  name                          = "${local.name}-${each.key}"
  resource_group_name           = azurerm_resource_group.dovetail.name
  location                      = var.location
  service_plan_id               = azurerm_service_plan.functions.id
  storage_account_name          = azurerm_storage_account.host.name
  storage_uses_managed_identity = true
  https_only                    = true
  functions_extension_version   = "~4"
  identity {
    type         = "UserAssigned"
    identity_ids = [azurerm_user_assigned_identity.fn[each.key].id]
  }
  key_vault_reference_identity_id = azurerm_user_assigned_identity.fn[each.key].id
  site_config {
    app_scale_limit = 1
    application_stack {
      use_custom_runtime = true
    }
  }
  app_settings = {
    FUNCTIONS_WORKER_RUNTIME              = "custom"
    WEBSITE_RUN_FROM_PACKAGE              = lookup(var.package_urls, each.key, "")
    AzureWebJobsStorage__accountName      = azurerm_storage_account.host.name
    AzureWebJobsStorage__credential       = "managedidentity"
    AzureWebJobsStorage__clientId         = azurerm_user_assigned_identity.fn[each.key].client_id
    AZURE_CLIENT_ID                       = azurerm_user_assigned_identity.fn[each.key].client_id
    DOVETAIL_CLUSTER                      = var.cluster_name
    DOVETAIL_CLOUD                        = "azure"
    DOVETAIL_EVENTGRID_NAMESPACE_ENDPOINT = local.namespace_endpoint
    DOVETAIL_COMMANDS_TOPIC               = azapi_resource.commands_topic.name
    DOVETAIL_STORAGE_ACCOUNT_URL          = azurerm_storage_account.dovetail.primary_blob_endpoint
    DOVETAIL_BLOB_CONTAINER               = azurerm_storage_container.claims.name
    DOVETAIL_DEAD_LETTER_CONTAINER        = azurerm_storage_container.deadletters.name
    DOVETAIL_OTLP_METRICS_ENDPOINT        = var.otlp_metrics_endpoint
    # The Azure provider (shared/runtime/cloudflags): where nodes go and how they join.
    DOVETAIL_REGION                         = var.location
    DOVETAIL_AZURE_SUBSCRIPTION_ID          = data.azurerm_client_config.current.subscription_id
    DOVETAIL_AZURE_NODE_RESOURCE_GROUP      = var.node_resource_group_name
    DOVETAIL_AZURE_SUBNET_ID                = var.node_subnet_id
    DOVETAIL_AZURE_NETWORK_PLUGIN           = var.network_plugin
    DOVETAIL_AKS_API_SERVER                 = var.aks_api_server
    DOVETAIL_AKS_CA                         = var.aks_ca
    DOVETAIL_AKS_KUBELET_IDENTITY_CLIENT_ID = var.aks_kubelet_identity_client_id
    DOVETAIL_AKS_KUBELET_IDENTITY_ID        = var.aks_kubelet_identity_id
    DOVETAIL_AKS_SSH_PUBLIC_KEY             = var.aks_ssh_public_key
    DOVETAIL_AKS_KUBERNETES_VERSION         = var.aks_kubernetes_version
    # Karpenter's scheduling policies (every function registers them; the planning ones use them)
    # and node repair (--node-repair: the lifecycle function's alone; the others ignore it).
    DOVETAIL_MIN_VALUES_POLICY     = var.min_values_policy
    DOVETAIL_PREFERENCE_POLICY     = var.preference_policy
    DOVETAIL_NODE_REPAIR           = tostring(var.node_repair)
    DOVETAIL_AKS_TENANT_ID         = data.azurerm_client_config.current.tenant_id
    DOVETAIL_AKS_NETWORK_POLICY    = var.aks_network_policy
    DOVETAIL_AKS_NETWORK_DATAPLANE = var.aks_network_dataplane
    DOVETAIL_AKS_VNET_GUID         = var.aks_vnet_guid
    # How nodes get the AKS bootstrap; bootstrappingclient asks the NodeBootstrapping server.
    DOVETAIL_AKS_PROVISION_MODE               = var.aks_provision_mode
    DOVETAIL_AKS_NODEBOOTSTRAPPING_SERVER_URL = var.aks_nodebootstrapping_server_url
    DOVETAIL_AKS_CLUSTER_RESOURCE_GROUP       = var.aks_cluster_resource_group
    DOVETAIL_AKS_CLUSTER_NAME                 = var.aks_cluster_name
    # The kubelet's bootstrap token is a secret: a Key Vault reference, resolved by the app's identity.
    DOVETAIL_AKS_BOOTSTRAP_TOKEN = "@Microsoft.KeyVault(SecretUri=${var.aks_bootstrap_token_secret_uri})"
  }
  tags = local.tags
  lifecycle {
    precondition {
      condition     = var.aks_provision_mode != "bootstrappingclient" || (var.aks_nodebootstrapping_server_url != "" && var.aks_cluster_resource_group != "")
      error_message = "aks_provision_mode = bootstrappingclient needs aks_nodebootstrapping_server_url and aks_cluster_resource_group (the functions refuse to start without them)."
    }
  }
}

# Each function reads the bootstrap token secret, and only it.
resource "azurerm_role_assignment" "bootstrap_token" {
  for_each             = local.functions
  scope                = var.aks_bootstrap_token_secret_id
  role_definition_name = "Key Vault Secrets User"
  principal_id         = azurerm_user_assigned_identity.fn[each.key].principal_id
}

# Each function publishes its metrics to the Data Collection Rule behind the OTLP endpoint, and
# only there: Monitoring Metrics Publisher is a data-plane role scoped to that one rule.
resource "azurerm_role_assignment" "metrics_publisher" {
  for_each             = var.otlp_metrics_dcr_id == "" ? {} : local.functions
  scope                = var.otlp_metrics_dcr_id
  role_definition_name = "Monitoring Metrics Publisher"
  principal_id         = azurerm_user_assigned_identity.fn[each.key].principal_id
}
