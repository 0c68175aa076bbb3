package fake

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	testclock "k8s.io/utils/clock/testing"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

const cluster = "dev"

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// registrar stands in for the cluster's API server (none runs in a unit test): it keeps the Nodes
// registered with it and can be told to fail.
type registrar struct {
	mu      sync.Mutex
	nodes   map[string]*corev1.Node
	fail    error
	removed []string
}

func newRegistrar() *registrar { return &registrar{nodes: map[string]*corev1.Node{}} }

func (r *registrar) RegisterNode(_ context.Context, n *corev1.Node) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	if _, ok := r.nodes[n.Name]; ok {
		return fmt.Errorf("node %s already exists", n.Name)
	}
	r.nodes[n.Name] = n
	return nil
}

func (r *registrar) DeregisterNode(_ context.Context, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.nodes, name)
	r.removed = append(r.removed, name)
	return nil
}

func (r *registrar) get(name string) *corev1.Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nodes[name]
}

func (r *registrar) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.nodes)
}

func newCloud(t *testing.T, boot time.Duration) (*Cloud, *testclock.FakeClock, *registrar) {
	t.Helper()
	clk := testclock.NewFakeClock(t0)
	reg := newRegistrar()
	c := New(Options{Catalog: testCatalog(), Cluster: cluster, BootDelay: boot, Clock: clk, Registrar: reg})
	return c, clk, reg
}

func off(it, zone, ct string) cloud.OfferingRef {
	return cloud.OfferingRef{InstanceType: it, Zone: zone, CapacityType: ct}
}

func request(token string, offerings ...cloud.OfferingRef) cloud.LaunchRequest {
	return cloud.LaunchRequest{
		ClientToken: token,
		Cluster:     cluster,
		Offerings:   offerings,
		Labels:      map[string]string{apisv1.LabelNodePool: "default", "team": "web"},
		Tags: map[string]string{
			apisv1.TagCluster: cluster, apisv1.TagNodePool: "default", apisv1.TagNodeClaim: "default-abc12",
		},
	}
}

func mustCreate(t *testing.T, c *Cloud, req cloud.LaunchRequest) *cloud.Instance {
	t.Helper()
	inst, err := c.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return inst
}

func TestCreatePicksLowestOnDemandPrice(t *testing.T) {
	c, _, _ := newCloud(t, 0)
	// Ranked by the caller as it liked; EC2 "lowest-price" takes c5.large at 0.085 $/h over
	// m5.large 0.096 and r5.large 0.126 (ec2_instance_types.csv on-demand column).
	inst := mustCreate(t, c, request("t1",
		off("m5.large", "us-east-1a", "on-demand"),
		off("r5.large", "us-east-1a", "on-demand"),
		off("c5.large", "us-east-1b", "on-demand")))
	if inst.InstanceType != "c5.large" || inst.Zone != "us-east-1b" || inst.CapacityType != "on-demand" || inst.PricePerHour != 0.085 {
		t.Fatalf("got %s/%s/%s at %v, want c5.large/us-east-1b/on-demand at 0.085", inst.InstanceType, inst.Zone, inst.CapacityType, inst.PricePerHour)
	}
	// Equal prices (m5.large is 0.096 in every zone): the request's order decides.
	inst = mustCreate(t, c, request("t2",
		off("m5.large", "us-east-1c", "on-demand"),
		off("m5.large", "us-east-1a", "on-demand")))
	if inst.Zone != "us-east-1c" {
		t.Fatalf("tie: got zone %s, want the first listed us-east-1c", inst.Zone)
	}
	if inst.State != cloud.StatePending {
		t.Fatalf("state %s, want pending right after launch", inst.State)
	}
}

