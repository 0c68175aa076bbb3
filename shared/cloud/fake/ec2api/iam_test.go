package ec2api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/smithy-go"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/ec2api"
)

func iamClient(t *testing.T) *iam.Client {
	t.Helper()
	srv, err := ec2api.New(ec2api.Options{Cloud: fake.New(fake.Options{Catalog: catalog.MustAWS(), Cluster: "c1"}), Roles: []string{"node"}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return iam.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(hs.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "test-secret", "")})
}

// ListInstanceProfiles returns no tags; GetInstanceProfile and ListInstanceProfileTags do. IAM
// API reference, ListInstanceProfiles: "IAM resource-listing operations return a subset of the
// available attributes for the resource. For example, this operation does not return tags";
// ListInstanceProfileTags: "The returned list of tags is sorted by tag key."
func TestIAMListReturnsNoTags(t *testing.T) {
	c := iamClient(t)
	ctx := context.Background()
	if _, err := c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("p"), Path: aws.String("/a/"),
		Tags: []iamtypes.Tag{{Key: aws.String("z"), Value: aws.String("1")}, {Key: aws.String("a"), Value: aws.String("2")}}}); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{})
	if err != nil || len(list.InstanceProfiles) != 1 {
		t.Fatalf("list %+v %v, want one profile", list, err)
	}
	if got := list.InstanceProfiles[0]; aws.ToString(got.Path) != "/a/" || len(got.Tags) != 0 {
		t.Errorf("listed profile path %q tags %+v, want /a/ and no tags", aws.ToString(got.Path), got.Tags)
	}
	get, err := c.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("p")})
	if err != nil || len(get.InstanceProfile.Tags) != 2 {
		t.Errorf("GetInstanceProfile tags %+v %v, want both", get, err)
	}
	tags, err := c.ListInstanceProfileTags(ctx, &iam.ListInstanceProfileTagsInput{InstanceProfileName: aws.String("p")})
	if err != nil || len(tags.Tags) != 2 || aws.ToString(tags.Tags[0].Key) != "a" || aws.ToString(tags.Tags[1].Value) != "1" || tags.IsTruncated {
		t.Errorf("ListInstanceProfileTags %+v %v, want a=2 then z=1, not truncated", tags, err)
	}
	_, err = c.ListInstanceProfileTags(ctx, &iam.ListInstanceProfileTagsInput{InstanceProfileName: aws.String("gone")})
	var nf *iamtypes.NoSuchEntityException
	if !errors.As(err, &nf) {
		t.Errorf("tags of a missing profile: %v, want NoSuchEntity (IAM API reference, ListInstanceProfileTags errors)", err)
	}
}

// ListInstanceProfiles and ListInstanceProfileTags page by MaxItems (1 to 1000, 100 when
// absent) and Marker, IsTruncated true while more remain (IAM API reference, both actions).
func TestIAMListsPaginate(t *testing.T) {
	c := iamClient(t)
	ctx := context.Background()
	var tags []iamtypes.Tag
	for i := range 5 {
		tags = append(tags, iamtypes.Tag{Key: aws.String(fmt.Sprintf("k%d", i)), Value: aws.String("v")})
	}
	for i := range 103 {
		in := &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(fmt.Sprintf("p%03d", i)), Path: aws.String("/x/")}
		if i == 0 {
			in.Tags = tags
		}
		if _, err := c.CreateInstanceProfile(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	first, err := c.ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{})
	if err != nil || len(first.InstanceProfiles) != 100 || !first.IsTruncated || aws.ToString(first.Marker) == "" {
		t.Fatalf("first page: %d profiles truncated %v %v, want the default 100 and a marker", len(first.InstanceProfiles), first.IsTruncated, err)
	}
	var names []string
	pg := iam.NewListInstanceProfilesPaginator(c, &iam.ListInstanceProfilesInput{PathPrefix: aws.String("/x/"), MaxItems: aws.Int32(40)})
	for pg.HasMorePages() {
		out, err := pg.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range out.InstanceProfiles {
			names = append(names, aws.ToString(p.InstanceProfileName))
		}
	}
	if len(names) != 103 || names[0] != "p000" || names[102] != "p102" {
		t.Errorf("paged %d names %v..., want p000..p102", len(names), names[:min(3, len(names))])
	}
	// The profile a marker points at deleted before the next page: the page goes on after it.
	page, err := c.ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{MaxItems: aws.Int32(50)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: page.Marker}); err != nil {
		t.Fatal(err)
	}
	next, err := c.ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{MaxItems: aws.Int32(50), Marker: page.Marker})
	if err != nil || len(next.InstanceProfiles) != 50 || aws.ToString(next.InstanceProfiles[0].InstanceProfileName) != "p051" {
		t.Errorf("page after a deleted marker: %v, want p051.. (p050 deleted)", err)
	}
	var keys []string
	tp := iam.NewListInstanceProfileTagsPaginator(c, &iam.ListInstanceProfileTagsInput{InstanceProfileName: aws.String("p000"), MaxItems: aws.Int32(2)})
	for tp.HasMorePages() {
		out, err := tp.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range out.Tags {
			keys = append(keys, aws.ToString(tg.Key))
		}
	}
	if fmt.Sprint(keys) != "[k0 k1 k2 k3 k4]" {
		t.Errorf("paged tag keys %v, want k0..k4", keys)
	}
	_, err = c.ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{MaxItems: aws.Int32(1001)})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != ec2api.CodeValidationError {
		t.Errorf("MaxItems 1001: %v, want ValidationError (MaxItems 1 to 1000)", err)
	}
}
