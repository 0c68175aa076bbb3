package launch

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/cloudmetrics"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/overlay"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// The cloud here is the in-memory fake over the real embedded catalog.

var at = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func plan(t *testing.T, types ...string) *provisioning.NodeClaimPlan {
	t.Helper()
	np := &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{
		Spec: apisv1.NodeClaimSpec{NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: "EC2NodeClass", Name: "default"},
			Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
				{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: types}},
				{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
			}}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}
	p, err := provisioning.Solve(provisioning.Input{Pods: []*corev1.Pod{pod}, NodePools: []*apisv1.NodePool{np}, Catalog: catalog.MustAWS()})
	if err != nil || len(p.NodeClaims) != 1 {
		t.Fatalf("plan: %v, %d claims", err, len(p.NodeClaims))
	}
	return p.NodeClaims[0]
}

func TestNamesAreDerivedFromTheDecision(t *testing.T) {
	p := plan(t, "m5.large")
	a := NodeClaimName("prod", Decision{Revision: 7}, p)
	if b := NodeClaimName("prod", Decision{Revision: 7}, p); a != b {
		t.Fatalf("same decision, different names: %s, %s", a, b)
	}
	if c := NodeClaimName("prod", Decision{Revision: 8}, p); c == a {
		t.Fatal("a later decision must get a new name (and so a new fleet token)")
	}
	// "default-" + 10 hex digits; EC2 client tokens are at most 64 ASCII characters.
	if len(a) != len("default-")+10 || len(ClientToken("prod", a, nil)) > 64 {
		t.Fatalf("name %q, token %q", a, ClientToken("prod", a, nil))
	}
}

// A static NodePool's NodeClaims carry no pods: their slots tell them apart within one decision,
// and a pod-driven claim's name does not change with the slot field unset.
func TestStaticSlotsNameApart(t *testing.T) {
	p := plan(t, "m5.large")
	plain := NodeClaimName("prod", Decision{Revision: 7}, p)
	empty := *p
	empty.Pods = nil
	s0, s1 := empty, empty
	s0.Slot, s1.Slot = "static-0", "static-1"
	a, b := NodeClaimName("prod", Decision{Revision: 7}, &s0), NodeClaimName("prod", Decision{Revision: 7}, &s1)
	if a == b || a == plain || a != NodeClaimName("prod", Decision{Revision: 7}, &s0) {
		t.Fatalf("slot names %s, %s (pod-driven %s): want distinct and repeatable", a, b, plain)
	}
}

func TestLaunchRecordsTheInstance(t *testing.T) {
	cat := catalog.MustAWS()
	fc := fake.New(fake.Options{Catalog: cat, Cluster: "prod", Clock: clocktesting.NewFakeClock(at)})
	l := &Launcher{Cluster: "prod", Provider: fc, Catalog: cat}
	res := l.Launch(context.Background(), Decision{Revision: 7, Time: at}, plan(t, "m5.large"), apisv1.NodeClass{})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	nc := res.NodeClaim
	// m5.large on demand: EKS allocatable 1930m CPU, 29 pods (3 ENIs × (10 − 1) + 2).
	cpu, pods := nc.Status.Allocatable[corev1.ResourceCPU], nc.Status.Allocatable[corev1.ResourcePods]
	if nc.Status.ProviderID != res.Instance.ProviderID || nc.Labels[corev1.LabelInstanceTypeStable] != "m5.large" ||
		nc.Labels[apisv1.LabelCapacityType] != "on-demand" || nc.Labels[apisv1.LabelNodePool] != "default" ||
		cpu.MilliValue() != 1930 || pods.Value() != 29 {
		t.Fatalf("NodeClaim does not record the launch: labels %v, status %+v", nc.Labels, nc.Status)
	}
	if res.Instance.Tags[apisv1.TagCluster] != "prod" || res.Instance.Tags[apisv1.TagNodeClaim] != nc.Name {
		t.Fatalf("instance tags %v must name the cluster and the NodeClaim", res.Instance.Tags)
	}
	// The same decision again launches nothing new: the fleet token returns the same instance.
	again := l.Launch(context.Background(), Decision{Revision: 7, Time: at}, plan(t, "m5.large"), apisv1.NodeClass{})
	if again.Err != nil || again.Instance.ID != res.Instance.ID || fc.Stats().Launches != 1 {
		t.Fatalf("redelivered launch: %v, %s vs %s, %d launches", again.Err, again.Instance.ID, res.Instance.ID, fc.Stats().Launches)
	}
}

