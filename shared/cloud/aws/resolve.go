package aws

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

var _ cloud.NodeClassResolver = (*Provider)(nil)

// nodeClassResources are what a launch needs of a NodeClass: its resolved status, indexed.
type nodeClassResources struct {
	family string
	// subnetsByZone lists each zone's subnet ids, most free addresses first.
	subnetsByZone map[string][]string
	groups        []string
	// amis are the images with the requirements (architecture, GPU, Neuron) of the types they
	// serve, in status order.
	amis    []apisv1.AMI
	profile string
}

// resources returns what a launch needs: the NodeClass status when the lifecycle function has
// resolved it (Ready=True), so a launch makes no Describe call; otherwise its subnet, security
// group and AMI selectors resolved now (read-only: a launch creates no instance profile; a
// spec.role class launches once the lifecycle function has written its profile). Errors name
// the part that did not resolve.
func (p *Provider) resources(ctx context.Context, nc *apisv1.EC2NodeClass) (*nodeClassResources, error) {
	st := nc.Status
	if !meta.IsStatusConditionTrue(st.Conditions, apisv1.ConditionReady) || len(st.Subnets) == 0 || len(st.SecurityGroups) == 0 || len(st.AMIs) == 0 {
		var err error
		var subnetProb, groupProb, prob *problem
		if st.Subnets, subnetProb, err = p.subnets(ctx, nc); err != nil {
			return nil, err
		}
		if st.SecurityGroups, groupProb, err = p.securityGroups(ctx, nc); err != nil {
			return nil, err
		}
		if st.AMIs, prob, err = p.AMIs(ctx, nc); err != nil {
			return nil, err
		}
		for _, pr := range []*problem{subnetProb, groupProb} {
			if pr != nil {
				return nil, fmt.Errorf("%s %s: %s", apisv1.KindEC2NodeClass, nc.Name, pr.message)
			}
		}
		switch {
		case prob != nil:
			return nil, fmt.Errorf("%s %s: %s", apisv1.KindEC2NodeClass, nc.Name, prob.message)
		case len(st.Subnets) == 0:
			return nil, fmt.Errorf("%s %s: %s", apisv1.KindEC2NodeClass, nc.Name, selectorMessage("subnetSelectorTerms", "subnets", len(nc.Spec.SubnetSelectorTerms)))
		case len(st.SecurityGroups) == 0:
			return nil, fmt.Errorf("%s %s: %s", apisv1.KindEC2NodeClass, nc.Name, selectorMessage("securityGroupSelectorTerms", "security groups", len(nc.Spec.SecurityGroupSelectorTerms)))
		case len(st.AMIs) == 0:
			return nil, fmt.Errorf("%s %s: %s", apisv1.KindEC2NodeClass, nc.Name, selectorMessage("amiSelectorTerms", "images", len(nc.Spec.AMISelectorTerms)))
		}
	}
	r := &nodeClassResources{family: nc.AMIFamily(), subnetsByZone: map[string][]string{}, amis: st.AMIs, profile: st.InstanceProfile}
	for _, s := range st.Subnets {
		r.subnetsByZone[s.Zone] = append(r.subnetsByZone[s.Zone], s.ID)
	}
	for _, g := range st.SecurityGroups {
		r.groups = append(r.groups, g.ID)
	}
	sort.Strings(r.groups)
	if nc.Spec.InstanceProfile != nil && *nc.Spec.InstanceProfile != "" {
		r.profile = *nc.Spec.InstanceProfile
	}
	if r.profile == "" {
		return nil, fmt.Errorf("%s %s: no instance profile yet (status.instanceProfile is empty; the lifecycle function creates one for spec.role %q): nodes without one cannot join",
			apisv1.KindEC2NodeClass, nc.Name, nc.Spec.Role)
	}
	return r, nil
}

// imageFor returns the first AMI whose requirements the instance type's labels satisfy, or nil.
func (r *nodeClassResources) imageFor(labels map[string]string) *apisv1.AMI {
	for i := range r.amis {
		if amiServes(r.amis[i], labels) {
			return &r.amis[i]
		}
	}
	return nil
}

