package aws_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	dvaws "github.com/dovetail-dev/dovetail/shared/cloud/aws"
)

func resolve(t *testing.T, e *env, nc *apisv1.EC2NodeClass) *apisv1.EC2NodeClass {
	t.Helper()
	got, err := e.p.ResolveNodeClass(context.Background(), apisv1.NodeClassOf(nc))
	if err != nil {
		t.Fatal(err)
	}
	return got.EC2
}

func condition(t *testing.T, nc *apisv1.EC2NodeClass, typ string) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(nc.Status.Conditions, typ)
	if c == nil {
		t.Fatalf("no %s condition in %+v", typ, nc.Status.Conditions)
	}
	return *c
}

func TestResolveNodeClassWritesStatusAndCreatesTheInstanceProfile(t *testing.T) {
	e := setup(t)
	nc := nodeClass("al2023@latest")
	nc.Spec.InstanceProfile, nc.Spec.Role = nil, nodeRole
	nc.UID = types.UID("5f0e6c1a-0000-4000-8000-000000000001")
	got := resolve(t, e, nc)

	// Six us-east-1 zones in the catalog, one fake subnet each; one security group.
	if len(got.Status.Subnets) != 6 || len(got.Status.SecurityGroups) != 1 {
		t.Errorf("subnets %+v security groups %+v, want 6 and 1", got.Status.Subnets, got.Status.SecurityGroups)
	}
	for _, s := range got.Status.Subnets {
		if !strings.HasPrefix(s.ID, "subnet-") || !strings.HasPrefix(s.Zone, "us-east-1") || s.ZoneID == "" {
			t.Errorf("subnet %+v", s)
		}
	}
	// AL2023 has five images: standard, nvidia and neuron for amd64; standard and nvidia for
	// arm64, each with its variant's requirements.
	want := map[string]string{
		"amd64/standard": "amazon-eks-node-al2023-x86_64-standard-1.37-v20261101",
		"amd64/nvidia":   "amazon-eks-node-al2023-x86_64-nvidia-1.37-v20261101",
		"amd64/neuron":   "amazon-eks-node-al2023-x86_64-neuron-1.37-v20261101",
		"arm64/standard": "amazon-eks-node-al2023-arm64-standard-1.37-v20261101",
		"arm64/nvidia":   "amazon-eks-node-al2023-arm64-nvidia-1.37-v20261101",
	}
	seen := map[string]string{}
	for _, a := range got.Status.AMIs {
		variant := "standard"
		for _, r := range a.Requirements[1:] {
			switch {
			case r.Key == apisv1.LabelInstanceGPUCount && r.Operator == "Exists":
				variant = "nvidia"
			case r.Key == "karpenter.k8s.aws/instance-accelerator-count" && r.Operator == "Exists":
				variant = "neuron"
			}
		}
		seen[a.Requirements[0].Values[0]+"/"+variant] = a.Name
	}
	if len(seen) != len(want) {
		t.Errorf("amis %+v, want %v", got.Status.AMIs, want)
	}
	for k, v := range want {
		if seen[k] != v {
			t.Errorf("ami %s: %q, want %q", k, seen[k], v)
		}
	}
	wantProfile := dvaws.InstanceProfileName(cluster, "us-east-1", string(nc.UID), nodeRole)
	if got.Status.InstanceProfile != wantProfile || !strings.HasPrefix(wantProfile, cluster+"_") || len(wantProfile) != len(cluster)+1+32 {
		t.Errorf("instance profile %q, want %q", got.Status.InstanceProfile, wantProfile)
	}
	roles, tags, ok := e.srv.InstanceProfile(wantProfile)
	if !ok || len(roles) != 1 || roles[0] != nodeRole {
		t.Fatalf("profile %s: exists %v roles %v, want the node role", wantProfile, ok, roles)
	}
	if tags[apisv1.TagCluster] != cluster || tags[dvaws.TagEC2NodeClass] != "default" || tags[dvaws.TagRegion] != "us-east-1" || tags["team"] != "platform" {
		t.Errorf("profile tags %v", tags)
	}
	for _, typ := range []string{apisv1.ConditionSubnetsReady, apisv1.ConditionSecurityGroupsReady, apisv1.ConditionAMIsReady,
		apisv1.ConditionInstanceProfileReady, apisv1.ConditionValidationSucceeded, apisv1.ConditionReady} {
		if c := condition(t, got, typ); c.Status != metav1.ConditionTrue {
			t.Errorf("%s: %+v, want True", typ, c)
		}
	}
	// A second pass (a redelivered snapshot, a cold function) adopts the profile.
	again := resolve(t, e, nc)
	if again.Status.InstanceProfile != wantProfile || len(e.srv.RequestsOf("CreateInstanceProfile")) != 1 {
		t.Errorf("second pass: profile %q, %d CreateInstanceProfile calls, want 1", again.Status.InstanceProfile, len(e.srv.RequestsOf("CreateInstanceProfile")))
	}

	// Launches from the resolved status use the profile and pick the image per type: the
	// standard image for m5.large, nvidia for g5.xlarge, neuron for inf2.xlarge.
	for _, c := range []struct{ typ, image string }{
		{"m5.large", want["amd64/standard"]}, {"g5.xlarge", want["amd64/nvidia"]}, {"inf2.xlarge", want["amd64/neuron"]},
	} {
		before := len(e.srv.RequestsOf("DescribeSubnets"))
		if _, err := e.p.Create(context.Background(), request("tok-"+c.typ, got, e.offering(t, c.typ, "us-east-1a", "on-demand"))); err != nil {
			t.Fatal(err)
		}
		if n := len(e.srv.RequestsOf("DescribeSubnets")); n != before {
			t.Errorf("%s: a launch from a Ready status described subnets again", c.typ)
		}
		fleets := fleetInputs(e)
		d := template(t, e, fleets[len(fleets)-1])
		if d.IamInstanceProfile == nil || aws.ToString(d.IamInstanceProfile.Name) != wantProfile {
			t.Errorf("%s: launch template instance profile %+v, want %s", c.typ, d.IamInstanceProfile, wantProfile)
		}
		if img := imageName(t, e, aws.ToString(d.ImageId)); img != c.image {
			t.Errorf("%s: image %s, want %s", c.typ, img, c.image)
		}
	}

	// Deleting the NodeClass deletes its profile (role removed first).
	if err := e.p.ReleaseNodeClass(context.Background(), apisv1.NodeClassOf(got)); err != nil {
		t.Fatal(err)
	}
	if names := e.srv.InstanceProfileNames(); len(names) != 1 || names[0] != nodeProfile {
		t.Errorf("profiles left after release: %v, want only the user's own %s", names, nodeProfile)
	}
	if err := e.p.ReleaseNodeClass(context.Background(), apisv1.NodeClassOf(got)); err != nil {
		t.Errorf("second release: %v, want success (nothing left)", err)
	}
}

