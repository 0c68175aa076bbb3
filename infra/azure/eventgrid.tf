# Events (agent → functions): custom topics pushed to each function's Event Grid trigger.
# Commands (functions → agent): a namespace topic the agent pulls from. CloudEvents 1.0 both ways;
# local (key) authentication off: every publisher and receiver uses Microsoft Entra ID.

resource "azurerm_eventgrid_topic" "events" {
  name                = "${local.name}-events"
  resource_group_name = azurerm_resource_group.dovetail.name
  location            = var.location
  input_schema        = "CloudEventSchemaV1_0"
  local_auth_enabled  = false
  identity {
    type = "SystemAssigned" # writes dead letters
  }
  tags = local.tags
}

# Cloud notices the cluster side publishes (Azure Scheduled Events of the nodes).
resource "azurerm_eventgrid_topic" "notices" {
  name                = "${local.name}-notices"
  resource_group_name = azurerm_resource_group.dovetail.name
  location            = var.location
  input_schema        = "CloudEventSchemaV1_0"
  local_auth_enabled  = false
  identity {
    type = "SystemAssigned"
  }
  tags = local.tags
}

# Azure Resource Notifications of VM health (spot preemption, deallocation annotations).
resource "azurerm_eventgrid_system_topic" "health" {
  name                   = "${local.name}-health"
  resource_group_name    = azurerm_resource_group.dovetail.name
  location               = "global"
  source_arm_resource_id = "/subscriptions/${data.azurerm_client_config.current.subscription_id}"
  topic_type             = "Microsoft.ResourceNotifications.HealthResources"
  identity {
    type = "SystemAssigned"
  }
  tags = local.tags
}

locals {
  # Each push subscription: topic, function app, function folder (its route).
  push_subscriptions = merge(
    { for f, spec in local.functions : "events-${f}" => {
      scope = azurerm_eventgrid_topic.events.id, app = f, folder = f == "interruption" ? "interruption-events" : f, subject_prefix = null
    } },
    {
      "notices-interruption" = { scope = azurerm_eventgrid_topic.notices.id, app = "interruption", folder = "interruption", subject_prefix = local.node_vm_prefix }
      "health-interruption"  = { scope = azurerm_eventgrid_system_topic.health.id, app = "interruption", folder = "interruption", subject_prefix = local.node_vm_prefix }
    },
  )
  # Notices about this cluster's VMs only. The health topic covers the whole subscription; its
  # events' subject is the resource's ID (Azure docs, "Azure Resource Notifications - Health
  # Resources events in Azure Event Grid"), and the Scheduled Events publisher's subject is the
  # reading VM's ID (agent/scheduledevents). Both begin with the node resource group's ID; the
  # filter is case-insensitive (subject_filter case_sensitive false), as ARM IDs are. The
  # interruption function still matches each notice by full resource ID (subscription, resource
  # group and name: notices.Notice.MatchesProviderID). Dovetail's nodes are VMs, never scale set
  # instances, so the prefix ends at virtualMachines/: AKS's own VMSS node pools' health events
  # are not delivered.
  node_vm_prefix = "${data.azurerm_resource_group.nodes.id}/providers/Microsoft.Compute/virtualMachines/"
}

resource "azurerm_eventgrid_event_subscription" "push" {
  for_each              = local.push_subscriptions
  name                  = each.key
  scope                 = each.value.scope
  event_delivery_schema = "CloudEventSchemaV1_0"
  dynamic "subject_filter" {
    for_each = each.value.subject_prefix == null ? [] : [each.value.subject_prefix]
    content {
      subject_begins_with = subject_filter.value
      case_sensitive      = false
    }
  }
  azure_function_endpoint {
    function_id                       = "${azurerm_linux_function_app.fn[each.value.app].id}/functions/${each.value.folder}"
    max_events_per_batch              = 10
    preferred_batch_size_in_kilobytes = 64
  }
  # Five attempts within the hour an event matters; then Event Grid dead-letters it
  # (MaxDeliveryAttemptsExceeded). Poison events never get that far: the custom handler writes
  # them with their reason to the same container and acknowledges them (shared/runtime).
  retry_policy {
    max_delivery_attempts = 5
    event_time_to_live    = 60
  }
  storage_blob_dead_letter_destination {
    storage_account_id          = azurerm_storage_account.dovetail.id
    storage_blob_container_name = azurerm_storage_container.deadletters.name
  }
  dead_letter_identity {
    type = "SystemAssigned"
  }
}

resource "azurerm_eventgrid_namespace" "dovetail" {
  name                  = "${local.name}-ns"
  resource_group_name   = azurerm_resource_group.dovetail.name
  location              = var.location
  sku                   = "Standard"
  capacity              = 1
  public_network_access = "Enabled"
  identity {
    type = "SystemAssigned" # writes dead letters
  }
  tags = local.tags
}

# Namespace topics and their subscriptions are not azurerm resources (4.x): azapi, ARM API
# Microsoft.EventGrid 2025-02-15.
resource "azapi_resource" "commands_topic" {
  type      = "Microsoft.EventGrid/namespaces/topics@2025-02-15"
  name      = "commands"
  parent_id = azurerm_eventgrid_namespace.dovetail.id
  body = {
    properties = {
      publisherType        = "Custom"
      inputSchema          = "CloudEventSchemaV1_0"
      eventRetentionInDays = 1
    }
  }
}

# The agent's queue subscription: a 60 s lock (renewed while a command runs), ten deliveries
# (the agent dead-letters with the reason on its fifth; shared/queue/eventgrid), then Event
# Grid's dead-lettering to the same container; rejected commands go there at once.
resource "azapi_resource" "commands_agent" {
  type      = "Microsoft.EventGrid/namespaces/topics/eventSubscriptions@2025-02-15"
  name      = "agent"
  parent_id = azapi_resource.commands_topic.id
  body = {
    properties = {
      eventDeliverySchema = "CloudEventSchemaV1_0"
      deliveryConfiguration = {
        deliveryMode = "Queue"
        queue = {
          receiveLockDurationInSeconds = 60
          maxDeliveryCount             = 10
          eventTimeToLive              = "P1D"
          deadLetterDestinationWithResourceIdentity = {
            identity = { type = "SystemAssigned" }
            deadLetterDestination = {
              endpointType = "StorageBlob"
              properties = {
                resourceId        = azurerm_storage_account.dovetail.id
                blobContainerName = "deadletters"
              }
            }
          }
        }
      }
    }
  }
}

locals {
  # A namespace's HTTP endpoint (Azure Event Grid documentation, "Namespace topics": <namespace>.<region>-1.eventgrid.azure.net).
  namespace_endpoint = "https://${azurerm_eventgrid_namespace.dovetail.name}.${var.location}-1.eventgrid.azure.net"
}
