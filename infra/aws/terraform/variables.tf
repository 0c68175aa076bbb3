# The module's inputs. Governance (discovery tag, VPC, image owners, AMI parameter paths,
# mandatory tags) reaches both IAM and every function (DOVETAIL_* variables).

variable "cluster_name" {
  type        = string
  description = "Dovetail cluster name (RFC 1123 label); the value of the dovetail.dev/cluster tag."
  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", var.cluster_name)) && length(var.cluster_name) <= 40
    error_message = "cluster_name must be an RFC 1123 label of at most 40 characters."
  }
}

variable "node_role_arn" {
  type        = string
  description = "ARN of the IAM role of the nodes' instance profile (the only role the function may pass)."
}

variable "eks_cluster_name" {
  type        = string
  description = "EKS cluster the nodes join."
}

variable "eks_endpoint" {
  type        = string
  description = "EKS API server URL the nodes join."
}

variable "eks_certificate_authority" {
  type        = string
  description = "EKS cluster CA bundle (base64)."
}

variable "kubernetes_version" {
  type = string
  # 1.35: in EKS standard support until 27 March 2027 (Amazon EKS Kubernetes release calendar,
  # docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html); 1.34's ended 2 December 2026.
  default     = "1.35"
  description = "Kubernetes minor version (1.35) of the EKS cluster, for the EKS-optimized AMI aliases' SSM parameters. Set it to the cluster's own version."
  validation {
    condition     = can(regex("^1\\.[0-9]+$", var.kubernetes_version))
    error_message = "kubernetes_version must be a Kubernetes minor version such as 1.35 (aws eks describe-cluster --query cluster.version)."
  }
}

variable "min_values_policy" {
  type        = string
  default     = "Strict"
  description = "Karpenter's --min-values-policy for the planning functions: Strict leaves a pod pending when its NodeClaim's instance types cannot keep a requirement's minValues; BestEffort launches with the types left and annotates the NodeClaim karpenter.sh/nodeclaim-min-values-relaxed."
  validation {
    condition     = contains(["Strict", "BestEffort"], var.min_values_policy)
    error_message = "min_values_policy must be Strict or BestEffort."
  }
}

variable "preference_policy" {
  type        = string
  default     = "Respect"
  description = "Karpenter's --preference-policy for the planning functions: Respect holds preferred affinities and ScheduleAnyway spreads while they can be met; Ignore never reads them."
  validation {
    condition     = contains(["Respect", "Ignore"], var.preference_policy)
    error_message = "preference_policy must be Respect or Ignore."
  }
}

variable "registration_ttl" {
  type        = string
  default     = "15m"
  description = "How long a launched NodeClaim may wait for its Node before the lifecycle function deletes it and marks its offering unavailable (a Go duration; DOVETAIL_REGISTRATION_TTL)."
  validation {
    condition     = can(regex("^([0-9]+(ns|us|ms|s|m|h))+$", var.registration_ttl))
    error_message = "registration_ttl must be a Go duration such as 15m."
  }
}

variable "node_repair" {
  type        = bool
  default     = true
  description = "Node repair in the lifecycle function (--node-repair; DOVETAIL_NODE_REPAIR): true replaces Nodes unhealthy past the cloud's repair policies unless more than 20% of their NodePool is unhealthy; false leaves them."
}

variable "package_dir" {
  type        = string
  default     = ""
  description = "Where make package wrote the zips (<function>-arm64.zip); empty: the repository's dist/ beside this module."
}

variable "discovery_tag_key" {
  type        = string
  default     = "karpenter.sh/discovery"
  description = "Tag key of the subnets and security groups nodes may be launched into (Karpenter's discovery tag); IAM refuses a launch into any other (ec2:ResourceTag), and a NodeClass selecting one is not Ready. DOVETAIL_DISCOVERY_TAG_KEY."
}

variable "discovery_tag_value" {
  type        = string
  default     = ""
  description = "The discovery tag's value; empty means eks_cluster_name (Karpenter's convention: karpenter.sh/discovery=<EKS cluster name>). DOVETAIL_DISCOVERY_TAG_VALUE."
}

variable "vpc_id" {
  type        = string
  default     = ""
  description = "When set, launches only into this VPC's subnets and security groups (ec2:Vpc). DOVETAIL_VPC_ID."
  validation {
    condition     = can(regex("^(vpc-[0-9a-f]+)?$", var.vpc_id))
    error_message = "vpc_id must be empty or a VPC id (vpc-...)."
  }
}

variable "image_owners" {
  type        = list(string)
  default     = []
  description = "Account IDs whose AMIs nodes may boot, besides Amazon's (ec2:Owner = amazon is always allowed: the EKS-optimized and Bottlerocket images). DOVETAIL_IMAGE_OWNERS."
  validation {
    condition     = alltrue([for o in var.image_owners : can(regex("^[0-9]{12}$", o))])
    error_message = "image_owners must be 12-digit account IDs."
  }
}

variable "ami_parameter_paths" {
  type        = list(string)
  default     = []
  description = "SSM parameter paths (such as /platform/amis, no trailing slash) under which amiSelectorTerms ssmParameter may read custom AMI ids, besides the public EKS and Bottlerocket parameters. DOVETAIL_AMI_PARAMETER_PATHS."
  validation {
    condition     = alltrue([for p in var.ami_parameter_paths : can(regex("^(/[a-zA-Z0-9_.-]+)+$", p))])
    error_message = "ami_parameter_paths must be absolute SSM paths without a trailing slash, such as /platform/amis."
  }
}

variable "mandatory_tags" {
  type        = list(string)
  default     = []
  description = "Tag keys (such as Environment, CostCenter) every instance, volume and network interface must carry: IAM refuses a launch without them (aws:RequestTag), and an EC2NodeClass whose spec.tags lacks one is not Ready. DOVETAIL_MANDATORY_TAGS."
}

variable "agent_namespace" {
  type        = string
  default     = "dovetail-system"
  description = "Namespace of the agent's ServiceAccount (the Helm chart's release namespace); the EKS Pod Identity association gives that ServiceAccount the agent role."
}

variable "agent_service_account" {
  type        = string
  default     = "dovetail-agent"
  description = "The agent's ServiceAccount (the Helm chart's serviceAccount.name, agent/rbac.yaml's)."
}

variable "kms_key_arn" {
  type        = string
  default     = ""
  description = "ARN of a customer managed KMS key that encrypts every queue and the claim-check bucket; empty: SQS-managed (SSE-SQS) and S3-managed (SSE-S3) keys. The roles get kms:Decrypt and kms:GenerateDataKey on it through SQS and S3 only; the key policy must let the account's IAM policies grant it and let events.amazonaws.com use it (kms:GenerateDataKey, kms:Decrypt) for the notices queue."
  validation {
    condition     = can(regex("^(arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[0-9a-zA-Z-]+)?$", var.kms_key_arn))
    error_message = "kms_key_arn must be empty or a KMS key ARN such as arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab (not an alias)."
  }
}