func imageName(t *testing.T, e *env, id string) string {
	t.Helper()
	for _, img := range e.srv.Images() {
		if aws.ToString(img.ImageId) == id {
			return aws.ToString(img.Name)
		}
	}
	t.Fatalf("no image %s", id)
	return ""
}

func TestResolveNodeClassReportsWhatMatchedNothing(t *testing.T) {
	e := setup(t)
	nc := nodeClass("al2023@latest")
	nc.Generation = 3
	nc.Spec.SubnetSelectorTerms = []apisv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "another-cluster"}}}
	nc.Spec.InstanceProfile, nc.Spec.Role = nil, "NoSuchRole"
	got := resolve(t, e, nc)
	sub := condition(t, got, apisv1.ConditionSubnetsReady)
	if sub.Status != metav1.ConditionFalse || sub.Reason != apisv1.ReasonSubnetsNotFound || !strings.Contains(sub.Message, "subnetSelectorTerms") || sub.ObservedGeneration != 3 {
		t.Errorf("SubnetsReady %+v", sub)
	}
	prof := condition(t, got, apisv1.ConditionInstanceProfileReady)
	if prof.Status != metav1.ConditionFalse || !strings.Contains(prof.Message, "role NoSuchRole does not exist") {
		t.Errorf("InstanceProfileReady %+v", prof)
	}
	ready := condition(t, got, apisv1.ConditionReady)
	if ready.Status != metav1.ConditionFalse || ready.Reason != apisv1.ReasonUnhealthyDependents ||
		ready.Message != "SubnetsReady=False, InstanceProfileReady=False" {
		t.Errorf("Ready %+v", ready)
	}
	why := apisv1.NodeClassOf(got).NotReady()
	if !strings.Contains(why, "EC2NodeClass default is not ready") || !strings.Contains(why, "SubnetsReady: spec.subnetSelectorTerms (1 terms) matched no subnets") {
		t.Errorf("NotReady %q", why)
	}
	// A launch is refused with the same reason, before any fleet call.
	_, err := e.p.Create(context.Background(), request("tok-none", nc, e.offering(t, "m5.large", "us-east-1a", "on-demand")))
	if err == nil || !strings.Contains(err.Error(), "subnetSelectorTerms (1 terms) matched no subnets") {
		t.Errorf("Create: %v, want a refusal naming the subnet selector", err)
	}
	// A spec.role class whose profile the lifecycle function has not written yet: refused, and
	// no profile is created by the launch.
	roleOnly := nodeClass("al2023@latest")
	roleOnly.Spec.InstanceProfile, roleOnly.Spec.Role = nil, nodeRole
	creates := len(e.srv.RequestsOf("CreateInstanceProfile"))
	_, err = e.p.Create(context.Background(), request("tok-role", roleOnly, e.offering(t, "m5.large", "us-east-1a", "on-demand")))
	if n := len(e.srv.RequestsOf("CreateInstanceProfile")) - creates; err == nil || !strings.Contains(err.Error(), "no instance profile yet") || n != 0 {
		t.Errorf("Create with spec.role and no status: %v (%d CreateInstanceProfile calls), want a refusal and none", err, n)
	}
	if n := e.counts.get("CreateFleet"); n != 0 {
		t.Errorf("%d CreateFleet calls", n)
	}

	// spec.instanceProfile naming a profile that does not exist.
	named := nodeClass("al2023@latest")
	named.Spec.InstanceProfile = aws.String("NoSuchProfile")
	c := condition(t, resolve(t, e, named), apisv1.ConditionInstanceProfileReady)
	if c.Status != metav1.ConditionFalse || c.Reason != apisv1.ReasonInstanceProfileNotFound || !strings.Contains(c.Message, "NoSuchProfile does not exist") {
		t.Errorf("InstanceProfileReady %+v", c)
	}
	// Connection tracking is refused by ValidationSucceeded; capacity reservations, Windows
	// families and placement groups no longer are (a group that does not exist is
	// PlacementGroupReady=False instead).
	win := nodeClass("windows2022@latest")
	win.Spec.CapacityReservationSelectorTerms = []apisv1.CapacityReservationSelectorTerm{{ID: "cr-0123456789abcdef0"}}
	win.Spec.PlacementGroupSelector = &apisv1.PlacementGroupSelector{Name: "training"}
	udp := int32(60)
	win.Spec.ConnectionTracking = &apisv1.ConnectionTracking{UDPTimeout: &udp}
	resolved := resolve(t, e, win)
	v := condition(t, resolved, apisv1.ConditionValidationSucceeded)
	if v.Status != metav1.ConditionFalse || v.Reason != apisv1.ReasonNotSupported || strings.Contains(v.Message, "capacityReservationSelectorTerms") ||
		strings.Contains(v.Message, "Windows") || strings.Contains(v.Message, "placementGroupSelector") || !strings.Contains(v.Message, "connectionTracking") {
		t.Errorf("ValidationSucceeded %+v", v)
	}
	if pg := condition(t, resolved, apisv1.ConditionPlacementGroupReady); pg.Status != metav1.ConditionFalse || pg.Reason != apisv1.ReasonPlacementGroupNotFound {
		t.Errorf("PlacementGroupReady %+v", pg)
	}
}

