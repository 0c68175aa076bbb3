package aws_test

// These tests drive the provider through the real aws-sdk-go-v2 EC2 and SSM clients against the
// fake cloud's EC2 Query / SSM JSON endpoint (shared/cloud/fake/ec2api) on loopback: every call
// crosses the real wire protocol, and errors arrive as smithy.APIError with EC2's codes.

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	dvaws "github.com/dovetail-dev/dovetail/shared/cloud/aws"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/ec2api"
)

const (
	nodeRole    = "KarpenterNodeRole-test"
	nodeProfile = "KarpenterNodeInstanceProfile-test"
	cluster     = "test"
	k8s         = "1.37"
	endpoint    = "https://ABCDEF.gr7.us-east-1.eks.amazonaws.com"
)

var clusterCA = base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n"))

type env struct {
	p      *dvaws.Provider
	srv    *ec2api.Server
	cloud  *fake.Cloud
	ec2    *ec2.Client
	iam    *iam.Client
	nodes  *fake.NodeRecorder
	cat    *catalog.Catalog
	counts *counter
}

// counter counts requests per EC2 Action / JSON target as they arrive on the wire, throttled
// ones included.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) get(action string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[action]
}

func setup(t *testing.T, opts ...func(*dvaws.Options)) *env {
	t.Helper()
	cat := catalog.MustAWS()
	reg := &fake.NodeRecorder{}
	fc := fake.New(fake.Options{Catalog: cat, Cluster: cluster, Registrar: reg})
	srv, err := ec2api.New(ec2api.Options{Cloud: fc, KubernetesVersion: k8s, Roles: []string{nodeRole}})
	if err != nil {
		t.Fatal(err)
	}
	srv.AddInstanceProfile(nodeProfile, nodeRole)
	cnt := &counter{n: map[string]int{}}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		action := r.Header.Get("X-Amz-Target")
		if action == "" {
			_ = r.ParseForm()
			action = r.Form.Get("Action")
		}
		cnt.mu.Lock()
		cnt.n[action]++
		cnt.mu.Unlock()
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	cfg, err := dvaws.NewConfig(context.Background(), dvaws.ConfigOptions{Endpoint: hs.URL, Region: "us-east-1", MaxBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e, s := dvaws.Clients(cfg)
	ic := dvaws.IAMClient(cfg)
	o := dvaws.Options{Cluster: cluster, ClusterEndpoint: endpoint, ClusterCA: clusterCA, KubernetesVersion: k8s,
		Catalog: cat, EC2: e, SSM: s, IAM: ic, Region: "us-east-1"}
	for _, f := range opts {
		f(&o)
	}
	p, err := dvaws.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return &env{p: p, srv: srv, cloud: fc, ec2: e, iam: ic, nodes: reg, cat: cat, counts: cnt}
}

func nodeClass(alias string) *apisv1.EC2NodeClass {
	return &apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.EC2NodeClassSpec{
		AMISelectorTerms:           []apisv1.AMISelectorTerm{{Alias: alias}},
		SubnetSelectorTerms:        []apisv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}},
		SecurityGroupSelectorTerms: []apisv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}},
		Tags:                       map[string]string{"team": "platform"},
		InstanceProfile:            aws.String(nodeProfile),
	}}
}

// offering returns the catalog's offering as a ref (with the catalog price).
func (e *env) offering(t *testing.T, typ, zone, ct string) cloud.OfferingRef {
	t.Helper()
	for _, o := range e.cat.Get(typ).Offerings {
		if o.Zone == zone && o.CapacityType == ct {
			return cloud.OfferingRef{InstanceType: typ, Zone: zone, CapacityType: ct, PricePerHour: o.PricePerHour}
		}
	}
	t.Fatalf("catalog has no %s/%s/%s", typ, zone, ct)
	return cloud.OfferingRef{}
}

func request(token string, nc *apisv1.EC2NodeClass, offs ...cloud.OfferingRef) cloud.LaunchRequest {
	return cloud.LaunchRequest{
		ClientToken: token, Cluster: cluster, NodeClass: apisv1.NodeClassOf(nc), Offerings: offs,
		Labels: map[string]string{"karpenter.sh/nodepool": "default", "team": "platform"},
		Taints: []corev1.Taint{{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}},
		Tags: map[string]string{apisv1.TagCluster: cluster, apisv1.TagNodePool: "default", apisv1.TagNodeClaim: "default-abc",
			"Name": "default-abc", apisv1.LabelEC2NodeClass: "default", "team": "platform"},
	}
}

func fleetInputs(e *env) []*ec2.CreateFleetInput {
	var out []*ec2.CreateFleetInput
	for _, in := range e.srv.RequestsOf("CreateFleet") {
		out = append(out, in.(*ec2.CreateFleetInput))
	}
	return out
}

