# The five functions: provided.al2023 on arm64, code from make package, each on its queues with
# partial batch responses.

resource "aws_cloudwatch_log_group" "provision" {
  name              = "/aws/lambda/dovetail-${var.cluster_name}-provision"
  retention_in_days = 30
}

resource "aws_cloudwatch_log_group" "consolidate" {
  name              = "/aws/lambda/dovetail-${var.cluster_name}-consolidate"
  retention_in_days = 30
}

resource "aws_cloudwatch_log_group" "drift" {
  name              = "/aws/lambda/dovetail-${var.cluster_name}-drift"
  retention_in_days = 30
}

resource "aws_cloudwatch_log_group" "lifecycle" {
  name              = "/aws/lambda/dovetail-${var.cluster_name}-lifecycle"
  retention_in_days = 30
}

resource "aws_cloudwatch_log_group" "interruption" {
  name              = "/aws/lambda/dovetail-${var.cluster_name}-interruption"
  retention_in_days = 30
}

resource "aws_lambda_function" "provision" {
  function_name    = "dovetail-${var.cluster_name}-provision"
  filename         = "${local.package_dir}/provision-arm64.zip"
  source_code_hash = filebase64sha256("${local.package_dir}/provision-arm64.zip")
  handler          = "bootstrap"
  runtime          = "provided.al2023"
  architectures    = ["arm64"]
  memory_size      = 512
  timeout          = 60
  role             = aws_iam_role.provision.arn
  environment {
    variables = {
      DOVETAIL_CLUSTER             = var.cluster_name
      DOVETAIL_CLOUD               = "aws"
      DOVETAIL_COMMAND_QUEUE_URL   = aws_sqs_queue.commands.url
      DOVETAIL_DLQ_URL             = aws_sqs_queue.events_dlq.url
      DOVETAIL_BLOB_BUCKET         = aws_s3_bucket.claim_check.bucket
      DOVETAIL_BLOB_PREFIX         = "claim-check/"
      DOVETAIL_EKS_CLUSTER_NAME    = var.eks_cluster_name
      DOVETAIL_EKS_ENDPOINT        = var.eks_endpoint
      DOVETAIL_EKS_CA              = var.eks_certificate_authority
      DOVETAIL_KUBERNETES_VERSION  = var.kubernetes_version
      DOVETAIL_MIN_VALUES_POLICY   = var.min_values_policy
      DOVETAIL_PREFERENCE_POLICY   = var.preference_policy
      DOVETAIL_DISCOVERY_TAG_KEY   = var.discovery_tag_key
      DOVETAIL_DISCOVERY_TAG_VALUE = local.discovery_tag_value
      DOVETAIL_VPC_ID              = var.vpc_id
      DOVETAIL_IMAGE_OWNERS        = join(",", var.image_owners)
      DOVETAIL_AMI_PARAMETER_PATHS = join(",", var.ami_parameter_paths)
      DOVETAIL_MANDATORY_TAGS      = join(",", var.mandatory_tags)
    }
  }
  depends_on = [aws_cloudwatch_log_group.provision, aws_iam_role_policy.provision, aws_iam_role_policy_attachment.launch, aws_iam_role_policy_attachment.ami_parameters]
}

resource "aws_lambda_function" "consolidate" {
  function_name    = "dovetail-${var.cluster_name}-consolidate"
  filename         = "${local.package_dir}/consolidate-arm64.zip"
  source_code_hash = filebase64sha256("${local.package_dir}/consolidate-arm64.zip")
  handler          = "bootstrap"
  runtime          = "provided.al2023"
  architectures    = ["arm64"]
  memory_size      = 1024
  timeout          = 60
  role             = aws_iam_role.consolidate.arn
  environment {
    variables = {
      DOVETAIL_CLUSTER             = var.cluster_name
      DOVETAIL_CLOUD               = "aws"
      DOVETAIL_COMMAND_QUEUE_URL   = aws_sqs_queue.commands.url
      DOVETAIL_DLQ_URL             = aws_sqs_queue.consolidate_events_dlq.url
      DOVETAIL_BLOB_BUCKET         = aws_s3_bucket.claim_check.bucket
      DOVETAIL_BLOB_PREFIX         = "claim-check/"
      DOVETAIL_EKS_CLUSTER_NAME    = var.eks_cluster_name
      DOVETAIL_EKS_ENDPOINT        = var.eks_endpoint
      DOVETAIL_EKS_CA              = var.eks_certificate_authority
      DOVETAIL_KUBERNETES_VERSION  = var.kubernetes_version
      DOVETAIL_MIN_VALUES_POLICY   = var.min_values_policy
      DOVETAIL_PREFERENCE_POLICY   = var.preference_policy
      DOVETAIL_DISCOVERY_TAG_KEY   = var.discovery_tag_key
      DOVETAIL_DISCOVERY_TAG_VALUE = local.discovery_tag_value
      DOVETAIL_VPC_ID              = var.vpc_id
      DOVETAIL_IMAGE_OWNERS        = join(",", var.image_owners)
      DOVETAIL_AMI_PARAMETER_PATHS = join(",", var.ami_parameter_paths)
      DOVETAIL_MANDATORY_TAGS      = join(",", var.mandatory_tags)
    }
  }
  depends_on = [aws_cloudwatch_log_group.consolidate, aws_iam_role_policy.consolidate, aws_iam_role_policy_attachment.launch, aws_iam_role_policy_attachment.ami_parameters]
}

