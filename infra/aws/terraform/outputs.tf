# What the agent needs (its flags, or the Helm chart's sqs values).

output "event_queue_url" {
  description = "The provision function's events queue (event_queue_urls.provision)."
  value       = aws_sqs_queue.events.url
}

output "command_queue_url" {
  description = "The agent's --command-queue-url (the Helm chart's sqs.commandQueueURL)."
  value       = aws_sqs_queue.commands.url
}

output "command_dlq_url" {
  description = "The agent's --command-dlq-url: poison commands go here with their reason."
  value       = aws_sqs_queue.commands_dlq.url
}

output "claim_check_bucket" {
  description = "The agent's --blob-bucket: claim-checked payloads and the latest snapshot."
  value       = aws_s3_bucket.claim_check.bucket
}

output "agent_role_arn" {
  description = "The agent's role, bound to its ServiceAccount by the Pod Identity association (or for an IRSA annotation)."
  value       = aws_iam_role.agent.arn
}

output "event_queue_urls" {
  description = "The agent's --event-queue-url of each function, by function name: the Helm chart's sqs.eventQueueURLs (--set-json \"sqs.eventQueueURLs=$(terraform output -json event_queue_urls)\")."
  value = {
    provision    = aws_sqs_queue.events.url
    consolidate  = aws_sqs_queue.consolidate_events.url
    drift        = aws_sqs_queue.drift_events.url
    interruption = aws_sqs_queue.interruption_events.url
    lifecycle    = aws_sqs_queue.lifecycle_events.url
  }
}
