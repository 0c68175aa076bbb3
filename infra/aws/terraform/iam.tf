# The functions' roles: one inline policy each, the shared launch policy (governed launches) and
# the AMI parameter policy. Resource "*" only where the action has no resource-level permission.

data "aws_iam_policy_document" "lambda_assume" {
  for_each = toset(local.lambda_functions)
  statement {
    effect  = "Allow"
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [data.aws_caller_identity.current.account_id]
    }
    condition {
      test     = "ArnLike"
      variable = "aws:SourceArn"
      values = [
        "arn:${data.aws_partition.current.partition}:lambda:${data.aws_region.current.region}:${data.aws_caller_identity.current.account_id}:function:dovetail-${var.cluster_name}-${each.key}",
      ]
    }
  }
}

data "aws_iam_policy_document" "provision" {
  statement {
    sid       = "WriteOwnLogs"
    effect    = "Allow"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.provision.arn}:*"]
  }
  statement {
    sid    = "ConsumeEvents"
    effect = "Allow"
    actions = [
      "sqs:ChangeMessageVisibility",
      "sqs:DeleteMessage",
      "sqs:GetQueueAttributes",
      "sqs:ReceiveMessage",
    ]
    resources = [aws_sqs_queue.events.arn]
  }
  statement {
    sid       = "SendCommandsAndDeadLetters"
    effect    = "Allow"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.commands.arn, aws_sqs_queue.events_dlq.arn]
  }
  statement {
    sid       = "ClaimCheckObjects"
    effect    = "Allow"
    actions   = ["s3:GetObject", "s3:PutObject"]
    resources = ["${aws_s3_bucket.claim_check.arn}/claim-check/*"]
  }
  # With a customer managed key (kms_key_arn) the queues and the claim-check bucket are encrypted
  # with it: sending to an SQS queue takes kms:GenerateDataKey and kms:Decrypt, receiving
  # kms:Decrypt (Amazon SQS Developer Guide, "Configuring KMS permissions"); S3 PutObject under
  # SSE-KMS takes kms:GenerateDataKey, GetObject kms:Decrypt (Amazon S3 User Guide, "Using
  # server-side encryption with AWS KMS keys"). Only through SQS and S3 (kms:ViaService).
  dynamic "statement" {
    for_each = var.kms_key_arn == "" ? [] : [var.kms_key_arn]
    content {
      sid       = "QueueAndClaimCheckKey"
      effect    = "Allow"
      actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
      resources = [var.kms_key_arn]
      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["s3.${data.aws_region.current.region}.amazonaws.com", "sqs.${data.aws_region.current.region}.amazonaws.com"]
      }
    }
  }
  statement {
    sid       = "TerminateClusterInstances"
    effect    = "Allow"
    actions   = ["ec2:TerminateInstances"]
    resources = ["${local.ec2_arn}:instance/*"]
    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/dovetail.dev/cluster"
      values   = [var.cluster_name]
    }
  }
  statement {
    sid       = "DeleteClusterLaunchTemplates"
    effect    = "Allow"
    actions   = ["ec2:DeleteLaunchTemplate"]
    resources = ["${local.ec2_arn}:launch-template/*"]
    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/dovetail.dev/cluster"
      values   = [var.cluster_name]
    }
  }
  statement {
    sid    = "DescribeInRegion"
    effect = "Allow"
    actions = [
      "ec2:DescribeCapacityReservations",
      "ec2:DescribeImages",
      "ec2:DescribeInstanceTypeOfferings",
      "ec2:DescribeInstanceTypes",
      "ec2:DescribeInstances",
      "ec2:DescribeLaunchTemplates",
      "ec2:DescribePlacementGroups",
      "ec2:DescribeSecurityGroups",
      "ec2:DescribeSpotPriceHistory",
      "ec2:DescribeSubnets",
    ]
    resources = ["*"]
    condition {
      test     = "StringEquals"
      variable = "aws:RequestedRegion"
      values   = [data.aws_region.current.region]
    }
  }
  statement {
    sid       = "OnDemandPrices"
    effect    = "Allow"
    actions   = ["pricing:GetProducts"]
    resources = ["*"]
  }
}

