package azure

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v8"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

var _ cloud.NodeClassResolver = (*Provider)(nil)

// AKSNodeClass condition reasons, the Azure provider's where it has one (its nodeclass status
// controllers at commit 00ae112…).
const (
	ReasonImagesNotFound           = "ImagesNotFound"
	ReasonSIGRequiredForFIPS       = "SIGRequiredForFIPS"
	ReasonSubnetNotFound           = "SubnetNotFound"
	ReasonSubnetIDInvalid          = "SubnetIDInvalid"
	ReasonSubnetNotUsable          = "SubnetNotUsable" // Dovetail's: the subnet exists but is not provisioned
	ReasonKubernetesVersionUnknown = "KubernetesVersionUnknown"
)

// ResolveNodeClass resolves an AKSNodeClass's status as the Azure provider's nodeclass status
// controllers do: status.images (each image definition of the image family at its latest
// published version in the AKS community gallery, with the architecture and Hyper-V generation
// of the sizes it serves, in the provider's order of preference), status.kubernetesVersion (the
// control plane's, Options.KubernetesVersion), and the conditions ImagesReady,
// KubernetesVersionReady, SubnetsReady (spec.vnetSubnetID, else the cluster subnet, parses,
// lies in the cluster's VNet and exists provisioned), ValidationSucceeded (the node settings
// Dovetail can launch) and Ready. A problem the user must fix is a False condition; the error is
// a failed call, to be retried. Images follow the gallery's latest on every resolve (the
// provider's behaviour when no maintenance window is configured).
func (p *Provider) ResolveNodeClass(ctx context.Context, in apisv1.NodeClass) (apisv1.NodeClass, error) {
	if in.AKS == nil {
		return apisv1.NodeClass{}, fmt.Errorf("nodeClass: %s %q is not an AKSNodeClass; the azure provider resolves only AKSNodeClasses", in.Kind(), in.Name())
	}
	nc := in.AKS.DeepCopy()
	gen := nc.Generation
	st := apisv1.AKSNodeClassStatus{LocalDNSState: nc.Status.LocalDNSState}
	set := func(typ string, ok bool, reason, msg string) {
		c := metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: typ, ObservedGeneration: gen}
		if !ok {
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, reason, msg
		}
		apisv1.SetCondition(&st.Conditions, c)
	}
	images, reason, msg, err := p.images(ctx, nc)
	if err != nil {
		return apisv1.NodeClass{}, err
	}
	st.Images = images
	set(apisv1.ConditionImagesReady, reason == "", reason, msg)

	if v, err := version.ParseGeneric(p.o.KubernetesVersion); err != nil {
		set(apisv1.ConditionKubernetesVersionReady, false, ReasonKubernetesVersionUnknown,
			fmt.Sprintf("the control plane's Kubernetes version %q (the functions' --aks-kubernetes-version) does not parse: %v", p.o.KubernetesVersion, err))
	} else {
		st.KubernetesVersion = v.String()
		set(apisv1.ConditionKubernetesVersionReady, true, "", "")
	}

	reason, msg, err = p.subnetProblem(ctx, nc)
	if err != nil {
		return apisv1.NodeClass{}, err
	}
	set(apisv1.ConditionSubnetsReady, reason == "", reason, msg)

	if _, err := cloud.AKSNodeSettings(nc, p.o.NetworkPlugin); err != nil {
		set(apisv1.ConditionValidationSucceeded, false, apisv1.ReasonNotSupported, err.Error())
	} else if errs := Unhonoured(nc); len(errs) > 0 {
		set(apisv1.ConditionValidationSucceeded, false, apisv1.ReasonNotSupported, errs.ToAggregate().Error())
	} else {
		set(apisv1.ConditionValidationSucceeded, true, "", "")
	}
	apisv1.SetReadyFromDependents(&st.Conditions, gen, apisv1.AKSNodeClassReadyDependents)
	nc.Status = st
	return apisv1.NodeClassOf(nc), nil
}

// ReleaseNodeClass releases nothing: an AKSNodeClass creates no cloud resource of its own (the
// finalizer only holds its deletion until no NodeClaim uses it).
func (p *Provider) ReleaseNodeClass(context.Context, apisv1.NodeClass) error { return nil }