// Release reads the tags the way IAM serves them: ListInstanceProfiles returns none (IAM API
// reference), so ListInstanceProfileTags decides. It deletes every profile at the NodeClass's
// path tagged for this cluster, over more than one page (IAM lists 100 by default), and leaves
// another cluster's profile at the same path, a profile one level deeper, one under a cluster
// whose name extends this one's, and the user's own.
func TestReleaseNodeClassDeletesOnlyTheClustersProfiles(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	nc := nodeClass("al2023@latest")
	nc.Spec.InstanceProfile, nc.Spec.Role = nil, nodeRole
	nc.UID = types.UID("5f0e6c1a-0000-4000-8000-000000000002")
	got := resolve(t, e, nc)
	path := dvaws.InstanceProfilePath("us-east-1", cluster, string(nc.UID))
	create := func(name, path, owner string) {
		t.Helper()
		_, err := e.iam.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name), Path: aws.String(path),
			Tags: []iamtypes.Tag{{Key: aws.String(apisv1.TagCluster), Value: aws.String(owner)}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 120 {
		create(fmt.Sprintf("%s_old%03d", cluster, i), path, cluster)
	}
	create("other-cluster-profile", path, "other")
	create("deeper", path+"sub/", cluster)
	create("longer-cluster", dvaws.InstanceProfilePath("us-east-1", cluster+"-2", string(nc.UID)), cluster)
	if err := e.p.ReleaseNodeClass(ctx, apisv1.NodeClassOf(got)); err != nil {
		t.Fatal(err)
	}
	want := []string{nodeProfile, "deeper", "longer-cluster", "other-cluster-profile"}
	sort.Strings(want)
	if names := e.srv.InstanceProfileNames(); fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("profiles left %v, want %v", names, want)
	}
	if n := len(e.srv.RequestsOf("DeleteInstanceProfile")); n != 121 {
		t.Errorf("%d DeleteInstanceProfile calls, want 121 (the resolved profile and 120 more)", n)
	}
}
