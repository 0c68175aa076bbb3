package preview

import (
	"fmt"

	"github.com/dovetail-dev/dovetail/shared/apis"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// A cluster without NodePools (Cluster Autoscaler scaling node groups) is previewed against the
// NodePool its users would start from:
//   - EKS: Karpenter's getting-started NodePool "default" (karpenter.sh docs, "Getting Started
//     with Karpenter", v1): linux/amd64, on-demand, instance categories c, m and r of
//     generation > 2, expireAfter 720h, consolidation WhenEmptyOrUnderutilized after 1m, the
//     default budget (10 % of the nodes); its EC2NodeClass "default" boots AL2023
//     (alias al2023@latest). The guide's cpu limit of 1000 is left out: the preview must place
//     the whole cluster.
//   - AKS: node auto-provisioning's NodePool "default" (Microsoft Learn, "Configure node pools
//     for node auto-provisioning"): linux/amd64, on-demand, SKU family D, expireAfter Never,
//     consolidation WhenEmptyOrUnderutilized; its AKSNodeClass "default" (Ubuntu).

const assumedEC2 = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements:
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
      - {key: kubernetes.io/os, operator: In, values: [linux]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
      - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["2"]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      expireAfter: 720h
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m
`

const assumedEC2Class = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: cluster}}]
`

const assumedAKS = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements:
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
      - {key: kubernetes.io/os, operator: In, values: [linux]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: karpenter.azure.com/sku-family, operator: In, values: [D]}
      nodeClassRef: {group: karpenter.azure.com, kind: AKSNodeClass, name: default}
      expireAfter: Never
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
`

const assumedAKSClass = `apiVersion: karpenter.azure.com/v1beta1
kind: AKSNodeClass
metadata: {name: default}
spec:
  imageFamily: Ubuntu2204
`

// AssumedNodePool returns the NodePool (and its NodeClass) a cluster without NodePools is
// previewed against, for the cloud of the NodeClass kind (apisv1.KindEC2NodeClass or
// apisv1.KindAKSNodeClass), defaulted and validated as any manifest is, with a one-line
// description for the output.
func AssumedNodePool(nodeClassKind string) (*apisv1.NodePool, apisv1.NodeClass, string, error) {
	pool, class, what := assumedEC2, assumedEC2Class,
		"Karpenter's getting-started NodePool \"default\" (linux/amd64, on-demand, categories c/m/r of generation > 2, AL2023, consolidation WhenEmptyOrUnderutilized after 1m, budget 10% of nodes; no cpu limit)"
	if nodeClassKind == apisv1.KindAKSNodeClass {
		pool, class, what = assumedAKS, assumedAKSClass,
			"AKS node auto-provisioning's NodePool \"default\" (linux/amd64, on-demand, SKU family D, Ubuntu, consolidation WhenEmptyOrUnderutilized, budget 10% of nodes)"
	}
	np, err := apis.Load([]byte(pool))
	if err != nil {
		return nil, apisv1.NodeClass{}, "", fmt.Errorf("assumed NodePool: %w", err)
	}
	nc, err := apis.Load([]byte(class))
	if err != nil {
		return nil, apisv1.NodeClass{}, "", fmt.Errorf("assumed NodeClass: %w", err)
	}
	var out apisv1.NodeClass
	switch c := nc.(type) {
	case *apisv1.EC2NodeClass:
		out.EC2 = c
	case *apisv1.AKSNodeClass:
		out.AKS = c
	}
	return np.(*apisv1.NodePool), out, what, nil
}