func TestSpotFallsBackToOnDemandAfterInsufficientCapacity(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	if err := e.cloud.InjectICE(fake.Pattern{CapacityType: apisv1.CapacityTypeSpot}, "InsufficientInstanceCapacity"); err != nil {
		t.Fatal(err)
	}
	req := request("tok-fallback", nodeClass("al2023@latest"),
		e.offering(t, "m5.large", "us-east-1a", "spot"), e.offering(t, "m5.large", "us-east-1b", "spot"),
		e.offering(t, "m5.large", "us-east-1a", "on-demand"), e.offering(t, "m5.large", "us-east-1b", "on-demand"))
	inst, err := e.p.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// Both spot offerings were refused, so the on-demand fleet launched; on-demand m5.large costs
	// the same in every zone, so lowest-price keeps the request order: us-east-1a.
	if inst.CapacityType != "on-demand" || inst.InstanceType != "m5.large" || inst.Zone != "us-east-1a" {
		t.Fatalf("launched %s/%s/%s, want m5.large/us-east-1a/on-demand", inst.InstanceType, inst.Zone, inst.CapacityType)
	}
	if inst.PricePerHour != 0.096 { // m5.large us-east-1 on-demand list price
		t.Errorf("price %g, want 0.096", inst.PricePerHour)
	}
	fleets := fleetInputs(e)
	if len(fleets) != 2 {
		t.Fatalf("%d CreateFleet calls, want 2 (spot, then on-demand)", len(fleets))
	}
	spot, od := fleets[0], fleets[1]
	if spot.TargetCapacitySpecification.DefaultTargetCapacityType != ec2types.DefaultTargetCapacityTypeSpot ||
		spot.SpotOptions.AllocationStrategy != ec2types.SpotAllocationStrategyPriceCapacityOptimized || aws.ToString(spot.ClientToken) != "tok-fallback" {
		t.Errorf("first fleet: %+v %+v token %q; want spot, price-capacity-optimized, the request's token",
			spot.TargetCapacitySpecification, spot.SpotOptions, aws.ToString(spot.ClientToken))
	}
	if od.TargetCapacitySpecification.DefaultTargetCapacityType != ec2types.DefaultTargetCapacityTypeOnDemand ||
		od.OnDemandOptions.AllocationStrategy != ec2types.FleetOnDemandAllocationStrategyLowestPrice || aws.ToString(od.ClientToken) != dvaws.FallbackToken("tok-fallback") {
		t.Errorf("second fleet: %+v %+v token %q; want on-demand, lowest-price, the fallback token",
			od.TargetCapacitySpecification, od.OnDemandOptions, aws.ToString(od.ClientToken))
	}
	for i, f := range fleets {
		if f.Type != ec2types.FleetTypeInstant || aws.ToInt32(f.TargetCapacitySpecification.TotalTargetCapacity) != 1 {
			t.Errorf("fleet %d: type %s capacity %d, want instant 1", i, f.Type, aws.ToInt32(f.TargetCapacitySpecification.TotalTargetCapacity))
		}
		var kinds []string
		for _, ts := range f.TagSpecifications {
			kinds = append(kinds, string(ts.ResourceType))
			tags := map[string]string{}
			for _, tg := range ts.Tags {
				tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
			}
			for _, k := range []string{apisv1.TagCluster, apisv1.TagNodePool, apisv1.TagNodeClaim, "Name", "team"} {
				if tags[k] != req.Tags[k] {
					t.Errorf("fleet %d %s tag %s = %q, want %q", i, ts.ResourceType, k, tags[k], req.Tags[k])
				}
			}
		}
		if strings.Join(kinds, ",") != "instance,volume,fleet" {
			t.Errorf("fleet %d tags %v, want instance,volume,fleet", i, kinds)
		}
	}
	// The launched instance carries the tags (read back with DescribeInstances).
	got, err := e.p.Get(ctx, inst.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Tags[apisv1.TagNodeClaim] != "default-abc" || got.Tags[apisv1.TagCluster] != cluster || got.State != "pending" {
		t.Errorf("instance %+v", got)
	}
}

func TestInsufficientCapacityEverywhereListsEveryOffering(t *testing.T) {
	e := setup(t)
	if err := e.cloud.InjectICE(fake.Pattern{}, "InsufficientInstanceCapacity"); err != nil {
		t.Fatal(err)
	}
	offs := []cloud.OfferingRef{e.offering(t, "m5.large", "us-east-1a", "spot"), e.offering(t, "m5.large", "us-east-1a", "on-demand")}
	_, err := e.p.Create(context.Background(), request("tok-ice", nodeClass("al2023@latest"), offs...))
	var ice *cloud.InsufficientCapacityError
	if !errors.As(err, &ice) {
		t.Fatalf("err %v, want *cloud.InsufficientCapacityError", err)
	}
	if len(ice.Unavailable) != 2 {
		t.Fatalf("unavailable %v, want both offerings", ice.Unavailable)
	}
	for i, u := range ice.Unavailable {
		want := offs[i]
		if u.Offering != want || u.Code != "InsufficientInstanceCapacity" {
			t.Errorf("unavailable[%d] = %+v, want %+v InsufficientInstanceCapacity", i, u, want)
		}
	}
}

func TestFleetErrorCodesMapToUnavailableOfferings(t *testing.T) {
	for _, code := range []string{"InsufficientFreeAddressesInSubnet", "MaxSpotInstanceCountExceeded", "UnfulfillableCapacity",
		"SpotMaxPriceTooLow", "VcpuLimitExceeded", "Unsupported"} {
		t.Run(code, func(t *testing.T) {
			e := setup(t)
			if err := e.cloud.InjectICE(fake.Pattern{}, code); err != nil {
				t.Fatal(err)
			}
			off := e.offering(t, "c6g.large", "us-east-1c", "spot")
			_, err := e.p.Create(context.Background(), request("tok-"+code, nodeClass("al2023@latest"), off))
			var ice *cloud.InsufficientCapacityError
			if !errors.As(err, &ice) || len(ice.Unavailable) != 1 || ice.Unavailable[0].Code != code || ice.Unavailable[0].Offering != off {
				t.Fatalf("err %v, want one unavailable %v with code %s", err, off, code)
			}
		})
	}
	// A fleet error that is not about capacity is an error, not a mark.
	e := setup(t)
	if err := e.cloud.InjectICE(fake.Pattern{}, "InvalidLaunchTemplateId.Malformed"); err != nil {
		t.Fatal(err)
	}
	_, err := e.p.Create(context.Background(), request("tok-other", nodeClass("al2023@latest"), e.offering(t, "m5.large", "us-east-1a", "spot")))
	if err == nil || cloud.IsInsufficientCapacity(err) || !strings.Contains(err.Error(), "InvalidLaunchTemplateId.Malformed") {
		t.Fatalf("err %v, want a plain error naming the code", err)
	}
}

func TestDuplicateDeliveryLaunchesOneInstance(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	req := request("tok-dup", nodeClass("bottlerocket@latest"), e.offering(t, "m6g.large", "us-east-1b", "on-demand"))
	first, err := e.p.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.p.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if first.ID != second.ID {
		t.Fatalf("second delivery launched %s, first %s", second.ID, first.ID)
	}
	if s := e.cloud.Stats(); s.Launches != 1 {
		t.Fatalf("%d launches, want 1", s.Launches)
	}
	list, err := e.p.List(ctx, cluster)
	if err != nil || len(list) != 1 || list[0].ID != first.ID {
		t.Fatalf("List = %v, %v; want just %s", list, err, first.ID)
	}
}

func TestDuplicateDeliveryAfterFallbackReplaysTheFallback(t *testing.T) {
	// EC2 answers a repeated ClientToken with the first response, failures included: once the spot
	// fleet failed and on-demand launched, a redelivery must get the same on-demand instance even if
	// spot capacity came back in between.
	e := setup(t)
	ctx := context.Background()
	if err := e.cloud.InjectICE(fake.Pattern{CapacityType: "spot"}, ""); err != nil {
		t.Fatal(err)
	}
	req := request("tok-dup-fallback", nodeClass("al2023@latest"), e.offering(t, "m5.large", "us-east-1a", "spot"), e.offering(t, "m5.large", "us-east-1a", "on-demand"))
	first, err := e.p.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	e.cloud.ClearICE()
	second, err := e.p.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if first.ID != second.ID || second.CapacityType != "on-demand" || e.cloud.Stats().Launches != 1 {
		t.Fatalf("first %s (%s), second %s (%s), launches %d; want one on-demand instance", first.ID, first.CapacityType, second.ID, second.CapacityType, e.cloud.Stats().Launches)
	}
}

func TestAtMostSixtyCheapestOverrides(t *testing.T) {
	e := setup(t)
	// 16 on-demand types with distinct list prices × 5 zones = 80 offerings, given most expensive
	// first. The fleet must carry exactly the 60 cheapest: the 12 cheapest types in every zone.
	types := []string{"c6i.large", "c6i.xlarge", "c6i.2xlarge", "c6i.4xlarge", "c6i.8xlarge", "c6i.12xlarge", "c6i.16xlarge", "c6i.24xlarge",
		"m6i.large", "m6i.xlarge", "m6i.2xlarge", "m6i.4xlarge", "m6i.8xlarge", "m6i.12xlarge", "m6i.16xlarge", "m6i.24xlarge"}
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1f"}
	var offs []cloud.OfferingRef
	for _, typ := range types {
		for _, z := range zones {
			offs = append(offs, e.offering(t, typ, z, "on-demand"))
		}
	}
	sort.SliceStable(offs, func(a, b int) bool { return offs[a].PricePerHour > offs[b].PricePerHour })
	byPrice := append([]cloud.OfferingRef(nil), offs...)
	sort.SliceStable(byPrice, func(a, b int) bool { return byPrice[a].PricePerHour < byPrice[b].PricePerHour })
	if byPrice[59].PricePerHour == byPrice[60].PricePerHour {
		t.Fatal("test data: the 60th and 61st offerings tie on price")
	}
	want := map[string]bool{}
	for _, o := range byPrice[:60] {
		want[o.InstanceType+"/"+o.Zone] = true
	}
	if _, err := e.p.Create(context.Background(), request("tok-cap", nodeClass("al2023@latest"), offs...)); err != nil {
		t.Fatal(err)
	}
	fleets := fleetInputs(e)
	if len(fleets) != 1 {
		t.Fatalf("%d fleets, want 1", len(fleets))
	}
	got := map[string]bool{}
	n := 0
	for _, c := range fleets[0].LaunchTemplateConfigs {
		for _, o := range c.Overrides {
			n++
			got[string(o.InstanceType)+"/"+aws.ToString(o.AvailabilityZone)] = true
		}
	}
	if n != 60 {
		t.Fatalf("%d overrides, want 60", n)
	}
	for k := range want {
		if !got[k] {
			t.Errorf("override %s (among the 60 cheapest) missing", k)
		}
	}
}

func TestTerminationRefusedForUntaggedInstance(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	// Instance IDs are the placeholders AWS uses in its documentation.
	if err := e.cloud.AddInstance(cloud.Instance{ID: "i-1234567890abcdef0", Zone: "us-east-1a", InstanceType: "m5.large", CapacityType: "on-demand"}); err != nil {
		t.Fatal(err)
	}
	if err := e.cloud.AddInstance(cloud.Instance{ID: "i-0fedcba0987654321", Zone: "us-east-1b", InstanceType: "m5.large", CapacityType: "on-demand",
		Tags: map[string]string{apisv1.TagCluster: "someone-else"}}); err != nil {
		t.Fatal(err)
	}
	err := e.p.Delete(ctx, cloud.AWSProviderID("us-east-1a", "i-1234567890abcdef0"))
	if err == nil || !strings.Contains(err.Error(), "i-1234567890abcdef0") || !strings.Contains(err.Error(), apisv1.TagCluster) {
		t.Fatalf("err %v, want a refusal naming the instance and the %s tag", err, apisv1.TagCluster)
	}
	err = e.p.Delete(ctx, cloud.AWSProviderID("us-east-1b", "i-0fedcba0987654321"))
	if err == nil || !strings.Contains(err.Error(), "i-0fedcba0987654321") || !strings.Contains(err.Error(), "someone-else") {
		t.Fatalf("err %v, want a refusal naming the instance and the foreign cluster", err)
	}
	if n := e.counts.get("TerminateInstances"); n != 0 {
		t.Fatalf("%d TerminateInstances calls, want 0", n)
	}
	for _, r := range e.cloud.Records() {
		if r.State != cloud.StateRunning {
			t.Errorf("%s is %s, want running", r.ID, r.State)
		}
	}
	// Our own instance is terminated, and a second delete is not an error.
	inst, err := e.p.Create(ctx, request("tok-own", nodeClass("al2023@latest"), e.offering(t, "m5.large", "us-east-1a", "on-demand")))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.p.Delete(ctx, inst.ProviderID); err != nil {
		t.Fatal(err)
	}
	if err := e.p.Delete(ctx, inst.ProviderID); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	got, _ := e.p.Get(ctx, inst.ProviderID)
	if got.State != cloud.StateShuttingDown || e.counts.get("TerminateInstances") != 1 {
		t.Fatalf("state %s after %d TerminateInstances, want shutting-down after 1", got.State, e.counts.get("TerminateInstances"))
	}
	list, err := e.p.List(ctx, cluster)
	if err != nil || len(list) != 1 || list[0].ID != inst.ID {
		t.Fatalf("List = %v, %v; want only %s (the untagged and foreign instances are not ours)", list, err, inst.ID)
	}
	if _, err := e.p.Get(ctx, cloud.AWSProviderID("us-east-1a", "i-0aaaaaaaaaaaaaaaa")); !errors.Is(err, cloud.ErrNotFound) {
		t.Fatalf("Get unknown: %v, want cloud.ErrNotFound", err)
	}
}

// template reads the launch template a fleet used, through DescribeLaunchTemplateVersions.
func template(t *testing.T, e *env, fleet *ec2.CreateFleetInput) *ec2types.ResponseLaunchTemplateData {
	t.Helper()
	name := aws.ToString(fleet.LaunchTemplateConfigs[0].LaunchTemplateSpecification.LaunchTemplateName)
	out, err := e.ec2.DescribeLaunchTemplateVersions(context.Background(), &ec2.DescribeLaunchTemplateVersionsInput{
		LaunchTemplateName: aws.String(name), Versions: []string{"$Latest"}})
	if err != nil {
		t.Fatal(err)
	}
	return out.LaunchTemplateVersions[0].LaunchTemplateData
}

func TestLaunchTemplateAL2023(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	inst, err := e.p.Create(ctx, request("tok-lt", nodeClass("al2023@latest"), e.offering(t, "m5.large", "us-east-1a", "on-demand")))
	if err != nil {
		t.Fatal(err)
	}
	d := template(t, e, fleetInputs(e)[0])
	m := d.MetadataOptions
	if m.HttpTokens != ec2types.LaunchTemplateHttpTokensStateRequired || aws.ToInt32(m.HttpPutResponseHopLimit) != 1 ||
		m.HttpEndpoint != ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled {
		t.Errorf("metadata options %+v, want IMDSv2 required, hop limit 1, endpoint enabled", m)
	}
	ud, err := base64.StdEncoding.DecodeString(aws.ToString(d.UserData))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Content-Type: application/node.eks.aws",
		"apiVersion: node.eks.aws/v1alpha1",
		"name: " + cluster,
		"apiServerEndpoint: " + endpoint,
		// Labels sorted by key, comma-separated (kubelet --node-labels); taints key=value:Effect.
		"--node-labels=karpenter.sh/nodepool=default,team=platform",
		"--register-with-taints=dedicated=batch:NoSchedule",
	} {
		if !strings.Contains(string(ud), want) {
			t.Errorf("user data lacks %q:\n%s", want, ud)
		}
	}
	if len(d.BlockDeviceMappings) != 1 || aws.ToString(d.BlockDeviceMappings[0].DeviceName) != "/dev/xvda" ||
		aws.ToInt32(d.BlockDeviceMappings[0].Ebs.VolumeSize) != 20 || !aws.ToBool(d.BlockDeviceMappings[0].Ebs.Encrypted) {
		t.Errorf("block devices %+v, want one encrypted 20 GiB /dev/xvda", d.BlockDeviceMappings)
	}
	if len(d.SecurityGroupIds) != 1 || !strings.HasPrefix(d.SecurityGroupIds[0], "sg-") {
		t.Errorf("security groups %v, want the one tagged karpenter.sh/discovery=%s", d.SecurityGroupIds, cluster)
	}
	// The node boots from that user data: the fake's kubelet registers the labels and taints.
	if err := e.cloud.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if len(e.nodes.Nodes()) != 1 {
		t.Fatalf("%d nodes registered, want 1", len(e.nodes.Nodes()))
	}
	n := e.nodes.Nodes()[0]
	if n.Labels["team"] != "platform" || n.Labels["karpenter.sh/nodepool"] != "default" || n.Spec.ProviderID != inst.ProviderID {
		t.Errorf("node labels %v providerID %s", n.Labels, n.Spec.ProviderID)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0] != (corev1.Taint{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}) {
		t.Errorf("node taints %v", n.Spec.Taints)
	}
	if n.Status.NodeInfo.OSImage != "Amazon Linux 2023" {
		t.Errorf("os image %q, want Amazon Linux 2023 (the AMI family of the SSM alias)", n.Status.NodeInfo.OSImage)
	}
}