func TestCapacityErrorBecomesThreeMinuteMarks(t *testing.T) {
	cat := catalog.MustAWS()
	fc := fake.New(fake.Options{Catalog: cat, Cluster: "prod", Clock: clocktesting.NewFakeClock(at)})
	if err := fc.InjectICE(fake.Pattern{InstanceType: "*", Zone: "*", CapacityType: "*"}, "InsufficientInstanceCapacity"); err != nil {
		t.Fatal(err)
	}
	l := &Launcher{Cluster: "prod", Provider: fc, Catalog: cat}
	res := l.Launch(context.Background(), Decision{Revision: 7, Time: at}, plan(t, "m5.large"), apisv1.NodeClass{})
	var ice *cloud.InsufficientCapacityError
	if !errors.As(res.Err, &ice) || res.NodeClaim != nil {
		t.Fatalf("want an insufficient-capacity error and no NodeClaim, got %v", res.Err)
	}
	// m5.large on demand is offered in the five Nitro zones of the embedded catalog.
	if len(res.Unavailable) != 5 {
		t.Fatalf("marks = %d, want 5", len(res.Unavailable))
	}
	for _, m := range res.Unavailable {
		if !m.Expires.Time.Equal(at.Add(3 * time.Minute)) {
			t.Fatalf("mark %+v must expire 3 minutes after the decision", m)
		}
	}
}

// refusingProvider is a provider that, like Azure's, tries offerings one by one: it reports the
// first offering refused (with a 1-hour TTL, ZonalAllocationFailed's on Azure) and launches the
// rest through the fake cloud.
type refusingProvider struct{ *fake.Cloud }

func (r refusingProvider) Create(ctx context.Context, req cloud.LaunchRequest) (*cloud.Instance, error) {
	first := req.Offerings[0]
	req.Offerings = req.Offerings[1:]
	inst, err := r.Cloud.Create(ctx, req)
	if inst != nil {
		inst.Refused = []cloud.UnavailableOffering{{Offering: first, Code: "ZonalAllocationFailed", TTL: time.Hour}}
	}
	return inst, err
}

// TestRefusalsBeforeASuccessAreMarkedWithTheirTTL: a launch that succeeded after refusals marks
// the refused offerings too, each for the TTL its provider gave (Azure's classes: 10 minutes to
// 23 hours), not the 3-minute default; a mark without a TTL keeps the default.
func TestRefusalsBeforeASuccessAreMarkedWithTheirTTL(t *testing.T) {
	cat := catalog.MustAWS()
	fc := fake.New(fake.Options{Catalog: cat, Cluster: "prod", Clock: clocktesting.NewFakeClock(at)})
	l := &Launcher{Cluster: "prod", Provider: refusingProvider{fc}, Catalog: cat}
	res := l.Launch(context.Background(), Decision{Revision: 7, Time: at}, plan(t, "m5.large"), apisv1.NodeClass{})
	if res.Err != nil || res.NodeClaim == nil {
		t.Fatalf("launch: %v", res.Err)
	}
	if len(res.Unavailable) != 1 || res.Unavailable[0].Reason != "ZonalAllocationFailed" || !res.Unavailable[0].Expires.Time.Equal(at.Add(time.Hour)) {
		t.Fatalf("marks %+v, want the refused offering until an hour after the decision", res.Unavailable)
	}
}