resource "aws_lambda_function" "drift" {
  function_name    = "dovetail-${var.cluster_name}-drift"
  filename         = "${local.package_dir}/drift-arm64.zip"
  source_code_hash = filebase64sha256("${local.package_dir}/drift-arm64.zip")
  handler          = "bootstrap"
  runtime          = "provided.al2023"
  architectures    = ["arm64"]
  memory_size      = 1024
  timeout          = 60
  role             = aws_iam_role.drift.arn
  environment {
    variables = {
      DOVETAIL_CLUSTER             = var.cluster_name
      DOVETAIL_CLOUD               = "aws"
      DOVETAIL_COMMAND_QUEUE_URL   = aws_sqs_queue.commands.url
      DOVETAIL_DLQ_URL             = aws_sqs_queue.drift_events_dlq.url
      DOVETAIL_BLOB_BUCKET         = aws_s3_bucket.claim_check.bucket
      DOVETAIL_BLOB_PREFIX         = "claim-check/"
      DOVETAIL_EKS_CLUSTER_NAME    = var.eks_cluster_name
      DOVETAIL_EKS_ENDPOINT        = var.eks_endpoint
      DOVETAIL_EKS_CA              = var.eks_certificate_authority
      DOVETAIL_KUBERNETES_VERSION  = var.kubernetes_version
      DOVETAIL_MIN_VALUES_POLICY   = var.min_values_policy
      DOVETAIL_PREFERENCE_POLICY   = var.preference_policy
      DOVETAIL_DISCOVERY_TAG_KEY   = var.discovery_tag_key
      DOVETAIL_DISCOVERY_TAG_VALUE = local.discovery_tag_value
      DOVETAIL_VPC_ID              = var.vpc_id
      DOVETAIL_IMAGE_OWNERS        = join(",", var.image_owners)
      DOVETAIL_AMI_PARAMETER_PATHS = join(",", var.ami_parameter_paths)
      DOVETAIL_MANDATORY_TAGS      = join(",", var.mandatory_tags)
    }
  }
  depends_on = [aws_cloudwatch_log_group.drift, aws_iam_role_policy.drift, aws_iam_role_policy_attachment.launch, aws_iam_role_policy_attachment.ami_parameters]
}

resource "aws_lambda_function" "lifecycle" {
  function_name    = "dovetail-${var.cluster_name}-lifecycle"
  filename         = "${local.package_dir}/lifecycle-arm64.zip"
  source_code_hash = filebase64sha256("${local.package_dir}/lifecycle-arm64.zip")
  handler          = "bootstrap"
  runtime          = "provided.al2023"
  architectures    = ["arm64"]
  memory_size      = 1024
  timeout          = 60
  role             = aws_iam_role.lifecycle.arn
  environment {
    variables = {
      DOVETAIL_CLUSTER             = var.cluster_name
      DOVETAIL_CLOUD               = "aws"
      DOVETAIL_COMMAND_QUEUE_URL   = aws_sqs_queue.commands.url
      DOVETAIL_DLQ_URL             = aws_sqs_queue.lifecycle_events_dlq.url
      DOVETAIL_BLOB_BUCKET         = aws_s3_bucket.claim_check.bucket
      DOVETAIL_BLOB_PREFIX         = "claim-check/"
      DOVETAIL_REGISTRATION_TTL    = var.registration_ttl
      DOVETAIL_NODE_REPAIR         = tostring(var.node_repair)
      DOVETAIL_KUBERNETES_VERSION  = var.kubernetes_version
      DOVETAIL_DISCOVERY_TAG_KEY   = var.discovery_tag_key
      DOVETAIL_DISCOVERY_TAG_VALUE = local.discovery_tag_value
      DOVETAIL_VPC_ID              = var.vpc_id
      DOVETAIL_IMAGE_OWNERS        = join(",", var.image_owners)
      DOVETAIL_AMI_PARAMETER_PATHS = join(",", var.ami_parameter_paths)
      DOVETAIL_MANDATORY_TAGS      = join(",", var.mandatory_tags)
    }
  }
  depends_on = [aws_cloudwatch_log_group.lifecycle, aws_iam_role_policy.lifecycle, aws_iam_role_policy_attachment.ami_parameters]
}

