package azure_test

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"errors"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/azureapi"
)

// mark is what a refused offering is expected to carry.
type mark struct {
	code string
	ttl  time.Duration
}

// checkMarks compares refused offerings (by "size/zone/priority") with want, exactly.
func checkMarks(t *testing.T, got []cloud.UnavailableOffering, want map[string]mark) {
	t.Helper()
	seen := map[string]mark{}
	for _, u := range got {
		k := u.Offering.String()
		if _, dup := seen[k]; dup {
			t.Errorf("%s refused twice", k)
		}
		seen[k] = mark{u.Code, u.TTL}
	}
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range seen {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if seen[k] != want[k] {
			t.Errorf("%s: refused as %+v, want %+v", k, seen[k], want[k])
		}
	}
}

func off(size, zone, ct string) cloud.OfferingRef {
	return cloud.OfferingRef{InstanceType: size, Zone: zone, CapacityType: ct}
}

// allZones is the size's offerings at the priorities given in eastus's three zones (the
// embedded catalog offers Standard_D2s_v5 in eastus-1, -2 and -3 at both priorities).
func allZones(size string, m mark, cts ...string) map[string]mark {
	out := map[string]mark{}
	for _, ct := range cts {
		for _, z := range []string{"eastus-1", "eastus-2", "eastus-3"} {
			out[off(size, z, ct).String()] = m
		}
	}
	return out
}

// TestCapacityClasses runs each ARM capacity error class through the SDK against the fake ARM
// (SkuNotAvailable at the PUT, the allocation failures at the end of the create operation, as
// ARM reports them) and checks what the launch marks and for how long, as
// karpenter-provider-azure's offerings error handlers mark them (commonerrorhandlers.go), hand
// derived from the class's scope: the launch then goes on with the first offering the class does
// not cover, and the marks travel on the instance (Instance.Refused).
func TestCapacityClasses(t *testing.T) {
	const d2, d2as = "Standard_D2s_v5", "Standard_D2as_v5"
	hour := time.Hour
	for _, tc := range []struct {
		name     string
		inject   fake.Pattern
		code     string
		offers   []cloud.OfferingRef
		launched cloud.OfferingRef
		want     map[string]mark
	}{{
		// Spot: the size at Spot in every zone of the placement, 1 h (SKUNotAvailableSpotTTL).
		name: "SkuNotAvailable spot", inject: fake.Pattern{InstanceType: d2, CapacityType: "spot"}, code: "SkuNotAvailable",
		offers:   []cloud.OfferingRef{off(d2, "eastus-1", "spot"), off(d2, "eastus-2", "spot"), off(d2, "eastus-1", "on-demand")},
		launched: off(d2, "eastus-1", "on-demand"),
		want:     allZones(d2, mark{"SkuNotAvailable", hour}, "spot"),
	}, {
		// On demand: the size is not offered there; 23 h (SKUNotAvailableOnDemandTTL).
		name: "SkuNotAvailable on-demand", inject: fake.Pattern{InstanceType: d2, CapacityType: "on-demand"}, code: "SkuNotAvailable",
		offers:   []cloud.OfferingRef{off(d2, "eastus-1", "on-demand"), off(d2as, "eastus-2", "on-demand")},
		launched: off(d2as, "eastus-2", "on-demand"),
		want:     allZones(d2, mark{"SkuNotAvailable", 23 * hour}, "on-demand"),
	}, {
		// The size in that zone at both priorities, 1 h; the next zone is tried.
		name: "ZonalAllocationFailed", inject: fake.Pattern{InstanceType: d2, Zone: "eastus-1"}, code: "ZonalAllocationFailed",
		offers:   []cloud.OfferingRef{off(d2, "eastus-1", "spot"), off(d2, "eastus-1", "on-demand"), off(d2, "eastus-2", "on-demand")},
		launched: off(d2, "eastus-2", "on-demand"),
		want: map[string]mark{off(d2, "eastus-1", "spot").String(): {"ZonalAllocationFailed", hour},
			off(d2, "eastus-1", "on-demand").String(): {"ZonalAllocationFailed", hour}},
	}, {
		// The size in every zone of the placement at both priorities, 1 h; another size is tried.
		name: "AllocationFailed", inject: fake.Pattern{InstanceType: d2}, code: "AllocationFailed",
		offers:   []cloud.OfferingRef{off(d2, "eastus-1", "spot"), off(d2, "eastus-2", "on-demand"), off(d2as, "eastus-2", "on-demand")},
		launched: off(d2as, "eastus-2", "on-demand"),
		want:     allZones(d2, mark{"AllocationFailed", hour}, "spot", "on-demand"),
	}, {
		// Only the tried offering (size, zone, priority), 1 h; the same size in another zone is tried.
		name: "OverconstrainedZonalAllocationRequest", inject: fake.Pattern{InstanceType: d2, Zone: "eastus-1", CapacityType: "spot"}, code: "OverconstrainedZonalAllocationRequest",
		offers:   []cloud.OfferingRef{off(d2, "eastus-1", "spot"), off(d2, "eastus-2", "spot")},
		launched: off(d2, "eastus-2", "spot"),
		want:     map[string]mark{off(d2, "eastus-1", "spot").String(): {"OverconstrainedZonalAllocationRequest", hour}},
	}, {
		// The size at that priority in every zone of the placement, 1 h; on demand is tried.
		name: "OverconstrainedAllocationRequest", inject: fake.Pattern{InstanceType: d2, CapacityType: "spot"}, code: "OverconstrainedAllocationRequest",
		offers:   []cloud.OfferingRef{off(d2, "eastus-1", "spot"), off(d2, "eastus-2", "spot"), off(d2, "eastus-1", "on-demand")},
		launched: off(d2, "eastus-1", "on-demand"),
		want:     allZones(d2, mark{"OverconstrainedAllocationRequest", hour}, "spot"),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "prod")
			if err := w.cloud.InjectICE(tc.inject, tc.code); err != nil {
				t.Fatal(err)
			}
			inst, err := w.p.Create(context.Background(), request("prod", "default-cap", tc.offers...))
			if err != nil {
				t.Fatal(err)
			}
			if got := off(inst.InstanceType, inst.Zone, inst.CapacityType); got != tc.launched {
				t.Errorf("launched %s, want %s", got, tc.launched)
			}
			checkMarks(t, inst.Refused, tc.want)
			if s := w.cloud.Stats(); s.CreateCalls != 2 {
				t.Errorf("%d VM creates, want 2 (the refused offering and the launched one; the class covers the rest)", s.CreateCalls)
			}
		})
	}
}