// images lists the family's image definitions at their latest published versions. A FIPS class
// has none (FIPS images are only in the shared image galleries of AKS-managed NAP); a definition
// without a version is left out; none at all is ImagesNotFound.
func (p *Provider) images(ctx context.Context, nc *apisv1.AKSNodeClass) ([]apisv1.AKSNodeImage, string, string, error) {
	if nc.Spec.FIPSMode != nil && *nc.Spec.FIPSMode == apisv1.FIPSModeFIPS {
		return nil, ReasonSIGRequiredForFIPS, "FIPS node images are published only to AKS's shared image galleries, which Dovetail does not use", nil
	}
	var out []apisv1.AKSNodeImage
	for _, d := range definitionsOf(nc.ImageFamily()) {
		v, err := p.latestVersion(ctx, d)
		if err != nil {
			return nil, "", "", err
		}
		if v != "" {
			out = append(out, apisv1.AKSNodeImage{ID: communityImageID(d.Gallery, d.Definition, v), Requirements: d.requirements()})
		}
	}
	if len(out) == 0 {
		return nil, ReasonImagesNotFound, fmt.Sprintf("spec.imageFamily %s: no node image version found in the AKS community galleries for %s", nc.ImageFamily(), p.o.Location), nil
	}
	return out, "", "", nil
}

// latestVersion is the definition's most recently published version ("" when it has none or
// does not exist in the region), the provider's latestNodeImageVersionCommunity.
func (p *Provider) latestVersion(ctx context.Context, d imageDefinition) (string, error) {
	defer p.listing()()
	pager := p.gallery.NewListPager(p.o.Location, d.Gallery, d.Definition, nil)
	var best string
	var bestAt int64
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if isNotFound(err) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("listing versions of image %s/%s: %w", d.Gallery, d.Definition, err)
		}
		for _, v := range page.Value {
			if v.Properties == nil || v.Properties.PublishedDate == nil || v.Name == nil {
				continue
			}
			if at := v.Properties.PublishedDate.UnixNano(); best == "" || at > bestAt || (at == bestAt && *v.Name > best) {
				best, bestAt = *v.Name, at
			}
		}
	}
	return best, nil
}

var subnetIDPattern = regexp.MustCompile(`(?i)^/subscriptions/([^/]+)/resourceGroups/([^/]+)/providers/Microsoft\.Network/virtualNetworks/([^/]+)/subnets/([^/]+)$`)

// subnetProblem checks the class's subnet (spec.vnetSubnetID, else Options.SubnetID): it must
// parse, lie in the cluster subnet's virtual network when it is another subnet (the provider's
// rule), exist and be provisioned. It returns the reason and message of a problem, "" when none.
func (p *Provider) subnetProblem(ctx context.Context, nc *apisv1.AKSNodeClass) (string, string, error) {
	id := p.o.SubnetID
	if nc.Spec.VNETSubnetID != nil && *nc.Spec.VNETSubnetID != "" {
		id = *nc.Spec.VNETSubnetID
	}
	m := subnetIDPattern.FindStringSubmatch(id)
	if m == nil {
		return ReasonSubnetIDInvalid, fmt.Sprintf("spec.vnetSubnetID %q: want /subscriptions/<id>/resourceGroups/<rg>/providers/Microsoft.Network/virtualNetworks/<vnet>/subnets/<subnet>", id), nil
	}
	if c := subnetIDPattern.FindStringSubmatch(p.o.SubnetID); c != nil && !strings.EqualFold(id, p.o.SubnetID) &&
		!(strings.EqualFold(c[1], m[1]) && strings.EqualFold(c[2], m[2]) && strings.EqualFold(c[3], m[3])) {
		return ReasonSubnetIDInvalid, fmt.Sprintf("spec.vnetSubnetID %s does not match the cluster's subscription, resource group or virtual network", id), nil
	}
	if !strings.EqualFold(m[1], p.o.SubscriptionID) {
		return ReasonSubnetIDInvalid, fmt.Sprintf("spec.vnetSubnetID %s is not in subscription %s", id, p.o.SubscriptionID), nil
	}
	got, err := p.subnets.Get(ctx, m[2], m[3], m[4], nil)
	if isNotFound(err) {
		return ReasonSubnetNotFound, "resource not found: " + id, nil
	}
	if err != nil {
		return "", "", fmt.Errorf("reading subnet %s: %w", id, err)
	}
	if got.Properties != nil && val(got.Properties.ProvisioningState) != armnetwork.ProvisioningStateSucceeded {
		return ReasonSubnetNotUsable, fmt.Sprintf("subnet %s is %s, not Succeeded", id, val(got.Properties.ProvisioningState)), nil
	}
	return "", "", nil
}