func TestLaunchTemplateBottlerocketWithNodeClassSettings(t *testing.T) {
	e := setup(t)
	nc := nodeClass("bottlerocket@latest")
	hop := int64(2)
	maxPods := int32(20)
	nc.Spec.MetadataOptions = &apisv1.MetadataOptions{HTTPPutResponseHopLimit: &hop}
	nc.Spec.Kubelet = &apisv1.KubeletConfiguration{MaxPods: &maxPods}
	if _, err := e.p.Create(context.Background(), request("tok-br", nc, e.offering(t, "m6g.large", "us-east-1a", "on-demand"))); err != nil {
		t.Fatal(err)
	}
	d := template(t, e, fleetInputs(e)[0])
	if aws.ToInt32(d.MetadataOptions.HttpPutResponseHopLimit) != 2 || d.MetadataOptions.HttpTokens != ec2types.LaunchTemplateHttpTokensStateRequired {
		t.Errorf("metadata %+v, want hop limit 2 from the NodeClass, tokens still required", d.MetadataOptions)
	}
	ud, _ := base64.StdEncoding.DecodeString(aws.ToString(d.UserData))
	for _, want := range []string{"cluster-name = '" + cluster + "'", "api-server = '" + endpoint + "'", "max-pods = 20",
		"[settings.kubernetes.node-labels]", "team = 'platform'", "[settings.kubernetes.node-taints]", "dedicated = ['batch:NoSchedule']"} {
		if !strings.Contains(string(ud), want) {
			t.Errorf("bottlerocket settings lack %q:\n%s", want, ud)
		}
	}
	// Bottlerocket's defaults: a 4 GiB OS volume and a 20 GiB data volume.
	if len(d.BlockDeviceMappings) != 2 || aws.ToInt32(d.BlockDeviceMappings[1].Ebs.VolumeSize) != 20 || aws.ToString(d.BlockDeviceMappings[1].DeviceName) != "/dev/xvdb" {
		t.Errorf("block devices %+v", d.BlockDeviceMappings)
	}
	if err := e.cloud.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	// maxPods 20 from the user data reached the kubelet.
	if got := e.nodes.Nodes()[0].Status.Capacity.Pods().Value(); got != 20 {
		t.Errorf("node pods capacity %d, want 20", got)
	}
}