data "aws_iam_policy_document" "consolidate" {
  statement {
    sid       = "WriteOwnLogs"
    effect    = "Allow"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.consolidate.arn}:*"]
  }
  statement {
    sid    = "ConsumeEvents"
    effect = "Allow"
    actions = [
      "sqs:ChangeMessageVisibility",
      "sqs:DeleteMessage",
      "sqs:GetQueueAttributes",
      "sqs:ReceiveMessage",
    ]
    resources = [aws_sqs_queue.consolidate_events.arn]
  }
  statement {
    sid       = "SendCommandsAndDeadLetters"
    effect    = "Allow"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.commands.arn, aws_sqs_queue.consolidate_events_dlq.arn]
  }
  statement {
    sid       = "ClaimCheckObjects"
    effect    = "Allow"
    actions   = ["s3:GetObject", "s3:PutObject"]
    resources = ["${aws_s3_bucket.claim_check.arn}/claim-check/*"]
  }
  # With a customer managed key (kms_key_arn) the queues and the claim-check bucket are encrypted
  # with it: sending to an SQS queue takes kms:GenerateDataKey and kms:Decrypt, receiving
  # kms:Decrypt (Amazon SQS Developer Guide, "Configuring KMS permissions"); S3 PutObject under
  # SSE-KMS takes kms:GenerateDataKey, GetObject kms:Decrypt (Amazon S3 User Guide, "Using
  # server-side encryption with AWS KMS keys"). Only through SQS and S3 (kms:ViaService).
  dynamic "statement" {
    for_each = var.kms_key_arn == "" ? [] : [var.kms_key_arn]
    content {
      sid       = "QueueAndClaimCheckKey"
      effect    = "Allow"
      actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
      resources = [var.kms_key_arn]
      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["s3.${data.aws_region.current.region}.amazonaws.com", "sqs.${data.aws_region.current.region}.amazonaws.com"]
      }
    }
  }
  statement {
    sid       = "TerminateClusterInstances"
    effect    = "Allow"
    actions   = ["ec2:TerminateInstances"]
    resources = ["${local.ec2_arn}:instance/*"]
    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/dovetail.dev/cluster"
      values   = [var.cluster_name]
    }
  }
  statement {
    sid    = "DescribeInRegion"
    effect = "Allow"
    actions = [
      "ec2:DescribeImages",
      "ec2:DescribeInstanceTypeOfferings",
      "ec2:DescribeInstanceTypes",
      "ec2:DescribeInstances",
      "ec2:DescribeLaunchTemplates",
      "ec2:DescribePlacementGroups",
      "ec2:DescribeSecurityGroups",
      "ec2:DescribeSpotPriceHistory",
      "ec2:DescribeSubnets",
    ]
    resources = ["*"]
    condition {
      test     = "StringEquals"
      variable = "aws:RequestedRegion"
      values   = [data.aws_region.current.region]
    }
  }
  statement {
    sid       = "OnDemandPrices"
    effect    = "Allow"
    actions   = ["pricing:GetProducts"]
    resources = ["*"]
  }
}

