# Claim checks (payloads above an event's size), dead letters (Event Grid's and Dovetail's own,
# with their reasons), and the Functions host's own storage. Microsoft Entra ID only: no shared
# keys, no public blobs, TLS 1.2.

resource "azurerm_storage_account" "dovetail" {
  # Storage account names: 3-24 lowercase letters and digits.
  name                            = substr(replace("dt${var.cluster_name}${substr(sha1(data.azurerm_client_config.current.subscription_id), 0, 6)}", "-", ""), 0, 24)
  resource_group_name             = azurerm_resource_group.dovetail.name
  location                        = var.location
  account_tier                    = "Standard"
  account_replication_type        = "LRS"
  min_tls_version                 = "TLS1_2"
  https_traffic_only_enabled      = true
  shared_access_key_enabled       = false
  allow_nested_items_to_be_public = false
  tags                            = local.tags
}

resource "azurerm_storage_container" "claims" {
  name                  = "claims"
  storage_account_id    = azurerm_storage_account.dovetail.id
  container_access_type = "private"
}

resource "azurerm_storage_container" "deadletters" {
  name                  = "deadletters"
  storage_account_id    = azurerm_storage_account.dovetail.id
  container_access_type = "private"
}

# Claim checks live a day: longer than any event lives in Event Grid with its retries
# (event_time_to_live below, and the commands topic's one-day retention).
resource "azurerm_storage_management_policy" "claims" {
  storage_account_id = azurerm_storage_account.dovetail.id
  rule {
    name    = "expire-claim-checks"
    enabled = true
    filters {
      blob_types   = ["blockBlob"]
      prefix_match = ["claims/claim-check/"]
    }
    actions {
      base_blob {
        delete_after_days_since_creation_greater_than = 1
      }
    }
  }
}

# The Functions host's own storage (AzureWebJobsStorage), apart from Dovetail's data.
resource "azurerm_storage_account" "host" {
  name                            = substr(replace("dth${var.cluster_name}${substr(sha1(data.azurerm_client_config.current.subscription_id), 0, 6)}", "-", ""), 0, 24)
  resource_group_name             = azurerm_resource_group.dovetail.name
  location                        = var.location
  account_tier                    = "Standard"
  account_replication_type        = "LRS"
  min_tls_version                 = "TLS1_2"
  https_traffic_only_enabled      = true
  shared_access_key_enabled       = false
  allow_nested_items_to_be_public = false
  tags                            = local.tags
}