resource "aws_lambda_function" "interruption" {
  function_name    = "dovetail-${var.cluster_name}-interruption"
  filename         = "${local.package_dir}/interruption-arm64.zip"
  source_code_hash = filebase64sha256("${local.package_dir}/interruption-arm64.zip")
  handler          = "bootstrap"
  runtime          = "provided.al2023"
  architectures    = ["arm64"]
  memory_size      = 512
  timeout          = 20
  role             = aws_iam_role.interruption.arn
  environment {
    variables = {
      DOVETAIL_CLUSTER             = var.cluster_name
      DOVETAIL_CLOUD               = "aws"
      DOVETAIL_COMMAND_QUEUE_URL   = aws_sqs_queue.commands.url
      DOVETAIL_DLQ_URL             = aws_sqs_queue.notices_dlq.url
      DOVETAIL_BLOB_BUCKET         = aws_s3_bucket.claim_check.bucket
      DOVETAIL_BLOB_PREFIX         = "claim-check/"
      DOVETAIL_EKS_CLUSTER_NAME    = var.eks_cluster_name
      DOVETAIL_EKS_ENDPOINT        = var.eks_endpoint
      DOVETAIL_EKS_CA              = var.eks_certificate_authority
      DOVETAIL_KUBERNETES_VERSION  = var.kubernetes_version
      DOVETAIL_MIN_VALUES_POLICY   = var.min_values_policy
      DOVETAIL_PREFERENCE_POLICY   = var.preference_policy
      DOVETAIL_REBALANCE           = "Record"
      DOVETAIL_DISCOVERY_TAG_KEY   = var.discovery_tag_key
      DOVETAIL_DISCOVERY_TAG_VALUE = local.discovery_tag_value
      DOVETAIL_VPC_ID              = var.vpc_id
      DOVETAIL_IMAGE_OWNERS        = join(",", var.image_owners)
      DOVETAIL_AMI_PARAMETER_PATHS = join(",", var.ami_parameter_paths)
      DOVETAIL_MANDATORY_TAGS      = join(",", var.mandatory_tags)
    }
  }
  depends_on = [aws_cloudwatch_log_group.interruption, aws_iam_role_policy.interruption, aws_iam_role_policy_attachment.launch, aws_iam_role_policy_attachment.ami_parameters]
}

resource "aws_lambda_event_source_mapping" "provision_events" {
  event_source_arn        = aws_sqs_queue.events.arn
  function_name           = aws_lambda_function.provision.arn
  batch_size              = 10
  function_response_types = ["ReportBatchItemFailures"]
}

resource "aws_lambda_event_source_mapping" "consolidate_events" {
  event_source_arn        = aws_sqs_queue.consolidate_events.arn
  function_name           = aws_lambda_function.consolidate.arn
  batch_size              = 10
  function_response_types = ["ReportBatchItemFailures"]
}

resource "aws_lambda_event_source_mapping" "drift_events" {
  event_source_arn        = aws_sqs_queue.drift_events.arn
  function_name           = aws_lambda_function.drift.arn
  batch_size              = 10
  function_response_types = ["ReportBatchItemFailures"]
}

resource "aws_lambda_event_source_mapping" "lifecycle_events" {
  event_source_arn        = aws_sqs_queue.lifecycle_events.arn
  function_name           = aws_lambda_function.lifecycle.arn
  batch_size              = 10
  function_response_types = ["ReportBatchItemFailures"]
}

resource "aws_lambda_event_source_mapping" "interruption_notices" {
  event_source_arn        = aws_sqs_queue.notices.arn
  function_name           = aws_lambda_function.interruption.arn
  batch_size              = 10
  function_response_types = ["ReportBatchItemFailures"]
}

resource "aws_lambda_event_source_mapping" "interruption_events" {
  event_source_arn        = aws_sqs_queue.interruption_events.arn
  function_name           = aws_lambda_function.interruption.arn
  batch_size              = 10
  function_response_types = ["ReportBatchItemFailures"]
}
