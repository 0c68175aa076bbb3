# What the agent's deployment needs (its flags and its service account's annotation).

output "agent_client_id" {
  description = "Annotate the agent's service account with azure.workload.identity/client-id = this."
  value       = azurerm_user_assigned_identity.agent.client_id
}

output "agent_flags" {
  description = "The agent's --transport eventgrid flags."
  value = [
    "--transport=eventgrid",
    "--cluster=${var.cluster_name}",
    "--eventgrid-topic-endpoint=${azurerm_eventgrid_topic.events.endpoint}",
    "--eventgrid-namespace-endpoint=${local.namespace_endpoint}",
    "--commands-topic=${azapi_resource.commands_topic.name}",
    "--commands-subscription=${azapi_resource.commands_agent.name}",
    "--storage-account-url=${azurerm_storage_account.dovetail.primary_blob_endpoint}",
    "--blob-container=${azurerm_storage_container.claims.name}",
    "--dead-letter-container=${azurerm_storage_container.deadletters.name}",
  ]
}

output "notices_topic_endpoint" {
  description = "Where the cluster side publishes Azure Scheduled Events notices."
  value       = azurerm_eventgrid_topic.notices.endpoint
}
