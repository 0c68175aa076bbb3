package localdev

import (
	"context"
	"encoding/base64"
	"fmt"
	"sort"
	"strings"

	awsinfra "github.com/dovetail-dev/dovetail/infra/aws"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	dvaws "github.com/dovetail-dev/dovetail/shared/cloud/aws"
	"github.com/dovetail-dev/dovetail/shared/cloud/aws/iampolicy"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/ec2api"
)

// Cloud providers the provision function can use in local dev mode.
const (
	// CloudFake calls the fake cloud through its Go interface (the default).
	CloudFake = "fake"
	// CloudAWS uses the real AWS provider (aws-sdk-go-v2 EC2 and SSM clients) against an EC2/SSM
	// endpoint: Options.AWSEndpoint, or the fake cloud's own EC2 Query / SSM JSON face
	// (shared/cloud/fake/ec2api) started in-process on loopback when no endpoint is given.
	CloudAWS = "aws"
)

// localClusterEndpoint and localClusterCA are what local nodes are told to join: the fake's
// kubelets only read the cluster name, so these are placeholders, never contacted.
const localClusterEndpoint = "https://kubernetes.default.svc"

// eksClusterName is the name of the EKS cluster local dev stands in for: the value the
// scenario's EC2NodeClasses select Karpenter's discovery tag with (the first in sorted order;
// the seed's is dovetail-dev), else "dovetail-<cluster>". The fake account's node subnets and
// security group carry the discovery tag with it, and the provider's governance allows only
// those (dvaws.Governance defaults), as the deployed IAM does.
func eksClusterName(e *Env) string {
	var values []string
	for _, c := range e.Set.NodeClasses {
		if c.EC2 == nil {
			continue
		}
		for _, t := range c.EC2.Spec.SubnetSelectorTerms {
			if v, ok := t.Tags[dvaws.DefaultDiscoveryTagKey]; ok && v != "*" {
				values = append(values, v)
			}
		}
		for _, t := range c.EC2.Spec.SecurityGroupSelectorTerms {
			if v, ok := t.Tags[dvaws.DefaultDiscoveryTagKey]; ok && v != "*" {
				values = append(values, v)
			}
		}
	}
	if len(values) == 0 {
		return "dovetail-" + e.Options.Cluster
	}
	sort.Strings(values)
	return values[0]
}

var localClusterCA = base64.StdEncoding.EncodeToString([]byte("dovetail dev: placeholder cluster CA"))

// provider returns the cloud.Provider the functions launch through. Either way NodeClasses are
// resolved (status subnets, security groups, AMIs, instance profile) by the real AWS provider
// against an EC2/SSM/IAM endpoint: with CloudFake the launches go to the fake cloud's Go
// interface and only the resolution crosses the wire.
func (e *Env) provider(ctx context.Context) (cloud.Provider, error) {
	switch e.Options.CloudProvider {
	case "", CloudFake:
		if e.Options.AWSEndpoint != "" {
			return nil, fmt.Errorf("--aws-endpoint %s: needs --cloud %s", e.Options.AWSEndpoint, CloudAWS)
		}
	case CloudAWS:
	case CloudAzure:
		if e.Options.AWSEndpoint != "" {
			return nil, fmt.Errorf("--aws-endpoint %s: needs --cloud %s", e.Options.AWSEndpoint, CloudAWS)
		}
		return e.azureProvider()
	default:
		return nil, fmt.Errorf("--cloud %q: want %s, %s or %s", e.Options.CloudProvider, CloudFake, CloudAWS, CloudAzure)
	}
	endpoint := e.Options.AWSEndpoint
	if endpoint == "" {
		identities, err := stackIdentities(e)
		if err != nil {
			return nil, err
		}
		srv, err := ec2api.New(ec2api.Options{Cloud: e.Cloud, DiscoveryTags: discoveryTags(e), Roles: nodeRoles(e), Log: e.Options.Log,
			Identities: identities})
		if err != nil {
			return nil, err
		}
		url, stop, err := srv.ListenLoopback()
		if err != nil {
			return nil, fmt.Errorf("starting the EC2/SSM endpoint: %w", err)
		}
		prev := e.stop
		e.stop = func() { prev(); stop() }
		e.EC2API, endpoint = srv, url
		if e.Options.CloudProvider == CloudAWS {
			e.Progress.Printf("EC2/SSM endpoint of the fake cloud at %s (aws provider)", url)
		}
	} else {
		e.Progress.Printf("aws provider against the EC2/SSM endpoint %s", endpoint)
	}
	cfg, err := dvaws.NewConfig(ctx, dvaws.ConfigOptions{Endpoint: endpoint, Region: e.Catalog.Region})
	if err != nil {
		return nil, err
	}
	ec2c, ssmc := dvaws.Clients(cfg)
	p, err := dvaws.New(dvaws.Options{Cluster: e.Options.Cluster, ClusterName: eksClusterName(e), ClusterEndpoint: localClusterEndpoint, ClusterCA: localClusterCA,
		KubernetesVersion: majorMinor(fake.DefaultKubeletVersion), Catalog: e.Catalog, EC2: ec2c, SSM: ssmc,
		IAM: dvaws.IAMClient(cfg), Region: cfg.Region})
	if err != nil {
		return nil, err
	}
	if e.Options.CloudProvider == CloudAWS {
		return p, nil
	}
	return resolvingFake{Cloud: e.Cloud, NodeClassResolver: p}, nil
}