func TestCreatePrefersSpotWhenAllowed(t *testing.T) {
	c, _, _ := newCloud(t, 0)
	// m5.large spot: the lowest of the real us-east-1 samples is us-east-1c at 0.0381 $/h.
	inst := mustCreate(t, c, request("t1",
		off("c5.large", "us-east-1a", "on-demand"),
		off("m5.large", "us-east-1a", "spot"),
		off("m5.large", "us-east-1b", "spot"),
		off("m5.large", "us-east-1c", "spot"),
		off("m5.large", "us-east-1f", "spot")))
	if inst.CapacityType != "spot" || inst.Zone != "us-east-1c" || inst.PricePerHour != 0.0381 {
		t.Fatalf("got %s/%s/%s at %v, want m5.large/us-east-1c/spot at 0.0381", inst.InstanceType, inst.Zone, inst.CapacityType, inst.PricePerHour)
	}
	// r5.large spot (0.13) costs more than c5.large on-demand (0.085) and is still taken: spot is
	// preferred by capacity type, as Karpenter does when a NodeClaim allows spot.
	inst = mustCreate(t, c, request("t2",
		off("c5.large", "us-east-1a", "on-demand"),
		off("r5.large", "us-east-1a", "spot")))
	if inst.InstanceType != "r5.large" || inst.CapacityType != "spot" {
		t.Fatalf("got %s/%s, want r5.large/spot", inst.InstanceType, inst.CapacityType)
	}
}

func TestCreateFallsBackPastICE(t *testing.T) {
	c, _, _ := newCloud(t, 0)
	offerings := []cloud.OfferingRef{
		off("m5.large", "us-east-1c", "spot"), // 0.0381
		off("m5.large", "us-east-1b", "spot"), // 0.0389
		off("m5.large", "us-east-1e", "spot"), // not offered: Unsupported
		off("c5.large", "us-east-1a", "on-demand"),
	}
	if err := c.InjectOfferingICE(offerings[0], ""); err != nil {
		t.Fatal(err)
	}
	inst := mustCreate(t, c, request("t1", offerings...))
	if inst.Zone != "us-east-1b" || inst.CapacityType != "spot" {
		t.Fatalf("got %s/%s, want the next cheapest spot offering us-east-1b", inst.Zone, inst.CapacityType)
	}
	if s := c.Stats(); s.ICEs != 1 || s.Launches != 1 || s.ICEErrors != 0 {
		t.Fatalf("stats %+v, want 1 ICE and 1 launch", s)
	}

	// All spot out of capacity: on-demand is next.
	if err := c.InjectICE(Pattern{CapacityType: "spot"}, CodeMaxSpotInstanceCountExceeded); err != nil {
		t.Fatal(err)
	}
	inst = mustCreate(t, c, request("t2", offerings...))
	if inst.InstanceType != "c5.large" || inst.CapacityType != "on-demand" {
		t.Fatalf("got %s/%s, want c5.large/on-demand", inst.InstanceType, inst.CapacityType)
	}

	// Everything refused: the error lists each offering with its code, catalog refusals first,
	// then in the order tried.
	if err := c.InjectICE(Pattern{InstanceType: "c5.*"}, "InsufficientInstanceCapacity"); err != nil {
		t.Fatal(err)
	}
	_, err := c.Create(context.Background(), request("t3", offerings...))
	var ice *cloud.InsufficientCapacityError
	if !errors.As(err, &ice) || !cloud.IsInsufficientCapacity(err) {
		t.Fatalf("err %v, want *cloud.InsufficientCapacityError", err)
	}
	got := []string{}
	for _, u := range ice.Unavailable {
		got = append(got, u.Offering.String()+" "+u.Code)
	}
	want := []string{
		"m5.large/us-east-1e/spot Unsupported",
		"m5.large/us-east-1c/spot InsufficientInstanceCapacity", // the first rule matches first
		"m5.large/us-east-1b/spot MaxSpotInstanceCountExceeded",
		"c5.large/us-east-1a/on-demand InsufficientInstanceCapacity",
	}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("unavailable:\n got %q\nwant %q", got, want)
	}
	if s := c.Stats(); s.Launches != 2 || s.ICEErrors != 1 {
		t.Fatalf("stats %+v, want 2 launches and 1 ICE error", s)
	}

	// Capacity back: a retry with the same token launches (failures are not remembered).
	c.ClearICE()
	if inst := mustCreate(t, c, request("t3", offerings...)); inst.Zone != "us-east-1c" {
		t.Fatalf("after ClearICE got %s, want the cheapest spot offering us-east-1c", inst.Zone)
	}
}