// ResolveNodeClass resolves an EC2NodeClass's selector terms into its status, as Karpenter's
// EC2NodeClass status controllers do: status.subnets (most free addresses first),
// status.securityGroups (by id), status.amis (each with the requirements of the instance types
// it serves: architecture, and for alias images the standard / nvidia / neuron variant),
// status.instanceProfile, status.capacityReservations (see capacityReservations), and the
// conditions SubnetsReady, SecurityGroupsReady, AMIsReady, InstanceProfileReady,
// CapacityReservationsReady, PlacementGroupReady (spec.placementGroupSelector resolved, see
// placementGroup; the CRD has no status field for the group, so only the condition records
// it), ValidationSucceeded and Ready. A selector that matches nothing is a
// False condition with a reason and a message naming the selector, not an error; the error is
// for calls that failed (throttling past the SDK's retries, permissions), to be retried.
// Conditions carry no lastTransitionTime: the agent keeps it when the status did not change.
func (p *Provider) ResolveNodeClass(ctx context.Context, in apisv1.NodeClass) (apisv1.NodeClass, error) {
	if in.EC2 == nil {
		return apisv1.NodeClass{}, fmt.Errorf("nodeClass: %s %q is not an EC2NodeClass; the aws provider resolves only EC2NodeClasses", in.Kind(), in.Name())
	}
	nc := in.EC2.DeepCopy()
	gen := nc.Generation
	st := apisv1.EC2NodeClassStatus{}
	set := func(typ string, ok bool, reason, msg string) {
		c := metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: typ, ObservedGeneration: gen}
		if !ok {
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, reason, msg
		}
		apisv1.SetCondition(&st.Conditions, c)
	}

	subnets, subnetProblem, err := p.subnets(ctx, nc)
	if err != nil {
		return apisv1.NodeClass{}, err
	}
	st.Subnets = subnets
	if subnetProblem != nil {
		set(apisv1.ConditionSubnetsReady, false, subnetProblem.reason, subnetProblem.message)
	} else {
		set(apisv1.ConditionSubnetsReady, len(subnets) > 0, apisv1.ReasonSubnetsNotFound, selectorMessage("subnetSelectorTerms", "subnets", len(nc.Spec.SubnetSelectorTerms)))
	}

	groups, groupProblem, err := p.securityGroups(ctx, nc)
	if err != nil {
		return apisv1.NodeClass{}, err
	}
	st.SecurityGroups = groups
	if groupProblem != nil {
		set(apisv1.ConditionSecurityGroupsReady, false, groupProblem.reason, groupProblem.message)
	} else {
		set(apisv1.ConditionSecurityGroupsReady, len(groups) > 0, apisv1.ReasonSecurityGroupsNotFound,
			selectorMessage("securityGroupSelectorTerms", "security groups", len(nc.Spec.SecurityGroupSelectorTerms)))
	}

	amis, amiProblem, err := p.AMIs(ctx, nc)
	if err != nil {
		return apisv1.NodeClass{}, err
	}
	st.AMIs = amis
	switch {
	case amiProblem != nil:
		set(apisv1.ConditionAMIsReady, false, amiProblem.reason, amiProblem.message)
	default:
		set(apisv1.ConditionAMIsReady, len(amis) > 0, apisv1.ReasonAMINotFound, selectorMessage("amiSelectorTerms", "images", len(nc.Spec.AMISelectorTerms)))
	}

	profile, profileProblem, err := p.instanceProfile(ctx, nc)
	if err != nil {
		return apisv1.NodeClass{}, err
	}
	st.InstanceProfile = profile
	if profileProblem != nil {
		set(apisv1.ConditionInstanceProfileReady, false, profileProblem.reason, profileProblem.message)
	} else {
		set(apisv1.ConditionInstanceProfileReady, true, "", "")
	}

	reservations, err := p.capacityReservations(ctx, nc)
	if err != nil {
		return apisv1.NodeClass{}, err
	}
	st.CapacityReservations = reservations
	set(apisv1.ConditionCapacityReservationsReady, true, "", "")

	_, pgProblem, err := p.placementGroup(ctx, nc)
	if err != nil {
		return apisv1.NodeClass{}, err
	}
	if pgProblem != nil {
		set(apisv1.ConditionPlacementGroupReady, false, pgProblem.reason, pgProblem.message)
	} else {
		set(apisv1.ConditionPlacementGroupReady, true, "", "")
	}

	g := p.governance()
	if unsupported := apisv1.UnsupportedEC2NodeClassFields(nc); len(unsupported) > 0 {
		set(apisv1.ConditionValidationSucceeded, false, apisv1.ReasonNotSupported, strings.Join(unsupported, "; "))
	} else if missing := g.missingTags(nc.Spec.Tags); len(missing) > 0 {
		set(apisv1.ConditionValidationSucceeded, false, apisv1.ReasonMandatoryTagsMissing, g.mandatoryTagsMessage(missing))
	} else {
		set(apisv1.ConditionValidationSucceeded, true, "", "")
	}
	apisv1.SetReadyFromDependents(&st.Conditions, gen, apisv1.EC2NodeClassReadyDependents)
	nc.Status = st
	return apisv1.NodeClassOf(nc), nil
}