func TestAliasResolvedThroughSSM(t *testing.T) {
	e := setup(t)
	// The parameter paths are the ones the EKS User Guide documents for AL2023 standard images.
	amdParam := "/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/standard/recommended/image_id"
	armParam := "/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/arm64/standard/recommended/image_id"
	custom := e.srv.AddImage(ec2types.Image{Name: aws.String("amazon-eks-node-al2023-x86_64-standard-1.37-v20261201"),
		Architecture: ec2types.ArchitectureValuesX8664, CreationDate: aws.String("2026-12-01T00:00:00.000Z"),
		OwnerId: aws.String(ec2api.AmazonImageAccount), ImageOwnerAlias: aws.String("amazon")}) // a new EKS release
	e.srv.PutParameter(amdParam, aws.ToString(custom.ImageId))
	armImage, ok := e.srv.Parameter(armParam)
	if !ok {
		t.Fatal("no arm64 parameter")
	}
	amis := resolveAMIs(t, e, nodeClass("al2023@latest"))
	if amis["amd64"] != aws.ToString(custom.ImageId) || amis["arm64"] != armImage {
		t.Fatalf("amis %+v, want amd64 %s (the parameter's new value) and arm64 %s", amis, aws.ToString(custom.ImageId), armImage)
	}
	var names []string
	for _, r := range e.srv.RequestsOf("AmazonSSM.GetParameter") {
		names = append(names, r.(string))
	}
	// Five documented AL2023 paths: standard, nvidia and neuron for x86_64, standard and nvidia
	// for arm64.
	var joined = strings.Join(names, "\n")
	for _, want := range []string{amdParam, armParam,
		"/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/nvidia/recommended/image_id",
		"/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/neuron/recommended/image_id",
		"/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/arm64/nvidia/recommended/image_id"} {
		if !strings.Contains(joined, want) {
			t.Errorf("GetParameter bodies %v lack %s", names, want)
		}
	}
	if len(names) != 5 {
		t.Errorf("%d GetParameter calls, want 5", len(names))
	}
	// Bottlerocket's paths.
	br, err := dvaws.AliasImages(apisv1.Alias{Family: apisv1.AMIFamilyBottlerocket, Version: "latest"}, "1.37")
	if err != nil || len(br) != 4 || br[1].Parameter != "/aws/service/bottlerocket/aws-k8s-1.37/arm64/latest/image_id" ||
		br[3].Parameter != "/aws/service/bottlerocket/aws-k8s-1.37-nvidia/arm64/latest/image_id" {
		t.Errorf("bottlerocket parameters %+v %v", br, err)
	}
	// An id term and a name/owner term go through DescribeImages.
	byID := nodeClass("")
	byID.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{ID: aws.ToString(custom.ImageId)}}
	if amis := resolveAMIs(t, e, byID); amis["amd64"] != aws.ToString(custom.ImageId) || len(amis) != 1 {
		t.Errorf("by id: %+v", amis)
	}
	byName := nodeClass("")
	byName.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{Name: "amazon-eks-node-al2023-x86_64-standard-1.37-*", Owner: "amazon"}}
	if amis := resolveAMIs(t, e, byName); amis["amd64"] != aws.ToString(custom.ImageId) {
		t.Errorf("by name (newest wins): %+v", amis)
	}
}

