package crd

import (
	"fmt"
	"reflect"

	"sigs.k8s.io/yaml"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Column is an additionalPrinterColumns entry.
type Column struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	JSONPath string `json:"jsonPath"`
	Priority int    `json:"priority,omitempty"`
}

// Definition describes one CRD to generate.
type Definition struct {
	File, Group, Kind, Plural, Singular string
	ShortNames                          []string
	Type                                reflect.Type
	Overrides                           map[string]func(*Schema)
	Columns                             []Column
	Description                         string
}

func ready() Column {
	return Column{Name: "Ready", Type: "string", JSONPath: `.status.conditions[?(@.type=="Ready")].status`}
}

func age() Column {
	return Column{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"}
}

// nodeClaimSpecOverrides are the rules shared by NodePool templates and NodeClaims, under prefix.
func nodeClaimSpecOverrides(prefix string, o map[string]func(*Schema)) {
	ops := enum("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")
	effects := enum("NoSchedule", "PreferNoSchedule", "NoExecute")
	o[prefix+".requirements"] = all(maxItems(100), desc("Requirements every node of this spec satisfies (operators In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte)."))
	o[prefix+".requirements[].operator"] = ops
	o[prefix+".requirements[].minValues"] = all(minMax(1, 50), desc("Minimum number of distinct values the offering list keeps for this key."))
	o[prefix+".taints[].effect"] = effects
	o[prefix+".startupTaints[].effect"] = effects
	o[prefix+".expireAfter"] = all(dflt("720h"), desc(`How long a node lives before it is replaced: a duration ("720h") or "Never".`))
	o[prefix+".terminationGracePeriod"] = pattern(`^([0-9]+(s|m|h))+$`)
	o[prefix+".nodeClassRef.group"] = pattern(`^[^/]*$`)
	o[prefix+".nodeClassRef"] = desc("The NodeClass (group, kind, name) with the cloud-specific launch settings.")
}

// Definitions returns the three CRDs Dovetail serves (v1 only).
func Definitions() []Definition {
	np := map[string]func(*Schema){
		"":                                    desc("NodePool (karpenter.sh/v1 compatible): a template for the nodes Dovetail may launch, with requirements, limits, weight and disruption rules."),
		"spec.disruption":                     dflt(map[string]any{"consolidateAfter": "0s"}),
		"spec.disruption.consolidationPolicy": all(enum(v1.ConsolidationPolicyWhenEmpty, v1.ConsolidationPolicyWhenEmptyOrUnderutilized), dflt(v1.ConsolidationPolicyWhenEmptyOrUnderutilized)),
		"spec.disruption.consolidateAfter":    desc(`How long a node must be empty or underutilized before consolidation: a duration ("30s") or "Never".`),
		"spec.disruption.consolidateWhen":     enum("WhenEmpty", "WhenEmptyOrUnderutilized", "WhenCostJustifiesDisruption"),
		"spec.disruption.decisionRatioThreshold": func(s *Schema) {
			zero := 0.0
			s.Minimum, s.ExclusiveMinimum = &zero, true
		},
		"spec.disruption.budgets":             all(maxItems(50), dflt([]any{map[string]any{"nodes": "10%"}})),
		"spec.disruption.budgets[].nodes":     all(pattern(`^((100|[0-9]{1,2})%|[0-9]+)$`), dflt("10%")),
		"spec.disruption.budgets[].schedule":  pattern(`^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`),
		"spec.disruption.budgets[].duration":  pattern(`^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`),
		"spec.disruption.budgets[].reasons":   maxItems(50),
		"spec.disruption.budgets[].reasons[]": enum(v1.DisruptionReasonUnderutilized, v1.DisruptionReasonEmpty, v1.DisruptionReasonDrifted),
		"spec.weight":                         all(minMax(1, 100), desc("Priority among NodePools: higher is tried first; unset counts as 0.")),
		"spec.replicas":                       minimum(0),
		"spec.limits":                         desc("Caps on the total capacity (cpu, memory, nvidia.com/gpu, nodes...) of all nodes of the pool."),
	}
	nodeClaimSpecOverrides("spec.template.spec", np)

	nc := map[string]func(*Schema){
		"": desc("NodeClaim (karpenter.sh/v1 compatible): one node Dovetail asked the cloud for."),
	}
	nodeClaimSpecOverrides("spec", nc)

	hop := int64(1)
	ec2 := map[string]func(*Schema){
		"":                                                              desc("EC2NodeClass (karpenter.k8s.aws/v1 compatible): how an AWS node is launched."),
		"spec.subnetSelectorTerms":                                      maxItems(30),
		"spec.subnetSelectorTerms[].id":                                 pattern(`^subnet-[0-9a-z]+$`),
		"spec.securityGroupSelectorTerms":                               maxItems(30),
		"spec.securityGroupSelectorTerms[].id":                          pattern(`^sg-[0-9a-z]+$`),
		"spec.capacityReservationSelectorTerms":                         maxItems(30),
		"spec.capacityReservationSelectorTerms[].id":                    pattern(`^cr-[0-9a-z]+$`),
		"spec.capacityReservationSelectorTerms[].ownerID":               pattern(`^[0-9]{12}$`),
		"spec.capacityReservationSelectorTerms[].instanceMatchCriteria": enum("open", "targeted"),
		"spec.amiSelectorTerms":                                         all(maxItems(30), desc(`AMI selection: one alias ("al2023@latest") or terms by id, name/owner, tags or ssmParameter.`)),
		"spec.amiSelectorTerms[].alias": func(s *Schema) {
			n := int64(30)
			s.MaxLength = &n
			s.Pattern = `^[a-zA-Z0-9]+@.+$`
		},
		"spec.amiSelectorTerms[].id":                              pattern(`^ami-[0-9a-z]+$`),
		"spec.amiFamily":                                          enum(v1.AMIFamilyAL2, v1.AMIFamilyAL2023, v1.AMIFamilyBottlerocket, v1.AMIFamilyCustom, v1.AMIFamilyWindows2019, v1.AMIFamilyWindows2022),
		"spec.ipPrefixCount":                                      minimum(0),
		"spec.instanceStorePolicy":                                enum("RAID0"),
		"spec.blockDeviceMappings":                                maxItems(50),
		"spec.blockDeviceMappings[].ebs.volumeType":               enum("standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"),
		"spec.blockDeviceMappings[].ebs.volumeInitializationRate": minMax(100, 300),
		"spec.metadataOptions":                                    dflt(map[string]any{"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": hop, "httpTokens": "required"}),
		"spec.metadataOptions.httpEndpoint":                       all(enum("enabled", "disabled"), dflt("enabled")),
		"spec.metadataOptions.httpProtocolIPv6":                   all(enum("enabled", "disabled"), dflt("disabled")),
		"spec.metadataOptions.httpPutResponseHopLimit":            all(minMax(1, 64), dflt(hop)),
		"spec.metadataOptions.httpTokens":                         all(enum("required", "optional"), dflt("required")),
		"spec.kubelet.maxPods":                                    minimum(0),
		"spec.kubelet.podsPerCore":                                minimum(0),
		"spec.kubelet.imageGCHighThresholdPercent":                minMax(0, 100),
		"spec.kubelet.imageGCLowThresholdPercent":                 minMax(0, 100),
		"status.capacityReservations[].reservationType":           enum("default", "capacity-block"),
		"status.capacityReservations[].state":                     enum("active", "expiring"),
	}

	return []Definition{
		{File: "karpenter.sh_nodepools.yaml", Group: v1.Group, Kind: "NodePool", Plural: "nodepools", Singular: "nodepool",
			Type: reflect.TypeFor[v1.NodePool](), Overrides: np, Columns: []Column{
				{Name: "NodeClass", Type: "string", JSONPath: ".spec.template.spec.nodeClassRef.name"},
				{Name: "Nodes", Type: "string", JSONPath: ".status.nodes"},
				ready(), age(),
				{Name: "Weight", Type: "integer", JSONPath: ".spec.weight", Priority: 1},
				{Name: "CPU", Type: "string", JSONPath: ".status.resources.cpu", Priority: 1},
				{Name: "Memory", Type: "string", JSONPath: ".status.resources.memory", Priority: 1},
			}},
		{File: "karpenter.sh_nodeclaims.yaml", Group: v1.Group, Kind: "NodeClaim", Plural: "nodeclaims", Singular: "nodeclaim",
			Type: reflect.TypeFor[v1.NodeClaim](), Overrides: nc, Columns: []Column{
				{Name: "Type", Type: "string", JSONPath: `.metadata.labels.node\.kubernetes\.io/instance-type`},
				{Name: "Capacity", Type: "string", JSONPath: `.metadata.labels.karpenter\.sh/capacity-type`},
				{Name: "Zone", Type: "string", JSONPath: `.metadata.labels.topology\.kubernetes\.io/zone`},
				{Name: "Node", Type: "string", JSONPath: ".status.nodeName"},
				ready(), age(),
				{Name: "ID", Type: "string", JSONPath: ".status.providerID", Priority: 1},
				{Name: "NodePool", Type: "string", JSONPath: `.metadata.labels.karpenter\.sh/nodepool`, Priority: 1},
				{Name: "NodeClass", Type: "string", JSONPath: ".spec.nodeClassRef.name", Priority: 1},
			}},
		{File: "karpenter.k8s.aws_ec2nodeclasses.yaml", Group: v1.AWSGroup, Kind: "EC2NodeClass", Plural: "ec2nodeclasses", Singular: "ec2nodeclass",
			ShortNames: []string{"ec2nc", "ec2ncs"}, Type: reflect.TypeFor[v1.EC2NodeClass](), Overrides: ec2, Columns: []Column{
				ready(), age(),
				{Name: "Role", Type: "string", JSONPath: ".spec.role", Priority: 1},
			}},
	}
}

// Render returns the CRD YAML of d.
func Render(d Definition) ([]byte, error) {
	used := map[string]bool{}
	o := make(map[string]func(*Schema), len(d.Overrides))
	for k, f := range d.Overrides {
		o[k] = func(s *Schema) { used[k] = true; f(s) }
	}
	schema := build(d.Type, "", o)
	for k := range d.Overrides {
		if !used[k] {
			return nil, fmt.Errorf("render %s: override %q names no field of %s", d.Kind, k, d.Type)
		}
	}
	names := map[string]any{"kind": d.Kind, "listKind": d.Kind + "List", "plural": d.Plural, "singular": d.Singular, "categories": []string{"karpenter", "dovetail"}}
	if len(d.ShortNames) > 0 {
		names["shortNames"] = d.ShortNames
	}
	doc := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata": map[string]any{
			"name":        d.Plural + "." + d.Group,
			"annotations": map[string]string{"dovetail.dev/generated-by": "shared/apis/crd (go test ./shared/apis/crd -run TestCRDFiles -update)"},
		},
		"spec": map[string]any{
			"group": d.Group,
			"names": names,
			"scope": "Cluster",
			"versions": []any{map[string]any{
				"name":                     "v1",
				"served":                   true,
				"storage":                  true,
				"additionalPrinterColumns": d.Columns,
				"subresources":             map[string]any{"status": map[string]any{}},
				"schema":                   map[string]any{"openAPIV3Schema": schema},
			}},
		},
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", d.Kind, err)
	}
	return append([]byte("# Generated from shared/apis/v1 by shared/apis/crd. Do not edit.\n---\n"), b...), nil
}
