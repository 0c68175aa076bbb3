package crd

import (
	"sort"
	"strings"
	"testing"
)

// fieldState is what Dovetail does with a schema field of the EC2NodeClass or NodePool CRD.
type fieldState int

const (
	// implemented: read (spec) or written (status) where the entry says.
	implemented fieldState = iota
	// refusedByCondition: a set value makes ValidationSucceeded=False naming the field (the
	// refused table below proves the message), and the solver refuses its NodePools.
	refusedByCondition
	// ownedElsewhere: refused by condition today, and being built by another item of issue 26
	// (static NodePools; Windows, EFA and placement groups); the lead moves it to implemented
	// when that item lands.
	ownedElsewhere
)

type fieldEntry struct {
	state fieldState
	where string
}

// fields classifies every field of the two schemas by subtree: an entry covers its path and
// everything under it, the longest entry deciding. TestEveryFieldImplementedOrRefused fails
// when a schema field has no entry, or an entry names no schema field.
var fields = map[string]fieldEntry{
	// NodePool
	"NodePool spec.disruption.budgets":                   {implemented, "shared/disruption/budgets.go (nodes, schedule, duration, reasons)"},
	"NodePool spec.disruption.consolidateAfter":          {implemented, "shared/disruption/candidates.go"},
	"NodePool spec.disruption.consolidationPolicy":       {implemented, "shared/disruption/consolidate.go (WhenEmpty, WhenEmptyOrUnderutilized)"},
	"NodePool spec.disruption":                           {implemented, "shared/disruption"},
	"NodePool spec.limits":                               {implemented, "shared/provisioning/limits.go"},
	"NodePool spec.weight":                               {implemented, "shared/provisioning/pools.go (weight order)"},
	"NodePool spec.replicas":                             {implemented, "shared/static (static NodePools: provision, lifecycle, drift)"},
	"NodePool spec.template.metadata":                    {implemented, "shared/provisioning/pools.go labels; shared/launch NodeClaim annotations"},
	"NodePool spec.template.spec.requirements":           {implemented, "shared/provisioning/pools.go (minValues under --min-values-policy)"},
	"NodePool spec.template.spec.nodeClassRef":           {implemented, "shared/apis/v1 FindNodeClass"},
	"NodePool spec.template.spec.taints":                 {implemented, "shared/provisioning/compat.go, shared/launch"},
	"NodePool spec.template.spec.startupTaints":          {implemented, "shared/launch, shared/lifecycle (initialization)"},
	"NodePool spec.template.spec.expireAfter":            {implemented, "shared/disruption expiry"},
	"NodePool spec.template.spec.terminationGracePeriod": {implemented, "shared/disruption/drift_plan.go, shared/lifecycle termination"},
	"NodePool spec.template":                             {implemented, "shared/provisioning/pools.go"},
	"NodePool spec":                                      {implemented, "shared/provisioning"},
	"NodePool status.conditions":                         {implemented, "shared/lifecycle/status.go (Ready, NodeClassReady, ValidationSucceeded)"},
	"NodePool status.nodes":                              {implemented, "shared/lifecycle/status.go (NodePool counter)"},
	"NodePool status.resources":                          {implemented, "shared/lifecycle/status.go (NodePool counter)"},
	"NodePool status.nodeClassObservedGeneration":        {implemented, "shared/lifecycle/status.go"},
	"NodePool status":                                    {implemented, "shared/lifecycle/status.go"},
	"EC2NodeClass spec.amiFamily":                        {implemented, "shared/catalog/kubelet.go, shared/cloud/aws/userdata (AL2, AL2023, Bottlerocket, Custom; Windows2019, Windows2022, Windows2025 in userdata/windows.go)"},
	"EC2NodeClass spec.amiSelectorTerms":                 {implemented, "shared/cloud/aws/resolve.go (alias, id, name, owner, ssmParameter, tags)"},
	"EC2NodeClass spec.associatePublicIPAddress":         {implemented, "shared/cloud/aws/launchtemplate.go"},
	"EC2NodeClass spec.blockDeviceMappings":              {implemented, "shared/cloud/aws/launchtemplate.go; root volume size in shared/cloud/nodesettings.go"},
	"EC2NodeClass spec.capacityReservationSelectorTerms": {implemented, "shared/cloud/aws/reservations.go"},
	"EC2NodeClass spec.connectionTracking":               {refusedByCondition, "UnsupportedEC2NodeClassFields: connection tracking timeouts are not set yet"},
	"EC2NodeClass spec.context":                          {implemented, "shared/cloud/aws/fleet.go (CreateFleet Context, off when minValues were relaxed)"},
	"EC2NodeClass spec.cpuOptions":                       {refusedByCondition, "UnsupportedEC2NodeClassFields: CPU options are not set yet"},
	"EC2NodeClass spec.detailedMonitoring":               {implemented, "shared/cloud/aws/launchtemplate.go"},
	"EC2NodeClass spec.instanceProfile":                  {implemented, "shared/cloud/aws/instanceprofile.go"},
	"EC2NodeClass spec.instanceStorePolicy":              {implemented, "shared/cloud/nodesettings.go, shared/cloud/aws/userdata (RAID0)"},
	"EC2NodeClass spec.ipPrefixCount":                    {implemented, "shared/cloud/aws/launchtemplate.go"},
	"EC2NodeClass spec.kubelet":                          {implemented, "shared/catalog/kubelet.go (allocatable), shared/cloud/aws/userdata"},
	"EC2NodeClass spec.metadataOptions":                  {implemented, "shared/cloud/aws/launchtemplate.go"},
	"EC2NodeClass spec.networkInterfaces":                {ownedElsewhere, "EFA (issue 26 item 5); UnsupportedEC2NodeClassFields until then"},
	"EC2NodeClass spec.placementGroupSelector":           {implemented, "shared/cloud/aws/placementgroup.go (DescribePlacementGroups, PlacementGroupReady, launch template Placement), ec2class drift"},
	"EC2NodeClass spec.role":                             {implemented, "shared/cloud/aws/instanceprofile.go"},
	"EC2NodeClass spec.securityGroupSelectorTerms":       {implemented, "shared/cloud/aws/resolve.go"},
	"EC2NodeClass spec.subnetSelectorTerms":              {implemented, "shared/cloud/aws/resolve.go"},
	"EC2NodeClass spec.tags":                             {implemented, "shared/cloud/aws (instances, volumes, templates, instance profile)"},
	"EC2NodeClass spec.userData":                         {implemented, "shared/cloud/aws/userdata (merged per family)"},
	"EC2NodeClass spec":                                  {implemented, "shared/cloud/aws"},
	"EC2NodeClass status.amis":                           {implemented, "shared/cloud/aws/resolve.go via the lifecycle function"},
	"EC2NodeClass status.capacityReservations":           {implemented, "shared/cloud/aws/reservations.go via the lifecycle function"},
	"EC2NodeClass status.conditions":                     {implemented, "shared/lifecycle (Ready, SubnetsReady, ..., ValidationSucceeded)"},
	"EC2NodeClass status.instanceProfile":                {implemented, "shared/cloud/aws/instanceprofile.go via the lifecycle function"},
	"EC2NodeClass status.securityGroups":                 {implemented, "shared/cloud/aws/resolve.go via the lifecycle function"},
	"EC2NodeClass status.subnets":                        {implemented, "shared/cloud/aws/resolve.go (id, zone, zoneID) via the lifecycle function"},
	"EC2NodeClass status":                                {implemented, "shared/lifecycle"},
}