data "aws_iam_policy_document" "drift" {
  statement {
    sid       = "WriteOwnLogs"
    effect    = "Allow"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.drift.arn}:*"]
  }
  statement {
    sid    = "ConsumeEvents"
    effect = "Allow"
    actions = [
      "sqs:ChangeMessageVisibility",
      "sqs:DeleteMessage",
      "sqs:GetQueueAttributes",
      "sqs:ReceiveMessage",
    ]
    resources = [aws_sqs_queue.drift_events.arn]
  }
  statement {
    sid       = "SendCommandsAndDeadLetters"
    effect    = "Allow"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.commands.arn, aws_sqs_queue.drift_events_dlq.arn]
  }
  statement {
    sid       = "ClaimCheckObjects"
    effect    = "Allow"
    actions   = ["s3:GetObject", "s3:PutObject"]
    resources = ["${aws_s3_bucket.claim_check.arn}/claim-check/*"]
  }
  # With a customer managed key (kms_key_arn) the queues and the claim-check bucket are encrypted
  # with it: sending to an SQS queue takes kms:GenerateDataKey and kms:Decrypt, receiving
  # kms:Decrypt (Amazon SQS Developer Guide, "Configuring KMS permissions"); S3 PutObject under
  # SSE-KMS takes kms:GenerateDataKey, GetObject kms:Decrypt (Amazon S3 User Guide, "Using
  # server-side encryption with AWS KMS keys"). Only through SQS and S3 (kms:ViaService).
  dynamic "statement" {
    for_each = var.kms_key_arn == "" ? [] : [var.kms_key_arn]
    content {
      sid       = "QueueAndClaimCheckKey"
      effect    = "Allow"
      actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
      resources = [var.kms_key_arn]
      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["s3.${data.aws_region.current.region}.amazonaws.com", "sqs.${data.aws_region.current.region}.amazonaws.com"]
      }
    }
  }
  statement {
    sid       = "TerminateClusterInstances"
    effect    = "Allow"
    actions   = ["ec2:TerminateInstances"]
    resources = ["${local.ec2_arn}:instance/*"]
    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/dovetail.dev/cluster"
      values   = [var.cluster_name]
    }
  }
  statement {
    sid    = "DescribeInRegion"
    effect = "Allow"
    actions = [
      "ec2:DescribeImages",
      "ec2:DescribeInstanceTypeOfferings",
      "ec2:DescribeInstanceTypes",
      "ec2:DescribeInstances",
      "ec2:DescribeLaunchTemplates",
      "ec2:DescribePlacementGroups",
      "ec2:DescribeSecurityGroups",
      "ec2:DescribeSpotPriceHistory",
      "ec2:DescribeSubnets",
    ]
    resources = ["*"]
    condition {
      test     = "StringEquals"
      variable = "aws:RequestedRegion"
      values   = [data.aws_region.current.region]
    }
  }
  statement {
    sid       = "OnDemandPrices"
    effect    = "Allow"
    actions   = ["pricing:GetProducts"]
    resources = ["*"]
  }
}