// problem is a resolution that failed for a reason the user must fix (a False condition).
type problem struct{ reason, message string }

func selectorMessage(field, what string, terms int) string {
	if terms == 0 {
		return fmt.Sprintf("spec.%s is empty: no %s selected", field, what)
	}
	return fmt.Sprintf("spec.%s (%d terms) matched no %s", field, terms, what)
}

// tagFilters turns selector tags into EC2 filters: tag:<key>=<value>, or tag-key=<key> for the
// value "*" (Karpenter's selector semantics).
func tagFilters(tags map[string]string) []ec2types.Filter {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []ec2types.Filter
	for _, k := range keys {
		if tags[k] == "*" {
			out = append(out, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
			continue
		}
		out = append(out, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{tags[k]}})
	}
	return out
}

// subnets resolves spec.subnetSelectorTerms (terms are ORed, a term's fields ANDed) into status
// subnets, most free addresses first, then by id (Karpenter's order, which its launches follow).
// No match is an empty list; a subnet Governance refuses (no discovery tag, another VPC) is a
// problem naming it, and only the allowed ones are listed; errors are failed calls.
func (p *Provider) subnets(ctx context.Context, nc *apisv1.EC2NodeClass) ([]apisv1.Subnet, *problem, error) {
	seen := map[string]ec2types.Subnet{}
	for i, t := range nc.Spec.SubnetSelectorTerms {
		in := &ec2.DescribeSubnetsInput{Filters: tagFilters(t.Tags)}
		if t.ID != "" {
			in.SubnetIds = []string{t.ID}
		}
		if t.CIDR != "" {
			in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("cidr-block"), Values: []string{t.CIDR}})
		}
		pg := ec2.NewDescribeSubnetsPaginator(p.o.EC2, in)
		for pg.HasMorePages() {
			out, err := pg.NextPage(ctx)
			if isNotFound(err) {
				break // an id term naming a subnet that does not exist matches nothing
			}
			if err != nil {
				return nil, nil, fmt.Errorf("spec.subnetSelectorTerms[%d]: DescribeSubnets: %w", i, err)
			}
			for _, s := range out.Subnets {
				seen[aws.ToString(s.SubnetId)] = s
			}
		}
	}
	list := make([]ec2types.Subnet, 0, len(seen))
	for _, s := range seen {
		list = append(list, s)
	}
	sort.Slice(list, func(a, b int) bool {
		fa, fb := aws.ToInt32(list[a].AvailableIpAddressCount), aws.ToInt32(list[b].AvailableIpAddressCount)
		if fa != fb {
			return fa > fb
		}
		return aws.ToString(list[a].SubnetId) < aws.ToString(list[b].SubnetId)
	})
	g := p.governance()
	out := make([]apisv1.Subnet, 0, len(list))
	var refused []string
	for _, s := range list {
		if why := g.networkRefusal(aws.ToString(s.SubnetId), ec2TagValue(s.Tags, "Name"), aws.ToString(s.VpcId), s.Tags); why != "" {
			refused = append(refused, why)
			continue
		}
		out = append(out, apisv1.Subnet{ID: aws.ToString(s.SubnetId), Zone: aws.ToString(s.AvailabilityZone), ZoneID: aws.ToString(s.AvailabilityZoneId)})
	}
	return out, g.networkProblem("subnetSelectorTerms", "subnets", apisv1.ReasonSubnetsNotAllowed, refused), nil
}

func ec2TagValue(tags []ec2types.Tag, key string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}

