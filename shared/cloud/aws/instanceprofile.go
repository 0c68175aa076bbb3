package aws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// IAMAPI is the part of the IAM client the provider calls for spec.role (satisfied by *iam.Client).
type IAMAPI interface {
	GetInstanceProfile(context.Context, *iam.GetInstanceProfileInput, ...func(*iam.Options)) (*iam.GetInstanceProfileOutput, error)
	CreateInstanceProfile(context.Context, *iam.CreateInstanceProfileInput, ...func(*iam.Options)) (*iam.CreateInstanceProfileOutput, error)
	AddRoleToInstanceProfile(context.Context, *iam.AddRoleToInstanceProfileInput, ...func(*iam.Options)) (*iam.AddRoleToInstanceProfileOutput, error)
	RemoveRoleFromInstanceProfile(context.Context, *iam.RemoveRoleFromInstanceProfileInput, ...func(*iam.Options)) (*iam.RemoveRoleFromInstanceProfileOutput, error)
	DeleteInstanceProfile(context.Context, *iam.DeleteInstanceProfileInput, ...func(*iam.Options)) (*iam.DeleteInstanceProfileOutput, error)
	ListInstanceProfiles(context.Context, *iam.ListInstanceProfilesInput, ...func(*iam.Options)) (*iam.ListInstanceProfilesOutput, error)
	ListInstanceProfileTags(context.Context, *iam.ListInstanceProfileTagsInput, ...func(*iam.Options)) (*iam.ListInstanceProfileTagsOutput, error)
}

// Tags on the instance profiles Dovetail creates for spec.role (Karpenter tags its own with the
// NodeClass and the region the same way); the IAM policies scope every profile call to
// TagCluster = the cluster.
const (
	TagEC2NodeClass = "karpenter.k8s.aws/ec2nodeclass"
	TagRegion       = "topology.kubernetes.io/region"
)

// InstanceProfilePath is the IAM path of the instance profiles Dovetail creates for one
// NodeClass: /dovetail/<region>/<cluster>/<nodeclass uid>/. Deleting the NodeClass deletes every
// profile under it, so a role change (a new profile) leaves nothing behind and no state is kept.
func InstanceProfilePath(region, cluster, uid string) string {
	return "/dovetail/" + region + "/" + cluster + "/" + uid + "/"
}

// InstanceProfileName is the profile Dovetail creates for a NodeClass's spec.role:
// "<cluster>_" and 32 hex digits of SHA-256(region, NodeClass uid, role), within IAM's 128
// characters. It derives from the inputs, so a retried or duplicated resolution adopts the
// profile the first one created, and a new role gets a new profile (instances of the old one
// keep theirs until the NodeClass is deleted).
func InstanceProfileName(cluster, region, uid, role string) string {
	sum := sha256.Sum256([]byte(region + "\x00" + uid + "\x00" + role))
	name := cluster + "_" + hex.EncodeToString(sum[:16])
	if len(name) > 128 {
		name = name[len(name)-128:]
	}
	return name
}

// roleName turns spec.role (a role name or its ARN, arn:aws:iam::123456789012:role/path/name)
// into the role name IAM's AddRoleToInstanceProfile takes.
func roleName(role string) string {
	if strings.HasPrefix(role, "arn:") {
		if i := strings.LastIndex(role, "/"); i >= 0 {
			return role[i+1:]
		}
	}
	return role
}

func uidOf(nc *apisv1.EC2NodeClass) string {
	if nc.UID != "" {
		return string(nc.UID)
	}
	return nc.Name // a manifest not yet applied has no uid
}