data "aws_iam_policy_document" "lifecycle" {
  statement {
    sid       = "WriteOwnLogs"
    effect    = "Allow"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.lifecycle.arn}:*"]
  }
  statement {
    sid    = "ConsumeEvents"
    effect = "Allow"
    actions = [
      "sqs:ChangeMessageVisibility",
      "sqs:DeleteMessage",
      "sqs:GetQueueAttributes",
      "sqs:ReceiveMessage",
    ]
    resources = [aws_sqs_queue.lifecycle_events.arn]
  }
  statement {
    sid       = "SendCommandsAndDeadLetters"
    effect    = "Allow"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.commands.arn, aws_sqs_queue.lifecycle_events_dlq.arn]
  }
  statement {
    sid       = "ClaimCheckObjects"
    effect    = "Allow"
    actions   = ["s3:GetObject", "s3:PutObject"]
    resources = ["${aws_s3_bucket.claim_check.arn}/claim-check/*"]
  }
  # With a customer managed key (kms_key_arn) the queues and the claim-check bucket are encrypted
  # with it: sending to an SQS queue takes kms:GenerateDataKey and kms:Decrypt, receiving
  # kms:Decrypt (Amazon SQS Developer Guide, "Configuring KMS permissions"); S3 PutObject under
  # SSE-KMS takes kms:GenerateDataKey, GetObject kms:Decrypt (Amazon S3 User Guide, "Using
  # server-side encryption with AWS KMS keys"). Only through SQS and S3 (kms:ViaService).
  dynamic "statement" {
    for_each = var.kms_key_arn == "" ? [] : [var.kms_key_arn]
    content {
      sid       = "QueueAndClaimCheckKey"
      effect    = "Allow"
      actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
      resources = [var.kms_key_arn]
      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["s3.${data.aws_region.current.region}.amazonaws.com", "sqs.${data.aws_region.current.region}.amazonaws.com"]
      }
    }
  }
  statement {
    sid       = "TerminateClusterInstances"
    effect    = "Allow"
    actions   = ["ec2:TerminateInstances"]
    resources = ["${local.ec2_arn}:instance/*"]
    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/dovetail.dev/cluster"
      values   = [var.cluster_name]
    }
  }
  statement {
    sid    = "DescribeInRegion"
    effect = "Allow"
    actions = [
      "ec2:DescribeCapacityReservations",
      "ec2:DescribeImages",
      "ec2:DescribeInstances",
      "ec2:DescribePlacementGroups",
      "ec2:DescribeSecurityGroups",
      "ec2:DescribeSubnets",
    ]
    resources = ["*"]
    condition {
      test     = "StringEquals"
      variable = "aws:RequestedRegion"
      values   = [data.aws_region.current.region]
    }
  }
  statement {
    sid     = "CreateClusterInstanceProfiles"
    effect  = "Allow"
    actions = ["iam:CreateInstanceProfile", "iam:TagInstanceProfile"]
    resources = [
      "arn:${data.aws_partition.current.partition}:iam::${data.aws_caller_identity.current.account_id}:instance-profile/dovetail/${data.aws_region.current.region}/${var.cluster_name}/*",
    ]
    condition {
      test     = "StringEquals"
      variable = "aws:RequestTag/dovetail.dev/cluster"
      values   = [var.cluster_name]
    }
  }
  statement {
    sid    = "ManageClusterInstanceProfiles"
    effect = "Allow"
    actions = [
      "iam:AddRoleToInstanceProfile",
      "iam:DeleteInstanceProfile",
      "iam:RemoveRoleFromInstanceProfile",
    ]
    resources = [
      "arn:${data.aws_partition.current.partition}:iam::${data.aws_caller_identity.current.account_id}:instance-profile/dovetail/${data.aws_region.current.region}/${var.cluster_name}/*",
    ]
    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/dovetail.dev/cluster"
      values   = [var.cluster_name]
    }
  }
  statement {
    sid     = "ReadInstanceProfiles"
    effect  = "Allow"
    actions = ["iam:GetInstanceProfile", "iam:ListInstanceProfileTags", "iam:ListInstanceProfiles"]
    resources = [
      "arn:${data.aws_partition.current.partition}:iam::${data.aws_caller_identity.current.account_id}:instance-profile/*",
    ]
  }
  statement {
    sid       = "PassNodeRoleToInstanceProfiles"
    effect    = "Allow"
    actions   = ["iam:PassRole"]
    resources = [var.node_role_arn]
    condition {
      test     = "StringEquals"
      variable = "iam:PassedToService"
      values   = ["ec2.amazonaws.com"]
    }
  }
}