// localAccessKey is the access key local dev's AWS clients sign with (dvaws.NewConfig's for an
// endpoint without credentials).
const localAccessKey = "AKIDLOCALENDPOINT"

// stackIdentities has the in-process endpoint enforce infra/aws's SAM stack, deployed for the
// local cluster with its defaults (discovery tag karpenter.sh/discovery=<EKS cluster>, Amazon's
// images, no mandatory tag): local dev's one set of credentials holds the provision and
// lifecycle roles' policies (one process plays both), so a launch the deployed stack would
// refuse is refused here too, with EC2's UnauthorizedOperation. The node role the stack passes
// is the scenario's first spec.role.
func stackIdentities(e *Env) (map[string]ec2api.Identity, error) {
	nodeRole := "KarpenterNodeRole-" + eksClusterName(e)
	if roles := nodeRoles(e); len(roles) > 0 {
		nodeRole = roles[0]
	}
	account := ec2api.DefaultAccountID
	roles, err := awsinfra.Roles(awsinfra.Stack{Partition: "aws", Region: e.Catalog.Region, Account: account, Params: map[string]string{
		"ClusterName": e.Options.Cluster, "EksClusterName": eksClusterName(e), "EksEndpoint": localClusterEndpoint,
		"EksCertificateAuthority": localClusterCA, "NodeRoleArn": "arn:aws:iam::" + account + ":role/" + nodeRole}})
	if err != nil {
		return nil, fmt.Errorf("infra/aws stack: %w", err)
	}
	provision, lifecycle := roles["dovetail-"+e.Options.Cluster+"-provision"], roles["dovetail-"+e.Options.Cluster+"-lifecycle"]
	return map[string]ec2api.Identity{localAccessKey: {RoleARN: "arn:aws:iam::" + account + ":role/" + provision.Name,
		Policies: append(append([]iampolicy.Policy(nil), provision.Policies...), lifecycle.Policies...)}}, nil
}

// resolvingFake launches through the fake cloud's Go interface and resolves NodeClasses through
// the AWS provider.
type resolvingFake struct {
	*fake.Cloud
	cloud.NodeClassResolver
}

// discoveryTags are the tags the fake VPC's node subnets and security group carry: the discovery
// tag of the local EKS cluster, and, so that the scenario's EC2NodeClass selector terms find
// them, every other key=value of their tag selectors (wildcard "*" values excepted), the first
// value in sorted order where two terms disagree. A selector asking for another discovery value
// finds nothing the deployment allows, as it would in a real account.
func discoveryTags(e *Env) map[string]string {
	values := map[string][]string{}
	add := func(tags map[string]string) {
		for k, v := range tags {
			if v != "*" {
				values[k] = append(values[k], v)
			}
		}
	}
	for _, c := range e.Set.NodeClasses {
		nc := c.EC2
		if nc == nil {
			continue
		}
		for _, t := range nc.Spec.SubnetSelectorTerms {
			add(t.Tags)
		}
		for _, t := range nc.Spec.SecurityGroupSelectorTerms {
			add(t.Tags)
		}
	}
	out := map[string]string{}
	for k, vs := range values {
		sort.Strings(vs)
		out[k] = vs[0]
	}
	out[dvaws.DefaultDiscoveryTagKey] = eksClusterName(e)
	return out
}

// nodeRoles are the IAM roles the fake account has: the spec.role of every EC2NodeClass of the
// scenario, as a user who followed Karpenter's getting-started guide has created them.
func nodeRoles(e *Env) []string {
	var out []string
	for _, c := range e.Set.NodeClasses {
		if c.EC2 != nil && c.EC2.Spec.Role != "" {
			r := c.EC2.Spec.Role
			if i := strings.LastIndex(r, "/"); strings.HasPrefix(r, "arn:") && i >= 0 {
				r = r[i+1:]
			}
			out = append(out, r)
		}
	}
	sort.Strings(out)
	return out
}

// majorMinor turns "v1.37.2" into "1.37".
func majorMinor(v string) string {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}
