# One FIFO events queue per function (an SQS message reaches one consumer), the commands queue,
# and a dead-letter queue for each.

resource "aws_sqs_queue" "events" {
  name                      = "dovetail-${var.cluster_name}-events.fifo"
  fifo_queue                = true
  max_message_size          = 262144
  message_retention_seconds = 86400
  sqs_managed_sse_enabled   = local.sqs_managed_sse
  kms_master_key_id         = local.kms_key
  tags = {
    "dovetail.dev/cluster" = var.cluster_name
  }
  content_based_deduplication = false
  deduplication_scope         = "messageGroup"
  fifo_throughput_limit       = "perMessageGroupId"
  visibility_timeout_seconds  = 360
  receive_wait_time_seconds   = 20
  redrive_policy              = jsonencode({ deadLetterTargetArn = aws_sqs_queue.events_dlq.arn, maxReceiveCount = 5 })
}

resource "aws_sqs_queue" "events_dlq" {
  name                      = "dovetail-${var.cluster_name}-events-dlq.fifo"
  fifo_queue                = true
  max_message_size          = 262144
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = local.sqs_managed_sse
  kms_master_key_id         = local.kms_key
  tags = {
    "dovetail.dev/cluster" = var.cluster_name
  }
}

resource "aws_sqs_queue" "commands" {
  name                      = "dovetail-${var.cluster_name}-commands.fifo"
  fifo_queue                = true
  max_message_size          = 262144
  message_retention_seconds = 86400
  sqs_managed_sse_enabled   = local.sqs_managed_sse
  kms_master_key_id         = local.kms_key
  tags = {
    "dovetail.dev/cluster" = var.cluster_name
  }
  content_based_deduplication = false
  deduplication_scope         = "messageGroup"
  fifo_throughput_limit       = "perMessageGroupId"
  visibility_timeout_seconds  = 60
  receive_wait_time_seconds   = 20
  redrive_policy              = jsonencode({ deadLetterTargetArn = aws_sqs_queue.commands_dlq.arn, maxReceiveCount = 5 })
}

resource "aws_sqs_queue" "commands_dlq" {
  name                      = "dovetail-${var.cluster_name}-commands-dlq.fifo"
  fifo_queue                = true
  max_message_size          = 262144
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = local.sqs_managed_sse
  kms_master_key_id         = local.kms_key
  tags = {
    "dovetail.dev/cluster" = var.cluster_name
  }
}

resource "aws_sqs_queue" "consolidate_events" {
  name                      = "dovetail-${var.cluster_name}-consolidate-events.fifo"
  fifo_queue                = true
  max_message_size          = 262144
  message_retention_seconds = 86400
  sqs_managed_sse_enabled   = local.sqs_managed_sse
  kms_master_key_id         = local.kms_key
  tags = {
    "dovetail.dev/cluster" = var.cluster_name
  }
  content_based_deduplication = false
  deduplication_scope         = "messageGroup"
  fifo_throughput_limit       = "perMessageGroupId"
  visibility_timeout_seconds  = 360
  receive_wait_time_seconds   = 20
  redrive_policy              = jsonencode({ deadLetterTargetArn = aws_sqs_queue.consolidate_events_dlq.arn, maxReceiveCount = 5 })
}

resource "aws_sqs_queue" "consolidate_events_dlq" {
  name                      = "dovetail-${var.cluster_name}-consolidate-events-dlq.fifo"
  fifo_queue                = true
  max_message_size          = 262144
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = local.sqs_managed_sse
  kms_master_key_id         = local.kms_key
  tags = {
    "dovetail.dev/cluster" = var.cluster_name
  }
}

resource "aws_sqs_queue" "drift_events" {
  name                      = "dovetail-${var.cluster_name}-drift-events.fifo"
  fifo_queue                = true
  max_message_size          = 262144
  message_retention_seconds = 86400
  sqs_managed_sse_enabled   = local.sqs_managed_sse
  kms_master_key_id         = local.kms_key
  tags = {
    "dovetail.dev/cluster" = var.cluster_name
  }
  content_based_deduplication = false
  deduplication_scope         = "messageGroup"
  fifo_throughput_limit       = "perMessageGroupId"
  visibility_timeout_seconds  = 360
  receive_wait_time_seconds   = 20
  redrive_policy              = jsonencode({ deadLetterTargetArn = aws_sqs_queue.drift_events_dlq.arn, maxReceiveCount = 5 })
}

resource "aws_sqs_queue" "drift_events_dlq" {
  name                      = "dovetail-${var.cluster_name}-drift-events-dlq.fifo"
  fifo_queue                = true
  max_message_size          = 262144
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = local.sqs_managed_sse
  kms_master_key_id         = local.kms_key
  tags = {
    "dovetail.dev/cluster" = var.cluster_name
  }
}

resource "aws_sqs_queue" "lifecycle_events" {
  name                      = "dovetail-${var.cluster_name}-lifecycle-events.fifo"
  fifo_queue                = true
  max_message_size          = 262144
  message_retention_seconds = 86400
  sqs_managed_sse_enabled   = local.sqs_managed_sse
  kms_master_key_id         = local.kms_key
  tags = {
    "dovetail.dev/cluster" = var.cluster_name
  }
  content_based_deduplication = false
  deduplication_scope         = "messageGroup"
  fifo_throughput_limit       = "perMessageGroupId"
  visibility_timeout_seconds  = 360
  receive_wait_time_seconds   = 20
  redrive_policy              = jsonencode({ deadLetterTargetArn = aws_sqs_queue.lifecycle_events_dlq.arn, maxReceiveCount = 5 })
}

resource "aws_sqs_queue" "lifecycle_events_dlq" {
  name                      = "dovetail-${var.cluster_name}-lifecycle-events-dlq.fifo"
  fifo_queue                = true
  max_message_size          = 262144
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = local.sqs_managed_sse
  kms_master_key_id         = local.kms_key
  tags = {
    "dovetail.dev/cluster" = var.cluster_name
  }
}

resource "aws_sqs_queue" "interruption_events" {
  name                      = "dovetail-${var.cluster_name}-interruption-events.fifo"
  fifo_queue                = true
  max_message_size          = 262144
  message_retention_seconds = 86400
  sqs_managed_sse_enabled   = local.sqs_managed_sse
  kms_master_key_id         = local.kms_key
  tags = {
    "dovetail.dev/cluster" = var.cluster_name
  }
  content_based_deduplication = false
  deduplication_scope         = "messageGroup"
  fifo_throughput_limit       = "perMessageGroupId"
  visibility_timeout_seconds  = 120
  receive_wait_time_seconds   = 20
  redrive_policy              = jsonencode({ deadLetterTargetArn = aws_sqs_queue.interruption_events_dlq.arn, maxReceiveCount = 5 })
}

resource "aws_sqs_queue" "interruption_events_dlq" {
  name                      = "dovetail-${var.cluster_name}-interruption-events-dlq.fifo"
  fifo_queue                = true
  max_message_size          = 262144
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = local.sqs_managed_sse
  kms_master_key_id         = local.kms_key
  tags = {
    "dovetail.dev/cluster" = var.cluster_name
  }
}