// resolveAMIs resolves the class and returns its standard-variant (or only) image per
// architecture.
func resolveAMIs(t *testing.T, e *env, nc *apisv1.EC2NodeClass) map[string]string {
	t.Helper()
	got, err := e.p.ResolveNodeClass(context.Background(), apisv1.NodeClassOf(nc))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, a := range got.EC2.Status.AMIs {
		arch := a.Requirements[0].Values[0]
		if len(a.Requirements) == 1 || a.Requirements[1].Operator == corev1.NodeSelectorOpDoesNotExist {
			out[arch] = a.ID
		}
	}
	return out
}

func TestThrottlingRetriedByTheSDK(t *testing.T) {
	e := setup(t)
	e.srv.InjectThrottle("CreateFleet", 2)
	if _, err := e.p.Create(context.Background(), request("tok-throttle", nodeClass("al2023@latest"), e.offering(t, "m5.large", "us-east-1a", "on-demand"))); err != nil {
		t.Fatal(err)
	}
	// Two RequestLimitExceeded answers, then success: three attempts, the SDK's default maximum.
	if n := e.counts.get("CreateFleet"); n != 3 {
		t.Fatalf("%d CreateFleet attempts, want 3", n)
	}
}

func TestCreateRefusesBadRequests(t *testing.T) {
	e := setup(t)
	off := e.offering(t, "m5.large", "us-east-1a", "on-demand")
	for name, c := range map[string]struct {
		req  cloud.LaunchRequest
		want string
	}{
		"no token":     {request("", nodeClass("al2023@latest"), off), "clientToken"},
		"no nodeclass": {request("t", nil, off), "nodeClass"},
		"aks nodeclass": {func() cloud.LaunchRequest {
			r := request("t", nil, off)
			r.NodeClass = apisv1.NodeClass{AKS: &apisv1.AKSNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}}
			return r
		}(), `nodeClass: AKSNodeClass "default" is not an EC2NodeClass`},
		"foreign": {func() cloud.LaunchRequest {
			r := request("t", nodeClass("al2023@latest"), off)
			r.Tags[apisv1.TagCluster] = "x"
			return r
		}(), "tags"},
		"no subnets": {func() cloud.LaunchRequest {
			r := request("t", nodeClass("al2023@latest"), off)
			r.NodeClass.EC2.Spec.SubnetSelectorTerms[0].Tags = map[string]string{"nope": "x"}
			return r
		}(), "spec.subnetSelectorTerms"},
		// Windows aliases take only "latest" (Karpenter's CRD note on amiSelectorTerms).
		"pinned windows": {request("t", nodeClass("windows2022@v20261101"), off), "spec.amiSelectorTerms[0].alias"},
		"no offerings":   {request("t", nodeClass("al2023@latest")), "offerings"},
	} {
		if _, err := e.p.Create(context.Background(), c.req); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one naming %s", name, err, c.want)
		}
	}
	if n := e.counts.get("CreateFleet"); n != 0 {
		t.Errorf("%d CreateFleet calls for refused requests", n)
	}
}

