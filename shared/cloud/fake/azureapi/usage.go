package azureapi

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	computefake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7/fake"
)

// Usage names of the Compute usages API for the regional vCPU quotas (GET
// /subscriptions/{id}/providers/Microsoft.Compute/locations/{location}/usages, "Usage - List";
// Azure "Check vCPU quotas": "Total Regional vCPUs" counts regular VMs, "Total Regional
// Low-priority vCPUs" counts Spot VMs, and each VM family's quota, named like
// standardDSv5Family, counts that family's regular VMs).
const (
	UsageCores            = "cores"
	UsageLowPriorityCores = "lowPriorityCores"
)

var usageLabels = map[string]string{UsageCores: "Total Regional vCPUs", UsageLowPriorityCores: "Total Regional Low-priority vCPUs"}

func (s *Server) usage() computefake.UsageServer {
	return computefake.UsageServer{NewListPager: s.listUsages}
}

// listUsages lists Options.Quotas with the vCPUs the live VMs hold against each, sorted by name,
// in the API's shape (currentValue, limit, name {value, localizedValue}, unit "Count"). A
// location other than the face's region lists nothing: the subscription has no VMs there, and
// the provider must not read another region's numbers as its own.
func (s *Server) listUsages(location string, _ *armcompute.UsageClientListOptions) (resp azfake.PagerResponder[armcompute.UsageClientListResponse]) {
	var out []*armcompute.Usage
	if strings.EqualFold(location, s.region) {
		names := make([]string, 0, len(s.o.Quotas))
		for n := range s.o.Quotas {
			names = append(names, n)
		}
		sort.Strings(names)
		s.mu.Lock()
		for _, n := range names {
			label := usageLabels[n]
			if label == "" {
				label = familyLabel(n)
			}
			out = append(out, &armcompute.Usage{CurrentValue: to.Ptr(s.usedLocked(n)), Limit: to.Ptr(int64(s.o.Quotas[n])), Unit: to.Ptr("Count"),
				Name: &armcompute.UsageName{Value: to.Ptr(n), LocalizedValue: to.Ptr(label)}})
		}
		s.mu.Unlock()
	}
	resp.AddPage(http.StatusOK, armcompute.UsageClientListResponse{ListUsagesResult: armcompute.ListUsagesResult{Value: out}}, nil)
	return
}

// familyLabel is the portal's name of a family quota: standardDSv5Family → "Standard DSv5 Family vCPUs".
func familyLabel(n string) string {
	core := strings.TrimSuffix(strings.TrimPrefix(n, "standard"), "Family")
	return "Standard " + core + " Family vCPUs"
}

// usedLocked sums the vCPUs the VMs of the resource group hold against a quota: regular VMs
// count against "cores" and their family's quota, Spot VMs against "lowPriorityCores" only
// (Azure "Use Azure Spot Virtual Machines": Spot quota is separate from regular quota). A VM in
// state Failed holds no cores. Called with s.mu held.
func (s *Server) usedLocked(name string) int32 {
	var n int32
	for _, vm := range s.vms {
		if val(vm.Properties.ProvisioningState) == stateFailed {
			continue
		}
		n += s.chargeFor(name, vm)
	}
	return n
}

// chargeFor is the vCPUs vm counts against quota name.
func (s *Server) chargeFor(name string, vm *armcompute.VirtualMachine) int32 {
	it := s.o.Cloud.Catalog().Get(size(vm))
	if it == nil || it.Azure == nil {
		return 0
	}
	spot := priority(vm) == string(armcompute.VirtualMachinePriorityTypesSpot)
	switch {
	case name == UsageLowPriorityCores && spot, name == UsageCores && !spot, !spot && name == it.Azure.QuotaFamily:
		return int32(it.Azure.VCPU)
	}
	return 0
}

// checkQuota refuses a VM that would take a quota of Options.Quotas past its limit, as Compute
// does: 409 OperationNotAllowed with the message naming the quota and the numbers (Azure
// "Resolve errors for resource quotas" / "vCPU quotas": "Operation could not be completed as it
// results in exceeding approved <quota> quota. Additional details - Deployment Model: Resource
// Manager, Location: <location>, Current Limit: <n>, Current Usage: <n>, Additional Required:
// <n>, (Minimum) New Limit Required: <n>. Submit a request for Quota increase …"; the quota is
// "LowPriorityCores" for Spot, "<family> Cores" for a family, "Total Regional Cores" for the
// region). A VM of the same name already counted (an update) is not counted twice.
func (s *Server) checkQuota(name string, vm *armcompute.VirtualMachine) *armError {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.vms[strings.ToLower(name)]
	names := make([]string, 0, len(s.o.Quotas))
	for n := range s.o.Quotas {
		names = append(names, n)
	}
	// Family before regional: when both are short the fake names the family (which one Compute
	// names first is not documented; the provider reads either).
	sort.Slice(names, func(i, j int) bool {
		return quotaRank(names[i]) < quotaRank(names[j]) || (quotaRank(names[i]) == quotaRank(names[j]) && names[i] < names[j])
	})
	for _, q := range names {
		need := s.chargeFor(q, vm)
		if need == 0 {
			continue
		}
		used := s.usedLocked(q)
		if prev != nil && val(prev.Properties.ProvisioningState) != stateFailed {
			used -= s.chargeFor(q, prev)
		}
		limit := s.o.Quotas[q]
		if used+need <= limit {
			continue
		}
		label := q + " Cores"
		switch q {
		case UsageLowPriorityCores:
			label = "LowPriorityCores"
		case UsageCores:
			label = "Total Regional Cores"
		}
		return &armError{http.StatusConflict, "OperationNotAllowed", fmt.Sprintf("Operation could not be completed as it results in exceeding approved %s quota. "+
			"Additional details - Deployment Model: Resource Manager, Location: %s, Current Limit: %d, Current Usage: %d, Additional Required: %d, "+
			"(Minimum) New Limit Required: %d. Submit a request for Quota increase at https://aka.ms/ProdportalCRP/#blade/Microsoft_Azure_Capacity/UsageAndQuota.ReactView "+
			"by specifying parameters listed in the 'Details' section for deployment to succeed.", label, s.region, limit, used, need, used+need)}
	}
	return nil
}

func quotaRank(n string) int {
	switch n {
	case UsageLowPriorityCores:
		return 1
	case UsageCores:
		return 2
	}
	return 0
}
