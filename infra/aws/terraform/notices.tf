# Interruption notices: EventBridge rules (spot, state change, AWS Health) to the notice queue.

data "aws_iam_policy_document" "notices_queue" {
  statement {
    sid       = "EventBridgeRulesSendNotices"
    effect    = "Allow"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.notices.arn]
    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }
    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values = [
        aws_cloudwatch_event_rule.spot_notices.arn,
        aws_cloudwatch_event_rule.state_change_notices.arn,
        aws_cloudwatch_event_rule.health_notices.arn,
      ]
    }
  }
}

resource "aws_sqs_queue" "notices" {
  name                      = "dovetail-${var.cluster_name}-notices"
  max_message_size          = 262144
  message_retention_seconds = 3600
  sqs_managed_sse_enabled   = local.sqs_managed_sse
  kms_master_key_id         = local.kms_key
  tags = {
    "dovetail.dev/cluster" = var.cluster_name
  }
  visibility_timeout_seconds = 120
  receive_wait_time_seconds  = 20
  redrive_policy             = jsonencode({ deadLetterTargetArn = aws_sqs_queue.notices_dlq.arn, maxReceiveCount = 40 })
}

resource "aws_sqs_queue" "notices_dlq" {
  name                      = "dovetail-${var.cluster_name}-notices-dlq"
  max_message_size          = 262144
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = local.sqs_managed_sse
  kms_master_key_id         = local.kms_key
  tags = {
    "dovetail.dev/cluster" = var.cluster_name
  }
}

resource "aws_cloudwatch_event_rule" "spot_notices" {
  name        = "dovetail-${var.cluster_name}-spot-notices"
  description = "Dovetail interruption notices (spot interruption, rebalance, capacity reservation)"
  event_pattern = jsonencode({
    source = ["aws.ec2"]
    detail-type = [
      "EC2 Spot Instance Interruption Warning",
      "EC2 Instance Rebalance Recommendation",
      "EC2 Capacity Reservation Instance Interruption Warning",
    ]
  })
  tags = {
    "dovetail.dev/cluster" = var.cluster_name
  }
}

resource "aws_cloudwatch_event_rule" "state_change_notices" {
  name        = "dovetail-${var.cluster_name}-state-change-notices"
  description = "Dovetail interruption notices (instance stopping, stopped, shutting down, terminated)"
  event_pattern = jsonencode({
    source      = ["aws.ec2"]
    detail-type = ["EC2 Instance State-change Notification"]
    detail      = { state = ["stopping", "stopped", "shutting-down", "terminated"] }
  })
  tags = {
    "dovetail.dev/cluster" = var.cluster_name
  }
}

resource "aws_cloudwatch_event_rule" "health_notices" {
  name        = "dovetail-${var.cluster_name}-health-notices"
  description = "Dovetail interruption notices (AWS Health scheduled changes of EC2)"
  event_pattern = jsonencode({
    source      = ["aws.health"]
    detail-type = ["AWS Health Event"]
    detail      = { service = ["EC2"], eventTypeCategory = ["scheduledChange"] }
  })
  tags = {
    "dovetail.dev/cluster" = var.cluster_name
  }
}

resource "aws_cloudwatch_event_target" "spot_notices" {
  rule      = aws_cloudwatch_event_rule.spot_notices.name
  target_id = "notices"
  arn       = aws_sqs_queue.notices.arn
}

resource "aws_cloudwatch_event_target" "state_change_notices" {
  rule      = aws_cloudwatch_event_rule.state_change_notices.name
  target_id = "notices"
  arn       = aws_sqs_queue.notices.arn
}

resource "aws_cloudwatch_event_target" "health_notices" {
  rule      = aws_cloudwatch_event_rule.health_notices.name
  target_id = "notices"
  arn       = aws_sqs_queue.notices.arn
}

resource "aws_sqs_queue_policy" "notices" {
  queue_url = aws_sqs_queue.notices.url
  policy    = data.aws_iam_policy_document.notices_queue.json
}