// instanceProfile resolves the NodeClass's instance profile: spec.instanceProfile must exist and
// hold a role (a profile without one boots nodes that cannot join); spec.role gets a profile
// created (or adopted) under InstanceProfilePath, tagged for the cluster, with the role added.
// The problem is what the user must fix; err a failed call.
func (p *Provider) instanceProfile(ctx context.Context, nc *apisv1.EC2NodeClass) (string, *problem, error) {
	if name := aws.ToString(nc.Spec.InstanceProfile); name != "" {
		if p.o.IAM == nil {
			return name, nil, nil // nothing to check it with: the launch will tell
		}
		prof, err := p.getProfile(ctx, name)
		if err != nil {
			return "", nil, err
		}
		switch {
		case prof == nil:
			return "", &problem{apisv1.ReasonInstanceProfileNotFound, fmt.Sprintf("spec.instanceProfile: instance profile %s does not exist", name)}, nil
		case len(prof.Roles) == 0:
			return "", &problem{apisv1.ReasonInstanceProfileNotFound, fmt.Sprintf("spec.instanceProfile: instance profile %s has no role; nodes would have no credentials to join", name)}, nil
		}
		return name, nil, nil
	}
	if nc.Spec.Role == "" {
		return "", &problem{apisv1.ReasonInstanceProfileNotFound, "spec.role and spec.instanceProfile are both empty: nodes need an IAM identity"}, nil
	}
	if p.o.IAM == nil {
		return "", &problem{apisv1.ReasonInstanceProfileError, "spec.role: Dovetail was started without IAM access to create an instance profile"}, nil
	}
	role := roleName(nc.Spec.Role)
	name := InstanceProfileName(p.o.Cluster, p.o.Region, uidOf(nc), role)
	prof, err := p.getProfile(ctx, name)
	if err != nil {
		return "", nil, err
	}
	if prof == nil {
		tags := map[string]string{}
		for k, v := range nc.Spec.Tags {
			tags[k] = v
		}
		tags[apisv1.TagCluster] = p.o.Cluster
		tags[TagEC2NodeClass] = nc.Name
		tags[TagRegion] = p.o.Region
		_, err := p.o.IAM.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name),
			Path: aws.String(InstanceProfilePath(p.o.Region, p.o.Cluster, uidOf(nc))), Tags: iamTags(tags)})
		var exists *iamtypes.EntityAlreadyExistsException
		if err != nil && !errors.As(err, &exists) {
			return "", nil, fmt.Errorf("spec.role: CreateInstanceProfile %s: %w", name, err)
		}
	}
	if prof != nil && len(prof.Roles) > 0 {
		if got := aws.ToString(prof.Roles[0].RoleName); got == role {
			return name, nil, nil
		}
		// Not ours to fix silently: the name derives from the role, so another role in it
		// means someone changed the profile by hand.
		return "", &problem{apisv1.ReasonInstanceProfileError, fmt.Sprintf("spec.role: instance profile %s holds role %s, not %s", name, aws.ToString(prof.Roles[0].RoleName), role)}, nil
	}
	_, err = p.o.IAM.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(role)})
	var nf *iamtypes.NoSuchEntityException
	var limit *iamtypes.LimitExceededException
	switch {
	case errors.As(err, &nf):
		return "", &problem{apisv1.ReasonInstanceProfileError, fmt.Sprintf("spec.role: role %s does not exist", role)}, nil
	case errors.As(err, &limit):
		// A concurrent resolution added the role first (a profile holds one role).
	case err != nil:
		return "", nil, fmt.Errorf("spec.role: AddRoleToInstanceProfile %s %s: %w", name, role, err)
	}
	return name, nil, nil
}

// getProfile returns the profile, or nil when it does not exist.
func (p *Provider) getProfile(ctx context.Context, name string) (*iamtypes.InstanceProfile, error) {
	out, err := p.o.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	var nf *iamtypes.NoSuchEntityException
	if errors.As(err, &nf) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("GetInstanceProfile %s: %w", name, err)
	}
	return out.InstanceProfile, nil
}