// raceTransport lets a concurrent launch take quota between the provider's read of the Compute
// usages and its VM create: once, right after the first usages response, it runs hook. This is
// how a quota error reaches a provider that reads usages first (two functions launching at once).
type raceTransport struct {
	next policy.Transporter
	once sync.Once
	hook func()
}

func (r *raceTransport) Do(req *http.Request) (*http.Response, error) {
	resp, err := r.next.Do(req)
	if strings.HasSuffix(req.URL.Path, "/usages") {
		r.once.Do(r.hook)
	}
	return resp, err
}

// quotaWorld is a world whose fake ARM enforces quotas and whose provider's first usages read is
// followed by a concurrent launch of a Standard_D2s_v5 at capacityType (which takes 2 vCPUs).
func quotaWorld(t *testing.T, quotas map[string]int32, capacityType string) *world {
	t.Helper()
	var w *world
	race := &raceTransport{}
	w = newWorldWith(t, "prod", func(ao *azureapi.Options, po *azure.Options) {
		ao.Quotas = quotas
		po.ClientOptions = nil
	})
	co := w.srv.ClientOptions()
	race.next = co.Transport
	race.hook = func() {
		other := newProviderOn(t, w, "prod")
		if _, err := other.Create(context.Background(), request("prod", "default-other", off("Standard_D2s_v5", "eastus-3", capacityType))); err != nil {
			t.Errorf("the concurrent launch: %v", err)
		}
	}
	co.Transport = race
	p, err := azure.New(azure.Options{Cluster: "prod", SubscriptionID: sub, ResourceGroup: rg, Location: "eastus", SubnetID: subnet,
		Catalog: w.cloud.Catalog(), Credential: &azfake.TokenCredential{}, ClientOptions: co, SSHPublicKey: "ssh-rsa AAAA fake", PollInterval: 10 * time.Millisecond,
		KubernetesVersion: "1.33.2", Bootstrap: azureapi.LocalBootstrap("https://example.invalid")})
	if err != nil {
		t.Fatal(err)
	}
	w.p = p
	return w
}

