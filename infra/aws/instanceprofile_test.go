package awsinfra

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/smithy-go"
	"k8s.io/apimachinery/pkg/types"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	dvaws "github.com/dovetail-dev/dovetail/shared/cloud/aws"
	"github.com/dovetail-dev/dovetail/shared/cloud/aws/iampolicy"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/ec2api"
)

const (
	lifecycleKey = "AKIDLIFECYCLEEXAMPLE"
	provisionIAM = "AKIDPROVISIONIAMEXAM"
	adminKey     = "AKIDADMINEXAMPLE0000"
)

// The stack's lifecycle role, enforced by the fake's IAM face: it creates the spec.role
// instance profile under the cluster's path, adds the node role (iam:PassRole to EC2), and at
// release lists the profiles, reads their tags with ListInstanceProfileTags (IAM's List returns
// none) and deletes the cluster's; another cluster's profile under the same path survives. The
// provision role may not create a profile: IAM's AccessDenied.
func TestLifecycleRoleResolvesAndReleasesInstanceProfiles(t *testing.T) {
	params := governance{}.sam()
	params["ClusterName"], params["EksClusterName"] = launchCluster, launchCluster
	params["NodeRoleArn"] = "arn:aws:iam::" + ec2api.DefaultAccountID + ":role/" + launchRole
	roles, err := Roles(Stack{Partition: "aws", Region: "us-east-1", Account: ec2api.DefaultAccountID, Params: params})
	if err != nil {
		t.Fatal(err)
	}
	identity := func(short string) ec2api.Identity {
		r := roles["dovetail-"+launchCluster+"-"+short]
		return ec2api.Identity{RoleARN: "arn:aws:iam::" + ec2api.DefaultAccountID + ":role/" + r.Name, Policies: r.Policies}
	}
	admin := ec2api.Identity{RoleARN: "arn:aws:iam::" + ec2api.DefaultAccountID + ":role/admin",
		Policies: []iampolicy.Policy{{Statement: []iampolicy.Statement{{Effect: "Allow", Action: []string{"*"}, Resource: []string{"*"}}}}}}
	cat := catalog.MustAWS()
	srv, err := ec2api.New(ec2api.Options{Cloud: fake.New(fake.Options{Catalog: cat, Cluster: launchCluster}), KubernetesVersion: "1.37",
		Roles: []string{launchRole}, Identities: map[string]ec2api.Identity{lifecycleKey: identity("lifecycle"), provisionIAM: identity("provision"), adminKey: admin}})
	if err != nil {
		t.Fatal(err)
	}
	url, stop, err := srv.ListenLoopback()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	provider := func(key string) (*dvaws.Provider, *iam.Client) {
		cfg, err := dvaws.NewConfig(context.Background(), dvaws.ConfigOptions{Endpoint: url, Region: "us-east-1", MaxAttempts: 1,
			Credentials: credentials.NewStaticCredentialsProvider(key, "secret", "")})
		if err != nil {
			t.Fatal(err)
		}
		e, s := dvaws.Clients(cfg)
		ic := dvaws.IAMClient(cfg)
		p, err := dvaws.New(dvaws.Options{Cluster: launchCluster, ClusterEndpoint: "https://example.eks", ClusterCA: "Q0E=", KubernetesVersion: "1.37",
			Catalog: cat, EC2: e, SSM: s, IAM: ic, Region: "us-east-1"})
		if err != nil {
			t.Fatal(err)
		}
		return p, ic
	}
	ctx := context.Background()
	nc := governedClass(nil)
	nc.Spec.InstanceProfile, nc.Spec.Role = nil, launchRole
	nc.UID = types.UID("5f0e6c1a-0000-4000-8000-0000000000aa")

	prov, _ := provider(provisionIAM)
	got, err := prov.ResolveNodeClass(ctx, apisv1.NodeClassOf(nc))
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != ec2api.CodeAccessDenied || !strings.Contains(ae.ErrorMessage(), "iam:GetInstanceProfile") {
		t.Errorf("the provision role resolving spec.role: %v (not ready: %q), want IAM's AccessDenied for iam:GetInstanceProfile", err, got.NotReady())
	}

	life, _ := provider(lifecycleKey)
	got, err = life.ResolveNodeClass(ctx, apisv1.NodeClassOf(nc))
	if err != nil {
		t.Fatal(err)
	}
	if msg := got.NotReady(); msg != "" {
		t.Fatal(msg)
	}
	profile := dvaws.InstanceProfileName(launchCluster, "us-east-1", string(nc.UID), launchRole)
	if r, tags, ok := srv.InstanceProfile(profile); !ok || len(r) != 1 || tags[apisv1.TagCluster] != launchCluster {
		t.Fatalf("profile %s: %v %v %v", profile, ok, r, tags)
	}
	_, ic := provider(adminKey)
	path := dvaws.InstanceProfilePath("us-east-1", launchCluster, string(nc.UID))
	if _, err := ic.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("other-cluster"), Path: aws.String(path),
		Tags: []iamtypes.Tag{{Key: aws.String(apisv1.TagCluster), Value: aws.String("other")}}}); err != nil {
		t.Fatal(err)
	}
	if err := life.ReleaseNodeClass(ctx, got); err != nil {
		t.Fatal(err)
	}
	if names := fmt.Sprint(srv.InstanceProfileNames()); names != "[other-cluster]" {
		t.Errorf("profiles left %s, want the other cluster's only", names)
	}
	if _, _, ok := srv.InstanceProfile(profile); ok {
		t.Errorf("the cluster's profile %s survived its release", profile)
	}
}
