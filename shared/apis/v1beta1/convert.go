package v1beta1

import (
	"encoding/json"

	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Defaults of the v1beta1 CRDs. The API server applies them to a v1beta1 object before its
// conversion webhook runs, so converting a manifest "as Karpenter does" means applying them first.
// Sources: kubebuilder markers of kubernetes-sigs/karpenter pkg/apis/v1beta1/nodepool.go
// (disruption default {consolidationPolicy: WhenUnderutilized, expireAfter: 720h}, budgets
// default [{nodes: 10%}]) and aws/karpenter-provider-aws pkg/apis/v1beta1/ec2nodeclass.go
// (metadataOptions default {enabled, disabled, hop limit 2, required}).
const (
	DefaultExpireAfter             = "720h"
	DefaultBudgetNodes             = "10%"
	DefaultHTTPPutResponseHopLimit = 2
	defaultNodeClassKind           = "EC2NodeClass"
)

// ConvertNodePool converts a v1beta1 NodePool to v1 the way Karpenter's conversion webhook does
// (kubernetes-sigs/karpenter pkg/apis/v1/nodepool_conversion.go, NodePool.ConvertFrom):
//   - v1beta1 CRD defaults are applied first (see above);
//   - consolidationPolicy WhenUnderutilized becomes WhenEmptyOrUnderutilized with consolidateAfter
//     0s; WhenEmpty keeps its consolidateAfter;
//   - disruption.expireAfter moves to template.spec.expireAfter;
//   - budgets keep nodes/schedule/duration;
//   - nodeClassRef.apiVersion becomes group (its group part); empty apiVersion and kind default
//     to karpenter.k8s.aws and EC2NodeClass (the provider's default NodeClass);
//   - template.spec.kubelet, which v1 moved to EC2NodeClass.spec.kubelet, is kept as JSON in the
//     NodePool annotation compatibility.karpenter.sh/v1beta1-kubelet-conversion (and the
//     annotation is removed when there is no kubelet), because the NodeClass is another object;
//   - template.spec.resources has no v1 template field and is dropped.
//
// Errors name the v1beta1 field path: an unknown consolidationPolicy, consolidateAfter missing
// with WhenEmpty or set with WhenUnderutilized (both refused by Karpenter's v1beta1 validation),
// a missing nodeClassRef, or an unparsable nodeClassRef.apiVersion.
func ConvertNodePool(in *NodePool) (*v1.NodePool, field.ErrorList) {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	out := &v1.NodePool{}
	out.APIVersion = v1.GroupVersion
	out.Kind = "NodePool"
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Status.Resources = in.Status.Resources.DeepCopy()
	out.Spec.Weight = in.Spec.Weight
	out.Spec.Limits = in.Spec.Limits.DeepCopy()

	d := Disruption{}
	if in.Spec.Disruption != nil {
		d = *in.Spec.Disruption
	}
	if d.ConsolidationPolicy == "" {
		d.ConsolidationPolicy = ConsolidationPolicyWhenUnderutilized
	}
	if d.ExpireAfter == nil || !d.ExpireAfter.IsSet() {
		e := v1.MustParseNillableDuration(DefaultExpireAfter)
		d.ExpireAfter = &e
	}
	if d.Budgets == nil {
		d.Budgets = []Budget{{Nodes: DefaultBudgetNodes}}
	}

	dp := spec.Child("disruption")
	switch d.ConsolidationPolicy {
	case ConsolidationPolicyWhenUnderutilized:
		if d.ConsolidateAfter != nil && d.ConsolidateAfter.IsSet() {
			errs = append(errs, field.Forbidden(dp.Child("consolidateAfter"), "cannot be combined with consolidationPolicy=WhenUnderutilized in v1beta1"))
		}
		zero := time.Duration(0)
		out.Spec.Disruption.ConsolidateAfter = &v1.NillableDuration{Duration: &zero, Raw: "0s"}
		out.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmptyOrUnderutilized
	case ConsolidationPolicyWhenEmpty:
		if d.ConsolidateAfter == nil || !d.ConsolidateAfter.IsSet() {
			errs = append(errs, field.Required(dp.Child("consolidateAfter"), "must be specified with consolidationPolicy=WhenEmpty"))
		} else {
			out.Spec.Disruption.ConsolidateAfter = d.ConsolidateAfter.DeepCopy()
		}
		out.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmpty
	default:
		errs = append(errs, field.NotSupported(dp.Child("consolidationPolicy"), d.ConsolidationPolicy,
			[]string{ConsolidationPolicyWhenEmpty, ConsolidationPolicyWhenUnderutilized}))
	}
	for _, b := range d.Budgets {
		out.Spec.Disruption.Budgets = append(out.Spec.Disruption.Budgets, v1.Budget{Nodes: b.Nodes, Schedule: b.Schedule, Duration: b.Duration})
	}

	t := in.Spec.Template
	tp := spec.Child("template", "spec")
	out.Spec.Template.ObjectMeta = v1.ObjectMeta{Labels: t.ObjectMeta.Labels, Annotations: t.ObjectMeta.Annotations}
	ts := v1.NodeClaimSpec{
		Taints:        t.Spec.Taints,
		StartupTaints: t.Spec.StartupTaints,
		Requirements:  t.Spec.Requirements,
		ExpireAfter:   *d.ExpireAfter.DeepCopy(),
	}
	if ref := t.Spec.NodeClassRef; ref == nil {
		errs = append(errs, field.Required(tp.Child("nodeClassRef"), "a NodePool must reference a NodeClass"))
	} else {
		nr := &v1.NodeClassReference{Name: ref.Name, Kind: ref.Kind, Group: v1.AWSGroup}
		if nr.Kind == "" {
			nr.Kind = defaultNodeClassKind
		}
		if ref.APIVersion != "" {
			gv, err := schema.ParseGroupVersion(ref.APIVersion)
			if err != nil {
				errs = append(errs, field.Invalid(tp.Child("nodeClassRef", "apiVersion"), ref.APIVersion, err.Error()))
			} else {
				nr.Group = gv.Group
			}
		}
		ts.NodeClassRef = nr
	}
	out.Spec.Template.Spec = *ts.DeepCopy()

	if out.Annotations != nil {
		delete(out.Annotations, v1.AnnotationKubeletCompatibility)
	}
	if t.Spec.Kubelet != nil {
		b, err := json.Marshal(t.Spec.Kubelet)
		if err != nil {
			errs = append(errs, field.InternalError(tp.Child("kubelet"), err))
		} else {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[v1.AnnotationKubeletCompatibility] = string(b)
		}
	}
	if len(out.Annotations) == 0 {
		out.Annotations = nil
	}
	return out, errs
}

// ConvertEC2NodeClass converts a v1beta1 EC2NodeClass to v1 the way Karpenter's conversion
// webhook does (aws/karpenter-provider-aws pkg/apis/v1/ec2nodeclass_conversion.go,
// EC2NodeClass.ConvertFrom):
//   - the v1beta1 metadataOptions default (hop limit 2) is applied first, so converted classes
//     keep hop limit 2 as migrated Karpenter clusters do;
//   - amiFamily AL2, AL2023, Bottlerocket, Windows2019, Windows2022 with no amiSelectorTerms
//     becomes the alias "<family lower-case>@latest" and amiFamily is cleared; with
//     amiSelectorTerms the terms and amiFamily are kept;
//   - Ubuntu becomes AL2 (same user-data format), gets Ubuntu's root volume (/dev/sda1, 20Gi gp3,
//     encrypted) when it has no blockDeviceMappings, and is marked with the annotation
//     compatibility.karpenter.k8s.aws/v1beta1-ubuntu. Ubuntu without amiSelectorTerms is an error:
//     Karpenter marks such a class "incompatible" with a placeholder AMI and never launches from it;
//   - Custom (or anything else) stays Custom;
//   - selector terms, role, instance profile, tags, user data, block devices, instance-store
//     policy, detailed monitoring, context and status are copied.
func ConvertEC2NodeClass(in *EC2NodeClass) (*v1.EC2NodeClass, field.ErrorList) {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	out := &v1.EC2NodeClass{}
	out.APIVersion = v1.AWSGroupVersion
	out.Kind = "EC2NodeClass"
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	s := in.Spec
	o := v1.EC2NodeClassSpec{
		AssociatePublicIPAddress: s.AssociatePublicIPAddress,
		UserData:                 s.UserData,
		Role:                     s.Role,
		InstanceProfile:          s.InstanceProfile,
		Tags:                     s.Tags,
		BlockDeviceMappings:      s.BlockDeviceMappings,
		InstanceStorePolicy:      s.InstanceStorePolicy,
		DetailedMonitoring:       s.DetailedMonitoring,
		Context:                  s.Context,
	}
	for _, t := range s.SubnetSelectorTerms {
		o.SubnetSelectorTerms = append(o.SubnetSelectorTerms, v1.SubnetSelectorTerm{ID: t.ID, Tags: t.Tags})
	}
	for _, t := range s.SecurityGroupSelectorTerms {
		o.SecurityGroupSelectorTerms = append(o.SecurityGroupSelectorTerms, v1.SecurityGroupSelectorTerm{ID: t.ID, Name: t.Name, Tags: t.Tags})
	}
	terms := make([]v1.AMISelectorTerm, 0, len(s.AMISelectorTerms))
	for _, t := range s.AMISelectorTerms {
		terms = append(terms, v1.AMISelectorTerm{ID: t.ID, Name: t.Name, Owner: t.Owner, Tags: t.Tags})
	}

	mo := v1.MetadataOptions{}
	if s.MetadataOptions != nil {
		mo = *s.MetadataOptions
	}
	setDefault(&mo.HTTPEndpoint, "enabled")
	setDefault(&mo.HTTPProtocolIPv6, "disabled")
	setDefault(&mo.HTTPPutResponseHopLimit, int64(DefaultHTTPPutResponseHopLimit))
	setDefault(&mo.HTTPTokens, "required")
	o.MetadataOptions = &mo

	family := ""
	if s.AMIFamily != nil {
		family = *s.AMIFamily
	}
	switch family {
	case v1.AMIFamilyAL2, v1.AMIFamilyAL2023, v1.AMIFamilyBottlerocket, v1.AMIFamilyWindows2019, v1.AMIFamilyWindows2022:
		if len(terms) == 0 {
			o.AMISelectorTerms = []v1.AMISelectorTerm{{Alias: strings.ToLower(family) + "@" + v1.AliasVersionLatest}}
		} else {
			o.AMISelectorTerms = terms
			o.AMIFamily = &family
		}
	case v1.AMIFamilyUbuntu:
		al2 := v1.AMIFamilyAL2
		o.AMIFamily = &al2
		changed := []string{"amiFamily"}
		if s.BlockDeviceMappings == nil {
			changed = append(changed, "blockDeviceMappings")
			size := resource.MustParse("20Gi")
			o.BlockDeviceMappings = []v1.BlockDeviceMapping{{
				DeviceName: ptr("/dev/sda1"), RootVolume: true,
				EBS: &v1.BlockDevice{Encrypted: ptr(true), VolumeType: ptr("gp3"), VolumeSize: &size},
			}}
		}
		if len(terms) == 0 {
			errs = append(errs, field.Required(spec.Child("amiSelectorTerms"),
				"amiFamily Ubuntu without amiSelectorTerms has no v1 equivalent (Karpenter marks such an EC2NodeClass incompatible and launches nothing from it)"))
		}
		o.AMISelectorTerms = terms
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[v1.AnnotationUbuntuCompatibility] = strings.Join(changed, ",")
	case "":
		errs = append(errs, field.Required(spec.Child("amiFamily"), "v1beta1 EC2NodeClass requires amiFamily"))
	case v1.AMIFamilyCustom:
		c := v1.AMIFamilyCustom
		o.AMIFamily = &c
		o.AMISelectorTerms = terms
	default:
		errs = append(errs, field.NotSupported(spec.Child("amiFamily"), family,
			[]string{v1.AMIFamilyAL2, v1.AMIFamilyAL2023, v1.AMIFamilyBottlerocket, v1.AMIFamilyUbuntu, v1.AMIFamilyCustom, v1.AMIFamilyWindows2019, v1.AMIFamilyWindows2022}))
	}
	out.Spec = *o.DeepCopy()
	st := in.Status
	out.Status = v1.EC2NodeClassStatus{Subnets: st.Subnets, SecurityGroups: st.SecurityGroups, AMIs: st.AMIs, InstanceProfile: st.InstanceProfile, Conditions: st.Conditions}
	out.Status = out.DeepCopy().Status
	return out, errs
}

func setDefault[T any](p **T, v T) {
	if *p == nil {
		*p = &v
	}
}

func ptr[T any](v T) *T { return &v }
