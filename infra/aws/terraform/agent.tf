# The in-cluster agent's role: send events, consume commands, read and write claim checks;
# no EC2 or IAM permission.

data "aws_iam_policy_document" "agent_assume" {
  statement {
    effect  = "Allow"
    actions = ["sts:AssumeRole", "sts:TagSession"]
    principals {
      type        = "Service"
      identifiers = ["pods.eks.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [data.aws_caller_identity.current.account_id]
    }
    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values = [
        "arn:${data.aws_partition.current.partition}:eks:${data.aws_region.current.region}:${data.aws_caller_identity.current.account_id}:cluster/${var.eks_cluster_name}",
      ]
    }
  }
}

data "aws_iam_policy_document" "agent" {
  statement {
    sid     = "PublishEvents"
    effect  = "Allow"
    actions = ["sqs:SendMessage"]
    resources = [
      aws_sqs_queue.events.arn,
      aws_sqs_queue.consolidate_events.arn,
      aws_sqs_queue.drift_events.arn,
      aws_sqs_queue.interruption_events.arn,
      aws_sqs_queue.lifecycle_events.arn,
      aws_sqs_queue.commands_dlq.arn,
    ]
  }
  statement {
    sid    = "ConsumeCommands"
    effect = "Allow"
    actions = [
      "sqs:ChangeMessageVisibility",
      "sqs:DeleteMessage",
      "sqs:GetQueueAttributes",
      "sqs:ReceiveMessage",
    ]
    resources = [aws_sqs_queue.commands.arn]
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
}

resource "aws_iam_role" "agent" {
  name               = "dovetail-${var.cluster_name}-agent"
  assume_role_policy = data.aws_iam_policy_document.agent_assume.json
}

resource "aws_iam_role_policy" "agent" {
  name   = "agent"
  role   = aws_iam_role.agent.id
  policy = data.aws_iam_policy_document.agent.json
}

# EKS Pod Identity: the agent's ServiceAccount gets the agent role (its trust policy admits
# pods.eks.amazonaws.com for this EKS cluster only). The cluster needs the eks-pod-identity-agent
# add-on; with IRSA instead, drop this and annotate the ServiceAccount (the Helm chart's
# serviceAccount.annotations) with a role trusting the cluster's OIDC provider.
resource "aws_eks_pod_identity_association" "agent" {
  cluster_name    = var.eks_cluster_name
  namespace       = var.agent_namespace
  service_account = var.agent_service_account
  role_arn        = aws_iam_role.agent.arn
  tags = {
    "dovetail.dev/cluster" = var.cluster_name
  }
}