// securityGroups resolves spec.securityGroupSelectorTerms into status security groups, by id; a
// group Governance refuses is a problem naming it, as for subnets.
func (p *Provider) securityGroups(ctx context.Context, nc *apisv1.EC2NodeClass) ([]apisv1.SecurityGroup, *problem, error) {
	g := p.governance()
	seen := map[string]string{}    // allowed: id → name
	refused := map[string]string{} // id → why
	for i, t := range nc.Spec.SecurityGroupSelectorTerms {
		in := &ec2.DescribeSecurityGroupsInput{Filters: tagFilters(t.Tags)}
		if t.ID != "" {
			in.GroupIds = []string{t.ID}
		}
		if t.Name != "" {
			in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("group-name"), Values: []string{t.Name}})
		}
		pg := ec2.NewDescribeSecurityGroupsPaginator(p.o.EC2, in)
		for pg.HasMorePages() {
			out, err := pg.NextPage(ctx)
			if isNotFound(err) {
				break
			}
			if err != nil {
				return nil, nil, fmt.Errorf("spec.securityGroupSelectorTerms[%d]: DescribeSecurityGroups: %w", i, err)
			}
			for _, sg := range out.SecurityGroups {
				id := aws.ToString(sg.GroupId)
				if why := g.networkRefusal(id, aws.ToString(sg.GroupName), aws.ToString(sg.VpcId), sg.Tags); why != "" {
					refused[id] = why
					continue
				}
				seen[id] = aws.ToString(sg.GroupName)
			}
		}
	}
	out := make([]apisv1.SecurityGroup, 0, len(seen))
	for id, name := range seen {
		out = append(out, apisv1.SecurityGroup{ID: id, Name: name})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	whys := make([]string, 0, len(refused))
	for _, why := range refused {
		whys = append(whys, why)
	}
	return out, g.networkProblem("securityGroupSelectorTerms", "security groups", apisv1.ReasonSecurityGroupsNotAllowed, whys), nil
}

// ec2Arch maps a Kubernetes architecture to EC2's.
var ec2Arch = map[string]string{"amd64": "x86_64", "arm64": "arm64"}

func kubeArch(a ec2types.ArchitectureValues) string {
	switch a {
	case ec2types.ArchitectureValuesX8664:
		return "amd64"
	case ec2types.ArchitectureValuesArm64:
		return "arm64"
	}
	return string(a)
}

// Variant is an EKS-optimized image variant: which accelerators its drivers serve.
type Variant string

// Variants of the EKS-optimized images (Amazon EKS User Guide, "Amazon EKS optimized accelerated
// Amazon Linux AMIs"; Karpenter selects them per instance type the same way).
const (
	// VariantStandard serves types with neither GPUs nor Neuron accelerators.
	VariantStandard Variant = "standard"
	// VariantNvidia serves types with GPUs (karpenter.k8s.aws/instance-gpu-count exists).
	VariantNvidia Variant = "nvidia"
	// VariantNeuron serves types with AWS Neuron accelerators (Inferentia, Trainium).
	VariantNeuron Variant = "neuron"
	// VariantWindows is a Windows image: it serves the types a Windows family offers
	// (kubernetes.io/os windows, catalog InstanceType.ForAMIFamily), whatever their
	// accelerators, as Karpenter's Windows images carry only the os and build requirements.
	VariantWindows Variant = "windows"
)

// WindowsParameter is the public SSM parameter of the latest EKS-optimized Windows Server
// Core image of a Windows Server version ("2022") and Kubernetes minor version ("1.31"):
// /aws/service/ami-windows-latest/Windows_Server-<version>-English-Core-EKS_Optimized-<k8s>/image_id
// (Karpenter's amifamily Windows.DescribeImageQuery).
func WindowsParameter(version, k8s string) string {
	return "/aws/service/ami-windows-latest/Windows_Server-" + version + "-English-Core-EKS_Optimized-" + k8s + "/image_id"
}

const labelAcceleratorCount = "karpenter.k8s.aws/instance-accelerator-count"