func TestCatalogUnavailableOfferingIsRefused(t *testing.T) {
	c, _, _ := newCloud(t, 0)
	// r5.large us-east-1b spot is in the catalog with Available=false.
	_, err := c.Create(context.Background(), request("t1", off("r5.large", "us-east-1b", "spot")))
	var ice *cloud.InsufficientCapacityError
	if !errors.As(err, &ice) || len(ice.Unavailable) != 1 || ice.Unavailable[0].Code != CodeInsufficientInstanceCapacity {
		t.Fatalf("err %v, want one InsufficientInstanceCapacity", err)
	}
}

func TestCreateIsIdempotentByClientToken(t *testing.T) {
	c, _, _ := newCloud(t, 0)
	req := request("nodeclaim-default-abc12-rev7", off("m5.large", "us-east-1a", "on-demand"))
	first := mustCreate(t, c, req)
	second := mustCreate(t, c, req)
	if first.ID != second.ID || first.ProviderID != second.ProviderID {
		t.Fatalf("second call got %s, want %s", second.ID, first.ID)
	}
	if s := c.Stats(); s.Launches != 1 || s.IdempotentReplays != 1 || s.CreateCalls != 2 {
		t.Fatalf("stats %+v, want 1 launch, 1 replay, 2 calls", s)
	}
	// i- and 17 hex digits (EC2 resource ID format); providerID aws:///<zone>/<id>.
	if !regexp.MustCompile(`^i-[0-9a-f]{17}$`).MatchString(first.ID) {
		t.Fatalf("id %q is not i- + 17 hex", first.ID)
	}
	if first.ProviderID != "aws:///us-east-1a/"+first.ID {
		t.Fatalf("providerID %q", first.ProviderID)
	}
	// Same decision in another fake (another run): same-looking ID.
	other, _, _ := newCloud(t, 0)
	if again := mustCreate(t, other, req); again.ID != first.ID {
		t.Fatalf("id not deterministic: %s vs %s", again.ID, first.ID)
	}
}

func TestCreateTokenReuseWithOtherParametersFails(t *testing.T) {
	c, _, _ := newCloud(t, 0)
	mustCreate(t, c, request("t1", off("m5.large", "us-east-1a", "on-demand")))
	_, err := c.Create(context.Background(), request("t1", off("m5.large", "us-east-1b", "on-demand")))
	if !errors.Is(err, cloud.ErrIdempotentParameterMismatch) {
		t.Fatalf("err %v, want IdempotentParameterMismatch", err)
	}
	if s := c.Stats(); s.Launches != 1 {
		t.Fatalf("launches %d, want 1", s.Launches)
	}
}

