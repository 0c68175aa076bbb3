# Dovetail on AWS for one cluster: the functions (Lambda), their queues, the claim-check bucket,
# the interruption notice rules and least-privilege IAM, as a Terraform module. The same stack as
# ../template.yaml (SAM); ../*_test.go parse both and hold them to the same rules. README.md in
# ../ says how to apply it.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 6.0"
    }
  }
}