// The launched NodeClaim carries topology.k8s.aws/zone-id of the zone it launched in, from the
// NodeClass's resolved subnets (their AvailabilityZoneId, as Karpenter labels NodeClaims);
// registration copies it onto the Node. Zone IDs are per account, so they come from the
// subnets, never from a table: here made-up ids "id-<zone>".
func TestLaunchLabelsTheZoneID(t *testing.T) {
	cat := catalog.MustAWS()
	fc := fake.New(fake.Options{Catalog: cat, Cluster: "prod", Clock: clocktesting.NewFakeClock(at)})
	l := &Launcher{Cluster: "prod", Provider: fc, Catalog: cat}
	profile := "node-profile"
	class := &apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.EC2NodeClassSpec{InstanceProfile: &profile}}
	for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1f"} {
		class.Status.Subnets = append(class.Status.Subnets, apisv1.Subnet{ID: "subnet-" + z, Zone: z, ZoneID: "id-" + z})
	}
	res := l.Launch(context.Background(), Decision{Revision: 7, Time: at}, plan(t, "m5.large"), apisv1.NodeClassOf(class))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	zone := res.NodeClaim.Labels[corev1.LabelTopologyZone]
	if got := res.NodeClaim.Labels[apisv1.LabelTopologyZoneID]; zone == "" || got != "id-"+zone {
		t.Fatalf("zone %q, zone-id label %q, want id-%s", zone, got, zone)
	}
}

// The launched NodeClaim records the allocatable the NodeClass gives the node, which in-flight
// accounting packs the next decision against before the node registers: under instanceStorePolicy
// RAID0 an i4i.xlarge has its 937 GB instance store as ephemeral storage, 937e9 − 1Gi − 93.7e9 =
// 842226258176 bytes allocatable. It recorded the 20Gi root volume's 17Gi, so a second decision
// saw no room for the pod the node was launched for.
func TestLaunchRecordsTheNodeClassAllocatable(t *testing.T) {
	cat := catalog.MustAWS()
	fc := fake.New(fake.Options{Catalog: cat, Cluster: "prod", Clock: clocktesting.NewFakeClock(at)})
	l := &Launcher{Cluster: "prod", Provider: fc, Catalog: cat}
	profile, raid0 := "node-profile", apisv1.InstanceStorePolicyRAID0
	class := &apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.EC2NodeClassSpec{InstanceProfile: &profile, InstanceStorePolicy: &raid0}}
	res := l.Launch(context.Background(), Decision{Revision: 7, Time: at}, plan(t, "i4i.xlarge"), apisv1.NodeClassOf(class))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	capacity, alloc := res.NodeClaim.Status.Capacity[corev1.ResourceEphemeralStorage], res.NodeClaim.Status.Allocatable[corev1.ResourceEphemeralStorage]
	if capacity.Value() != 937_000_000_000 || alloc.Value() != 842_226_258_176 {
		t.Fatalf("ephemeral-storage capacity %s allocatable %s, want 937G and 842226258176", capacity.String(), alloc.String())
	}
}

// The functions launch through the metrics decorator (cloudmetrics.Decorate). It hid the
// provider's NodeClass rules, so no launched NodeClaim recorded status.imageID and AMI drift
// never found a node to replace: the e2e AMIDriftOnRefresh check caught it.
func TestLaunchThroughTheMetricsDecoratorRecordsTheImage(t *testing.T) {
	cat := catalog.MustAWS()
	fc := fake.New(fake.Options{Catalog: cat, Cluster: "prod", Clock: clocktesting.NewFakeClock(at)})
	l := &Launcher{Cluster: "prod", Provider: cloudmetrics.Decorate(fc, &telemetry.Memory{}, "provisioner"), Catalog: cat}
	profile := "node-profile"
	class := &apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.EC2NodeClassSpec{InstanceProfile: &profile}}
	class.Status.AMIs = []apisv1.AMI{{ID: "ami-0123456789abcdef0", Requirements: []corev1.NodeSelectorRequirement{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}}
	res := l.Launch(context.Background(), Decision{Revision: 7, Time: at}, plan(t, "m5.large"), apisv1.NodeClassOf(class))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if got := res.NodeClaim.Status.ImageID; got != "ami-0123456789abcdef0" {
		t.Fatalf("status.imageID %q, want the amd64 AMI ami-0123456789abcdef0 (m5.large is amd64)", got)
	}
	if res.NodeClaim.Annotations[apisv1.AnnotationEC2NodeClassHash] == "" {
		t.Fatal("no EC2NodeClass hash recorded")
	}
}

