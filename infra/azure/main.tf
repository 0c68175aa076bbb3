# Dovetail on Azure for one AKS cluster: Event Grid topics and subscriptions with dead-lettering,
# one Linux Function App per function (custom handler), the storage account of claim checks and
# dead letters, a user-assigned managed identity per function with custom roles scoped to the
# cluster's node resource group, Azure Policy for what RBAC cannot condition on, and Workload
# Identity federation for the agent. See README.md.

terraform {
  required_version = ">= 1.6"
  required_providers {
    azurerm = {
      source  = "hashicorp/azurerm"
      version = "~> 4.0"
    }
    azapi = {
      source  = "Azure/azapi"
      version = "~> 2.0"
    }
  }
}

provider "azurerm" {
  features {}
  # azurerm 4.x requires the subscription (its 4.0 upgrade guide: "subscription_id is now a required
  # provider property"; ARM_SUBSCRIPTION_ID is its environment form). A variable so the deploy line
  # names it rather than failing at plan time.
  subscription_id = var.subscription_id
  # The function apps' storage is reached with Microsoft Entra ID, not account keys.
  storage_use_azuread = true
}

variable "subscription_id" {
  description = "The Azure subscription (a GUID: az account show --query id -o tsv) of the AKS cluster and every Dovetail resource; azurerm 4.x requires it."
  type        = string
  validation {
    condition     = can(regex("^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", var.subscription_id))
    error_message = "subscription_id must be a subscription GUID such as 00000000-0000-0000-0000-000000000000 (az account show --query id -o tsv)."
  }
}

variable "cluster_name" {
  description = "Dovetail cluster name (RFC 1123 label): the dovetail.dev_cluster tag of every VM, and part of every resource name."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", var.cluster_name))
    error_message = "cluster_name must be an RFC 1123 label."
  }
}

variable "location" {
  description = "Azure region of the Dovetail resources (the AKS cluster's)."
  type        = string
}

variable "node_resource_group_name" {
  description = "The AKS cluster's node resource group (MC_<rg>_<cluster>_<region>): where VMs and NICs are created, and the only scope of the launch and terminate roles."
  type        = string
}

variable "aks_oidc_issuer_url" {
  description = "The AKS cluster's OIDC issuer URL (az aks show --query oidcIssuerProfile.issuerUrl), trusted for the agent's service account."
  type        = string
}

variable "agent_namespace" {
  description = "Namespace of the agent's service account (agent/rbac.yaml's, as on AWS and in the Helm chart's examples)."
  type        = string
  default     = "dovetail-system"
}

variable "agent_service_account" {
  description = "Name of the agent's service account."
  type        = string
  default     = "dovetail-agent"
}

variable "node_subnet_id" {
  description = "ARM id of the subnet node NICs join when an AKSNodeClass sets no vnetSubnetID (the cluster's node subnet)."
  type        = string
}

variable "extra_node_subnet_ids" {
  description = "ARM ids of the other subnets AKSNodeClasses name in spec.vnetSubnetID: the functions that launch may put NICs in them and lifecycle may read them, as in node_subnet_id. Empty: node_subnet_id only."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for s in var.extra_node_subnet_ids : can(regex("(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft.Network/virtualNetworks/[^/]+/subnets/[^/]+$", s))])
    error_message = "extra_node_subnet_ids must be subnet ARM ids (/subscriptions/<id>/resourceGroups/<rg>/providers/Microsoft.Network/virtualNetworks/<vnet>/subnets/<subnet>)."
  }
}

variable "min_values_policy" {
  description = "Karpenter's --min-values-policy for the planning functions: Strict (a NodeClaim that cannot keep minValues is not made) or BestEffort (made with the types left, annotated karpenter.sh/nodeclaim-min-values-relaxed)."
  type        = string
  default     = "Strict"
  validation {
    condition     = contains(["Strict", "BestEffort"], var.min_values_policy)
    error_message = "min_values_policy must be Strict or BestEffort."
  }
}

