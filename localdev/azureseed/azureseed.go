// Package azureseed holds the AKS variant of the seed scenario for `dovetail dev --cloud azure`
// and the `dovetail plan` tests: an AKS NodePool and AKSNodeClass (nodepool.yaml) and an AKS
// system node pool of two nodes (system-nodes.yaml). The workloads are the seed's own
// (localdev/manifests/workloads.yaml), which name no cloud.
package azureseed

import "embed"

// FS holds nodepool.yaml and system-nodes.yaml.
//
//go:embed nodepool.yaml system-nodes.yaml
var FS embed.FS