// ReleaseNodeClass deletes what ResolveNodeClass created for a NodeClass being deleted: every
// instance profile at its InstanceProfilePath that is tagged for this cluster (roles removed
// first, as IAM requires). A profile named by spec.instanceProfile is the user's and is left
// alone. Deleting what is already gone is success.
//
// The tags are read with ListInstanceProfileTags, one profile at a time: ListInstanceProfiles
// does not return tags ("IAM resource-listing operations return a subset of the available
// attributes ... this operation does not return tags", IAM API reference), so a filter on the
// listed tags would match nothing on real AWS and leak every profile.
func (p *Provider) ReleaseNodeClass(ctx context.Context, in apisv1.NodeClass) error {
	if in.EC2 == nil || p.o.IAM == nil {
		return nil
	}
	path := InstanceProfilePath(p.o.Region, p.o.Cluster, uidOf(in.EC2))
	owned, err := p.clusterProfiles(ctx, path)
	if err != nil {
		return err
	}
	for _, prof := range owned {
		for _, r := range prof.Roles {
			_, err := p.o.IAM.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{
				InstanceProfileName: prof.InstanceProfileName, RoleName: r.RoleName})
			var nf *iamtypes.NoSuchEntityException
			if err != nil && !errors.As(err, &nf) {
				return fmt.Errorf("RemoveRoleFromInstanceProfile %s: %w", aws.ToString(prof.InstanceProfileName), err)
			}
		}
	}
	for _, prof := range owned {
		n := aws.ToString(prof.InstanceProfileName)
		_, err := p.o.IAM.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(n)})
		var nf *iamtypes.NoSuchEntityException
		if err != nil && !errors.As(err, &nf) {
			return fmt.Errorf("DeleteInstanceProfile %s: %w", n, err)
		}
	}
	return nil
}

// clusterProfiles lists the instance profiles whose path is exactly path (PathPrefix also
// matches deeper paths) and whose dovetail.dev/cluster tag, read with ListInstanceProfileTags
// (paginated), names this cluster; sorted by name. A profile deleted between the two calls is
// skipped.
func (p *Provider) clusterProfiles(ctx context.Context, path string) ([]iamtypes.InstanceProfile, error) {
	var owned []iamtypes.InstanceProfile
	pg := iam.NewListInstanceProfilesPaginator(p.o.IAM, &iam.ListInstanceProfilesInput{PathPrefix: aws.String(path)})
	for pg.HasMorePages() {
		out, err := pg.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("ListInstanceProfiles %s: %w", path, err)
		}
		for _, prof := range out.InstanceProfiles {
			if aws.ToString(prof.Path) != path {
				continue
			}
			cluster, err := p.profileTag(ctx, aws.ToString(prof.InstanceProfileName), apisv1.TagCluster)
			var nf *iamtypes.NoSuchEntityException
			switch {
			case errors.As(err, &nf):
				continue
			case err != nil:
				return nil, err
			}
			if cluster == p.o.Cluster {
				owned = append(owned, prof)
			}
		}
	}
	sort.Slice(owned, func(i, j int) bool {
		return aws.ToString(owned[i].InstanceProfileName) < aws.ToString(owned[j].InstanceProfileName)
	})
	return owned, nil
}

// profileTag reads one tag of an instance profile with ListInstanceProfileTags, following its
// pages; "" when the profile does not carry it.
func (p *Provider) profileTag(ctx context.Context, name, key string) (string, error) {
	pg := iam.NewListInstanceProfileTagsPaginator(p.o.IAM, &iam.ListInstanceProfileTagsInput{InstanceProfileName: aws.String(name)})
	for pg.HasMorePages() {
		out, err := pg.NextPage(ctx)
		if err != nil {
			return "", fmt.Errorf("ListInstanceProfileTags %s: %w", name, err)
		}
		if v, ok := tagValue(out.Tags, key); ok {
			return v, nil
		}
	}
	return "", nil
}

func iamTags(m map[string]string) []iamtypes.Tag {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]iamtypes.Tag, 0, len(keys))
	for _, k := range keys {
		out = append(out, iamtypes.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

func tagValue(tags []iamtypes.Tag, key string) (string, bool) {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value), true
		}
	}
	return "", false
}