func TestOneFleetAcrossArchitectures(t *testing.T) {
	e := setup(t)
	nc := nodeClass("bottlerocket@latest")
	maxPods := int32(30)
	nc.Spec.Kubelet = &apisv1.KubeletConfiguration{MaxPods: &maxPods}
	// m6g.large (arm64) and m5.large (amd64) need one launch template each (one AMI per
	// architecture), both in the same fleet.
	inst, err := e.p.Create(context.Background(), request("tok-arch", nc,
		e.offering(t, "m6g.large", "us-east-1a", "on-demand"), e.offering(t, "m5.large", "us-east-1a", "on-demand")))
	if err != nil {
		t.Fatal(err)
	}
	f := fleetInputs(e)[0]
	if len(f.LaunchTemplateConfigs) != 2 {
		t.Fatalf("%d launch template configs, want 2 (amd64 and arm64)", len(f.LaunchTemplateConfigs))
	}
	first := template(t, e, f)
	f.LaunchTemplateConfigs = f.LaunchTemplateConfigs[1:]
	second := template(t, e, f)
	if aws.ToString(first.ImageId) == aws.ToString(second.ImageId) {
		t.Fatalf("both templates use %s", aws.ToString(first.ImageId))
	}
	// m6g.large lists at 0.077 USD/h on demand, m5.large at 0.096: lowest-price takes m6g.
	if inst.InstanceType != "m6g.large" {
		t.Fatalf("launched %s, want m6g.large", inst.InstanceType)
	}
}