variable "node_repair" {
  description = "Node repair in the lifecycle function (--node-repair; DOVETAIL_NODE_REPAIR): true replaces Nodes unhealthy past the cloud's repair policies unless more than 20% of their NodePool is unhealthy; false leaves them."
  type        = bool
  default     = true
}

variable "preference_policy" {
  description = "Karpenter's --preference-policy for the planning functions: Respect (preferences held while they can be met) or Ignore (never read)."
  type        = string
  default     = "Respect"
  validation {
    condition     = contains(["Respect", "Ignore"], var.preference_policy)
    error_message = "preference_policy must be Respect or Ignore."
  }
}

variable "network_plugin" {
  description = "The cluster's network plugin as the Azure provider names it: azure-overlay (default), azure, kubenet or none."
  type        = string
  default     = "azure-overlay"
}

variable "aks_api_server" {
  description = "The AKS API server URL nodes join."
  type        = string
}

variable "aks_ca" {
  description = "The AKS cluster CA (base64 PEM)."
  type        = string
}

variable "aks_kubelet_identity_client_id" {
  description = "Client id of the cluster's kubelet identity (optional)."
  type        = string
  default     = ""
}

variable "aks_network_policy" {
  description = "The cluster's network policy engine (az aks show --query networkProfile.networkPolicy -o tsv): empty, azure, calico or cilium. Nodes' NETWORK_POLICY bootstrap variable."
  type        = string
  default     = ""
  validation {
    condition     = contains(["", "azure", "calico", "cilium"], var.aks_network_policy)
    error_message = "aks_network_policy must be empty, azure, calico or cilium."
  }
}

variable "aks_network_dataplane" {
  description = "The cluster's network dataplane (az aks show --query networkProfile.networkDataplane -o tsv): empty (azure) or cilium, which labels nodes kubernetes.azure.com/ebpf-dataplane=cilium for the Cilium DaemonSet."
  type        = string
  default     = ""
  validation {
    condition     = contains(["", "azure", "cilium"], var.aks_network_dataplane)
    error_message = "aks_network_dataplane must be empty, azure or cilium."
  }
}

variable "aks_vnet_guid" {
  description = "resourceGuid of the cluster's VNet (az network vnet show --query resourceGuid -o tsv): the kubernetes.azure.com/nodenetwork-vnetguid label of Azure CNI Overlay nodes. Empty: the label is left off."
  type        = string
  default     = ""
}

variable "aks_kubelet_identity_id" {
  description = "ARM id of the cluster's kubelet user-assigned identity (az aks show --query identityProfile.kubeletidentity.resourceId -o tsv), which every node VM carries for ACR pulls and the disk and file CSI drivers. Set, the functions that launch get Managed Identity Operator on it alone. Empty: node VMs carry no identity."
  type        = string
  default     = ""
  validation {
    condition     = var.aks_kubelet_identity_id == "" || can(regex("(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft.ManagedIdentity/userAssignedIdentities/[^/]+$", var.aks_kubelet_identity_id))
    error_message = "aks_kubelet_identity_id must be a user-assigned identity's ARM id (/subscriptions/<id>/resourceGroups/<rg>/providers/Microsoft.ManagedIdentity/userAssignedIdentities/<name>) or empty."
  }
}

variable "aks_provision_mode" {
  description = "How nodes get the AKS bootstrap (the Azure Karpenter provider's --provision-mode): aksscriptless (rendered by the functions into each VM's custom data) or bootstrappingclient (asked of AKS's NodeBootstrapping server; the provisioning command runs as the VM's CustomScript extension cse-agent-karpenter, which the functions that launch may then create and read in the node resource group)."
  type        = string
  default     = "aksscriptless"
  validation {
    condition     = contains(["aksscriptless", "bootstrappingclient"], var.aks_provision_mode)
    error_message = "aks_provision_mode must be aksscriptless or bootstrappingclient."
  }
}