data "aws_iam_policy_document" "interruption" {
  statement {
    sid       = "WriteOwnLogs"
    effect    = "Allow"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.interruption.arn}:*"]
  }
  statement {
    sid    = "ConsumeNoticesAndEvents"
    effect = "Allow"
    actions = [
      "sqs:ChangeMessageVisibility",
      "sqs:DeleteMessage",
      "sqs:GetQueueAttributes",
      "sqs:ReceiveMessage",
    ]
    resources = [aws_sqs_queue.notices.arn, aws_sqs_queue.interruption_events.arn]
  }
  statement {
    sid       = "RedriveWaitingNotices"
    effect    = "Allow"
    actions   = ["sqs:GetQueueUrl"]
    resources = [aws_sqs_queue.notices.arn]
  }
  statement {
    sid       = "SendCommandsAndDeadLetters"
    effect    = "Allow"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.commands.arn, aws_sqs_queue.notices_dlq.arn]
  }
  statement {
    sid       = "ClaimCheckObjects"
    effect    = "Allow"
    actions   = ["s3:GetObject", "s3:PutObject"]
    resources = ["${aws_s3_bucket.claim_check.arn}/claim-check/*"]
  }
  # With a customer managed key (kms_key_arn) the queues and the claim-check bucket are encrypted
  # with it: sending to an SQS queue takes kms:GenerateDataKey and kms:Decrypt, receiving
  # kms:Decrypt (Amazon SQS Developer Guide, "Configuring KMS permissions"); S3 PutObject under
  # SSE-KMS takes kms:GenerateDataKey, GetObject kms:Decrypt (Amazon S3 User Guide, "Using
  # server-side encryption with AWS KMS keys"). Only through SQS and S3 (kms:ViaService).
  dynamic "statement" {
    for_each = var.kms_key_arn == "" ? [] : [var.kms_key_arn]
    content {
      sid       = "QueueAndClaimCheckKey"
      effect    = "Allow"
      actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
      resources = [var.kms_key_arn]
      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["s3.${data.aws_region.current.region}.amazonaws.com", "sqs.${data.aws_region.current.region}.amazonaws.com"]
      }
    }
  }
  statement {
    sid       = "TerminateClusterInstances"
    effect    = "Allow"
    actions   = ["ec2:TerminateInstances"]
    resources = ["${local.ec2_arn}:instance/*"]
    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/dovetail.dev/cluster"
      values   = [var.cluster_name]
    }
  }
  statement {
    sid    = "DescribeInRegion"
    effect = "Allow"
    actions = [
      "ec2:DescribeImages",
      "ec2:DescribeInstanceTypeOfferings",
      "ec2:DescribeInstanceTypes",
      "ec2:DescribeInstances",
      "ec2:DescribeLaunchTemplates",
      "ec2:DescribePlacementGroups",
      "ec2:DescribeSecurityGroups",
      "ec2:DescribeSpotPriceHistory",
      "ec2:DescribeSubnets",
    ]
    resources = ["*"]
    condition {
      test     = "StringEquals"
      variable = "aws:RequestedRegion"
      values   = [data.aws_region.current.region]
    }
  }
  statement {
    sid       = "OnDemandPrices"
    effect    = "Allow"
    actions   = ["pricing:GetProducts"]
    resources = ["*"]
  }
}