// instanceStorePolicy RAID0 travels from the EC2NodeClass into the launch template's user data
// (nodeadm NodeConfig spec.instance.localStorage.strategy RAID0, as Karpenter's nodeadm.go
// writes it), and the node booted from that template through the SDK reports the i4i.xlarge
// instance store (EC2 TotalSizeInGB 937) as its ephemeral-storage capacity: 937e9 bytes.
func TestLaunchTemplateInstanceStoreRAID0(t *testing.T) {
	e := setup(t)
	nc := nodeClass("al2023@latest")
	raid0 := apisv1.InstanceStorePolicyRAID0
	nc.Spec.InstanceStorePolicy = &raid0
	if _, err := e.p.Create(context.Background(), request("tok-raid0", nc, e.offering(t, "i4i.xlarge", "us-east-1a", "on-demand"))); err != nil {
		t.Fatal(err)
	}
	d := template(t, e, fleetInputs(e)[0])
	ud, _ := base64.StdEncoding.DecodeString(aws.ToString(d.UserData))
	if !strings.Contains(string(ud), "  instance:\n    localStorage:\n      strategy: RAID0\n") {
		t.Errorf("user data lacks nodeadm's localStorage RAID0:\n%s", ud)
	}
	if err := e.cloud.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := e.nodes.Nodes()[0].Status.Capacity[corev1.ResourceEphemeralStorage]
	if got.Value() != 937_000_000_000 {
		t.Errorf("node ephemeral-storage capacity %s, want 937G (the instance store)", got.String())
	}
}

// spec.context reaches CreateFleet as Context, through the SDK's wire format into the fake EC2
// endpoint's record; a NodeClaim whose minValues were relaxed launches without it, and a
// NodeClass without one sends none (Karpenter's instance provider and its suite's "EC2
// Context" cases).
func TestFleetCarriesNodeClassContext(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	nc := nodeClass("al2023@latest")
	nc.Spec.Context = aws.String("context-1234")
	if _, err := e.p.Create(ctx, request("tok-ctx", nc, e.offering(t, "m5.large", "us-east-1a", "on-demand"))); err != nil {
		t.Fatal(err)
	}
	relaxed := request("tok-ctx-relaxed", nc, e.offering(t, "m5.large", "us-east-1a", "on-demand"))
	relaxed.NodeClaim = &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc",
		Annotations: map[string]string{"karpenter.sh/nodeclaim-min-values-relaxed": "true"}}}
	if _, err := e.p.Create(ctx, relaxed); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.Create(ctx, request("tok-no-ctx", nodeClass("al2023@latest"), e.offering(t, "m5.large", "us-east-1a", "on-demand"))); err != nil {
		t.Fatal(err)
	}
	ins := fleetInputs(e)
	if len(ins) != 3 {
		t.Fatalf("%d CreateFleet calls, want 3", len(ins))
	}
	for i, want := range []string{"context-1234", "", ""} {
		if got := aws.ToString(ins[i].Context); got != want {
			t.Errorf("fleet %d (%s): Context %q, want %q", i, aws.ToString(ins[i].ClientToken), got, want)
		}
	}
}

