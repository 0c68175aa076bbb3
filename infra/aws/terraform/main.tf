# Shared values and the account, region and partition the ARNs are built from.

locals {
  # make package writes the zips to the repository's dist/; path.module keeps that right when the
  # module is called from elsewhere.
  package_dir         = var.package_dir != "" ? var.package_dir : "${path.module}/../../../dist"
  ec2_arn             = "arn:${data.aws_partition.current.partition}:ec2:${data.aws_region.current.region}:${data.aws_caller_identity.current.account_id}"
  discovery_tag_value = var.discovery_tag_value != "" ? var.discovery_tag_value : var.eks_cluster_name
  lambda_functions    = ["provision", "consolidate", "drift", "lifecycle", "interruption"]
  # The roles that launch (provision, and the replacements of consolidate, drift and
  # interruption) hold the one launch policy; every function reads AMI parameters.
  launching_roles = {
    provision    = aws_iam_role.provision.name
    consolidate  = aws_iam_role.consolidate.name
    drift        = aws_iam_role.drift.name
    interruption = aws_iam_role.interruption.name
  }
  ami_reading_roles = merge(local.launching_roles, { lifecycle = aws_iam_role.lifecycle.name })
  # Queue encryption: SQS-managed keys (SSE-SQS) unless kms_key_arn names a customer managed key;
  # the two are exclusive on a queue (null leaves an argument unset).
  sqs_managed_sse = var.kms_key_arn == "" ? true : null
  kms_key         = var.kms_key_arn == "" ? null : var.kms_key_arn
}

data "aws_partition" "current" {}

data "aws_region" "current" {}

data "aws_caller_identity" "current" {}