// requirements are the node selector requirements of the types a variant serves.
func (v Variant) requirements() []corev1.NodeSelectorRequirement {
	switch v {
	case VariantNvidia:
		return []corev1.NodeSelectorRequirement{{Key: apisv1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpExists}}
	case VariantNeuron:
		return []corev1.NodeSelectorRequirement{{Key: labelAcceleratorCount, Operator: corev1.NodeSelectorOpExists}}
	case VariantWindows:
		return []corev1.NodeSelectorRequirement{{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{string(corev1.Windows)}}}
	}
	return []corev1.NodeSelectorRequirement{
		{Key: labelAcceleratorCount, Operator: corev1.NodeSelectorOpDoesNotExist},
		{Key: apisv1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpDoesNotExist},
	}
}

// AliasImage is one public SSM parameter an AMI alias reads, and what the image it names serves.
type AliasImage struct {
	// Parameter is the SSM parameter name.
	Parameter string
	// Arch is the Kubernetes architecture (amd64, arm64).
	Arch string
	// Variants are the accelerator variants the image serves (the AL2 GPU image serves both
	// nvidia and neuron).
	Variants []Variant
}

// AliasImages lists the public SSM parameters an alias resolves through, for one Kubernetes
// minor version ("1.31"): for AL2023 the standard, nvidia and neuron images of x86_64 and the
// standard and nvidia images of arm64; for Bottlerocket the aws-k8s and aws-k8s-nvidia images
// (the x86_64 aws-k8s image also serves Neuron); for AL2 the standard, arm64 and GPU images
// (Amazon EKS User Guide, "Retrieve recommended Amazon Linux AMI IDs" and "Retrieve recommended
// Bottlerocket AMI IDs"; pinned-version paths as Karpenter documents for amiSelectorTerms
// aliases); for Windows families the Server Core image (WindowsParameter). Error: a family with
// no public parameters (Custom).
func AliasImages(a apisv1.Alias, k8s string) ([]AliasImage, error) {
	latest := a.Version == apisv1.AliasVersionLatest
	var out []AliasImage
	switch a.Family {
	case apisv1.AMIFamilyAL2023:
		for _, x := range []struct {
			arch     string
			variants []Variant
		}{{"amd64", []Variant{VariantStandard, VariantNvidia, VariantNeuron}}, {"arm64", []Variant{VariantStandard, VariantNvidia}}} {
			ea := ec2Arch[x.arch]
			for _, v := range x.variants {
				leaf := "recommended"
				if !latest {
					leaf = "amazon-eks-node-al2023-" + ea + "-" + string(v) + "-" + k8s + "-" + a.Version
				}
				out = append(out, AliasImage{Parameter: "/aws/service/eks/optimized-ami/" + k8s + "/amazon-linux-2023/" + ea + "/" + string(v) + "/" + leaf + "/image_id",
					Arch: x.arch, Variants: []Variant{v}})
			}
		}
	case apisv1.AMIFamilyBottlerocket:
		v := "latest"
		if !latest {
			v = strings.TrimPrefix(a.Version, "v")
		}
		out = []AliasImage{
			{"/aws/service/bottlerocket/aws-k8s-" + k8s + "/x86_64/" + v + "/image_id", "amd64", []Variant{VariantStandard, VariantNeuron}},
			{"/aws/service/bottlerocket/aws-k8s-" + k8s + "/arm64/" + v + "/image_id", "arm64", []Variant{VariantStandard}},
			{"/aws/service/bottlerocket/aws-k8s-" + k8s + "-nvidia/x86_64/" + v + "/image_id", "amd64", []Variant{VariantNvidia}},
			{"/aws/service/bottlerocket/aws-k8s-" + k8s + "-nvidia/arm64/" + v + "/image_id", "arm64", []Variant{VariantNvidia}},
		}
	case apisv1.AMIFamilyAL2:
		leaf := func(kind string) string {
			if latest {
				return "recommended"
			}
			return "amazon-eks-" + kind + "node-" + k8s + "-" + a.Version
		}
		out = []AliasImage{
			{"/aws/service/eks/optimized-ami/" + k8s + "/amazon-linux-2/" + leaf("") + "/image_id", "amd64", []Variant{VariantStandard}},
			{"/aws/service/eks/optimized-ami/" + k8s + "/amazon-linux-2-arm64/" + leaf("arm64-") + "/image_id", "arm64", []Variant{VariantStandard}},
			{"/aws/service/eks/optimized-ami/" + k8s + "/amazon-linux-2-gpu/" + leaf("gpu-") + "/image_id", "amd64", []Variant{VariantNeuron, VariantNvidia}},
		}
	default:
		rel, ok := apisv1.WindowsReleaseOf(a.Family)
		if !ok {
			return nil, fmt.Errorf("alias family %s: Dovetail resolves AL2023, AL2, Bottlerocket and Windows aliases", a.Family)
		}
		// The EKS-optimized Windows Server Core image (Karpenter's amifamily Windows reads only
		// the Core edition; Amazon EKS User Guide, "Retrieve recommended Microsoft Windows AMI
		// IDs"); Windows aliases take only "latest" (ParseAlias) and the image is x86_64.
		out = []AliasImage{{Parameter: WindowsParameter(rel.Version, k8s), Arch: "amd64", Variants: []Variant{VariantWindows}}}
	}
	return out, nil
}