// TestQuotaClasses: quota errors as Compute words them (OperationNotAllowed, the message naming
// the quota and its numbers) mark what the provider marks: LowPriorityCores every Spot offering
// of the request for 1 h; a family quota with room left the size at that priority in every zone
// for 10 min (a smaller size of the family may fit); a family quota of 0 every size of the family
// for 1 h; the regional quota the request's regular offerings for 10 min (Spot quota is separate).
func TestQuotaClasses(t *testing.T) {
	const d2, d4, d2as = "Standard_D2s_v5", "Standard_D4s_v5", "Standard_D2as_v5"
	dsv5 := []string{"Standard_D2s_v5", "Standard_D4s_v5", "Standard_D8s_v5", "Standard_D16s_v5", "Standard_D32s_v5", "Standard_D48s_v5", "Standard_D64s_v5", "Standard_D96s_v5"}
	t.Run("LowPriorityCores", func(t *testing.T) {
		// 2 Spot vCPUs: the usages show room for one D2s_v5, the concurrent launch takes it.
		w := quotaWorld(t, map[string]int32{azureapi.UsageLowPriorityCores: 2}, "spot")
		offers := []cloud.OfferingRef{off(d2, "eastus-1", "spot"), off(d2as, "eastus-2", "spot"), off(d2, "eastus-1", "on-demand")}
		inst, err := w.p.Create(context.Background(), request("prod", "default-q", offers...))
		if err != nil {
			t.Fatal(err)
		}
		checkMarks(t, inst.Refused, map[string]mark{offers[0].String(): {"OperationNotAllowed", time.Hour}, offers[1].String(): {"OperationNotAllowed", time.Hour}})
		if inst.CapacityType != "on-demand" {
			t.Errorf("launched %s, want the regular fallback", inst.CapacityType)
		}
	})
	t.Run("family quota with room", func(t *testing.T) {
		// 4 DSv5 vCPUs: room for a D4s_v5 until the concurrent D2s_v5 takes 2.
		w := quotaWorld(t, map[string]int32{"standardDSv5Family": 4}, "on-demand")
		offers := []cloud.OfferingRef{off(d4, "eastus-1", "on-demand"), off(d2, "eastus-2", "on-demand")}
		inst, err := w.p.Create(context.Background(), request("prod", "default-q", offers...))
		if err != nil {
			t.Fatal(err)
		}
		checkMarks(t, inst.Refused, allZones(d4, mark{"OperationNotAllowed", 10 * time.Minute}, "on-demand"))
		if inst.InstanceType != d2 {
			t.Errorf("launched %s, want the smaller size of the family, which still fits", inst.InstanceType)
		}
	})
	t.Run("family quota of 0", func(t *testing.T) {
		// "Current Limit: 0" cannot be raced into (the usages show it): the fake ARM is asked
		// directly, as a provider that skipped the usages would be answered.
		w := newWorldWith(t, "prod", func(ao *azureapi.Options, _ *azure.Options) {
			ao.Quotas = map[string]int32{"standardDSv5Family": 0}
		})
		offers := []cloud.OfferingRef{off(d2, "eastus-1", "on-demand"), off(d2as, "eastus-1", "on-demand")}
		inst, err := w.p.Create(context.Background(), request("prod", "default-q", offers...))
		if err != nil {
			t.Fatal(err)
		}
		checkMarks(t, inst.Refused, map[string]mark{offers[0].String(): {azure.CodeFamilyQuota, azure.LowQuotaTTL}})
		if w.cloud.Stats().CreateCalls != 1 {
			t.Errorf("%d creates: the usages say the family has no room, so D2s_v5 is not tried", w.cloud.Stats().CreateCalls)
		}
		want := map[string]mark{}
		for _, size := range dsv5 {
			for k, v := range allZones(size, mark{"OperationNotAllowed", time.Hour}, "on-demand") {
				want[k] = v
			}
		}
		checkMarks(t, azure.RuledOutForTest(w.p, "OperationNotAllowed",
			"Operation could not be completed as it results in exceeding approved standardDSv5Family Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 0, Current Usage: 0, Additional Required: 2, (Minimum) New Limit Required: 2.",
			offers[0], offers), want)
	})
	t.Run("regional quota", func(t *testing.T) {
		// 2 regular vCPUs in the region: the concurrent D2s_v5 takes them.
		w := quotaWorld(t, map[string]int32{azureapi.UsageCores: 2}, "on-demand")
		offers := []cloud.OfferingRef{off(d2, "eastus-1", "on-demand"), off(d2as, "eastus-2", "on-demand")}
		_, err := w.p.Create(context.Background(), request("prod", "default-q", offers...))
		var ice *cloud.InsufficientCapacityError
		if !errors.As(err, &ice) {
			t.Fatalf("err %v, want insufficient capacity", err)
		}
		checkMarks(t, ice.Unavailable, map[string]mark{offers[0].String(): {"OperationNotAllowed", 10 * time.Minute}, offers[1].String(): {"OperationNotAllowed", 10 * time.Minute}})
		if n := w.cloud.Stats().CreateCalls; n != 1 {
			t.Errorf("%d VMs run, want 1 (the concurrent one: ours is refused by ARM before it runs, the second offering is covered)", n)
		}
	})
}

// TestUsagesKeepExhaustedFamilyUntried: the Compute usages say the DSv5 family has 2 vCPUs left,
// so a D4s_v5 (4 vCPUs) is refused without a create (FamilyQuotaExhausted, 10 min) and the D2s_v5
// of the same family (2 vCPUs) is launched: a launch that reads quotas is not a guess.
func TestUsagesKeepExhaustedFamilyUntried(t *testing.T) {
	w := newWorldWith(t, "prod", func(ao *azureapi.Options, _ *azure.Options) {
		ao.Quotas = map[string]int32{"standardDSv5Family": 2, azureapi.UsageCores: 100}
	})
	offers := []cloud.OfferingRef{off("Standard_D4s_v5", "eastus-1", "on-demand"), off("Standard_D2s_v5", "eastus-1", "on-demand")}
	inst, err := w.p.Create(context.Background(), request("prod", "default-u", offers...))
	if err != nil {
		t.Fatal(err)
	}
	if inst.InstanceType != "Standard_D2s_v5" || w.cloud.Stats().CreateCalls != 1 {
		t.Errorf("launched %s after %d creates, want Standard_D2s_v5 at the first create", inst.InstanceType, w.cloud.Stats().CreateCalls)
	}
	checkMarks(t, inst.Refused, map[string]mark{offers[0].String(): {azure.CodeFamilyQuota, azure.LowQuotaTTL}})
}