data "aws_iam_policy_document" "launch" {
  statement {
    sid     = "CreateTaggedInstances"
    effect  = "Allow"
    actions = ["ec2:CreateFleet", "ec2:RunInstances"]
    resources = [
      "${local.ec2_arn}:instance/*",
      "${local.ec2_arn}:network-interface/*",
      "${local.ec2_arn}:volume/*",
    ]
    condition {
      test     = "StringEquals"
      variable = "aws:RequestTag/dovetail.dev/cluster"
      values   = [var.cluster_name]
    }
    dynamic "condition" {
      for_each = var.mandatory_tags
      content {
        test     = "Null"
        variable = "aws:RequestTag/${condition.value}"
        values   = ["false"]
      }
    }
  }
  statement {
    sid       = "CreateTaggedFleets"
    effect    = "Allow"
    actions   = ["ec2:CreateFleet", "ec2:RunInstances"]
    resources = ["${local.ec2_arn}:fleet/*", "${local.ec2_arn}:spot-instances-request/*"]
    condition {
      test     = "StringEquals"
      variable = "aws:RequestTag/dovetail.dev/cluster"
      values   = [var.cluster_name]
    }
  }
  statement {
    sid       = "CreateClusterLaunchTemplates"
    effect    = "Allow"
    actions   = ["ec2:CreateLaunchTemplate"]
    resources = ["${local.ec2_arn}:launch-template/*"]
    condition {
      test     = "StringEquals"
      variable = "aws:RequestTag/dovetail.dev/cluster"
      values   = [var.cluster_name]
    }
  }
  statement {
    sid       = "LaunchFromClusterTemplates"
    effect    = "Allow"
    actions   = ["ec2:CreateFleet", "ec2:RunInstances"]
    resources = ["${local.ec2_arn}:launch-template/*"]
    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/dovetail.dev/cluster"
      values   = [var.cluster_name]
    }
  }
  statement {
    sid       = "LaunchIntoDiscoveredNetwork"
    effect    = "Allow"
    actions   = ["ec2:CreateFleet", "ec2:RunInstances"]
    resources = ["${local.ec2_arn}:security-group/*", "${local.ec2_arn}:subnet/*"]
    condition {
      test     = "StringEquals"
      variable = "ec2:ResourceTag/${var.discovery_tag_key}"
      values   = [local.discovery_tag_value]
    }
    dynamic "condition" {
      for_each = var.vpc_id == "" ? [] : [var.vpc_id]
      content {
        test     = "ArnEquals"
        variable = "ec2:Vpc"
        values   = ["${local.ec2_arn}:vpc/${condition.value}"]
      }
    }
  }
  statement {
    sid       = "LaunchIntoCapacityReservations"
    effect    = "Allow"
    actions   = ["ec2:CreateFleet", "ec2:RunInstances"]
    resources = ["${local.ec2_arn}:capacity-reservation/*"]
  }
  statement {
    sid       = "LaunchIntoPlacementGroups"
    effect    = "Allow"
    actions   = ["ec2:CreateFleet", "ec2:RunInstances"]
    resources = ["${local.ec2_arn}:placement-group/*"]
  }
  statement {
    sid     = "LaunchApprovedImages"
    effect  = "Allow"
    actions = ["ec2:CreateFleet", "ec2:RunInstances"]
    resources = [
      "arn:${data.aws_partition.current.partition}:ec2:${data.aws_region.current.region}::image/*",
      "arn:${data.aws_partition.current.partition}:ec2:${data.aws_region.current.region}::snapshot/*",
    ]
    condition {
      test     = "StringEquals"
      variable = "ec2:Owner"
      values   = concat(["amazon"], var.image_owners)
    }
  }
  statement {
    sid     = "TagInstancesOnCreate"
    effect  = "Allow"
    actions = ["ec2:CreateTags"]
    resources = [
      "${local.ec2_arn}:instance/*",
      "${local.ec2_arn}:network-interface/*",
      "${local.ec2_arn}:volume/*",
    ]
    condition {
      test     = "StringEquals"
      variable = "aws:RequestTag/dovetail.dev/cluster"
      values   = [var.cluster_name]
    }
    condition {
      test     = "StringEquals"
      variable = "ec2:CreateAction"
      values   = ["CreateFleet", "RunInstances"]
    }
    dynamic "condition" {
      for_each = var.mandatory_tags
      content {
        test     = "Null"
        variable = "aws:RequestTag/${condition.value}"
        values   = ["false"]
      }
    }
  }
  statement {
    sid     = "TagFleetsAndTemplatesOnCreate"
    effect  = "Allow"
    actions = ["ec2:CreateTags"]
    resources = [
      "${local.ec2_arn}:fleet/*",
      "${local.ec2_arn}:launch-template/*",
      "${local.ec2_arn}:spot-instances-request/*",
    ]
    condition {
      test     = "StringEquals"
      variable = "aws:RequestTag/dovetail.dev/cluster"
      values   = [var.cluster_name]
    }
    condition {
      test     = "StringEquals"
      variable = "ec2:CreateAction"
      values   = ["CreateFleet", "CreateLaunchTemplate", "RunInstances"]
    }
  }
  statement {
    sid       = "PassNodeRoleToEC2"
    effect    = "Allow"
    actions   = ["iam:PassRole"]
    resources = [var.node_role_arn]
    condition {
      test     = "StringEquals"
      variable = "iam:PassedToService"
      values   = ["ec2.amazonaws.com"]
    }
  }
}

