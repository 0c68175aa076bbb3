// Package aws is the cloud.Provider for Amazon EC2, over aws-sdk-go-v2: one CreateFleet of type
// instant per NodeClaim, launch templates per NodeClass × AMI, AMIs from amiSelectorTerms (aliases
// through the public SSM parameters), subnets and security groups from their selector terms, and
// termination only of instances tagged for this cluster.
//
// Throttling is retried by the SDK's adaptive retryer (NewConfig), never by a loop here.
package aws

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/apis/validate"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// EC2API is the part of the EC2 client the provider calls (satisfied by *ec2.Client).
type EC2API interface {
	CreateFleet(context.Context, *ec2.CreateFleetInput, ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	CreateLaunchTemplate(context.Context, *ec2.CreateLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error)
	DescribeLaunchTemplates(context.Context, *ec2.DescribeLaunchTemplatesInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error)
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	DescribeSubnets(context.Context, *ec2.DescribeSubnetsInput, ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	DescribeSecurityGroups(context.Context, *ec2.DescribeSecurityGroupsInput, ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error)
	DescribeImages(context.Context, *ec2.DescribeImagesInput, ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
	DescribeCapacityReservations(context.Context, *ec2.DescribeCapacityReservationsInput, ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error)
	DescribePlacementGroups(context.Context, *ec2.DescribePlacementGroupsInput, ...func(*ec2.Options)) (*ec2.DescribePlacementGroupsOutput, error)
}

// SSMAPI is the part of the SSM client the provider calls (satisfied by *ssm.Client).
type SSMAPI interface {
	GetParameter(context.Context, *ssm.GetParameterInput, ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// DefaultServiceCIDR is the service CIDR nodeadm is told when Options.ServiceCIDR is empty: the
// block EKS picks when none is given and the VPC is in 10.0.0.0/8 (EKS User Guide, "Create a
// cluster": 10.100.0.0/16 or 172.20.0.0/16).
const DefaultServiceCIDR = "10.100.0.0/16"

// Options configure the provider.
type Options struct {
	// Cluster is the value of the apisv1.TagCluster tag this provider launches with and may
	// terminate. Required.
	Cluster string
	// ClusterName, ClusterEndpoint (https URL) and ClusterCA (base64) are what nodes join with
	// (EKS DescribeCluster). Required for the AL2023, AL2 and Bottlerocket families.
	ClusterName     string
	ClusterEndpoint string
	ClusterCA       string
	// ServiceCIDR, KubernetesVersion ("1.31", the EKS-optimized AMIs of aliases) and ClusterDNS
	// (the nodes' resolver, kubelet clusterDNS) override what the agent discovered (the
	// snapshot's events.ClusterFacts: LaunchRequest.ClusterFacts, cloud.ClusterFactsFrom); empty
	// takes the discovered value. Without either, the service CIDR is DefaultServiceCIDR, the
	// cluster DNS is left to the node image (nodeadm derives it from the CIDR), and an alias
	// does not resolve.
	ServiceCIDR       string
	KubernetesVersion string
	ClusterDNS        string
	// Catalog gives each instance type's architecture (to pick the AMI) and the prices reported
	// on instances. Required.
	Catalog *catalog.Catalog
	// EC2 and SSM are the clients (ec2.NewFromConfig / ssm.NewFromConfig of NewConfig). Required.
	EC2 EC2API
	SSM SSMAPI
	// IAM creates the instance profiles of spec.role and checks spec.instanceProfile
	// (iam.NewFromConfig). Nil: a spec.role NodeClass is not Ready (InstanceProfileReady=False).
	IAM IAMAPI
	// Region is the region instance profiles are named and tagged for (the config's region).
	Region string
	// Governance is what the deployment's IAM lets NodeClasses launch with (the zero value:
	// infra/aws's defaults); ResolveNodeClass refuses the rest in status, Create refuses a
	// launch without the mandatory tags.
	Governance Governance
	// Now is the clock capacity block states are decided on (default time.Now).
	Now func() time.Time
}

// Provider launches and terminates EC2 instances. It keeps no state between calls, so it is
// safe for concurrent use and for use from stateless functions.
type Provider struct {
	o Options
}

var _ cloud.Provider = (*Provider)(nil)

// New checks the options and returns a provider.
func New(o Options) (*Provider, error) {
	switch {
	case o.Cluster == "":
		return nil, errors.New("aws provider: Options.Cluster is required")
	case o.Catalog == nil:
		return nil, errors.New("aws provider: Options.Catalog is required")
	case o.EC2 == nil:
		return nil, errors.New("aws provider: Options.EC2 is required")
	case o.SSM == nil:
		return nil, errors.New("aws provider: Options.SSM is required")
	}
	if o.ClusterName == "" {
		o.ClusterName = o.Cluster
	}
	if err := ValidateGovernance(o.Governance); err != nil {
		return nil, fmt.Errorf("aws provider: governance: %w", err)
	}
	return &Provider{o: o}, nil
}

// clusterFacts are the facts a call works with: each Options override when set, else the
// discovered value from f (nil: none), else DefaultServiceCIDR for the service range. The IP
// family follows the cluster DNS address in use when there is one (Karpenter's bootstrap reads
// IPv6 from it), else the discovered family.
func (p *Provider) clusterFacts(f *events.ClusterFacts) events.ClusterFacts {
	var out events.ClusterFacts
	if f != nil {
		out = *f
	}
	for _, o := range []struct{ override, to *string }{{&p.o.KubernetesVersion, &out.KubernetesVersion},
		{&p.o.ServiceCIDR, &out.ServiceCIDR}, {&p.o.ClusterDNS, &out.ClusterDNSIP}} {
		if *o.override != "" {
			*o.to = *o.override
		}
	}
	if out.ServiceCIDR == "" {
		out.ServiceCIDR = DefaultServiceCIDR
	}
	if a, err := netip.ParseAddr(out.ClusterDNSIP); err == nil {
		out.IPFamily = validate.IPFamilyIPv4
		if a.Is6() && !a.Is4In6() {
			out.IPFamily = validate.IPFamilyIPv6
		}
	}
	return out
}

// Name is "aws".
func (p *Provider) Name() string { return "aws" }