// The discovered cluster facts stand in for the flags: with no --kubernetes-version an alias
// resolves with the snapshot's version (the SSM parameter of that version's AMI), and a launch
// tells the node the snapshot's service range and kube-dns address (Karpenter fills the
// kubelet's clusterDNS from kube-dns when the NodeClass sets none). A flag, when set, wins; a
// NodeClass's own clusterDNS wins over both.
func TestDiscoveredClusterFacts(t *testing.T) {
	e := setup(t, func(o *dvaws.Options) { o.KubernetesVersion = "" })
	facts := &events.ClusterFacts{KubernetesVersion: k8s, ClusterDNSIP: "172.20.0.10", ServiceCIDR: "172.20.0.0/16", IPFamily: "ipv4"}
	nc := nodeClass("al2023@latest")
	got, err := e.p.ResolveNodeClass(context.Background(), apisv1.NodeClassOf(nc))
	if err != nil || len(got.EC2.Status.AMIs) != 0 {
		t.Fatalf("without a version: %d AMIs (%v), want none", len(got.EC2.Status.AMIs), err)
	}
	want, _ := e.srv.Parameter("/aws/service/eks/optimized-ami/" + k8s + "/amazon-linux-2023/x86_64/standard/recommended/image_id")
	got, err = e.p.ResolveNodeClass(cloud.WithClusterFacts(context.Background(), facts), apisv1.NodeClassOf(nc))
	if err != nil || len(got.EC2.Status.AMIs) == 0 || !hasAMI(got.EC2.Status.AMIs, want) {
		t.Fatalf("with the snapshot's version %s: AMIs %+v (%v), want %s among them", k8s, got.EC2.Status.AMIs, err, want)
	}

	userData := func(p *dvaws.Provider, class *apisv1.EC2NodeClass) string {
		t.Helper()
		req := request("tok", class, e.offering(t, "m5.large", "us-east-1a", "on-demand"))
		req.ClusterFacts = facts
		d, err := p.TemplateData(req, apisv1.AMIFamilyAL2023, "ami-0", []string{"sg-1"}, nodeProfile)
		if err != nil {
			t.Fatal(err)
		}
		ud, _ := base64.StdEncoding.DecodeString(aws.ToString(d.UserData))
		return string(ud)
	}
	ud := userData(e.p, nc)
	for _, want := range []string{"cidr: 172.20.0.0/16", "clusterDNS:\n      - 172.20.0.10"} {
		if !strings.Contains(ud, want) {
			t.Errorf("user data lacks %q:\n%s", want, ud)
		}
	}
	flagged := setup(t, func(o *dvaws.Options) { o.ServiceCIDR, o.ClusterDNS = "10.100.0.0/16", "10.100.0.10" })
	if ud := userData(flagged.p, nc); !strings.Contains(ud, "cidr: 10.100.0.0/16") || !strings.Contains(ud, "- 10.100.0.10") {
		t.Errorf("the flags do not override the snapshot:\n%s", ud)
	}
	own := nodeClass("al2023@latest")
	own.Spec.Kubelet = &apisv1.KubeletConfiguration{ClusterDNS: []string{"169.254.20.10"}}
	if ud := userData(e.p, own); !strings.Contains(ud, "- 169.254.20.10") || strings.Contains(ud, "172.20.0.10") {
		t.Errorf("the NodeClass's clusterDNS does not win:\n%s", ud)
	}
}

func hasAMI(amis []apisv1.AMI, id string) bool {
	for _, a := range amis {
		if a.ID == id {
			return true
		}
	}
	return false
}

// A NodeClaim priced by NodeOverlays (karpenter.sh/price-overlay-applied) launches with the
// prioritized strategy, each override's priority its overlaid price, and EC2 (the fake, as
// the CreateFleet reference says) launches the lowest priority number: m6i.large at its overlaid
// $0.0672/h before c6i.large at $0.085/h, where lowest-price would take c6i.large (its list
// price is below m6i.large's $0.096/h).
func TestFleetFollowsOverlaidPrices(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	m := e.offering(t, "m6i.large", "us-east-1a", "on-demand")
	m.PricePerHour = 0.096 * 0.7
	c := e.offering(t, "c6i.large", "us-east-1a", "on-demand")
	plain, err := e.p.Create(ctx, request("tok-plain", nodeClass("al2023@latest"), m, c))
	if err != nil || plain.InstanceType != "c6i.large" {
		t.Fatalf("without the annotation: %v (%v), want c6i.large (lowest-price)", plain, err)
	}
	req := request("tok-overlay", nodeClass("al2023@latest"), m, c)
	req.NodeClaim = &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc",
		Annotations: map[string]string{apisv1.AnnotationPriceOverlayApplied: "true"}}}
	got, err := e.p.Create(ctx, req)
	if err != nil || got.InstanceType != "m6i.large" {
		t.Fatalf("with the annotation: %v (%v), want m6i.large", got, err)
	}
	ins := fleetInputs(e)
	last := ins[len(ins)-1]
	if last.OnDemandOptions == nil || last.OnDemandOptions.AllocationStrategy != ec2types.FleetOnDemandAllocationStrategyPrioritized {
		t.Fatalf("on-demand options %+v, want prioritized", last.OnDemandOptions)
	}
	var prios []float64
	for _, cfg := range last.LaunchTemplateConfigs {
		for _, o := range cfg.Overrides {
			prios = append(prios, aws.ToFloat64(o.Priority))
		}
	}
	if len(prios) != 2 || prios[0] != m.PricePerHour || prios[1] != 0.085 {
		t.Errorf("priorities %v, want [%v 0.085]", prios, m.PricePerHour)
	}
}