variable "aks_nodebootstrapping_server_url" {
  description = "With aks_provision_mode = bootstrappingclient: URL of the NodeBootstrapping server (the provider's --nodebootstrapping-server-url). It is not an ARM endpoint and Azure RBAC has no action for it: the server authorizes the functions' tokens itself."
  type        = string
  default     = ""
  validation {
    condition     = var.aks_nodebootstrapping_server_url == "" || can(regex("^https?://[^/?#]+(/[^?#]*)?$", var.aks_nodebootstrapping_server_url))
    error_message = "aks_nodebootstrapping_server_url must be empty or an http(s) URL without query or fragment."
  }
}

variable "aks_cluster_resource_group" {
  description = "With aks_provision_mode = bootstrappingclient: the resource group of the AKS cluster resource (az aks show --query resourceGroup; not the node resource group)."
  type        = string
  default     = ""
}

variable "aks_cluster_name" {
  description = "With aks_provision_mode = bootstrappingclient: the AKS cluster resource's name. Empty: cluster_name."
  type        = string
  default     = ""
}

variable "aks_kubernetes_version" {
  description = "The AKS control plane's Kubernetes version (az aks show --query currentKubernetesVersion -o tsv, e.g. 1.34.2): AKSNodeClass status.kubernetesVersion. No default: nodes must join at the cluster's own version. Update it with the cluster."
  type        = string
  validation {
    condition     = can(regex("^[0-9]+\\.[0-9]+(\\.[0-9]+)?$", var.aks_kubernetes_version))
    error_message = "aks_kubernetes_version must be a Kubernetes version such as 1.34.2 (az aks show --query currentKubernetesVersion -o tsv)."
  }
}

variable "aks_ssh_public_key" {
  description = "The admin SSH public key of AKS Linux nodes."
  type        = string
}

variable "aks_bootstrap_token_secret_uri" {
  description = "Key Vault secret URI (versionless) of the kubelet TLS bootstrap token: never an app setting in clear."
  type        = string
}

variable "aks_bootstrap_token_secret_id" {
  description = "ARM resource id of that secret, the only scope of the functions' Key Vault Secrets User role."
  type        = string
}

variable "package_urls" {
  description = "Per function, the URL of its package (host.json, the function folders of infra/azure/app and the linux/amd64 handler binary, zipped), for WEBSITE_RUN_FROM_PACKAGE."
  type        = map(string)
  default     = {}
}

variable "otlp_metrics_endpoint" {
  description = "OTLP/HTTP metrics URL the functions export Karpenter-named metrics to (Azure Monitor's OpenTelemetry ingestion, https://<ingestion host>/v1/metrics, signed with each function's managed identity; or a collector). Empty: no metrics."
  type        = string
  default     = ""
}

variable "otlp_metrics_dcr_id" {
  description = "ARM resource id of the Azure Monitor Data Collection Rule behind otlp_metrics_endpoint. Set, each function's identity gets Monitoring Metrics Publisher on that rule only (Azure Monitor refuses an ingestion token without it); empty (a collector, or no metrics): no grant."
  type        = string
  default     = ""
}

locals {
  name = "dovetail-${var.cluster_name}"
  # One Function App per function: each runs under its own identity. Each function's
  # function.json folders are in app/<function>/ (the routes of shared/runtime: the function's own
  # subject at /<name>, the agent's events at /<name>-events when that is not its subject).
  functions = {
    provision    = { launches = true, folders = ["provision"] }
    consolidate  = { launches = true, folders = ["consolidate"] }
    drift        = { launches = true, folders = ["drift"] }
    interruption = { launches = true, folders = ["interruption", "interruption-events"] }
    lifecycle    = { launches = false, folders = ["lifecycle"] }
  }
  # The tag Dovetail writes as dovetail.dev/cluster: ARM tag names cannot hold "/"
  # (shared/cloud/azure ToAzureTags).
  cluster_tag   = "dovetail.dev_cluster"
  nodeclaim_tag = "karpenter.sh_nodeclaim"
  tags          = { "dovetail.dev_cluster" = var.cluster_name }
}

data "azurerm_client_config" "current" {}

resource "azurerm_resource_group" "dovetail" {
  name     = "${local.name}-rg"
  location = var.location
  tags     = local.tags
}

data "azurerm_resource_group" "nodes" {
  name = var.node_resource_group_name
}
