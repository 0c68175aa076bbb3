package lifecycle_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/lifecycle"
	"github.com/dovetail-dev/dovetail/localdev/scenarios"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	dvaws "github.com/dovetail-dev/dovetail/shared/cloud/aws"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/ec2api"
)

// The NodeClass status path: the real AWS provider (aws-sdk-go-v2 EC2, SSM and IAM clients)
// against the fake cloud's EC2/SSM/IAM face on loopback resolves the World's EC2NodeClass; the
// World applies the commands as the agent does.
func awsHandler(t *testing.T, w *scenarios.World) (*lifecycle.Handler, *ec2api.Server) {
	t.Helper()
	srv, err := ec2api.New(ec2api.Options{Cloud: w.Cloud, Roles: []string{"KarpenterNodeRole-dev"}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	cfg, err := dvaws.NewConfig(context.Background(), dvaws.ConfigOptions{Endpoint: hs.URL, Region: "us-east-1", MaxBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e, s := dvaws.Clients(cfg)
	p, err := dvaws.New(dvaws.Options{Cluster: scenarios.Cluster, ClusterEndpoint: "https://example.invalid", ClusterCA: "Y2E=",
		KubernetesVersion: "1.37", Catalog: w.Cloud.Catalog(), EC2: e, SSM: s, IAM: dvaws.IAMClient(cfg), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	return &lifecycle.Handler{Cluster: scenarios.Cluster, Provider: p, Publisher: w, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		RefreshInterval: time.Hour}, srv
}

func TestNodeClassStatusResolvedWrittenAndRefreshed(t *testing.T) {
	w := scenarios.NewWorld(scenarios.Start, 30*time.Second, nil)
	class := &apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "uid-default", Generation: 1}, Spec: apisv1.EC2NodeClassSpec{
		Role:                       "KarpenterNodeRole-dev",
		AMISelectorTerms:           []apisv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		SubnetSelectorTerms:        []apisv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": scenarios.Cluster}}},
		SecurityGroupSelectorTerms: []apisv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": scenarios.Cluster}}},
	}}
	w.AddPools(nil, []apisv1.NodeClass{apisv1.NodeClassOf(class)})
	h, srv := awsHandler(t, w)
	ctx := context.Background()

	out, err := h.Decide(ctx, w.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if len(out.NodeClassStatuses) != 1 {
		t.Fatalf("%d status writes, want 1", len(out.NodeClassStatuses))
	}
	got := w.Snapshot().NodeClasses[0].EC2
	if !meta.IsStatusConditionTrue(got.Status.Conditions, apisv1.ConditionReady) || got.Status.InstanceProfile == "" ||
		len(got.Status.Subnets) != 6 || len(got.Status.AMIs) != 5 || len(got.Finalizers) != 1 || got.Finalizers[0] != events.FinalizerNodeClassTermination {
		t.Fatalf("class after the first pass: status %+v finalizers %v", got.Status, got.Finalizers)
	}
	if roles, _, ok := srv.InstanceProfile(got.Status.InstanceProfile); !ok || len(roles) != 1 || roles[0] != "KarpenterNodeRole-dev" {
		t.Fatalf("instance profile %s: exists %v roles %v", got.Status.InstanceProfile, ok, roles)
	}

	// The next snapshot, inside the refresh interval and with the status current: no cloud call.
	before := len(srv.RequestsOf("DescribeSubnets"))
	if out, err = h.Decide(ctx, w.Snapshot()); err != nil || len(out.NodeClassStatuses) != 0 || len(srv.RequestsOf("DescribeSubnets")) != before {
		t.Fatalf("second pass: %d writes, %d DescribeSubnets calls, err %v; want none", len(out.NodeClassStatuses), len(srv.RequestsOf("DescribeSubnets"))-before, err)
	}

	// A new AMI behind the alias: the next pass after the refresh interval writes it, and drift
	// then reads the new image from the status.
	img := srv.AddImage(ec2types.Image{Name: aws.String("amazon-eks-node-al2023-x86_64-standard-1.37-v20261201"), Architecture: ec2types.ArchitectureValuesX8664,
		CreationDate: aws.String("2026-12-01T00:00:00.000Z"), OwnerId: aws.String(ec2api.AmazonImageAccount), ImageOwnerAlias: aws.String("amazon")}) // a new EKS release
	srv.PutParameter("/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/standard/recommended/image_id", aws.ToString(img.ImageId))
	h.RefreshInterval = time.Nanosecond
	if out, err = h.Decide(ctx, w.Snapshot()); err != nil || len(out.NodeClassStatuses) != 1 {
		t.Fatalf("refresh: %d writes, err %v; want 1", len(out.NodeClassStatuses), err)
	}
	found := false
	for _, a := range w.Snapshot().NodeClasses[0].EC2.Status.AMIs {
		found = found || a.ID == aws.ToString(img.ImageId)
	}
	if !found {
		t.Errorf("status AMIs %+v lack the new image %s", w.Snapshot().NodeClasses[0].EC2.Status.AMIs, aws.ToString(img.ImageId))
	}

	// Deleting the class (no NodeClaim uses it) deletes the instance profile and the finalizer.
	w.DeleteNodeClass("default")
	if out, err = h.Decide(ctx, w.Snapshot()); err != nil || len(out.Released) != 1 {
		t.Fatalf("release: %+v err %v", out.Released, err)
	}
	if names := srv.InstanceProfileNames(); len(names) != 0 {
		t.Errorf("instance profiles left: %v", names)
	}
	if cs := w.Snapshot().NodeClasses; len(cs) != 0 {
		t.Errorf("classes left: %d (finalizer %v)", len(cs), cs[0].Meta().Finalizers)
	}
}