// Every NodeClaim carries karpenter.sh/nodeclaim-min-values-relaxed, as Karpenter's scheduler
// writes it: "false" for a plan that kept its minValues, "true" for one relaxed under
// BestEffort, whose requirement then records the lowered minValues. A 3-CPU pod fits m5.xlarge
// and m5.2xlarge (not m5.large's 1930m): 2 types against minValues 3.
func TestLaunchAnnotatesMinValuesRelaxed(t *testing.T) {
	cat := catalog.MustAWS()
	three := 3
	np := &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{
		Spec: apisv1.NodeClaimSpec{NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: "EC2NodeClass", Name: "default"},
			Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
				{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5"}}},
				{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelInstanceSize, Operator: corev1.NodeSelectorOpIn, Values: []string{"large", "xlarge", "2xlarge"}}, MinValues: &three},
				{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
			}}}}}
	for _, c := range []struct {
		cpu, want string
		minValues int
	}{{"1", "false", 3}, {"3", "true", 2}} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(c.cpu)}}}}}}
		p, err := provisioning.Solve(provisioning.Input{Pods: []*corev1.Pod{pod}, NodePools: []*apisv1.NodePool{np}, Catalog: cat,
			Policies: provisioning.Policies{MinValues: provisioning.MinValuesBestEffort}})
		if err != nil || len(p.NodeClaims) != 1 {
			t.Fatalf("%s CPU: plan %v, %d claims", c.cpu, err, len(p.NodeClaims))
		}
		fc := fake.New(fake.Options{Catalog: cat, Cluster: "prod", Clock: clocktesting.NewFakeClock(at)})
		l := &Launcher{Cluster: "prod", Provider: fc, Catalog: cat}
		res := l.Launch(context.Background(), Decision{Revision: 7, Time: at}, p.NodeClaims[0], apisv1.NodeClass{})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		if got := res.NodeClaim.Annotations[apisv1.AnnotationNodeClaimMinValuesRelaxed]; got != c.want {
			t.Errorf("%s CPU: annotation %q, want %q", c.cpu, got, c.want)
		}
		for _, r := range res.NodeClaim.Spec.Requirements {
			if r.Key == apisv1.LabelInstanceSize && (r.MinValues == nil || *r.MinValues != c.minValues) {
				t.Errorf("%s CPU: instance-size minValues %v, want %d", c.cpu, r.MinValues, c.minValues)
			}
		}
	}
}

// A claim planned from NodeOverlays carries Karpenter's overlay annotations, and its status
// records the added extended resources, so the next decision counts them while it is in flight.
func TestLaunchRecordsOverlays(t *testing.T) {
	cat := catalog.MustAWS()
	p := plan(t, "m5.large")
	o := &apisv1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: "devices"}, Spec: apisv1.NodeOverlaySpec{
		Requirements: []corev1.NodeSelectorRequirement{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}}},
		Capacity:     corev1.ResourceList{"example.com/device": resource.MustParse("4")}}}
	adj := "-10%"
	o.Spec.PriceAdjustment = &adj
	store := overlay.Resolve([]*apisv1.NodeOverlay{o}, []*apisv1.NodePool{p.NodePool}, cat)
	for i := range p.Offerings {
		p.Offerings[i].InstanceType = store.Apply("default", p.Offerings[i].InstanceType)
	}
	fc := fake.New(fake.Options{Catalog: cat, Cluster: "prod", Clock: clocktesting.NewFakeClock(at)})
	l := &Launcher{Cluster: "prod", Provider: fc, Catalog: cat}
	res := l.Launch(context.Background(), Decision{Revision: 7, Time: at}, p, apisv1.NodeClass{})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	nc := res.NodeClaim
	if nc.Annotations[apisv1.AnnotationPriceOverlayApplied] != "true" || nc.Annotations[apisv1.AnnotationCapacityOverlayApplied] != "true" {
		t.Errorf("annotations %v, want both overlay marks", nc.Annotations)
	}
	c, a := nc.Status.Capacity["example.com/device"], nc.Status.Allocatable["example.com/device"]
	if c.Value() != 4 || a.Value() != 4 {
		t.Errorf("status capacity %v allocatable %v, want 4 example.com/device each", nc.Status.Capacity, nc.Status.Allocatable)
	}
}
