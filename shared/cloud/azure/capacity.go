package azure

import (
	"context"
	"fmt"
	"strings"
	"time"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// How long Azure's capacity errors keep offerings out, karpenter-provider-azure's
// (pkg/providers/instance/offerings/commonerrorhandlers.go): an allocation failure is a capacity
// crunch that does not clear in minutes; SkuNotAvailable on demand means the size is not offered
// there at all; a quota with some room left (a smaller size of the family may still fit) is
// retried sooner than one whose limit is 0.
const (
	AllocationFailureTTL        = time.Hour      // AllocationFailed, ZonalAllocationFailed, Overconstrained*
	SKUNotAvailableSpotTTL      = time.Hour      // SkuNotAvailable for Spot (may be Spot capacity)
	SKUNotAvailableOnDemandTTL  = 23 * time.Hour // SkuNotAvailable for regular VMs (not offered)
	SubscriptionQuotaReachedTTL = time.Hour      // a family quota of 0, the LowPriorityCores quota
	LowQuotaTTL                 = 10 * time.Minute
)

// Codes the provider gives offerings it refuses before a create because the Compute usages API
// says their quota has no room for the size (see quotas).
const (
	CodeFamilyQuota      = "FamilyQuotaExhausted"
	CodeRegionalQuota    = "RegionalQuotaExhausted"
	CodeLowPriorityQuota = "LowPriorityQuotaExhausted"
)

const codeOperationNotAllow = "OperationNotAllowed"

// capacityScope says which offerings an ARM error takes out of the running, besides the one tried.
type capacityScope int

const (
	notCapacity capacityScope = iota
	// scopeZone: the size in the tried zone, at the tried priority.
	scopeZone
	// scopeZoneBoth: the size in the tried zone, at both priorities.
	scopeZoneBoth
	// scopePlacement: the size in every zone of the tried placement (zonal or regional), at the
	// tried priority.
	scopePlacement
	// scopePlacementBoth: the size in every zone of the tried placement, at both priorities.
	scopePlacementBoth
	// scopeSize: the size in every zone, at the tried priority.
	scopeSize
	// scopeFamily: every size of the tried size's quota family in every zone, at the tried priority.
	scopeFamily
	// scopePriority: every size in every zone at the tried priority.
	scopePriority
)

// capacityClass is what one ARM error rules out and for how long.
type capacityClass struct {
	code  string
	scope capacityScope
	ttl   time.Duration
}

// Search terms in ARM's quota messages (azure-sdk-for-go-extensions pkg/errors, read by
// karpenter-provider-azure: LowPriorityQuotaExceededTerm, SKUFamilyQuotaExceededTerm,
// RegionalQuotaExceededTerm; "Current Limit: 0" is its cpuLimitIsZero).
const (
	termLowPriority  = "LowPriorityCores"
	termFamily       = "Family Cores quota"
	termRegional     = "exceeding approved Total Regional Cores quota"
	termLimitZero    = "Current Limit: 0,"
	codeSkuNotAvail  = "SkuNotAvailable"
	codeZonalAlloc   = "ZonalAllocationFailed"
	codeAlloc        = "AllocationFailed"
	codeOverZonal    = "OverconstrainedZonalAllocationRequest"
	codeOverRegional = "OverconstrainedAllocationRequest"
)

// classify maps an ARM error of a VM create to what it rules out, as karpenter-provider-azure's
// response error handlers do (pkg/providers/instance/offerings: handleSKUNotAvailableError,
// handleZonalAllocationFailureError, handleAllocationFailureError, handleOverconstrained*,
// handleLowPriorityQuotaError, handleSKUFamilyQuotaError, handleRegionalQuotaError):
//
//	SkuNotAvailable                       size × placement × priority   1 h spot, 23 h on demand
//	ZonalAllocationFailed                 size × zone × both priorities 1 h
//	AllocationFailed                      size × placement × both       1 h
//	OverconstrainedZonalAllocationRequest size × zone × priority        1 h
//	OverconstrainedAllocationRequest      size × placement × priority   1 h
//	OperationNotAllowed "LowPriorityCores"              the request's Spot offerings     1 h
//	OperationNotAllowed "… Family Cores quota", limit 0 the family × priority             1 h
//	OperationNotAllowed "… Family Cores quota", limit>0 size × priority                  10 min
//	OperationNotAllowed "Total Regional Cores quota"    the request's regular offerings  10 min
//
// (placement: every zone of a zonal offering, or the regional offering alone; see ruledOut for
// why the priority-wide classes mark only the request's offerings.)
//
// Three choices differ from the provider, all recorded in docs/design-notes.md (2026-12-06): a
// family quota with limit 0 marks the whole family (the provider marks the size; every size of
// the family fails the same way); a regional quota marks for LowQuotaTTL (the provider marks
// nothing; a stateless re-plan would try again at once); the priority-wide classes mark the
// request's offerings, not a priority (ruledOut). Any other error, an
// OperationNotAllowed naming none of these quotas included, is not capacity.
func classify(err error, capacityType string) capacityClass {
	code := responseCode(err)
	switch code {
	case codeSkuNotAvail:
		if capacityType == apisv1.CapacityTypeSpot {
			return capacityClass{code, scopePlacement, SKUNotAvailableSpotTTL}
		}
		return capacityClass{code, scopePlacement, SKUNotAvailableOnDemandTTL}
	case codeZonalAlloc:
		return capacityClass{code, scopeZoneBoth, AllocationFailureTTL}
	case codeAlloc:
		return capacityClass{code, scopePlacementBoth, AllocationFailureTTL}
	case codeOverZonal:
		return capacityClass{code, scopeZone, AllocationFailureTTL}
	case codeOverRegional:
		return capacityClass{code, scopePlacement, AllocationFailureTTL}
	case codeOperationNotAllow:
		msg := err.Error()
		switch {
		case strings.Contains(msg, termLowPriority):
			return capacityClass{code, scopePriority, SubscriptionQuotaReachedTTL}
		case strings.Contains(msg, termFamily) && strings.Contains(msg, termLimitZero):
			return capacityClass{code, scopeFamily, SubscriptionQuotaReachedTTL}
		case strings.Contains(msg, termFamily):
			return capacityClass{code, scopeSize, LowQuotaTTL}
		case strings.Contains(msg, termRegional):
			return capacityClass{code, scopePriority, LowQuotaTTL}
		}
	}
	return capacityClass{code: code}
}

// covers reports whether class c, raised by a create of tried, rules out offering o.
func (p *Provider) covers(c capacityClass, tried, o cloud.OfferingRef) bool {
	samePriority := o.CapacityType == tried.CapacityType
	sameSize := o.InstanceType == tried.InstanceType
	samePlacement := (o.Zone == catalog.AzureRegionalZone) == (tried.Zone == catalog.AzureRegionalZone)
	switch c.scope {
	case scopeZone:
		return sameSize && o.Zone == tried.Zone && samePriority
	case scopeZoneBoth:
		return sameSize && o.Zone == tried.Zone
	case scopePlacement:
		return sameSize && samePlacement && samePriority
	case scopePlacementBoth:
		return sameSize && samePlacement
	case scopeSize:
		return sameSize && samePriority
	case scopeFamily:
		return samePriority && quotaFamily(p.o.Catalog.Get(o.InstanceType)) != "" &&
			quotaFamily(p.o.Catalog.Get(o.InstanceType)) == quotaFamily(p.o.Catalog.Get(tried.InstanceType))
	case scopePriority:
		return samePriority
	}
	return false
}

// ruledOut lists every offering class c rules out: the request's and, beyond it, the catalog's
// (so the marks keep the next plan off them too), each once, in a stable order (the request's
// first, then the catalog's by size, zone and priority). A priority-wide class (LowPriorityCores,
// the regional quota) marks only the request's offerings: every Spot offering of a region is
// thousands of marks, each one an entry of the marks ConfigMap (1 MiB at most), where the
// provider keeps one cache key; the next plan's offerings are marked when it is refused in turn.
func (p *Provider) ruledOut(c capacityClass, tried cloud.OfferingRef, req []cloud.OfferingRef) []cloud.UnavailableOffering {
	seen := map[cloud.OfferingRef]bool{}
	var out []cloud.UnavailableOffering
	add := func(o cloud.OfferingRef) {
		k := cloud.OfferingRef{InstanceType: o.InstanceType, Zone: o.Zone, CapacityType: o.CapacityType}
		if seen[k] || !p.covers(c, tried, k) {
			return
		}
		seen[k] = true
		out = append(out, cloud.UnavailableOffering{Offering: o, Code: c.code, TTL: c.ttl})
	}
	add(tried)
	for _, o := range req {
		add(o)
	}
	if c.scope == scopePriority {
		return out
	}
	for _, it := range p.o.Catalog.Types() {
		for _, o := range it.Offerings {
			add(cloud.OfferingRef{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType, PricePerHour: o.PricePerHour})
		}
	}
	return out
}

func quotaFamily(it *catalog.InstanceType) string {
	if it == nil || it.Azure == nil {
		return ""
	}
	return it.Azure.QuotaFamily
}

// quotaRoom is the vCPUs left in each regional quota the Compute usages API reports (limit −
// current value), by usage name ("cores", "lowPriorityCores", "standardDSv5Family").
type quotaRoom map[string]int64

// quotas reads the Compute usages of the provider's location (armcompute UsageClient, GET
// /subscriptions/{id}/providers/Microsoft.Compute/locations/{location}/usages), every page, so
// a size whose quota has no room is not tried: Azure refuses it anyway, one create later.
func (p *Provider) quotas(ctx context.Context) (quotaRoom, error) {
	room := quotaRoom{}
	defer p.listing()()
	pager := p.usages.NewListPager(p.o.Location, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading compute usages of %s: %w", p.o.Location, err)
		}
		for _, u := range page.Value {
			if u == nil || u.Name == nil || u.Name.Value == nil || u.Limit == nil || u.CurrentValue == nil {
				continue
			}
			room[*u.Name.Value] = *u.Limit - int64(*u.CurrentValue)
		}
	}
	return room, nil
}

// refuse returns the code of the quota that has no room for a VM of it at capacityType, or "":
// a Spot VM counts against lowPriorityCores, a regular one against cores and its family's quota
// (Azure "Check vCPU quotas", "Use Azure Spot Virtual Machines"). A quota the API did not list
// is not checked.
func (q quotaRoom) refuse(it *catalog.InstanceType, capacityType string) string {
	if it == nil || it.Azure == nil {
		return ""
	}
	need := it.Azure.VCPU
	short := func(name string) bool {
		left, ok := q[name]
		return ok && left < need
	}
	if capacityType == apisv1.CapacityTypeSpot {
		if short("lowPriorityCores") {
			return CodeLowPriorityQuota
		}
		return ""
	}
	switch {
	case it.Azure.QuotaFamily != "" && short(it.Azure.QuotaFamily):
		return CodeFamilyQuota
	case short("cores"):
		return CodeRegionalQuota
	}
	return ""
}