// AMIs resolves spec.amiSelectorTerms into status AMIs. Aliases go through the public SSM
// parameters (AliasImages), each image getting the requirements of its architecture and
// variant; ids, name/owner pairs and tags through DescribeImages; ssmParameter through
// GetParameter. For the non-alias terms the newest image (by creation date) of each
// architecture is kept. The problem is a term the user must fix (an alias family Dovetail does
// not resolve, a named parameter that does not exist); err is a failed call.
func (p *Provider) AMIs(ctx context.Context, nc *apisv1.EC2NodeClass) ([]apisv1.AMI, *problem, error) {
	g := p.governance()
	refused := map[string]string{}  // images Governance refuses: id → why
	known := map[string][]Variant{} // image id → variants, for alias images
	var ids []string
	var queries []*ec2.DescribeImagesInput
	for i, t := range nc.Spec.AMISelectorTerms {
		field := fmt.Sprintf("spec.amiSelectorTerms[%d]", i)
		switch {
		case t.Alias != "":
			a, err := apisv1.ParseAlias(t.Alias)
			if err != nil {
				return nil, &problem{apisv1.ReasonUnsupportedAlias, fmt.Sprintf("%s.alias: %v", field, err)}, nil
			}
			k8s := p.clusterFacts(cloud.ClusterFactsFrom(ctx)).KubernetesVersion
			if k8s == "" {
				return nil, &problem{apisv1.ReasonUnsupportedAlias, fmt.Sprintf("%s.alias: no Kubernetes version to resolve %s with: the agent's snapshot carries none and --kubernetes-version is not set", field, t.Alias)}, nil
			}
			images, err := AliasImages(a, k8s)
			if err != nil {
				return nil, &problem{apisv1.ReasonUnsupportedAlias, fmt.Sprintf("%s.alias: %v", field, err)}, nil
			}
			for _, img := range images {
				id, found, err := p.parameter(ctx, img.Parameter)
				if err != nil {
					return nil, nil, fmt.Errorf("%s.alias %s: %w", field, t.Alias, err)
				}
				if found {
					known[id] = append(known[id], img.Variants...)
				}
			}
		case t.SSMParameter != "":
			if why := g.parameterRefusal(t.SSMParameter); why != "" {
				return nil, &problem{apisv1.ReasonAMINotAllowed, field + ".ssmParameter: " + why}, nil
			}
			id, found, err := p.parameter(ctx, t.SSMParameter)
			if err != nil {
				return nil, nil, fmt.Errorf("%s.ssmParameter: %w", field, err)
			}
			if !found {
				return nil, &problem{apisv1.ReasonAMINotFound, fmt.Sprintf("%s.ssmParameter: parameter %s does not exist", field, t.SSMParameter)}, nil
			}
			ids = append(ids, id)
		case t.ID != "":
			ids = append(ids, t.ID)
		default:
			in := &ec2.DescribeImagesInput{Filters: tagFilters(t.Tags)}
			if t.Name != "" {
				in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("name"), Values: []string{t.Name}})
				// Karpenter's default owners for a name without an owner: this account and Amazon.
				in.Owners = []string{"self", "amazon"}
			}
			if t.Owner != "" {
				in.Owners = []string{t.Owner}
			}
			queries = append(queries, in)
		}
	}
	for id := range known {
		ids = append(ids, id)
	}
	if len(ids) > 0 {
		sort.Strings(ids)
		queries = append(queries, &ec2.DescribeImagesInput{ImageIds: dedupe(ids)})
	}
	type candidate struct {
		ec2types.Image
		arch string
	}
	newest := map[string]candidate{} // by arch, for non-alias images
	var out []apisv1.AMI
	aliasSeen := map[string]bool{}
	for _, in := range queries {
		pg := ec2.NewDescribeImagesPaginator(p.o.EC2, in)
		for pg.HasMorePages() {
			page, err := pg.NextPage(ctx)
			if isNotFound(err) {
				break
			}
			if err != nil {
				return nil, nil, fmt.Errorf("spec.amiSelectorTerms: DescribeImages: %w", err)
			}
			for _, img := range page.Images {
				id, arch := aws.ToString(img.ImageId), kubeArch(img.Architecture)
				if why := g.imageRefusal(img); why != "" {
					refused[id] = why
					continue
				}
				if variants, ok := known[id]; ok {
					if aliasSeen[id] {
						continue
					}
					aliasSeen[id] = true
					for _, v := range variants {
						reqs := append([]corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}}}, v.requirements()...)
						out = append(out, apisv1.AMI{ID: id, Name: aws.ToString(img.Name), Requirements: reqs, Deprecated: img.DeprecationTime != nil && *img.DeprecationTime != ""})
					}
					continue
				}
				c := candidate{Image: img, arch: arch}
				cur, ok := newest[arch]
				if !ok || aws.ToString(img.CreationDate) > aws.ToString(cur.CreationDate) ||
					(aws.ToString(img.CreationDate) == aws.ToString(cur.CreationDate) && id < aws.ToString(cur.ImageId)) {
					newest[arch] = c
				}
			}
		}
	}
	if len(refused) > 0 {
		whys := make([]string, 0, len(refused))
		for _, why := range refused {
			whys = append(whys, why)
		}
		sort.Strings(whys)
		return nil, &problem{apisv1.ReasonAMINotAllowed, "spec.amiSelectorTerms selects images IAM refuses to launch (ec2:Owner): " + strings.Join(whys, "; ")}, nil
	}
	for arch, c := range newest {
		out = append(out, apisv1.AMI{ID: aws.ToString(c.ImageId), Name: aws.ToString(c.Name),
			Requirements: []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}}}})
	}
	// Stable order: by architecture, then the more specific requirement sets (a variant) last,
	// then id; amiServes picks the first match and variants exclude each other.
	sort.SliceStable(out, func(a, b int) bool {
		aa, ab := out[a].Requirements[0].Values[0], out[b].Requirements[0].Values[0]
		if aa != ab {
			return aa < ab
		}
		if ka, kb := variantKey(out[a]), variantKey(out[b]); ka != kb {
			return ka < kb
		}
		return out[a].ID < out[b].ID
	})
	return out, nil, nil
}