data "aws_iam_policy_document" "ami_parameters" {
  statement {
    sid     = "PublicAMIParameters"
    effect  = "Allow"
    actions = ["ssm:GetParameter"]
    resources = [
      "arn:${data.aws_partition.current.partition}:ssm:${data.aws_region.current.region}::parameter/aws/service/bottlerocket/*",
      "arn:${data.aws_partition.current.partition}:ssm:${data.aws_region.current.region}::parameter/aws/service/eks/optimized-ami/*",
      # The EKS-optimized Windows Server images behind windows20XX@latest aliases.
      "arn:${data.aws_partition.current.partition}:ssm:${data.aws_region.current.region}::parameter/aws/service/ami-windows-latest/*",
    ]
  }
  dynamic "statement" {
    for_each = length(var.ami_parameter_paths) > 0 ? [1] : []
    content {
      sid       = "ApprovedAMIParameters"
      effect    = "Allow"
      actions   = ["ssm:GetParameter"]
      resources = [for p in var.ami_parameter_paths : "arn:${data.aws_partition.current.partition}:ssm:${data.aws_region.current.region}:${data.aws_caller_identity.current.account_id}:parameter${p}/*"]
    }
  }
}

resource "aws_iam_role" "provision" {
  name               = "dovetail-${var.cluster_name}-provision"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume["provision"].json
}

resource "aws_iam_role" "consolidate" {
  name               = "dovetail-${var.cluster_name}-consolidate"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume["consolidate"].json
}

resource "aws_iam_role" "drift" {
  name               = "dovetail-${var.cluster_name}-drift"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume["drift"].json
}

resource "aws_iam_role" "lifecycle" {
  name               = "dovetail-${var.cluster_name}-lifecycle"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume["lifecycle"].json
}

resource "aws_iam_role" "interruption" {
  name               = "dovetail-${var.cluster_name}-interruption"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume["interruption"].json
}

resource "aws_iam_role_policy" "provision" {
  name   = "provision"
  role   = aws_iam_role.provision.id
  policy = data.aws_iam_policy_document.provision.json
}

resource "aws_iam_role_policy" "consolidate" {
  name   = "consolidate"
  role   = aws_iam_role.consolidate.id
  policy = data.aws_iam_policy_document.consolidate.json
}

resource "aws_iam_role_policy" "drift" {
  name   = "drift"
  role   = aws_iam_role.drift.id
  policy = data.aws_iam_policy_document.drift.json
}

resource "aws_iam_role_policy" "lifecycle" {
  name   = "lifecycle"
  role   = aws_iam_role.lifecycle.id
  policy = data.aws_iam_policy_document.lifecycle.json
}

resource "aws_iam_role_policy" "interruption" {
  name   = "interruption"
  role   = aws_iam_role.interruption.id
  policy = data.aws_iam_policy_document.interruption.json
}

resource "aws_iam_policy" "launch" {
  name        = "dovetail-${var.cluster_name}-launch"
  description = "Dovetail launch permissions (governed: discovery-tagged subnets and security groups, approved images, mandatory tags)."
  policy      = data.aws_iam_policy_document.launch.json
}

resource "aws_iam_policy" "ami_parameters" {
  name        = "dovetail-${var.cluster_name}-ami-parameters"
  description = "SSM parameters Dovetail may read AMI ids from."
  policy      = data.aws_iam_policy_document.ami_parameters.json
}

resource "aws_iam_role_policy_attachment" "launch" {
  for_each   = local.launching_roles
  role       = each.value
  policy_arn = aws_iam_policy.launch.arn
}

resource "aws_iam_role_policy_attachment" "ami_parameters" {
  for_each   = local.ami_reading_roles
  role       = each.value
  policy_arn = aws_iam_policy.ami_parameters.arn
}