func TestCreateRefusesInvalidRequests(t *testing.T) {
	c, _, _ := newCloud(t, 0)
	ok := func() cloud.LaunchRequest { return request("t1", off("m5.large", "us-east-1a", "on-demand")) }
	cases := map[string]struct {
		mutate func(*cloud.LaunchRequest)
		want   string
	}{
		"no token":        {func(r *cloud.LaunchRequest) { r.ClientToken = "" }, "clientToken: required"},
		"long token":      {func(r *cloud.LaunchRequest) { r.ClientToken = strings.Repeat("x", 65) }, "clientToken: 65 characters"},
		"no cluster tag":  {func(r *cloud.LaunchRequest) { delete(r.Tags, apisv1.TagCluster) }, `tags["dovetail.dev/cluster"]: required`},
		"foreign cluster": {func(r *cloud.LaunchRequest) { r.Tags[apisv1.TagCluster] = "prod" }, `"prod" is not this provider's cluster "dev"`},
		"no offerings":    {func(r *cloud.LaunchRequest) { r.Offerings = nil }, "offerings: empty"},
		"unknown type":    {func(r *cloud.LaunchRequest) { r.Offerings[0].InstanceType = "m5.huge" }, `offerings[0].instanceType: "m5.huge" is not in the us-east-1 catalog`},
		"capacity type":   {func(r *cloud.LaunchRequest) { r.Offerings[0].CapacityType = "cheap" }, `offerings[0].capacityType: "cheap"`},
		"bad label":       {func(r *cloud.LaunchRequest) { r.Labels["team"] = "a b" }, `labels["team"]: invalid value "a b"`},
		"bad taint":       {func(r *cloud.LaunchRequest) { r.Taints = []corev1.Taint{{Key: "gpu", Effect: "Never"}} }, `taints[0].effect: "Never"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := ok()
			tc.mutate(&req)
			_, err := c.Create(context.Background(), req)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if s := c.Stats(); s.Launches != 0 {
		t.Fatalf("launched %d on invalid input", s.Launches)
	}
}

func TestBootRegistersNodeAsKubeletWould(t *testing.T) {
	c, clk, reg := newCloud(t, 90*time.Second)
	req := request("t1", off("m5.large", "us-east-1c", "spot"))
	req.Labels[apisv1.LabelNodeClaim] = "default-abc12"
	req.Taints = []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}}
	bottlerocket := apisv1.AMIFamilyBottlerocket
	req.NodeClass = apisv1.NodeClass{EC2: &apisv1.EC2NodeClass{Spec: apisv1.EC2NodeClassSpec{AMIFamily: &bottlerocket, InstanceProfile: &testProfile}}}
	inst := mustCreate(t, c, req)
	ctx := context.Background()

	clk.Step(89 * time.Second)
	if err := c.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Get(ctx, inst.ProviderID); got.State != cloud.StatePending || reg.count() != 0 {
		t.Fatalf("at 89s: state %s, %d nodes; want pending and none", got.State, reg.count())
	}
	clk.Step(time.Second)
	if err := c.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Get(ctx, inst.ProviderID); got.State != cloud.StateRunning {
		t.Fatalf("at 90s: state %s, want running", got.State)
	}

	// us-east-1c is the zone index 2, so its subnet is 10.0.64.0/19; the first usable host is .4
	// (AWS reserves .0-.3). In us-east-1 the private DNS name is ip-<a-b-c-d>.ec2.internal.
	const name = "ip-10-0-64-4.ec2.internal"
	node := reg.get(name)
	if node == nil {
		t.Fatalf("no node %s registered; have %d", name, reg.count())
	}
	if node.Spec.ProviderID != inst.ProviderID {
		t.Fatalf("providerID %q, want %q", node.Spec.ProviderID, inst.ProviderID)
	}
	wantLabels := map[string]string{
		// the instance type's labels
		"kubernetes.io/arch":               "amd64",
		"kubernetes.io/os":                 "linux",
		"node.kubernetes.io/instance-type": "m5.large",
		// the request's, through the rendered user data (kubelet --node-labels); no catalog
		// label and no capacity type: those arrive with registration
		"karpenter.sh/nodepool":  "default",
		"dovetail.dev/nodeclaim": "default-abc12",
		"team":                   "web",
		// what the kubelet and the cloud provider set
		"kubernetes.io/hostname":                   name,
		"topology.kubernetes.io/zone":              "us-east-1c",
		"topology.kubernetes.io/region":            "us-east-1",
		"beta.kubernetes.io/arch":                  "amd64",
		"beta.kubernetes.io/os":                    "linux",
		"beta.kubernetes.io/instance-type":         "m5.large",
		"failure-domain.beta.kubernetes.io/zone":   "us-east-1c",
		"failure-domain.beta.kubernetes.io/region": "us-east-1",
	}
	if len(node.Labels) != len(wantLabels) {
		t.Errorf("labels: got %d, want %d: %v", len(node.Labels), len(wantLabels), node.Labels)
	}
	for k, v := range wantLabels {
		if node.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	// Hand computation in m5Large: 1930m, 6903Mi, 29 pods, 17Gi (= Karpenter's published row).
	wantAlloc := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("1930m"),
		corev1.ResourceMemory:           resource.MustParse("6903Mi"),
		corev1.ResourcePods:             resource.MustParse("29"),
		corev1.ResourceEphemeralStorage: resource.MustParse("17Gi"),
	}
	for k, want := range wantAlloc {
		if got := node.Status.Allocatable[k]; got.Cmp(want) != 0 {
			t.Errorf("allocatable %s = %s, want %s", k, got.String(), want.String())
		}
	}
	if got := node.Status.Capacity[corev1.ResourceMemory]; got.Cmp(resource.MustParse("7577Mi")) != 0 {
		t.Errorf("capacity memory = %s, want 7577Mi", got.String())
	}
	if len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != "dedicated" {
		t.Errorf("taints %v", node.Spec.Taints)
	}
	ready := false
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue && cond.LastHeartbeatTime.Time.Equal(t0.Add(90*time.Second)) {
			ready = true
		}
	}
	if !ready {
		t.Errorf("no Ready=True condition at 90s: %v", node.Status.Conditions)
	}
	ni := node.Status.NodeInfo
	if ni.Architecture != "amd64" || ni.OperatingSystem != "linux" || ni.KubeletVersion != DefaultKubeletVersion || ni.OSImage != "Bottlerocket OS" {
		t.Errorf("nodeInfo %+v", ni)
	}
	if s := c.Stats(); s.Registrations != 1 {
		t.Errorf("registrations %d, want 1", s.Registrations)
	}
	// Further ticks do not register it again.
	if err := c.Tick(ctx); err != nil || c.Stats().Registrations != 1 {
		t.Fatalf("re-registered: %v %+v", err, c.Stats())
	}
}

func TestRegistrationFailureIsRetried(t *testing.T) {
	c, _, reg := newCloud(t, 0)
	mustCreate(t, c, request("t1", off("m5.large", "us-east-1a", "on-demand")))
	reg.fail = errors.New("apiserver unavailable")
	if err := c.Tick(context.Background()); err == nil || !strings.Contains(err.Error(), "apiserver unavailable") {
		t.Fatalf("err %v, want the registrar's error", err)
	}
	reg.mu.Lock()
	reg.fail = nil
	reg.mu.Unlock()
	if err := c.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if reg.get("ip-10-0-0-4.ec2.internal") == nil {
		t.Fatal("node not registered on retry")
	}
}

func TestDeleteOnlyOwnInstances(t *testing.T) {
	c, clk, reg := newCloud(t, 0)
	c.terminateDelay = 30 * time.Second
	ctx := context.Background()
	own := mustCreate(t, c, request("t1", off("m5.large", "us-east-1a", "on-demand")))
	if err := c.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	foreign := cloud.Instance{ID: "i-0fedcba0987654321", Zone: "us-east-1a", InstanceType: "m5.large", Tags: map[string]string{apisv1.TagCluster: "prod"}}
	untagged := cloud.Instance{ID: "i-1234567890abcdef0", Zone: "us-east-1b", InstanceType: "c5.large"}
	for _, i := range []cloud.Instance{foreign, untagged} {
		if err := c.AddInstance(i); err != nil {
			t.Fatal(err)
		}
	}
	err := c.Delete(ctx, "aws:///us-east-1a/i-0fedcba0987654321")
	if err == nil || !strings.Contains(err.Error(), "i-0fedcba0987654321") || !strings.Contains(err.Error(), `"prod"`) {
		t.Fatalf("foreign delete: %v", err)
	}
	err = c.Delete(ctx, "aws:///us-east-1b/i-1234567890abcdef0")
	if err == nil || !strings.Contains(err.Error(), "i-1234567890abcdef0") || !strings.Contains(err.Error(), apisv1.TagCluster) {
		t.Fatalf("untagged delete: %v", err)
	}
	if err := c.Delete(ctx, "aws:///us-east-1a/i-00000000000000001"); !errors.Is(err, cloud.ErrNotFound) {
		t.Fatalf("unknown delete: %v, want ErrNotFound", err)
	}
	if err := c.Delete(ctx, "i-0fedcba0987654321"); err == nil || !strings.Contains(err.Error(), "aws:///") {
		t.Fatalf("malformed providerID: %v", err)
	}

	if err := c.Delete(ctx, own.ProviderID); err != nil {
		t.Fatal(err)
	}
	got, _ := c.Get(ctx, own.ProviderID)
	list, _ := c.List(ctx, cluster)
	if got.State != cloud.StateShuttingDown || len(list) != 1 {
		t.Fatalf("after Delete: state %s, listed %d; want shutting-down and still listed", got.State, len(list))
	}
	clk.Step(30 * time.Second)
	if err := c.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ = c.Get(ctx, own.ProviderID)
	list, _ = c.List(ctx, cluster)
	if got.State != cloud.StateTerminated || len(list) != 0 {
		t.Fatalf("after terminate delay: state %s, listed %d; want terminated and not listed", got.State, len(list))
	}
	if reg.count() != 0 || len(reg.removed) != 1 {
		t.Fatalf("node not deregistered: %d nodes, removed %v", reg.count(), reg.removed)
	}
	if err := c.Delete(ctx, own.ProviderID); err != nil {
		t.Fatalf("deleting a terminated instance: %v", err)
	}
	if s := c.Stats(); s.Deletes != 1 {
		t.Fatalf("deletes %d, want 1", s.Deletes)
	}
	if prod, _ := c.List(ctx, "prod"); len(prod) != 1 || prod[0].ID != foreign.ID {
		t.Fatalf("List(prod) = %v", prod)
	}
}

func TestGetNotFound(t *testing.T) {
	c, _, _ := newCloud(t, 0)
	if _, err := c.Get(context.Background(), "aws:///us-east-1a/i-0123456789abcdef0"); !errors.Is(err, cloud.ErrNotFound) {
		t.Fatalf("err %v, want ErrNotFound", err)
	}
}

func TestSpotInterruption(t *testing.T) {
	clk := testclock.NewFakeClock(t0)
	var notices []Interruption
	var mu sync.Mutex
	c := New(Options{Catalog: testCatalog(), Cluster: cluster, Clock: clk, OnInterruption: func(i Interruption) {
		mu.Lock()
		notices = append(notices, i)
		mu.Unlock()
	}})
	ctx := context.Background()
	spot := mustCreate(t, c, request("t1", off("m5.large", "us-east-1b", "spot")))
	od := mustCreate(t, c, request("t2", off("c5.large", "us-east-1a", "on-demand")))
	if err := c.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Interrupt(od.ProviderID, KindSpotInterruption); err == nil {
		t.Fatal("interrupted an on-demand instance")
	}
	n, err := c.Interrupt(spot.ProviderID, KindSpotInterruption)
	if err != nil {
		t.Fatal(err)
	}
	// Two-minute notice (EC2 User Guide, "Spot Instance interruption notices").
	if !n.ReclaimTime.Equal(t0.Add(2*time.Minute)) || len(notices) != 1 || notices[0].InstanceID != spot.ID {
		t.Fatalf("notice %+v, callback got %v", n, notices)
	}
	clk.Step(119 * time.Second)
	_ = c.Tick(ctx)
	if got, _ := c.Get(ctx, spot.ProviderID); got.State != cloud.StateRunning {
		t.Fatalf("before reclaim: %s", got.State)
	}
	clk.Step(time.Second)
	_ = c.Tick(ctx)
	if got, _ := c.Get(ctx, spot.ProviderID); got.State != cloud.StateTerminated {
		t.Fatalf("after reclaim: %s, want terminated (TerminateDelay 0)", got.State)
	}
	if s := c.Stats(); s.Interruptions != 1 {
		t.Fatalf("interruptions %d", s.Interruptions)
	}
}

func TestInjectICERejectsBadPattern(t *testing.T) {
	c, _, _ := newCloud(t, 0)
	if err := c.InjectICE(Pattern{Zone: "us-east-1["}, ""); err == nil || !strings.Contains(err.Error(), "pattern.zone") {
		t.Fatalf("err %v", err)
	}
}

// TestConcurrentUse runs launches (with repeated tokens), lists, ticks and deletes in parallel;
// run with -race. Each token must launch exactly once and every node name must be unique.
func TestConcurrentUse(t *testing.T) {
	c, clk, reg := newCloud(t, time.Second)
	ctx := context.Background()
	const tokens, callsPerToken = 40, 4
	var wg sync.WaitGroup
	ids := make([][]string, tokens)
	for i := range tokens {
		ids[i] = make([]string, callsPerToken)
		for j := range callsPerToken {
			wg.Add(1)
			go func() {
				defer wg.Done()
				zone := []string{"us-east-1a", "us-east-1b", "us-east-1c"}[i%3]
				inst, err := c.Create(ctx, request(fmt.Sprintf("token-%d", i), off("m5.large", zone, "on-demand")))
				if err != nil {
					t.Error(err)
					return
				}
				ids[i][j] = inst.ID
				if _, err := c.List(ctx, cluster); err != nil {
					t.Error(err)
				}
				_ = c.Tick(ctx)
			}()
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			clk.Step(100 * time.Millisecond)
			_ = c.Tick(ctx)
		}
	}()
	wg.Wait()
	clk.Step(time.Second)
	if err := c.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range tokens {
		for j := 1; j < callsPerToken; j++ {
			if ids[i][j] != ids[i][0] {
				t.Fatalf("token %d got two instances: %s and %s", i, ids[i][0], ids[i][j])
			}
		}
	}
	s := c.Stats()
	if s.Launches != tokens || s.IdempotentReplays != tokens*(callsPerToken-1) || s.Registrations != tokens || reg.count() != tokens {
		t.Fatalf("stats %+v, nodes %d; want %d launches and nodes", s, reg.count(), tokens)
	}
	// Delete concurrently, twice each.
	list, _ := c.List(ctx, cluster)
	for _, inst := range list {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.Delete(ctx, inst.ProviderID); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	if err := c.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if list, _ := c.List(ctx, cluster); len(list) != 0 || c.Stats().Deletes != tokens || reg.count() != 0 {
		t.Fatalf("after deleting all: %d listed, stats %+v, %d nodes", len(list), c.Stats(), reg.count())
	}
}

// TestRunTicksOnTheClock drives Run with the fake clock: the instance boots once the clock has
// passed BootDelay and Run's timer has fired.
func TestRunTicksOnTheClock(t *testing.T) {
	c, clk, reg := newCloud(t, 5*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx, time.Second); close(done) }()
	defer func() { cancel(); <-done }()

	mustCreate(t, c, request("t1", off("m5.large", "us-east-1a", "on-demand")))
	deadline := time.Now().Add(5 * time.Second)
	for reg.count() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no node after stepping the clock; stats %+v", c.Stats())
		}
		if clk.HasWaiters() { // Run is waiting on its timer: move time on by one interval
			clk.Step(time.Second)
		}
		time.Sleep(time.Millisecond)
	}
	if got := clk.Since(t0); got < 5*time.Second {
		t.Fatalf("registered after %v of fake time, want at least the 5s BootDelay", got)
	}
}

// An injected boot failure: the instance runs (and is listed) but its Node never registers;
// other offerings still boot.
func TestInjectedBootFailureNeverRegisters(t *testing.T) {
	c, clk, reg := newCloud(t, time.Second)
	if err := c.InjectBootFailure(Pattern{InstanceType: "m5.*"}); err != nil {
		t.Fatal(err)
	}
	bad := mustCreate(t, c, request("t1", off("m5.large", "us-east-1a", "on-demand")))
	good := mustCreate(t, c, request("t2", off("c5.large", "us-east-1a", "on-demand")))
	clk.Step(time.Hour)
	if err := c.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if inst, _ := c.Get(context.Background(), bad.ProviderID); inst.State != cloud.StateRunning {
		t.Fatalf("bad instance %s, want running", inst.State)
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if len(reg.nodes) != 1 {
		t.Fatalf("registered %d nodes, want only the c5.large's", len(reg.nodes))
	}
	for _, n := range reg.nodes {
		if n.Spec.ProviderID != good.ProviderID {
			t.Fatalf("registered %s, want only %s", n.Spec.ProviderID, good.ProviderID)
		}
	}
	if err := c.InjectBootFailure(Pattern{Zone: "["}); err == nil || !strings.Contains(err.Error(), "pattern.zone") {
		t.Fatalf("malformed pattern: %v", err)
	}
}

// A NodeClass without an instance profile (none named, none resolved for spec.role) boots
// instances with no IAM identity: a real kubelet cannot authenticate, so the instance runs (and bills) but its Node
// never registers, which the lifecycle's registration TTL then reaps.
func TestInstanceWithoutIdentityNeverRegisters(t *testing.T) {
	c, clk, reg := newCloud(t, 10*time.Second)
	req := request("t-noid", off("m5.large", "us-east-1c", "on-demand"))
	// spec.role alone, its profile not resolved into status yet: EC2 has no profile to give.
	req.NodeClass = apisv1.NodeClass{EC2: &apisv1.EC2NodeClass{Spec: apisv1.EC2NodeClassSpec{Role: "KarpenterNodeRole-test"}}}
	inst := mustCreate(t, c, req)
	clk.Step(time.Minute)
	if err := c.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Get(context.Background(), inst.ProviderID); got.State != cloud.StateRunning || reg.count() != 0 {
		t.Fatalf("state %s with %d nodes, want running and none registered", got.State, reg.count())
	}
}

// testProfile is the instance profile the test NodeClasses name: an instance needs one to join.
var testProfile = "KarpenterNodeInstanceProfile-test"