func variantKey(a apisv1.AMI) string {
	parts := make([]string, 0, len(a.Requirements))
	for _, r := range a.Requirements[1:] {
		parts = append(parts, r.Key+string(r.Operator))
	}
	return strings.Join(parts, ",")
}

// amiServes reports whether labels (an instance type's) satisfy every requirement of the AMI,
// with the solver's requirement semantics (shared/scheduling). A malformed requirement serves
// nothing.
func amiServes(a apisv1.AMI, labels map[string]string) bool {
	reqs, err := scheduling.NewRequirements(a.Requirements...)
	return err == nil && reqs.MatchLabels(labels) == nil
}

func dedupe(sorted []string) []string {
	out := sorted[:0]
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// isNotFound reports an EC2 ".NotFound" error (an id term naming a resource that does not
// exist): a selector that matches nothing, not a failed call.
func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	var code interface{ ErrorCode() string }
	return errors.As(err, &code) && strings.HasSuffix(code.ErrorCode(), ".NotFound")
}

// parameter reads an SSM parameter; found is false when it does not exist.
func (p *Provider) parameter(ctx context.Context, name string) (value string, found bool, err error) {
	out, err := p.o.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
	var nf *ssmtypes.ParameterNotFound
	if errors.As(err, &nf) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("ssm GetParameter %s: %w", name, err)
	}
	return aws.ToString(out.Parameter.Value), true, nil
}