// entryFor returns the longest entry covering the path.
func entryFor(key string) (string, bool) {
	best := ""
	for k := range fields {
		if (key == k || strings.HasPrefix(key, k+".") || strings.HasPrefix(key, k+"[]")) && len(k) > len(best) {
			best = k
		}
	}
	return best, best != ""
}

// Every field of Karpenter v1.14.0's EC2NodeClass and NodePool schemas (infra/crds) is either
// implemented or refused by a condition (directly, or until another item of issue 26 lands);
// every refused or owned entry is one the refused table proves is named by the condition.
func TestEveryFieldImplementedOrRefused(t *testing.T) {
	used := map[string]bool{}
	counts := map[fieldState]int{}
	for _, f := range Files {
		if f.Kind != "EC2NodeClass" && f.Kind != "NodePool" {
			continue
		}
		up := map[string]bool{}
		schemaPaths(schemaRoot(t, f), "", up)
		paths := make([]string, 0, len(up))
		for p := range up {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			if under(p, "metadata", "apiVersion", "kind") {
				continue
			}
			k, ok := entryFor(f.Kind + " " + p)
			if !ok {
				t.Errorf("%s: field %s is neither implemented nor refused (add it to fields)", f.Kind, p)
				continue
			}
			used[k] = true
			counts[fields[k].state]++
		}
	}
	for k, e := range fields {
		if !used[k] {
			t.Errorf("fields lists %s, which is not in the schemas", k)
		}
		if e.state == implemented {
			continue
		}
		if _, ok := refused[k]; !ok && k != "EC2NodeClass spec.cpuOptions" {
			t.Errorf("%s is %s but the refused table does not prove its condition", k, e.where)
		}
	}
	// spec.cpuOptions is proven through its one field.
	for _, k := range []string{"EC2NodeClass spec.cpuOptions.nestedVirtualization"} {
		if _, ok := refused[k]; !ok {
			t.Errorf("refused no longer proves %s", k)
		}
	}
	t.Logf("schema fields: %d implemented, %d refused by condition, %d owned by another issue-26 item",
		counts[implemented], counts[refusedByCondition], counts[ownedElsewhere])
}
