# Claim-check bucket: payloads over the SQS message limit, expired after a day, TLS only.

data "aws_iam_policy_document" "claim_check_tls" {
  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["s3:GetObject", "s3:PutObject"]
    resources = ["${aws_s3_bucket.claim_check.arn}/*"]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_s3_bucket" "claim_check" {
  bucket_prefix = "dovetail-${var.cluster_name}-"
  tags = {
    "dovetail.dev/cluster" = var.cluster_name
  }
}

resource "aws_s3_bucket_ownership_controls" "claim_check" {
  bucket = aws_s3_bucket.claim_check.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_public_access_block" "claim_check" {
  bucket                  = aws_s3_bucket.claim_check.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_server_side_encryption_configuration" "claim_check" {
  bucket = aws_s3_bucket.claim_check.id
  rule {
    # SSE-S3 by default; SSE-KMS with kms_key_arn, with an S3 Bucket Key so each object does
    # not cost a KMS request (Amazon S3 User Guide, "Reducing the cost of SSE-KMS with Amazon S3
    # Bucket Keys").
    apply_server_side_encryption_by_default {
      sse_algorithm     = var.kms_key_arn == "" ? "AES256" : "aws:kms"
      kms_master_key_id = local.kms_key
    }
    bucket_key_enabled = var.kms_key_arn != ""
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "claim_check" {
  bucket = aws_s3_bucket.claim_check.id
  rule {
    id     = "expire-claim-checks"
    status = "Enabled"
    filter {
      prefix = "claim-check/"
    }
    expiration {
      days = 1
    }
    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }
}

resource "aws_s3_bucket_policy" "claim_check" {
  bucket = aws_s3_bucket.claim_check.id
  policy = data.aws_iam_policy_document.claim_check_tls.json
}
